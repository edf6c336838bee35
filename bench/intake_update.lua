-- POST /partners/external/intake for cases one create round made: every request updates
-- an existing case, each thread cycling through its own (bench/threads.lua).
local dir = os.getenv("BENCH_DIR")
dofile(dir .. "/report.lua")
dofile(dir .. "/enquiry.lua")
dofile(dir .. "/partner.lua")

function request()
   return wrk.format("POST", "/partners/external/intake", partner_headers, enquiry_body(next_case_email()))
end
