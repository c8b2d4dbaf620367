-- epoch: the restart and failover guard, shared by the scripts that can
-- give a node's vote to a lock (acquire, and refresh when it re-seeds).
--
-- A node keeps an epoch record (a hash): the identity of the Redis process
-- that wrote it (run_id), the node time until which the node is recovering,
-- and the node time until which that identity check is trusted (a cache, so
-- that INFO runs at most every delta ms). A node whose process changed (a
-- restart, or a promoted replica with a copy of its old master's record)
-- starts a new epoch and recovers for max_ttl: it may have forgotten locks,
-- and every lock it could have forgotten expires within max_ttl.
--
-- Times are node milliseconds (TIME). guard is '1' (on), 'p' (on, but
-- trust persistence: a restart that kept the record needs no recovery) or
-- '0' (off).

local function node_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- epoch returns the node time (ms), the time left to recover (ms, 0 when
-- the node may vote) and the current epoch's id.
local function epoch(key, max_ttl, delta, guard, record_ttl)
  local now = node_now()
  if guard == '0' then
    return now, 0, 'off'
  end
  local rec = redis.call('HMGET', key, 'id', 'run', 'until', 'trust')
  local id, run, rec_until, trust = rec[1], rec[2], tonumber(rec[3]), tonumber(rec[4])
  if id and rec_until and trust and now < trust then
    return now, math.max(rec_until - now, 0), id
  end
  local server = redis.call('INFO', 'server')
  local run_id = string.match(server, 'run_id:(%x+)')
  local uptime = tonumber(string.match(server, 'uptime_in_seconds:(%d+)')) or 0
  if not id or not rec_until then
    -- No record: the data set is new to this library. A node that was
    -- never a replica can only have forgotten locks taken before its
    -- process started; a promoted replica may lack its old master's
    -- latest locks whenever it was promoted.
    local repl = redis.call('INFO', 'replication')
    local replid2 = string.match(repl, 'master_replid2:(%x+)') or ''
    if string.match(replid2, '^0*$') then
      -- uptime_in_seconds is the difference of two whole-second clocks:
      -- it can say 1 for a process started 2 ms ago. The latest the
      -- process can have started is now - (uptime - 1) s.
      rec_until = now - math.max(uptime - 1, 0) * 1000 + max_ttl
    else
      rec_until = now + max_ttl
    end
    id = run_id .. ':' .. now
  elseif run ~= run_id then
    -- Another process wrote the record: a restart that kept its data, or
    -- a replica promoted with its old master's record.
    if guard ~= 'p' then
      rec_until = now + max_ttl
    end
    id = run_id .. ':' .. now
  end
  redis.call('HSET', key, 'id', id, 'run', run_id, 'until', string.format('%d', rec_until),
    'trust', string.format('%d', now + delta))
  if record_ttl > 0 then
    redis.call('PEXPIRE', key, record_ttl)
  end
  return now, math.max(rec_until - now, 0), id
end
