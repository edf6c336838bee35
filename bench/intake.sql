-- What one POST /partners/external/intake writes (intake-api/src/store/submit.rs, SUBMIT_POSTGRES),
-- for pgbench: the one statement the intake-api sends on PostgreSQL, which upserts the case
-- and inserts the submission and the event and queues the event for partners' webhooks,
-- committed on its own. Run by bench/run.sh:
--   pgbench -n -M prepared -c 32 -j 2 -T N -f bench/intake.sql -D mode=create|spread|one \
--     -D tag=.. -D pool=.. -D threads=.. -D email=.. -D enquiry=.. -D payload=.. -D client=.. \
--     -D delay=SECONDS \
--     INTAKE_DB_URL
-- -M prepared: sqlx prepares each statement once per connection and binds the values.
-- The e-mail, enquiry JSON and raw body are bound values, as in the service (the enquiry as
-- text cast to jsonb, as the service binds it). Where the service binds ids and timestamps it made,
-- the server makes them here: now(), and time-ordered ids like the service's UUIDv7 from
-- bench_id (bench/run.sh creates it) seeded by two random numbers (the new case's id
-- appears twice, as in the service, so it must be the same value both times).
-- :delay is the activation delay in seconds, the one bench/run.sh gives the services.
-- The service draws a random 12-digit reference and draws again on the rare collision;
-- pgbench cannot retry, so its references come from a sequence (bench/run.sh creates it),
-- 12 characters that never look like the service's.
-- The e-mail, by mode (every variable is given in every mode; the CASE is evaluated once
-- per statement, on bound values):
--   create: a new case every time (a fresh e-mail);
--   spread: the update of one of the cases create round TAG made, as bench/intake_update.lua
--           picks them: c-TAG-T-I@example.com, T in 1..threads, I in 2..pool+1;
--   one:    the update of the one case for :email, every time.
\set n random(1, 1000000000000)
\set m random(1, 1000000000000)
\set t random(1, :threads)
\set i random(2, :pool + 1)
WITH upserted AS (
    INSERT INTO "cases" ("id", "reference", "brand", "email", "status", "enquiry", "product_uuid",
        "created_at", "updated_at", "activates_at", "activated_at", "redirect_token_id", "sandbox")
    VALUES (bench_id(:n || '-' || :m), 'p' || lpad(nextval('bench_reference')::text, 11, '0'), 'brand_a',
        CASE :mode
            WHEN 'create' THEN 'p-' || :tag || '-' || :client_id || '-' || :n || '@example.com'
            WHEN 'spread' THEN 'c-' || :tag || '-' || :t || '-' || :i || '@example.com'
            ELSE :email
        END,
        'pending_activation', :enquiry::jsonb, '67e55044-10b1-426f-9247-bb680e5fe0c8', now(), now(), now() + make_interval(secs => :delay), NULL, NULL, false)
    ON CONFLICT ("brand", "email", "sandbox") DO UPDATE SET
        "enquiry" = excluded."enquiry",
        "updated_at" = excluded."updated_at",
        "product_uuid" = COALESCE(excluded."product_uuid", "cases"."product_uuid"),
        "status" = CASE "cases"."status" WHEN 'referred' THEN excluded."status" ELSE "cases"."status" END,
        "activates_at" = CASE "cases"."status" WHEN 'referred' THEN excluded."activates_at" ELSE "cases"."activates_at" END
    RETURNING "id", "reference"
), submitted AS (
    INSERT INTO "submissions" ("id", "case_id", "client_id", "received_at", "payload", "kind")
    SELECT bench_id(:n || '-s-' || :m), "id", :client, now(), :payload, 'enquiry' FROM upserted
), logged AS (
    INSERT INTO "case_events" ("id", "case_id", "kind", "client_id", "detail", "created_at")
    SELECT bench_id(:n || '-e-' || :m), "id", CASE WHEN "id" = bench_id(:n || '-' || :m) THEN 'created' ELSE 'updated' END, :client, NULL, now()
    FROM upserted
    RETURNING "id", "case_id", "kind", "created_at"
), notified AS (
    INSERT INTO "webhook_deliveries" ("id", "client_id", "case_id", "event_type", "created_at",
        "next_attempt_at", "attempts")
    SELECT "logged"."id", "ep"."client_id", "logged"."case_id",
        CASE "logged"."kind" WHEN 'created' THEN 'case.created' ELSE 'case.updated' END,
        "logged"."created_at", "logged"."created_at", 0
    FROM "logged" JOIN "webhook_endpoints" AS "ep" ON "ep"."disabled_at" IS NULL AND ("ep"."client_id" = :client OR EXISTS (SELECT 1 FROM "submissions" WHERE "submissions"."case_id" = "logged"."case_id" AND "submissions"."client_id" = "ep"."client_id" AND "submissions"."kind" = 'enquiry'))
)
SELECT "id", "reference" FROM upserted;
