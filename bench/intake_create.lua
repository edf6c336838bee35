-- POST /partners/external/intake, a new case every time: a unique e-mail per request from a
-- per-thread counter. BENCH_TAG differs per round, so no round updates another's cases.
local dir = os.getenv("BENCH_DIR")
dofile(dir .. "/report.lua")
dofile(dir .. "/enquiry.lua")
dofile(dir .. "/partner.lua")

local tag = os.getenv("BENCH_TAG")
local counter = 0

function request()
   counter = counter + 1
   local email = string.format("c-%s-%d-%d@example.com", tag, tid, counter)
   return wrk.format("POST", "/partners/external/intake", partner_headers, enquiry_body(email))
end
