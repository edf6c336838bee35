-- POST /partners/external/intake/attach over the cases one create round made, each thread
-- cycling through its own (bench/threads.lua).
local dir = os.getenv("BENCH_DIR")
dofile(dir .. "/report.lua")
dofile(dir .. "/partner.lua")

function request()
   return wrk.format("POST", "/partners/external/intake/attach", partner_headers,
      '{"email":"' .. next_case_email() .. '","product_uuid":"3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07"}')
end
