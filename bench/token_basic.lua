-- POST /oauth/token with client_secret_basic: a form body and an Authorization: Basic header.
-- BENCH_BASIC is base64("client_id:client_secret"), computed by bench/run.sh with openssl.
dofile(os.getenv("BENCH_DIR") .. "/report.lua")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
wrk.headers["Authorization"] = "Basic " .. os.getenv("BENCH_BASIC")
wrk.body = "grant_type=client_credentials&scope=enquiry%3Acase%3Aintake%3Acreate"
