-- A resource's fields, without a token: nothing is checked or recorded.
return redis.call('HMGET', KEYS[1], 'value', 'fence', 'shared', 'writes', 'refused', 'bounded', 'lock')
