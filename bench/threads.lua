-- Numbers wrk's threads 1..N, so e-mail addresses built from (tag, thread, counter) never
-- collide between threads; each thread has its own Lua state and counter.
local next_id = 0
function setup(thread)
   next_id = next_id + 1
   thread:set("tid", next_id)
end

-- The e-mail of the case create round BENCH_TAG made as thread tid's request I, for
-- I = BENCH_FIRST .. BENCH_FIRST + BENCH_POOL - 1 in turn (BENCH_FIRST is 2 unless set): the
-- request after `counter` earlier ones cycles through them. (Not from 1: wrk builds one
-- request to check the script before the run, so thread 1's first e-mail is never sent. For
-- the same reason a run through existing cases reaches thread 1's from one case later.)
local case_tag = os.getenv("BENCH_TAG")
local case_pool = tonumber(os.getenv("BENCH_POOL") or "1")
local first_case = tonumber(os.getenv("BENCH_FIRST") or "2")
function existing_case_email(counter)
   return string.format("c-%s-%d-%d@example.com", case_tag, tid, counter % case_pool + first_case)
end
