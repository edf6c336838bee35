-- POST /oauth/token with client_secret_post: the credentials in a JSON body.
-- BENCH_CLIENT_ID and BENCH_CLIENT_SECRET come from the environment (bench/run.sh).
dofile(os.getenv("BENCH_DIR") .. "/report.lua")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = string.format(
   '{"grant_type":"client_credentials","client_id":"%s","client_secret":"%s","scope":"enquiry:case:intake:create"}',
   os.getenv("BENCH_CLIENT_ID"), os.getenv("BENCH_CLIENT_SECRET"))
