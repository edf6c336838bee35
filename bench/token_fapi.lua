-- POST /oauth/token as a FAPI 2.0 partner: private_key_jwt and a DPoP proof, both new in
-- every request (bench/fapi_token_requests.py made them ahead, a line each: the assertion,
-- a tab, the proof). Each wrk thread takes every THREADS-th line, so none is sent twice.
dofile(os.getenv("BENCH_DIR") .. "/report.lua")

local threads = 0
function setup(thread)
   thread:set("id", threads)
   threads = threads + 1
end

local pending = {}
local next_line = 1
local body = "grant_type=client_credentials&scope=" .. os.getenv("BENCH_SCOPE")
   .. "&client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer"
   .. "&client_assertion="

function init(args)
   local n = 0
   local count = tonumber(os.getenv("BENCH_THREADS"))
   for line in io.lines(os.getenv("BENCH_FAPI_FILE")) do
      if n % count == id then
         pending[#pending + 1] = line
      end
      n = n + 1
   end
end

function request()
   local line = pending[next_line]
   if line == nil then
      error("bench/token_fapi.lua: BENCH_FAPI_FILE has no request left for this thread")
   end
   next_line = next_line + 1
   local tab = line:find("\t", 1, true)
   local headers = {
      ["Content-Type"] = "application/x-www-form-urlencoded",
      ["DPoP"] = line:sub(tab + 1),
   }
   return wrk.format("POST", nil, headers, body .. line:sub(1, tab - 1))
end
