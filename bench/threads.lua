-- Numbers wrk's threads 1..N, so e-mail addresses built from (tag, thread, counter) never
-- collide between threads; each thread has its own Lua state and counter.
local next_id = 0
function setup(thread)
   next_id = next_id + 1
   thread:set("tid", next_id)
end

-- The e-mail of the case create round BENCH_TAG made as thread tid's request I, for
-- I = 2 .. BENCH_POOL + 1 in turn: the request after `counter` earlier ones cycles through
-- them. (Not 1: wrk builds one request to check the script before the run, so thread 1's
-- first e-mail is never sent.)
local case_tag = os.getenv("BENCH_TAG")
local case_pool = tonumber(os.getenv("BENCH_POOL") or "1")
function existing_case_email(counter)
   return string.format("c-%s-%d-%d@example.com", case_tag, tid, counter % case_pool + 2)
end
