#!/usr/bin/env bash
# The token endpoint with its signing keys inside a PKCS#11 token (bench/RESULTS.md, section
# 1f): the same release auth-server twice, one with its keys sealed in the database (the
# default) and one with AUTH_KEY_STORE=pkcs11 on a SoftHSM2 token of its own, each on a
# PostgreSQL database of its own, loaded in turn round by round with client_secret_post at
# 64 connections (bench/token_post.lua), for RS256 and then ES256 (moved there with `key
# rotate --alg`). Prints a table of tokens per second and the auth-server's CPU time per
# token.
#   bench/pkcs11_token.sh
# Settings (environment): BENCH_SECS (default 10), BENCH_ROUNDS (default 3), BENCH_PG_URL
# (default postgres://postgres@127.0.0.1:5432/postgres), BENCH_PKCS11_PORT (default 18095,
# and the next one), BENCH_PKCS11_SESSIONS (default: AUTH_PKCS11_SESSIONS's, 8). Needs wrk,
# psql, curl, openssl, python3 and SoftHSM2 (Debian's softhsm2).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${BENCH_SECS:-10}
rounds=${BENCH_ROUNDS:-3}
pg=${BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
port=${BENCH_PKCS11_PORT:-18095}
sessions=${BENCH_PKCS11_SESSIONS:-8}
module=/usr/lib/softhsm/libsofthsm2.so
scope=enquiry:case:intake:create
threads=$(nproc)
conns=64
die() { echo "bench/pkcs11_token.sh: $*" >&2; exit 1; }
for tool in wrk psql curl openssl python3 softhsm2-util; do
    command -v "$tool" >/dev/null || die "$tool is not installed"
done
[ -f "$module" ] || die "$module is missing (apt-get install softhsm2)"

cargo build --release -j2 -p auth-server >&2
bin=${CARGO_TARGET_DIR:-target}/release/auth-server
work=$(mktemp -d)
pids=() dbs=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; done
    for db in "${dbs[@]}"; do
        psql -q "$pg" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# A token of its own, in a directory of its own.
mkdir "$work/tokens"
printf 'directories.tokendir = %s\nobjectstore.backend = file\n' "$work/tokens" >"$work/softhsm2.conf"
export SOFTHSM2_CONF=$work/softhsm2.conf
softhsm2-util --init-token --free --label bench --pin 2026 --so-pin 6202 >/dev/null

# Starts the auth-server of store $1 (database or pkcs11) on port $2; sets ENV and the
# client's CLIENT_ID and CLIENT_SECRET.
start() {
    local store=$1 at=$2 db=bench_pkcs11_${1}_$$
    psql -q "$pg" -c "CREATE DATABASE $db" >/dev/null
    dbs+=("$db")
    ENV=(AUTH_BIND=127.0.0.1:$at AUTH_DATABASE_URL=${pg%/*}/$db AUTH_ISSUER=http://127.0.0.1:$at
        AUTH_KEY_ENCRYPTION_KEY=$(openssl rand -base64 32) AUTH_KEY_STORE=$store
        AUTH_PKCS11_MODULE=$module AUTH_PKCS11_TOKEN_LABEL=bench AUTH_PKCS11_PIN=2026
        AUTH_PKCS11_SESSIONS=$sessions AUTH_TOKEN_RATE_LIMIT=1000000000
        AUTH_SOURCE_RATE_LIMIT=1000000000 AUTH_FAILED_AUTH_LIMIT=1000000000 RUST_LOG=warn)
    env "${ENV[@]}" "$bin" migrate >/dev/null
    local created
    created=$(env "${ENV[@]}" "$bin" client create --name "Bench $store" --scopes "$scope" -o json)
    CLIENT_ID=$(sed -nE 's/.*"client_id": *"([^"]+)".*/\1/p' <<<"$created")
    CLIENT_SECRET=$(sed -nE 's/.*"client_secret": *"([^"]+)".*/\1/p' <<<"$created")
    env "${ENV[@]}" "$bin" serve >"$work/auth-$store.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$at/readyz" && break; sleep 0.1; done
    curl -fs -o /dev/null "http://127.0.0.1:$at/readyz" ||
        die "the $store auth-server did not start: $(tail "$work/auth-$store.log")"
}

start database "$port"
db_env=("${ENV[@]}") db_pid=${pids[-1]} db_client=("$CLIENT_ID" "$CLIENT_SECRET")
start pkcs11 $((port + 1))
hsm_env=("${ENV[@]}") hsm_pid=${pids[-1]} hsm_client=("$CLIENT_ID" "$CLIENT_SECRET")

# Loads the server of pid $1 on port $2 with client $3/$4 for SECS seconds; prints
# "rps cpu_us_per_token".
load() {
    local before after line
    before=$(awk '{ print $14 + $15 }' "/proc/$1/stat")
    BENCH_DIR=$PWD/bench BENCH_CLIENT_ID=$3 BENCH_CLIENT_SECRET=$4 \
        wrk -t"$threads" -c"$conns" -d"${secs}s" --timeout 10s -s bench/token_post.lua \
        "http://127.0.0.1:$2/oauth/token" >"$work/wrk.out" 2>&1 || die "wrk: $(cat "$work/wrk.out")"
    after=$(awk '{ print $14 + $15 }' "/proc/$1/stat")
    line=$(grep '^BENCH ' "$work/wrk.out") || die "wrk printed no summary: $(cat "$work/wrk.out")"
    grep -q 'status_errors=0 socket_errors=0' <<<"$line" || die "requests failed: $line"
    awk -v line="$line" -v ticks="$((after - before))" -v hz="$(getconf CLK_TCK)" 'BEGIN {
        n = split(line, f, /[ =]/); for (i = 2; i < n; i += 2) v[f[i]] = f[i + 1]
        printf "%.0f %.0f\n", v["rps"], ticks / hz * 1e6 / v["requests"] }'
}

# The alg of a token the server on port $1 signs for client $2/$3 now.
alg_now() {
    curl -fsS "http://127.0.0.1:$1/oauth/token" -H 'Content-Type: application/json' \
        -d "{\"grant_type\":\"client_credentials\",\"client_id\":\"$2\",\"client_secret\":\"$3\",\"scope\":\"$scope\"}" |
        python3 -c 'import base64,json,sys; t=json.load(sys.stdin)["access_token"].split(".")[0]; print(json.loads(base64.urlsafe_b64decode(t + "=" * (-len(t) % 4)))["alg"])'
}

echo "| signed with | keys | tokens per second, by round | CPU per token, by round |"
echo "|---|---|---|---|"
for alg in RS256 ES256; do
    if [ "$alg" != RS256 ]; then
        env "${db_env[@]}" "$bin" key rotate --alg "$alg" --publish-ahead-secs 0 >/dev/null
        env "${hsm_env[@]}" "$bin" key rotate --alg "$alg" --publish-ahead-secs 0 >/dev/null
    fi
    for side in database pkcs11; do
        if [ $side = database ]; then p=$port c=("${db_client[@]}"); else p=$((port + 1)) c=("${hsm_client[@]}"); fi
        got=$(alg_now "$p" "${c[@]}")
        [ "$got" = "$alg" ] || die "the $side server signs $got, not $alg"
    done
    declare -A rates=() costs=()
    for r in $(seq "$rounds"); do
        # Which side goes first alternates from round to round.
        order=(database pkcs11)
        ((r % 2 == 0)) && order=(pkcs11 database)
        for side in "${order[@]}"; do
            if [ $side = database ]; then
                read -r rps cost < <(load "$db_pid" "$port" "${db_client[@]}")
            else
                read -r rps cost < <(load "$hsm_pid" $((port + 1)) "${hsm_client[@]}")
            fi
            rates[$side]+="${rates[$side]:+, }$rps" costs[$side]+="${costs[$side]:+, }$cost µs"
        done
    done
    for side in database pkcs11; do
        label=$side
        [ $side = database ] && label="sealed in the database (in process)"
        [ $side = pkcs11 ] && label="in SoftHSM2 (PKCS#11, $sessions sessions)"
        echo "| $alg | $label | ${rates[$side]} | ${costs[$side]} |"
    done
    unset rates costs
done
