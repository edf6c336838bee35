-- What every intake request of the bench sends as a partner would: JSON with the bearer
-- token from BENCH_TOKEN (bench/run.sh), and for loads on existing cases, the next case.
dofile(os.getenv("BENCH_DIR") .. "/threads.lua")

partner_headers = {
   ["Content-Type"] = "application/json",
   ["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN"),
}

local cases_used = 0
-- The next of this thread's existing cases, in turn (bench/threads.lua).
function next_case_email()
   local email = existing_case_email(cases_used)
   cases_used = cases_used + 1
   return email
end
