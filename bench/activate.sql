-- One pass of the intake-api's activation worker on PostgreSQL (intake-api/src/store/activate.rs,
-- activate_due_now), for pgbench: in one transaction, the due cases claimed and activated in
-- one UPDATE (the oldest due first, at most ACTIVATION_BATCH = 500, FOR UPDATE SKIP LOCKED),
-- then one 'activated' event inserted per case returned, and the events queued for partners'
-- webhooks. Run by bench/run.sh's scale section:
--   pgbench -n -M prepared -c 1 -j 1 -t PASSES -f bench/activate.sql SCALE_DB_URL
-- The service binds the time it read once (Utc::now()) where this has now(), the start of
-- the transaction, and the LIMIT as a value, as :batch is here. Its UPDATE returns id, brand
-- and activates_at row by row, and its event insert binds six values per case; pgbench can
-- only keep one row's values, so the same UPDATE hands back the ids as one array, which the
-- insert unnests.
-- The pass rolls back instead of committing: the next pass then finds the same 500 cases
-- due, so every pass activates 500 however many passes are measured, on a database of any
-- size (bench/scale_load.sql loads a backlog of due cases). What that leaves out is the
-- commit's WAL flush; every pass writes the same WAL as a committed one up to it.
\set batch 500
BEGIN;
WITH activated AS (
    UPDATE "cases" SET "status" = 'active', "activated_at" = now()
    WHERE "id" IN (SELECT "id" FROM "cases" WHERE "status" = 'pending_activation'
        AND "activates_at" <= now() ORDER BY "activates_at" ASC LIMIT :batch FOR UPDATE SKIP LOCKED)
    RETURNING "id", "brand", "activates_at"
)
SELECT count(*) AS activated, coalesce(array_agg("id"), '{}')::text AS ids FROM activated \gset
\if :activated != :batch
-- Fails the run with the count in the error: the backlog of due cases ran out.
SELECT ('activation pass activated ' || :activated || ' cases, not ' || :batch)::int;
\endif
WITH logged AS (
    INSERT INTO "case_events" ("id", "case_id", "kind", "client_id", "detail", "created_at")
    SELECT bench_uuid7(now(), 'activated-' || c || '-' || random()), c, 'activated', NULL, NULL, now()
    FROM unnest(:ids::uuid[]) AS c
    RETURNING "id"
)
SELECT coalesce(array_agg("id"), '{}')::text AS event_ids FROM logged \gset
-- The events queued for partners' webhooks, as queue_events (intake-api/src/store/outbox.rs) does.
INSERT INTO "webhook_deliveries" ("id", "client_id", "endpoint_id", "case_id", "event_type",
    "created_at", "next_attempt_at", "attempts")
SELECT "ev"."id", "ep"."client_id", "ep"."id", "ev"."case_id", CASE "ev"."kind" WHEN 'created' THEN 'case.created' WHEN 'referred' THEN 'case.referred' WHEN 'updated' THEN 'case.updated' WHEN 'activated' THEN 'case.activated' WHEN 'product_attached' THEN 'product.attached' END, "ev"."created_at", "ev"."created_at", 0
FROM "case_events" AS "ev" INNER JOIN "webhook_endpoints" AS "ep" ON "ep"."disabled_at" IS NULL AND ("ep"."event_types" IS NULL OR ("ep"."event_types" & (CASE "ev"."kind" WHEN 'created' THEN 1 WHEN 'referred' THEN 16 WHEN 'updated' THEN 2 WHEN 'activated' THEN 4 WHEN 'product_attached' THEN 8 ELSE 0 END)) <> 0) AND EXISTS (SELECT 1 FROM "submissions" WHERE "submissions"."case_id" = "ev"."case_id" AND "submissions"."client_id" = "ep"."client_id" AND "submissions"."kind" = 'enquiry')
WHERE "ev"."id" = ANY(:event_ids::uuid[]);
ROLLBACK;
