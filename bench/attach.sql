-- What one POST /partners/external/intake/attach does in the database on PostgreSQL
-- (intake-api/src/store/attach.rs: attach_lookup, the case among those the partner
-- made an enquiry on, as the ORM builds it, then ATTACH_POSTGRES, each committed on its own),
-- for pgbench, the same way as bench/intake.sql:
--   pgbench -n -M prepared -c 32 -j 2 -T N -f bench/attach.sql -D tag=r1 -D pool=.. \
--     -D threads=.. -D client=.. INTAKE_DB_URL
-- It picks the same cases as bench/attach.lua: c-TAG-T-I@example.com, T in 1..threads,
-- I in 2..pool+1. The redirect token's hash is made by the server here (43 characters, like
-- the service's base64url SHA-256); the service computes it itself and binds it. Ids are
-- time-ordered like the service's, from bench_id (bench/run.sh).
\set t random(1, :threads)
\set i random(2, :pool + 1)
\set r random(1, 1000000000000)
SELECT "cases"."id", "cases"."reference", "cases"."brand" FROM "cases" WHERE "cases"."email" = 'c-' || :tag || '-' || :t || '-' || :i || '@example.com' AND (EXISTS (SELECT 1 FROM "submissions" WHERE "submissions"."case_id" = "cases"."id" AND "submissions"."client_id" = :client AND "submissions"."kind" = 'enquiry')) ORDER BY "cases"."updated_at" DESC LIMIT 1 \gset found_
WITH token AS (
    INSERT INTO "redirect_tokens" ("id", "case_id", "token_hash", "product_uuid", "created_at",
        "expires_at", "used_at", "client_id", "reference")
    VALUES (bench_id('t-' || :r), :found_id, substr(md5(random()::text) || md5(random()::text), 1, 43), '3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07', now(), now() + interval '1 day', NULL, NULL, NULL)
), updated AS (
    UPDATE "cases" SET "product_uuid" = '3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07', "updated_at" = now(),
        "redirect_token_id" = bench_id('t-' || :r) WHERE "id" = :found_id
), logged AS (
    INSERT INTO "case_events" ("id", "case_id", "kind", "client_id", "detail", "created_at")
    VALUES (bench_id('e-' || :found_id || '-' || random()), :found_id, 'product_attached', :client, '{"product_uuid": "3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07"}'::jsonb, now())
    RETURNING "id"
)
INSERT INTO "webhook_deliveries" ("id", "client_id", "case_id", "event_type", "created_at",
    "next_attempt_at", "attempts")
SELECT (SELECT "id" FROM "logged"), "ep"."client_id", :found_id, 'product.attached', now(), now(), 0
FROM "webhook_endpoints" AS "ep"
WHERE "ep"."disabled_at" IS NULL AND EXISTS (SELECT 1 FROM "submissions" WHERE "submissions"."case_id" = :found_id AND "submissions"."client_id" = "ep"."client_id" AND "submissions"."kind" = 'enquiry');
