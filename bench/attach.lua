-- POST /partners/external/intake/attach over the cases one create round made: thread t
-- cycles through c-TAG-t-2 .. c-TAG-t-(POOL+1), which that round is known to have created.
-- (Not 1: wrk builds one request to check the script before the run, so thread 1's first
-- e-mail is never sent.)
local dir = os.getenv("BENCH_DIR")
dofile(dir .. "/report.lua")
dofile(dir .. "/threads.lua")

local tag = os.getenv("BENCH_TAG")
local pool = tonumber(os.getenv("BENCH_POOL"))
local headers = {
   ["Content-Type"] = "application/json",
   ["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN"),
}
local counter = 0

function request()
   counter = counter + 1
   local email = string.format("c-%s-%d-%d@example.com", tag, tid, (counter - 1) % pool + 2)
   return wrk.format("POST", "/partners/external/intake/attach", headers,
      '{"email":"' .. email .. '","product_uuid":"3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07"}')
end
