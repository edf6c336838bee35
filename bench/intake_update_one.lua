-- POST /partners/external/intake, always the same e-mail: every request updates one case.
local dir = os.getenv("BENCH_DIR")
dofile(dir .. "/report.lua")
dofile(dir .. "/enquiry.lua")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. os.getenv("BENCH_TOKEN")
wrk.body = enquiry_body(os.getenv("BENCH_EMAIL"))
