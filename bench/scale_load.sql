-- Existing cases for the scale run of bench/run.sh, written straight into an intake database
-- the intake-api's own migration made, as the service would have written them over two
-- years: the case, its submissions (the raw body as sent), its events, and for some a
-- product attached (the redirect token and its event). One batch of case numbers per run:
--   psql -v lo=K0 -v hi=K1 -v total=N -v active_below=A -v end=E -v threads=T -v now0=EPOCH \
--     -v enquiry="$ENQUIRY_JSON" -v payload="$PAYLOAD_TEMPLATE" -f bench/scale_load.sql DB_URL
-- Case numbers 0..A-1 are active, created between two years and a day before now0; A..E-1
-- are pending and due, created 25 to 16 minutes before now0 (a backlog for the activation
-- worker; bench/activate.sql takes its 500 oldest). Numbers from N on are due cases added to
-- an existing database later. Everything is a function of the case number, so batches can be
-- run in any order and never collide.
--
-- Two in three cases are brand_a, the brand bench/enquiry.json sends, with the e-mail
-- addresses bench/threads.lua addresses: c-load-T-I@example.com for T in 1..threads and I
-- from 2 up, every one taken, so the existing wrk scripts with BENCH_TAG=load and BENCH_POOL
-- up to (N - N / 3) / threads update and attach loaded cases only. The rest are brand_b,
-- b-load-T-I@example.com. Which case gets which comes from a permutation of the case
-- number, so the cases the scripts cycle through, the first I of each thread onwards, are
-- spread over the whole table and its indexes. References are another permutation: 12
-- digits, unique, in no order. The enquiry is the one the service stored for
-- bench/enquiry.json (ENQUIRY_JSON in bench/run.sh) with the applicant's details varied, in
-- the service's normalised form (the mobile number without spaces, amounts as decimals); the
-- payload is that request body with the same details, as a partner sends them.
\set ON_ERROR_STOP on

-- A UUIDv7 like the service's Uuid::now_v7() for a given time: milliseconds, version 7, the
-- variant, then bits of md5(seed).
CREATE OR REPLACE FUNCTION bench_uuid7(at timestamptz, seed text) RETURNS uuid
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (lpad(to_hex(floor(extract(epoch FROM at) * 1000)::bigint), 12, '0') || '7'
        || substr(h, 1, 3) || substr('89ab', ('x' || substr(h, 4, 1))::bit(4)::int % 4 + 1, 1)
        || substr(h, 5, 15))::uuid
    FROM md5(seed) AS h
$$;

WITH n AS (
    SELECT k, abs(hashint8extended(k, 20261125)) AS r,
        -- The wrk scripts' case numbering, permuted; 1000003 is prime and divides no N used.
        CASE WHEN k < :total THEN (1000003 * k + 7) % :total END AS p,
        CASE WHEN k < :active_below
            THEN :now0 - 730 * 86400 + k * (729.0 * 86400 / :active_below)
            ELSE :now0 - 1500 + (k - :active_below) * (540.0 / greatest(1, :end - :active_below))
        END AS created_s
    FROM generate_series(:lo::bigint, :hi - 1) AS k
), d AS (
    SELECT n.*,
        CASE WHEN p IS NULL THEN format('d-load-%s@example.com', k)
            WHEN p < :total - :total / 3 THEN format('c-load-%s-%s@example.com', p % :threads + 1, p / :threads + 2)
            ELSE format('b-load-%s-%s@example.com', p % :threads + 1, p / :threads + 2)
        END AS email,
        CASE WHEN p >= :total - :total / 3 THEN 'brand_b' ELSE 'brand_a' END AS brand,
        (100000000000 + (738061247 * k + 13) % 900000000000)::text AS reference,
        k < :active_below AS active,
        -- A quarter were sent again later, and three in ten active ones had a product attached.
        CASE WHEN k < :active_below AND r % 4 = 0
            THEN created_s + 1000 + (r / 4 % 1000) / 1000.0 * least(30 * 86400, greatest(0, :now0 - 86400 - created_s))
        END AS updated_s,
        k < :active_below AND r / 4000 % 10 < 3 AS attached,
        (ARRAY['Olivia', 'Amelia', 'Isla', 'Ava', 'Mia', 'Sophia', 'Grace', 'Lily', 'Freya', 'Emily',
            'Noah', 'Oliver', 'George', 'Arthur', 'Leo', 'Harry', 'Oscar', 'Archie', 'Henry', 'Jack',
            'Muhammad', 'Priya', 'Aisha', 'Wei', 'Tomasz', 'Siobhan', 'Rhys', 'Callum', 'Niamh', 'Zara'])[r / 40000 % 30 + 1] AS first_name,
        (ARRAY['Smith', 'Jones', 'Williams', 'Taylor', 'Brown', 'Davies', 'Evans', 'Wilson', 'Thomas',
            'Johnson', 'Roberts', 'Robinson', 'Thompson', 'Wright', 'Walker', 'White', 'Edwards',
            'Hughes', 'Green', 'Hall', 'Khan', 'Patel', 'Nowak', 'O''Brien', 'MacDonald', 'Chen',
            'Okafor', 'Kowalski', 'Fitzgerald', 'Ahmed'])[r / 1200000 % 30 + 1] AS last_name,
        900000 + r % 1000 AS mobile_line,
        (date '1950-01-01' + (r / 7 % 18000)::int)::text AS date_of_birth,
        18000 + r / 11 % 150000 AS income,
        90000 + (r / 13 % 900) * 1000 AS property_value,
        md5('partner-' || r / 17 % 8)::uuid::text AS client_id
    FROM n
), g AS MATERIALIZED (
    SELECT d.*,
        bench_uuid7(to_timestamp(created_s), 'case-' || k) AS case_id,
        to_timestamp(created_s) AS created_at,
        to_timestamp(updated_s) AS updated_at2,
        to_timestamp(created_s + 900) AS activates_at,
        CASE WHEN active THEN to_timestamp(created_s + 900 + r / 19 % 1000 / 1000.0) END AS activated_at,
        CASE WHEN attached THEN to_timestamp(coalesce(updated_s, created_s + 900) + 60 + r / 23 % 3600) END AS attached_at,
        round(property_value * (5 + r / 29 % 20) / 100) AS deposit
    FROM d
), new_cases AS (
    INSERT INTO "cases" ("id", "reference", "brand", "email", "status", "enquiry", "product_uuid",
        "created_at", "updated_at", "activates_at", "activated_at")
    SELECT case_id, reference, brand, email,
        CASE WHEN active THEN 'active' ELSE 'pending_activation' END,
        (:'enquiry'::jsonb || jsonb_build_object('brand', brand, 'email', email,
            'first_name', first_name, 'last_name', last_name, 'mobile_number', '+447700' || mobile_line,
            'date_of_birth', date_of_birth, 'total_annual_income', income::numeric(12, 1),
            'new_property_value', property_value::numeric(12, 1), 'deposit_amount', deposit::numeric(12, 1)))::json,
        CASE WHEN attached THEN '3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07'::uuid
            ELSE (:'enquiry'::jsonb ->> 'product_uuid')::uuid END,
        created_at, greatest(created_at, updated_at2, attached_at), activates_at, activated_at
    FROM g ORDER BY k
), sent AS (
    SELECT k, case_id, client_id, at, replace(replace(replace(replace(replace(replace(replace(replace(
            :'payload', 'EMAIL', email),
            '"brand":"brand_a"', '"brand":"' || brand || '"'),
            '"first_name":"Jane"', '"first_name":"' || first_name || '"'),
            '"last_name":"Doe"', '"last_name":"' || last_name || '"'),
            '"mobile_number":"+44 7700 900123"', '"mobile_number":"+44 7700 ' || mobile_line || '"'),
            '"date_of_birth":"1990-05-17"', '"date_of_birth":"' || date_of_birth || '"'),
            '"total_annual_income":52000.5', '"total_annual_income":' || income),
            '"new_property_value":250000,"deposit_amount":25000',
            '"new_property_value":' || property_value || ',"deposit_amount":' || deposit) AS payload,
        kind
    FROM g CROSS JOIN LATERAL (VALUES (created_at, 'created'), (updated_at2, 'updated')) AS s (at, kind)
    WHERE at IS NOT NULL
), new_submissions AS (
    INSERT INTO "submissions" ("id", "case_id", "client_id", "received_at", "payload")
    SELECT bench_uuid7(at, kind || '-submission-' || k), case_id, client_id, at, payload
    FROM sent ORDER BY k, at
), new_tokens AS (
    INSERT INTO "redirect_tokens" ("id", "case_id", "token_hash", "product_uuid", "created_at",
        "expires_at", "used_at")
    SELECT bench_uuid7(attached_at, 'token-' || k), case_id,
        translate(rtrim(encode(sha256(('token-' || k)::bytea), 'base64'), '='), '+/', '-_'),
        '3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07', attached_at, attached_at + interval '1 day',
        CASE WHEN r % 10 < 7 THEN attached_at + (r / 31 % 600) * interval '1 second' END
    FROM g WHERE attached ORDER BY k
), events AS (
    SELECT k, case_id, kind, client_id, NULL::json AS detail, at FROM sent
    UNION ALL
    SELECT k, case_id, 'activated', NULL, NULL, activated_at FROM g WHERE active
    UNION ALL
    SELECT k, case_id, 'product_attached', client_id,
        '{"product_uuid":"3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07"}'::jsonb::json, attached_at
    FROM g WHERE attached
), new_events AS (
    INSERT INTO "case_events" ("id", "case_id", "kind", "client_id", "detail", "created_at")
    SELECT bench_uuid7(at, kind || '-event-' || k), case_id, kind, client_id, detail, at
    FROM events ORDER BY k, at
)
SELECT count(*) AS cases FROM g;
