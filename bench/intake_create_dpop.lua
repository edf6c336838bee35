-- POST /partners/external/intake as bench/intake_create.lua, with a DPoP-bound token and a
-- new proof for every request: the first line of BENCH_DPOP_FILE is the token, each further
-- line one proof (partner-client/examples/dpop_proofs.rs made them). One thread only.
local dir = os.getenv("BENCH_DIR")
dofile(dir .. "/report.lua")
dofile(dir .. "/enquiry.lua")

local tag = os.getenv("BENCH_TAG")
local lines = io.lines(os.getenv("BENCH_DPOP_FILE"))
local authorization = "DPoP " .. lines()
local counter = 0

function request()
   counter = counter + 1
   local proof = lines()
   if proof == nil then
      error("bench/intake_create_dpop.lua: BENCH_DPOP_FILE has no proof left")
   end
   local email = string.format("d-%s-%d@example.com", tag, counter)
   local headers = {
      ["Content-Type"] = "application/json",
      ["Authorization"] = authorization,
      ["DPoP"] = proof,
   }
   return wrk.format("POST", "/partners/external/intake", headers, enquiry_body(email))
end
