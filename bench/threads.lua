-- Numbers wrk's threads 1..N, so e-mail addresses built from (tag, thread, counter) never
-- collide between threads; each thread has its own Lua state and counter.
local next_id = 0
function setup(thread)
   next_id = next_id + 1
   thread:set("tid", next_id)
end
