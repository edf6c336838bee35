-- What one POST /partners/external/intake writes on PostgreSQL, for pgbench: the one statement
-- the intake-api sends (`intake-api statements submit`), which upserts the case, inserts the
-- submission and the event and queues the event for partners' webhooks, committed on its own.
-- A template: bench/run.sh makes the script pgbench runs of it and that statement, as the
-- binary it measures prints it (bench/pgbench_script.py), then runs
--   pgbench -n -M prepared -c 32 -j 2 -T N -f SCRIPT -D mode=create|spread|one \
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
\bind case_id bench_id(:n || '-' || :m)
\bind reference 'p' || lpad(nextval('bench_reference')::text, 11, '0')
\bind brand 'brand_a'
\bind email CASE :mode WHEN 'create' THEN 'p-' || :tag || '-' || :client_id || '-' || :n || '@example.com' WHEN 'spread' THEN 'c-' || :tag || '-' || :t || '-' || :i || '@example.com' ELSE :email END
\bind status 'pending_activation'
\bind enquiry :enquiry
\bind product_uuid '67e55044-10b1-426f-9247-bb680e5fe0c8'::uuid
\bind now now()
\bind activates_at now() + make_interval(secs => :delay)
\bind submission_id bench_id(:n || '-s-' || :m)
\bind client_id :client
\bind payload :payload
\bind event_id bench_id(:n || '-e-' || :m)
\bind sandbox false
\statement submit
