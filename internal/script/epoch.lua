-- epoch: the restart and failover guard, shared by the scripts that can
-- give a node's vote to a lock (acquire, and refresh when it re-seeds).
--
-- A node keeps an epoch record (a hash). A node whose process changed (a
-- restart, or a promoted replica with a copy of its old master's record)
-- starts a new epoch and recovers: it may have forgotten locks, and every
-- lock it could have forgotten expires within max_ttl of the epoch's start.
-- The record's fields (times are node milliseconds, from TIME):
--   run     run_id of the Redis process that last checked the record
--   base    when the epoch's forgetting could have happened at the latest:
--           the process start for a node that was never a replica since
--           it started (a data set new to the library, or a restart that
--           kept its data), the moment the promotion was seen for a
--           failover
--   maxttl  the largest max_ttl any guarded client has sent: a client with
--           a smaller one never shortens the recovery of the others
--   until   base + maxttl: the node recovers until then
--   kind    how the epoch began: 'new' (no record, never a replica),
--           'restart' (another process of a node that was never a replica
--           since it started: a restart that kept its data) or 'failover'
--           (a node that was a replica: its data came from a master that
--           may have held locks it never received)
--   check   when the process identity was last checked with INFO
--
-- INFO costs about 20 us, so the identity check is cached: it is trusted
-- while check <= now < check + delta, on this node's clock. A promoted
-- replica holds a copy of its old master's record, whose check is a time
-- of the old master's clock: the lower bound refuses a copy that lies in
-- this node's future (its clock is behind), the upper bound one that is
-- older than delta. A failover slower than delta plus the clock offset
-- between a master and its replica is therefore always seen.
--
-- The fast path is one read (acquire.lua reads it in one MGET with the
-- lock's counter): the key <record>:ok exists while a check is
-- trusted and the node is out of recovery, and holds the record's maxttl
-- and the counters' floor. It is written with replication and the AOF
-- turned off (redis.set_repl), so that no replica and no restart from the
-- AOF ever has it; it expires after delta, and is deleted whenever the
-- record changes. (An RDB snapshot, taken by a replica's full sync or a
-- restart, can hold it, with its absolute expiry: it is then gone unless
-- the sync or restart finished within delta of it, plus the clock offset
-- between master and replica, which the failover assumption excludes.)
--
-- guard's first character is '1' (on), 'p' (on, but trust persistence: a
-- 'restart' epoch needs no recovery, since the process kept every write)
-- or '0' (off: no record is read or written); the characters after it, if
-- any, are the node's identity as the Client learned it (node_is).

-- node_is refuses a request that reached another server than the node
-- the Client identified (the Client's identity.go, docs/reconfiguration.md,
-- "A node's identity"): guard's characters after its mode are the
-- identity ({PREFIX}:id, id.lua) the Client learned for the node, none on
-- a Redis Cluster (where the identity is in another slot than the lock)
-- or before the node first answered. An address that reaches another
-- server than at the first contact (a DNS name or a proxy pointed
-- elsewhere) may reach another node of the set, and that node's vote would
-- count twice. Every script that can give a vote calls it (through epoch,
-- or first, for a refresh's extension) before it writes anything but the
-- epoch record, and answers the error 'REDLOCK_NODE <identity>' ('-' for
-- none: a node that lost its data set): no vote, and the Client
-- identifies the node again. key is the node's epoch record ({PREFIX}:epoch), in the slot
-- of its identity ({PREFIX}:id).
local function node_is(key, guard)
  if #guard < 2 then
    return
  end
  local id = redis.call('GET', string.sub(key, 1, -6) .. 'id')
  if id ~= string.sub(guard, 2) then
    error({err = 'REDLOCK_NODE ' .. (id or '-')})
  end
end

local function node_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- renew checks the node's process identity with INFO and brings the record
-- up to date; it returns the end of the recovery, how the epoch began and
-- the largest max_ttl seen.
local function renew(key, now, max_ttl, record_ttl)
  local rec = redis.call('HMGET', key, 'run', 'base', 'maxttl', 'kind', 'until')
  local run, base, maxttl, kind = rec[1], tonumber(rec[2]), tonumber(rec[3]), rec[4]
  local server = redis.call('INFO', 'server')
  local run_id = string.match(server, 'run_id:(%x+)')
  if not (run == run_id and base and maxttl and kind) then
    -- A node that was a replica since its process started (INFO
    -- replication's master_replid2 is set after a promotion) may lack
    -- its old master's latest locks, whenever it was promoted.
    local repl = redis.call('INFO', 'replication')
    local replica = not string.match(string.match(repl, 'master_replid2:(%x+)') or '', '^0*$')
    -- A node that was never a replica since its process started can
    -- only have forgotten locks taken before the process started: its
    -- epoch's base is the start. uptime_in_seconds is the difference of
    -- two whole-second clocks: it can say 1 for a process started 2 ms
    -- ago, so the latest possible start is now - (uptime - 1) s.
    local uptime = tonumber(string.match(server, 'uptime_in_seconds:(%d+)')) or 0
    local start = now - math.max(uptime - 1, 0) * 1000
    if replica then
      -- A promoted replica's process started long before its promotion.
      kind, base = 'failover', now
    elseif not run then
      -- A data set new to the library.
      kind, base = 'new', start
    elseif run ~= run_id then
      -- Another process wrote the record: a restart that kept its data
      -- (a promoted replica was caught above), or a slot moved here. It
      -- recovers from the start, not from its first guarded request, so
      -- that a node restarted more than max_ttl ago votes at once; and
      -- never ends before the old record's recovery (the old process, or
      -- the slot's old node, may have been recovering).
      kind, base = 'restart', math.max(start, (tonumber(rec[5]) or 0) - max_ttl)
    else
      -- This process wrote the record in an older layout: keep the end
      -- of its recovery, and no less than max_ttl from the start.
      kind, base = 'restart', math.max((tonumber(rec[5]) or now) - max_ttl, start)
    end
    maxttl = 0
  end
  maxttl = math.max(maxttl, max_ttl)
  redis.call('HSET', key, 'run', run_id, 'base', string.format('%d', base),
    'maxttl', string.format('%d', maxttl), 'until', string.format('%d', base + maxttl),
    'kind', kind, 'check', string.format('%d', now))
  if record_ttl > 0 then
    redis.call('PEXPIRE', key, record_ttl)
  end
  return base + maxttl, kind, maxttl
end

-- trust writes the fast path's key for the ttl (ms) that the identity
-- check is still trusted, or deletes it while the node recovers; on this
-- process only.
local function trust(key, now, ttl, rec_until, maxttl)
  redis.set_repl(redis.REPL_NONE)
  if now >= rec_until then
    redis.call('SET', key .. ':ok', string.format('%d:%d', maxttl, rec_until * 1024), 'PX', ttl)
  else
    redis.call('DEL', key .. ':ok')
  end
  redis.set_repl(redis.REPL_ALL)
end

-- guarded returns the node time (ms, nil when the fast path did not need
-- it), the time left to recover (ms, 0 when the node may vote for this
-- client) and the floor of the lock's fencing counter: a counter below it
-- was written before the epoch began and may lack increments (acquire.lua
-- raises it). The floor is the end of the recovery x 1024, or for a client
-- that trusts persistence after a restart (no recovery), the restart x
-- 1024; 0 with the guard off.
-- ok is the fast path's key when the caller read it already (false when
-- missing), nil when it did not.
local function guarded(key, max_ttl, delta, guard, record_ttl, ok)
  if guard == '0' then
    return nil, 0, 0
  end
  if ok == nil then
    ok = redis.call('GET', key .. ':ok')
  end
  if ok then
    local m, f = string.match(ok, '^(%d+):(%d+)$')
    if m and tonumber(m) >= max_ttl then
      return nil, 0, tonumber(f)
    end
  end
  local now = node_now()
  local rec = redis.call('HMGET', key, 'check', 'until', 'kind', 'maxttl')
  local check, rec_until, kind, maxttl = tonumber(rec[1]), tonumber(rec[2]), rec[3], tonumber(rec[4])
  if not (check and rec_until and kind and maxttl and check <= now and now < check + delta and max_ttl <= maxttl) then
    rec_until, kind, maxttl = renew(key, now, max_ttl, record_ttl)
    check = now
  end
  trust(key, now, check + delta - now, rec_until, maxttl)
  if guard == 'p' and kind == 'restart' then
    return now, 0, (rec_until - maxttl) * 1024
  end
  return now, math.max(rec_until - now, 0), rec_until * 1024
end

-- epoch is guarded, with guard's mode, then, where the node may vote,
-- node_is: a recovering node says so first (a node restarted without its
-- data recovers, and has lost its identity too), and the only write before
-- the identity check is the epoch record's, the node's own bookkeeping of
-- its process, which gives no vote.
local function epoch(key, max_ttl, delta, guard, record_ttl, ok)
  local now, recovering, floor = guarded(key, max_ttl, delta, string.sub(guard, 1, 1), record_ttl, ok)
  if recovering == 0 then
    node_is(key, guard)
  end
  return now, recovering, floor
end
