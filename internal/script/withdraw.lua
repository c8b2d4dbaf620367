-- withdraw: an exclusive hold of the lock family that gives up waiting
-- takes back the mark its refusals left (family.lua's refuse), so that
-- readers no longer wait behind it. Only its own mark: one that a writer
-- refused later wrote over it stays, and that writer marks again at its
-- next refusal if this one was its.
-- KEYS[1] the lock's writer mark (<lock>:wwait)
-- ARGV[1] the mark's value (Hold.Wait)
-- Returns 1 when the mark was deleted, else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
