-- epoch: the restart and failover guard, shared by the scripts that can
-- give a node's vote to a lock (acquire, and refresh when it re-seeds).
--
-- A node keeps an epoch record (a hash). A node whose process changed (a
-- restart, or a promoted replica with a copy of its old master's record)
-- starts a new epoch and recovers: it may have forgotten locks, and every
-- lock it could have forgotten expires within max_ttl of the epoch's start.
-- The record's fields (times are node milliseconds, from TIME):
--   id      the epoch's id (run_id:start); fencing counters remember it
--   run     run_id of the Redis process that last checked the record
--   base    when the epoch's forgetting could have happened at the latest:
--           the process start for a data set new to the library, else the
--           moment the change was seen
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
-- guard is '1' (on), 'p' (on, but trust persistence: a 'restart' epoch
-- needs no recovery, since the process kept every write) or '0' (off: no
-- record is read or written).

local function node_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- epoch returns the node time (ms), the time left to recover (ms, 0 when
-- the node may vote for this client) and the current epoch's id.
local function epoch(key, max_ttl, delta, guard, record_ttl)
  local now = node_now()
  if guard == '0' then
    return now, 0, 'off'
  end
  local rec = redis.call('HMGET', key, 'id', 'run', 'base', 'maxttl', 'kind', 'check', 'until')
  local id, run, base, maxttl, kind, check =
    rec[1], rec[2], tonumber(rec[3]), tonumber(rec[4]), rec[5], tonumber(rec[6])
  local write = false
  if not (id and base and maxttl and kind and check and check <= now and now < check + delta) then
    local server = redis.call('INFO', 'server')
    local run_id = string.match(server, 'run_id:(%x+)')
    if not (id and run == run_id and base and maxttl and kind) then
      -- A node that was a replica since its process started (INFO
      -- replication's master_replid2 is set after a promotion) may lack
      -- its old master's latest locks, whenever it was promoted.
      local repl = redis.call('INFO', 'replication')
      local replica = not string.match(string.match(repl, 'master_replid2:(%x+)') or '', '^0*$')
      if not id then
        if replica then
          kind, base = 'failover', now
        else
          -- A data set new to the library, on a node that was never a
          -- replica: it can only have forgotten locks taken before its
          -- process started. uptime_in_seconds is the difference of two
          -- whole-second clocks: it can say 1 for a process started 2 ms
          -- ago, so the latest possible start is now - (uptime - 1) s.
          local uptime = tonumber(string.match(server, 'uptime_in_seconds:(%d+)')) or 0
          kind, base = 'new', now - math.max(uptime - 1, 0) * 1000
        end
        id = run_id .. ':' .. now
      elseif run ~= run_id then
        -- Another process wrote the record: a restart that kept its
        -- data, or a replica promoted with its old master's record.
        if replica then kind = 'failover' else kind = 'restart' end
        base, id = now, run_id .. ':' .. now
      else
        -- This process wrote the record in an older layout: keep its
        -- epoch and the end of its recovery.
        if replica then kind = 'failover' else kind = 'restart' end
        base = (tonumber(rec[7]) or now) - max_ttl
      end
      maxttl = 0
    end
    run, check, write = run_id, now, true
  end
  if max_ttl > maxttl then
    maxttl, write = max_ttl, true
  end
  if write then
    redis.call('HSET', key, 'id', id, 'run', run, 'base', string.format('%d', base),
      'maxttl', string.format('%d', maxttl), 'until', string.format('%d', base + maxttl),
      'kind', kind, 'check', string.format('%d', check))
    if record_ttl > 0 then
      redis.call('PEXPIRE', key, record_ttl)
    end
  end
  if guard == 'p' and kind == 'restart' then
    return now, 0, id
  end
  return now, math.max(base + maxttl - now, 0), id
end
