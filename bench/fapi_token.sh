#!/usr/bin/env bash
# The token endpoint under FAPI 2.0 (bench/RESULTS.md, section 1e): an auth-server with
# AUTH_FAPI2 on, signing its tokens with ES256 and then PS256 (moved there with `key rotate
# --alg`), and a partner whose assertions and DPoP proofs use the same algorithm: every
# request a new assertion and a new proof, made ahead (bench/fapi_token_requests.py) and sent
# by wrk at 64 connections (bench/token_fapi.lua). Each request's assertion and proof are
# checked and recorded as used in Redis, and a DPoP-bound token is signed. Server nonces are
# off (AUTH_DPOP_NONCE=false): requests made ahead cannot carry one, and with them on a
# proof's check gains one comparison. Prints a table of requests per second and the
# auth-server's CPU time per request, round by round.
#   bench/fapi_token.sh
# Settings (environment): BENCH_SECS (default 10), BENCH_ROUNDS (default 3),
# BENCH_PG_URL (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_REDIS_URL
# (default redis://127.0.0.1:6379), BENCH_FAPI_PORT (default 18091). Needs wrk, psql,
# curl, and jwskate (pip install requests-oauth2client).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${BENCH_SECS:-10}
rounds=${BENCH_ROUNDS:-3}
pg=${BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
redis=${BENCH_REDIS_URL:-redis://127.0.0.1:6379}
port=${BENCH_FAPI_PORT:-18091}
scope=enquiry:case:intake:create
threads=$(nproc)
conns=64
die() { echo "bench/fapi_token.sh: $*" >&2; exit 1; }
for tool in wrk psql curl python3; do command -v "$tool" >/dev/null || die "$tool is not installed"; done
python3 -c 'import jwskate' 2>/dev/null || die "jwskate is not installed (pip install requests-oauth2client)"

cargo build --release -j2 -p auth-server >&2
bin=${CARGO_TARGET_DIR:-target}/release/auth-server
work=$(mktemp -d)
pid= db=
cleanup() {
    [ -z "$pid" ] || { kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
    [ -z "$db" ] || psql -q "$pg" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

# Sends the file's requests for SECS seconds; prints "rps cpu_us_per_request".
load() { # file secs
    local before after line
    before=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    BENCH_DIR=$PWD/bench BENCH_FAPI_FILE=$1 BENCH_THREADS=$threads BENCH_SCOPE=$scope \
        wrk -t"$threads" -c"$conns" -d"$2s" --timeout 10s -s bench/token_fapi.lua \
        "http://127.0.0.1:$port/oauth/token" >"$work/wrk.out" 2>&1 || die "wrk: $(cat "$work/wrk.out")"
    after=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    line=$(grep '^BENCH ' "$work/wrk.out") || die "wrk printed no summary: $(cat "$work/wrk.out")"
    grep -q 'status_errors=0 socket_errors=0' <<<"$line" || die "requests failed: $line"
    awk -v line="$line" -v ticks="$((after - before))" -v hz="$(getconf CLK_TCK)" 'BEGIN {
        n = split(line, f, /[ =]/); for (i = 2; i < n; i += 2) v[f[i]] = f[i + 1]
        printf "%.0f %.0f\n", v["rps"], ticks / hz * 1e6 / v["requests"] }'
}

echo "| signed with | requests per second, by round | CPU per request, by round |"
echo "|---|---|---|"
for alg in ES256 PS256; do
    db=bench_fapi_${alg,,}_$$
    psql -q "$pg" -c "CREATE DATABASE $db" >/dev/null
    env=(AUTH_BIND=127.0.0.1:$port AUTH_DATABASE_URL=${pg%/*}/$db AUTH_ISSUER=http://127.0.0.1:$port
        AUTH_KEY_ENCRYPTION_KEY=$(openssl rand -base64 32) AUTH_FAPI2=true AUTH_DPOP_NONCE=false
        REDIS_URL=$redis AUTH_TOKEN_RATE_LIMIT=1000000000 AUTH_SOURCE_RATE_LIMIT=1000000000
        AUTH_FAILED_AUTH_LIMIT=1000000000 RUST_LOG=warn)
    env "${env[@]}" "$bin" migrate >/dev/null
    env "${env[@]}" "$bin" key rotate --alg "$alg" --publish-ahead-secs 0 >/dev/null
    ALG=$alg KEY=$work/key.json JWKS=$work/jwks.json python3 - <<'PY'
import json, os
from jwskate import Jwk
alg = os.environ["ALG"]
key = Jwk.generate(alg=alg, **({"key_size": 2048} if alg.startswith("PS") else {}))
json.dump(dict(key), open(os.environ["KEY"], "w"))
json.dump({"keys": [dict(key.public_jwk())]}, open(os.environ["JWKS"], "w"))
PY
    client=$(env "${env[@]}" "$bin" client create --name "Bench FAPI $alg" --scopes "$scope" \
        --auth-method private_key_jwt --jwks-file "$work/jwks.json" -o json |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["client_id"])')
    env "${env[@]}" "$bin" serve >"$work/auth-$alg.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$port/readyz" && break; sleep 0.1; done
    curl -fs -o /dev/null "http://127.0.0.1:$port/readyz" || die "the auth-server did not start: $(tail "$work/auth-$alg.log")"
    token_url=http://127.0.0.1:$port/oauth/token
    made() { python3 bench/fapi_token_requests.py "$token_url" "$client" "$work/key.json" "$1" >"$work/requests.txt"; }
    # One request by hand first: a DPoP-bound token signed with the algorithm.
    made 1
    IFS=$'\t' read -r assertion proof <"$work/requests.txt"
    answer=$(curl -sS "$token_url" -H "DPoP: $proof" -d grant_type=client_credentials -d "scope=$scope" \
        -d client_assertion_type=urn:ietf:params:oauth:client-assertion-type:jwt-bearer \
        -d "client_assertion=$assertion") || die "$alg: the first token request failed"
    [[ $answer == *access_token* ]] || die "$alg: the first token request was refused: $answer"
    header=$(python3 -c 'import base64,json,sys; a=json.loads(sys.argv[1]); t=a["access_token"].split(".")[0]; print(a["token_type"], json.loads(base64.urlsafe_b64decode(t + "=" * (-len(t) % 4)))["alg"])' "$answer")
    [ "$header" = "DPoP $alg" ] || die "$alg: the token is \"$header\", not a DPoP-bound $alg one"
    # The rate, from a short run, tells how many requests a round needs.
    made 40000
    read -r rps _ < <(load "$work/requests.txt" 2)
    rates=() costs=()
    for _ in $(seq "$rounds"); do
        made $((rps * secs * 2 + 1000))
        read -r rps cost < <(load "$work/requests.txt" "$secs")
        rates+=("$rps") costs+=("$cost µs")
    done
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; pid=
    psql -q "$pg" -c "DROP DATABASE $db WITH (FORCE)" >/dev/null; db=
    echo "| $alg (assertion, proof, token) | $(IFS=,; echo "${rates[*]}" | sed 's/,/, /g') | $(IFS=,; echo "${costs[*]}" | sed 's/,/, /g') |"
done
