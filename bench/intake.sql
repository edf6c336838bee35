-- What one POST /partners/external/intake writes (intake-api/src/store.rs), for pgbench:
-- the statements the intake-api sends, in its order, in one transaction. Run by bench/run.sh:
--   pgbench -n -M prepared -c 32 -j 2 -T N -f bench/intake.sql -D create=1|0 -D tag=.. \
--     -D email=.. -D enquiry=.. -D payload=.. -D client=.. INTAKE_DB_URL
-- -M prepared: sqlx prepares each statement once per connection and binds the values.
-- The e-mail, enquiry JSON and raw body are bound values, as in the service (the enquiry as
-- jsonb, which is how sqlx binds JSON); ids and timestamps are made by the server
-- (gen_random_uuid(), now()) where the service binds its own, and fixed strings are literals.
-- create=1: a new case every time (a fresh e-mail); create=0: the update of the one case
-- for :email, which already exists.
\set n random(1, 1000000000000)
\set ref random(100000000000, 999999999999)
\set one 1
BEGIN;
\if :create
INSERT INTO "cases" ("id", "reference", "brand", "email", "status", "enquiry", "product_uuid", "created_at", "updated_at", "activates_at", "activated_at") VALUES (gen_random_uuid(), :ref, 'brand_a', 'p-' || :tag || '-' || :client_id || '-' || :n || '@example.com', 'pending_activation', :enquiry::jsonb, '67e55044-10b1-426f-9247-bb680e5fe0c8', now(), now(), now() + interval '900 seconds', NULL) ON CONFLICT ("brand", "email") DO NOTHING RETURNING "id" AS case_id \gset
INSERT INTO "submissions" ("id", "case_id", "client_id", "received_at", "payload") VALUES (gen_random_uuid(), :case_id, :client, now(), :payload);
INSERT INTO "case_events" ("id", "case_id", "kind", "client_id", "detail", "created_at") VALUES (gen_random_uuid(), :case_id, 'created', :client, NULL, now());
\else
INSERT INTO "cases" ("id", "reference", "brand", "email", "status", "enquiry", "product_uuid", "created_at", "updated_at", "activates_at", "activated_at") VALUES (gen_random_uuid(), :ref, 'brand_a', :email, 'pending_activation', :enquiry::jsonb, '67e55044-10b1-426f-9247-bb680e5fe0c8', now(), now(), now() + interval '900 seconds', NULL) ON CONFLICT ("brand", "email") DO NOTHING RETURNING "id";
SELECT "cases"."id" AS case_id, "cases"."reference", "cases"."brand", "cases"."email", "cases"."status", "cases"."enquiry", "cases"."product_uuid", "cases"."created_at", "cases"."updated_at", "cases"."activates_at", "cases"."activated_at" FROM "cases" WHERE "cases"."brand" = 'brand_a' AND "cases"."email" = :email LIMIT :one \gset found_
UPDATE "cases" SET "enquiry" = :enquiry::jsonb, "updated_at" = now(), "product_uuid" = '67e55044-10b1-426f-9247-bb680e5fe0c8' WHERE "cases"."id" = :found_case_id;
INSERT INTO "submissions" ("id", "case_id", "client_id", "received_at", "payload") VALUES (gen_random_uuid(), :found_case_id, :client, now(), :payload);
INSERT INTO "case_events" ("id", "case_id", "kind", "client_id", "detail", "created_at") VALUES (gen_random_uuid(), :found_case_id, 'updated', :client, NULL, now());
\endif
COMMIT;
