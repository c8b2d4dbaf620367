-- run_id: the run_id of the Redis process (INFO server), '' where the
-- caller may not run INFO (an ACL). INFO costs more than the rest of
-- id.lua. As a script (EVAL) this chunk runs on every call and reads INFO
-- each time. In the library (library.go) it runs when the library is
-- loaded, which happens in each process anew (FUNCTION LOAD; replication
-- and a restart from the RDB or AOF load it into the new process), so
-- cached_run_id is the run_id of the process that runs the function: it
-- is read with INFO once per process and library, and handed only to a
-- caller that may run INFO itself.
local cached_run_id
local function run_id()
  if cached_run_id and redis.acl_check_cmd('INFO', 'server') then
    return cached_run_id
  end
  local info = redis.pcall('INFO', 'server')
  if type(info) ~= 'string' then
    return ''
  end
  local run = string.match(info, 'run_id:(%x+)') or ''
  if run ~= '' then
    cached_run_id = run
  end
  return run
end
