-- What one POST /partners/external/intake/attach does in the database on PostgreSQL, for
-- pgbench: the intake-api's two statements (`intake-api statements attach-lookup`, the case
-- among those the partner made an enquiry on, then `intake-api statements attach`), each
-- committed on its own. A template, made into pgbench's script as bench/intake.sql is, then
--   pgbench -n -M prepared -c 32 -j 2 -T N -f SCRIPT -D tag=r1 -D pool=.. \
--     -D threads=.. -D client=.. INTAKE_DB_URL
-- It picks the same cases as bench/attach.lua: c-TAG-T-I@example.com, T in 1..threads,
-- I in 2..pool+1. The redirect token's hash is made by the server here (43 characters, like
-- the service's base64url SHA-256); the service computes it itself and binds it. Ids are
-- time-ordered like the service's, from bench_id (bench/run.sh).
\set t random(1, :threads)
\set i random(2, :pool + 1)
\set r random(1, 1000000000000)
\bind email 'c-' || :tag || '-' || :t || '-' || :i || '@example.com'
\bind client_id :client
\statement attach-lookup \gset found_
\bind token_id bench_id('t-' || :r)
\bind case_id :found_id::uuid
\bind token_hash substr(md5(random()::text) || md5(random()::text), 1, 43)
\bind product_uuid '3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07'::uuid
\bind now now()
\bind expires_at now() + interval '1 day'
\bind event_id bench_id('e-' || :r)
\bind detail '{"product_uuid": "3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07"}'
\statement attach
