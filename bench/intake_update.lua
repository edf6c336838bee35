-- POST /partners/external/intake for cases one create round made: every request updates
-- an existing case, each thread cycling through its own (bench/threads.lua).
local dir = os.getenv("BENCH_DIR")
dofile(dir .. "/report.lua")
dofile(dir .. "/enquiry.lua")
dofile(dir .. "/threads.lua")

local headers = {
   ["Content-Type"] = "application/json",
   ["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN"),
}
local counter = 0

function request()
   local email = existing_case_email(counter)
   counter = counter + 1
   return wrk.format("POST", "/partners/external/intake", headers, enquiry_body(email))
end
