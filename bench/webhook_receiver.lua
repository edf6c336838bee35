-- POST to the webhook receiver of bench/webhooks.sh what the intake-api's worker sends: an
-- event of the largest kind (product.attached, 204 bytes of JSON) with the Standard Webhooks
-- headers. The receiver checks nothing, so the values only need their real sizes.
dofile(os.getenv("BENCH_DIR") .. "/report.lua")

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["webhook-id"] = "msg_019b2f6c3a1e7d40a5b8c9d0e1f2a3b4"
wrk.headers["webhook-timestamp"] = "1795802295"
wrk.headers["webhook-signature"] = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
wrk.headers["User-Agent"] = "partner-intake-webhooks/0.2.0"
wrk.body = '{"type":"product.attached","timestamp":"2026-11-27T09:30:00.000Z","data":{"reference":"418290357116",'
   .. '"brand":"brand_a","status":"pending_activation","product_uuid":"67e55044-10b1-426f-9247-bb680e5fe0c8"}}'
