#!/usr/bin/env bash
# shellcheck disable=SC2153,SC2154
# Section 8 of bench/run.sh: the intake-api's webhook delivery against a receiver that answers
# at once. Sourced by run.sh as soon as it has read its own settings, so that these (WH_*, from
# the BENCH_WEBHOOK* variables of its header) are checked with them; the helpers used here
# (log, die, rec, med, calc, start_service, ...) are run.sh's. Run alone, it is
# `BENCH_ONLY=webhooks bench/run.sh`: the build, an auth-server, then this section only.
#
# Each load runs on an intake-api of its own with a fresh database, so that what one load
# left pending cannot be sent during the next: steady creates from one partner at each rate
# of BENCH_WEBHOOK_RATES, the same from BENCH_WEBHOOK_PARTNERS partners at once, then a
# backlog of BENCH_WEBHOOK_BACKLOG events drained. The figures come from the database
# (webhook_deliveries: created_at when the event was made, delivered_at when the partner's
# 2xx was recorded), not from the receiver.

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    BENCH_ONLY=webhooks exec "$(dirname "${BASH_SOURCE[0]}")/run.sh" "$@"
fi

WH_ROUNDS=${BENCH_WEBHOOK_ROUNDS:-1}
read -ra WH_RATES <<<"${BENCH_WEBHOOK_RATES:-200 1000 max}"
WH_PARTNERS=${BENCH_WEBHOOK_PARTNERS:-100}
WH_PARTNERS_RATE=${BENCH_WEBHOOK_PARTNERS_RATE:-1000}
WH_BACKLOG=${BENCH_WEBHOOK_BACKLOG:-100000}
WH_DRAIN_SECS=${BENCH_WEBHOOK_DRAIN_SECS:-120}
# The section's intake-api, the receiver, and a port nothing listens on.
WH_PORT=${BENCH_WEBHOOK_PORT:-$((INTAKE_PORT + 4))}
WH_RECEIVER_PORT=$((WH_PORT + 1))
WH_CLOSED_PORT=$((WH_PORT + 2))
WH_URL="http://127.0.0.1:$WH_PORT"
WH_RECEIVER="http://127.0.0.1:$WH_RECEIVER_PORT"
WH_CONNS=$INTAKE_CONNS

if ((WEBHOOKS)); then
    [[ $WH_ROUNDS =~ ^[0-9]+$ && $WH_ROUNDS -ge 1 ]] || die "BENCH_WEBHOOK_ROUNDS must be a positive number"
    for rate in "${WH_RATES[@]}"; do
        [[ $rate == max || ($rate =~ ^[0-9]+$ && $rate -ge 1) ]] ||
            die "BENCH_WEBHOOK_RATES must be creates per second or max, separated by spaces"
    done
    [[ $WH_PARTNERS =~ ^[0-9]+$ && $WH_PARTNERS -ge 2 ]] || die "BENCH_WEBHOOK_PARTNERS must be at least 2"
    [[ $WH_PARTNERS_RATE =~ ^[0-9]+$ && $WH_PARTNERS_RATE -ge 1 ]] ||
        die "BENCH_WEBHOOK_PARTNERS_RATE must be creates per second"
    [[ $WH_BACKLOG =~ ^[0-9]+$ && $WH_BACKLOG -ge $((WH_CONNS * 10)) ]] ||
        die "BENCH_WEBHOOK_BACKLOG must be a whole number of at least $((WH_CONNS * 10))"
    [[ $WH_DRAIN_SECS =~ ^[0-9]+$ && $WH_DRAIN_SECS -ge 1 ]] || die "BENCH_WEBHOOK_DRAIN_SECS must be a positive number"
fi

WH_IDS=()
WH_SECRETS=()
WH_PID=
WH_RECEIVER_PID=

# The section's settings that are not the defaults, as run.sh takes them.
webhooks_settings() {
    if ((!WEBHOOKS)); then
        printf ' BENCH_WEBHOOKS=0'
        return
    fi
    [[ $WH_ROUNDS == 1 ]] || printf ' BENCH_WEBHOOK_ROUNDS=%s' "$WH_ROUNDS"
    [[ ${WH_RATES[*]} == "200 1000 max" ]] || printf " BENCH_WEBHOOK_RATES='%s'" "${WH_RATES[*]}"
    [[ $WH_PARTNERS == 100 ]] || printf ' BENCH_WEBHOOK_PARTNERS=%s' "$WH_PARTNERS"
    [[ $WH_PARTNERS_RATE == 1000 ]] || printf ' BENCH_WEBHOOK_PARTNERS_RATE=%s' "$WH_PARTNERS_RATE"
    [[ $WH_BACKLOG == 100000 ]] || printf ' BENCH_WEBHOOK_BACKLOG=%s' "$WH_BACKLOG"
    [[ $WH_DRAIN_SECS == 120 ]] || printf ' BENCH_WEBHOOK_DRAIN_SECS=%s' "$WH_DRAIN_SECS"
}

webhooks_ports_free() {
    local p
    for p in "$WH_PORT" "$WH_RECEIVER_PORT" "$WH_CLOSED_PORT"; do
        port_free "$p" || die "port $p is in use (set BENCH_WEBHOOK_PORT; the section uses it and the next two)"
    done
}

# ---------------------------------------------------------------------------------------------
# The receiver

# nginx answering 204 to everything, with one worker: it takes as little of the cores from
# the intake-api and PostgreSQL as it can, and one already answers tens of thousands of
# requests a second. No access log (a line per event would be its main cost); keep-alive
# with no limit on requests per connection and an idle timeout longer than the client's
# (the worker's client keeps its connections, and one closed under it as it sends would be
# a failed try), and stub_status, which counts the requests it was sent.
wh_receiver_start() {
    local dir=$WORK/receiver
    mkdir -p "$dir"
    cat >"$dir/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    keepalive_timeout 600s;
    keepalive_requests 1000000000;
    server {
        listen 127.0.0.1:$WH_RECEIVER_PORT;
        location = /receiver-status { stub_status; }
        location / { return 204; }
    }
}
EOF
    note_cmd "nginx -p DIR -e DIR/error.log -c DIR/nginx.conf   # worker_processes 1; access_log off; keepalive_timeout 600s; keepalive_requests 1000000000; location / { return 204; }; location = /receiver-status { stub_status; }"
    nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf" >"$dir/nginx.out" 2>&1 &
    WH_RECEIVER_PID=$!
    PIDS+=("$WH_RECEIVER_PID")
    local _
    for _ in $(seq 50); do
        kill -0 "$WH_RECEIVER_PID" 2>/dev/null || die "nginx exited: $(tail -5 "$dir/nginx.out" "$dir/error.log")"
        [[ $(curl -s -o /dev/null -w '%{http_code}' -X POST "$WH_RECEIVER/hooks/check") == 204 ]] && return 0
        sleep 0.1
    done
    die "the receiver did not answer at $WH_RECEIVER"
}

# Requests the receiver has been sent so far, this question included.
wh_received() {
    local n
    n=$(curl -sf "$WH_RECEIVER/receiver-status" | awk 'NR == 3 { print $3 }')
    [[ -n $n ]] || die "the receiver's stub_status gave no count"
    echo "$n"
}

# Requests the receiver has been sent since wh_received said $1, not counting the questions.
wh_received_since() { echo $(($(wh_received) - $1 - 1)); }

# The receiver's ceiling: plain wrk, no intake-api in the way.
wh_receiver_limit() {
    local round=$1
    local out=$WORK/wrk-webhook-receiver-$round.txt
    note_cmd "wrk -t$THREADS -c$WH_CONNS -d${SECS}s --timeout 10s -s bench/webhook_receiver.lua http://127.0.0.1:$WH_RECEIVER_PORT/hooks/1"
    run_child wrk -t"$THREADS" -c"$WH_CONNS" -d"${SECS}s" --timeout 10s -s "$BENCH_DIR/webhook_receiver.lua" \
        "$WH_RECEIVER/hooks/1" >"$out" 2>&1 || die "wrk failed: $(cat "$out")"
    wrk_summary "$out" "webhook receiver round $round"
    rec wh_receiver "$round" rps "$(field rps "$WRK_LINE")"
    rec wh_receiver "$round" p99_ms "$(field p99_ms "$WRK_LINE")"
    log "webhook receiver round $round: $(field rps "$WRK_LINE") req/s"
}

# ---------------------------------------------------------------------------------------------
# Partners and the section's intake-api

# Waits for the background commands $@, each of which must succeed.
wh_wait() {
    local pid
    for pid in "$@"; do
        wait "$pid" || die "a background command failed (see $WORK/cli.log)"
    done
}

# The operator commands below are run ten at a time: each mostly waits (the auth-server's
# command waits out the servers' propagation delay after its change).
WH_PARALLEL=10

# Runs the command "$3..." with each number from $1 to $2 as its last argument, in the
# background, WH_PARALLEL at a time; dies if one fails.
wh_each() {
    local from=$1 to=$2 i pids=()
    shift 2
    for ((i = from; i <= to; i++)); do
        "$@" "$i" &
        pids+=($!)
        if ((${#pids[@]} == WH_PARALLEL)); then
            wh_wait "${pids[@]}"
            pids=()
        fi
    done
    wh_wait "${pids[@]}"
}

# Partner $2's client, created at the auth-server; its JSON written to $1/$2.json.
wh_create_partner() {
    env "${UNSET_ENV[@]}" "${AUTH_ENV[@]}" RUST_LOG=warn "$TARGET_DIR/release/auth-server" \
        client create --name "Bench Webhook Partner $2" --scopes "$SCOPE" -o json \
        >"$1/$2.json" 2>>"$WORK/cli.log"
}

# The partners: the run's bench client, and as many more as BENCH_WEBHOOK_PARTNERS asks for
# (each its own client at the auth-server, so its own token and endpoint).
wh_partners() {
    log "webhooks: creating $((WH_PARTNERS - 1)) more partners"
    WH_IDS=("$BENCH_CLIENT_ID")
    WH_SECRETS=("$BENCH_CLIENT_SECRET")
    note_cmd "target/release/auth-server client create --name \"Bench Webhook Partner N\" --scopes \"$SCOPE\"   # N = 2..$WH_PARTNERS"
    local dir=$WORK/partners i json
    mkdir -p "$dir"
    wh_each 2 "$WH_PARTNERS" wh_create_partner "$dir"
    for i in $(seq 2 "$WH_PARTNERS"); do
        json=$(cat "$dir/$i.json")
        WH_IDS+=("$(sed -nE 's/.*"client_id": *"([^"]+)".*/\1/p' <<<"$json" | head -1)")
        WH_SECRETS+=("$(sed -nE 's/.*"client_secret": *"([^"]+)".*/\1/p' <<<"$json" | head -1)")
        [[ -n ${WH_IDS[-1]} && -n ${WH_SECRETS[-1]} ]] || die "client create printed no credentials for partner $i"
    done
    rm -rf "$dir"
}

# Writes a fresh access token for each of the first $1 partners, one a line, to
# $WORK/webhook-tokens.txt.
wh_tokens() {
    local i token file=$WORK/webhook-tokens.txt
    : >"$file"
    for ((i = 0; i < $1; i++)); do
        token=$(BENCH_CLIENT_ID=${WH_IDS[$i]} BENCH_CLIENT_SECRET=${WH_SECRETS[$i]} get_token)
        [[ $token == *.*.* ]] || die "no access token for partner $((i + 1))"
        printf '%s\n' "$token" >>"$file"
    done
}

wh_psql() { psql "$(db_url "$1")" -v ON_ERROR_STOP=1 -qAt -F ' ' -c "$2"; }

# Starts the section's intake-api on database $1 (the rest: settings over the run's), with
# webhooks allowed to http on the loopback; sets WH_PID.
wh_start() {
    local db=$1
    shift
    LOG_NAME=intake-api-webhooks start_service intake-api "${INTAKE_ENV[@]}" "${MAIN_READER_ENV[@]}" \
        INTAKE_BIND="127.0.0.1:$WH_PORT" INTAKE_DATABASE_URL="$(db_url "$db")" \
        INTAKE_WEBHOOK_ALLOW_INSECURE=true "$@"
    WH_PID=$STARTED_PID
    wait_ready "$WH_URL" "$WH_PID"
}

wh_stop() {
    kill -TERM "$WH_PID" 2>/dev/null || true
    wait "$WH_PID" 2>/dev/null || true
}

# Points partner $2's endpoint on database $1 at URL $3 with the intake-api's own command
# (which also enables it). The secret it prints is not needed: the receiver checks nothing.
wh_endpoint() {
    env "${UNSET_ENV[@]}" RUST_LOG=warn INTAKE_DATABASE_URL="$(db_url "$1")" \
        INTAKE_KEY_ENCRYPTION_KEY="$INTAKE_KEK" "$TARGET_DIR/release/intake-api" webhook set "$2" "$3" --webhook-allow-insecure true --show-secret \
        >/dev/null 2>>"$WORK/cli.log" || die "webhook set $2 $3 failed: $(tail -3 "$WORK/cli.log")"
}

# Partner number $2 (from 1) sends its events to a path of its own on the receiver, in
# database $1.
wh_partner_endpoint() {
    wh_endpoint "$1" "${WH_IDS[$(($2 - 1))]}" "$WH_RECEIVER/hooks/$2"
}

# Events not yet delivered nor given up on.
wh_pending() {
    wh_psql "$1" "SELECT count(*) FROM webhook_deliveries WHERE delivered_at IS NULL AND failed_at IS NULL"
}

# Waits until database $1 has no pending event, or until $2 (seconds since the epoch). Sets
# WH_END to when the last event was delivered, or to when the wait ended with some pending.
wh_drain() {
    local db=$1 deadline=$2 pending
    # Creates wrk left in flight may still be committing their events.
    sleep 0.5
    while true; do
        pending=$(wh_pending "$db")
        if ((pending == 0)); then
            WH_END=$(wh_psql "$db" "SELECT extract(epoch FROM coalesce(greatest(max(delivered_at), max(failed_at)), now()))
                FROM webhook_deliveries")
            return 0
        fi
        if awk -v now="$(date +%s.%N)" -v d="$deadline" 'BEGIN { exit !(now >= d) }'; then
            WH_END=$(date +%s.%N)
            return 0
        fi
        sleep 0.5
    done
}

# CPU seconds so far of the section's intake-api, PostgreSQL and the receiver's worker.
wh_cpu() {
    local worker
    worker=$(pgrep -P "$WH_RECEIVER_PID" | head -1)
    echo "$(proc_cpu "$WH_PID") $(postgres_cpu) $(proc_cpu "$worker")"
}

# ---------------------------------------------------------------------------------------------
# The loads

# Steady creates at $3 per second (or max) for SECS seconds from the first $4 partners, each
# with its endpoint at its own path on the receiver, recorded under key $1, round $2; then
# the wait for the queue to drain.
wh_steady() {
    local key=$1 round=$2 rate=$3 partners=$4
    local db="bench_wh_${key#wh_}_r${round}_$RUN_ID"
    psql_admin -c "CREATE DATABASE \"$db\"" >/dev/null
    DBS+=("$db")
    wh_start "$db"
    wh_each 1 "$partners" wh_partner_endpoint "$db"
    wh_tokens "$partners"
    # The worker finds an endpoint another process set at its next look, at most its poll
    # period (the default, 1 s) away: the load starts after that, so that the lags are a
    # partner's whose endpoint was set before it sent, not the wait for that look.
    sleep 1.2
    local paced=$rate
    [[ $rate == max ]] && paced=0
    export BENCH_TOKENS=$WORK/webhook-tokens.txt BENCH_RATE=$paced BENCH_THREADS=$THREADS \
        BENCH_LIMIT=0 BENCH_TAG="w${key#wh_}r$round"
    local out=$WORK/wrk-$key-$round.txt received0 t0 t1
    local whose="the partner's token"
    ((partners > 1)) && whose="a token of each of the $partners partners, one a line"
    note_cmd "BENCH_RATE=$paced BENCH_THREADS=$THREADS BENCH_TOKENS=tokens.txt wrk -t$THREADS -c$WH_CONNS -d${SECS}s --timeout 10s -s bench/webhook_create.lua http://127.0.0.1:$WH_PORT/partners/external/intake   # tokens.txt: $whose"
    checkpoint
    received0=$(wh_received)
    t0=$(date +%s.%N)
    run_child wrk -t"$THREADS" -c"$WH_CONNS" -d"${SECS}s" --timeout 10s -s "$BENCH_DIR/webhook_create.lua" \
        "$WH_URL/partners/external/intake" >"$out" 2>&1 || die "wrk failed: $(cat "$out")"
    t1=$(date +%s.%N)
    wrk_summary "$out" "$key round $round"
    local requests
    requests=$(field requests "$WRK_LINE")
    rec "$key" "$round" asked "$paced"
    rec "$key" "$round" achieved "$(field rps "$WRK_LINE")"
    rec "$key" "$round" create_p99_ms "$(field p99_ms "$WRK_LINE")"
    analyze_db "$db"
    wh_drain "$db" "$(calc "$t1 + $WH_DRAIN_SECS")"
    wh_measure "$key" "$round" "$db" "$t0" "$t1" "$received0"
    local made
    made=$(awk -F'\t' -v k="$key" -v r="$round" '$1 == k && $2 == r && $3 == "made" { print $4 }' "$DATA")
    ((made >= requests)) || die "$key: wrk counted $requests creates but only $made events were queued"
    ((made <= requests + WH_CONNS)) || die "$key: $made events were queued for $requests creates"
    wh_stop
    psql_admin -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null
}

# Records what database $3 says of a load that ran from $4 to $5 (seconds since the epoch)
# and whose wait ended at WH_END: events made, delivered, pending and failed; delivered per
# second from the load's start to WH_END; the time from the load's end to WH_END; and the
# lag's p50 and p99, with an event still pending counted with what it has waited so far (the
# percentiles are then lower bounds, recorded as such).
wh_measure() {
    local key=$1 round=$2 db=$3 t0=$4 t1=$5 received0=$6 row
    row=$(wh_psql "$db" "SELECT count(*), count(delivered_at),
            count(*) FILTER (WHERE delivered_at IS NULL AND failed_at IS NULL), count(failed_at),
            coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM coalesce(delivered_at, now()) - created_at)) FILTER (WHERE failed_at IS NULL), 0),
            coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM coalesce(delivered_at, now()) - created_at)) FILTER (WHERE failed_at IS NULL), 0),
            coalesce(max(attempts), 0)
        FROM webhook_deliveries")
    local made delivered pending failed p50 p99 attempts received
    read -r made delivered pending failed p50 p99 attempts <<<"$row"
    received=$(wh_received_since "$received0")
    rec "$key" "$round" made "$made"
    rec "$key" "$round" delivered "$delivered"
    rec "$key" "$round" pending "$pending"
    rec "$key" "$round" failed "$failed"
    rec "$key" "$round" received "$received"
    rec "$key" "$round" max_attempts "$attempts"
    rec "$key" "$round" delivered_per_s "$(calc "$delivered / ($WH_END - $t0)" 1)"
    rec "$key" "$round" drain_s "$(calc "($WH_END > $t1 ? $WH_END - $t1 : 0)" 1)"
    rec "$key" "$round" lag_p50_s "$(calc "$p50" 3)"
    rec "$key" "$round" lag_p99_s "$(calc "$p99" 3)"
    local state
    state="drained in $(calc "($WH_END > $t1 ? $WH_END - $t1 : 0)" 1) s"
    ((pending > 0)) && state="not drained, $pending pending"
    log "$key round $round: $(field rps "$WRK_LINE") creates/s, $made made, $delivered delivered ($(calc "$delivered / ($WH_END - $t0)" 1)/s), lag p50 $(calc "$p50" 3) s, p99 $(calc "$p99" 3) s, $state"
}

# The backlog, recorded under key wh_backlog, round $1: WH_BACKLOG events made for the run's
# partner while its endpoint was down, then drained once it is back. They are made by creates
# at full speed on an intake-api whose worker waits a day between looks, with the endpoint at
# a closed port besides, so that a worker woken some other way (by the creates themselves)
# sends nothing anywhere; what such a worker tried is made due again, as if never tried, or
# the drain would time its back-off rather than its sending. Then the intake-api is stopped,
# the endpoint pointed at the receiver, and a new intake-api with the default poll period
# drains them.
wh_backlog() {
    local round=$1 key=wh_backlog
    local db="bench_wh_backlog_r${round}_$RUN_ID"
    psql_admin -c "CREATE DATABASE \"$db\"" >/dev/null
    DBS+=("$db")
    wh_start "$db" INTAKE_WEBHOOK_POLL_MS=$((ACTIVATION_DELAY * 1000))
    wh_endpoint "$db" "$BENCH_CLIENT_ID" "http://127.0.0.1:$WH_CLOSED_PORT/hooks/1"
    wh_tokens 1
    export BENCH_TOKENS=$WORK/webhook-tokens.txt BENCH_RATE=0 BENCH_THREADS=$THREADS \
        BENCH_LIMIT=$(((WH_BACKLOG + THREADS - 1) / THREADS)) BENCH_TAG="wbr$round"
    local out=$WORK/wrk-$key-$round.txt made=0 t0 t1
    # Long enough for creates at a fiftieth of the usual rate; stopped as soon as the
    # database holds the backlog.
    local secs=$((WH_BACKLOG / 50 + 60))
    note_cmd "target/release/intake-api webhook set CLIENT_ID http://127.0.0.1:$WH_CLOSED_PORT/hooks/1 --webhook-allow-insecure true --show-secret   # on an intake-api started with INTAKE_WEBHOOK_POLL_MS=$((ACTIVATION_DELAY * 1000))"
    note_cmd "BENCH_RATE=0 BENCH_THREADS=$THREADS BENCH_LIMIT=$BENCH_LIMIT BENCH_TOKENS=tokens.txt wrk -t$THREADS -c$WH_CONNS -d${secs}s --timeout 10s -s bench/webhook_create.lua http://127.0.0.1:$WH_PORT/partners/external/intake   # stopped (SIGINT) once $WH_BACKLOG events are queued"
    log "webhooks: making a backlog of $WH_BACKLOG events"
    t0=$(date +%s.%N)
    wrk -t"$THREADS" -c"$WH_CONNS" -d"${secs}s" --timeout 10s -s "$BENCH_DIR/webhook_create.lua" \
        "$WH_URL/partners/external/intake" >"$out" 2>&1 &
    CHILD=$!
    while kill -0 "$CHILD" 2>/dev/null; do
        made=$(wh_psql "$db" "SELECT count(*) FROM webhook_deliveries")
        if ((made >= WH_BACKLOG)); then
            kill -INT "$CHILD" 2>/dev/null || true
            break
        fi
        sleep 0.5
    done
    wait "$CHILD" || die "wrk failed: $(cat "$out")"
    CHILD=
    t1=$(date +%s.%N)
    wrk_summary "$out" "$key round $round (creates)"
    wh_stop
    local tried
    read -r made tried <<<"$(wh_psql "$db" "SELECT count(*), count(*) FILTER (WHERE attempts > 0 OR locked_until IS NOT NULL OR delivered_at IS NOT NULL OR failed_at IS NOT NULL) FROM webhook_deliveries")"
    ((made >= WH_BACKLOG)) || log "warning: the backlog holds $made events, not $WH_BACKLOG (creates ended early: see $out)"
    if ((tried > 0)); then
        log "webhooks: $tried events were tried while the backlog was made; making them due again"
        note_cmd "psql -c 'UPDATE webhook_deliveries SET next_attempt_at = created_at, attempts = 0, locked_until = NULL, last_status = NULL, last_error = NULL WHERE (attempts > 0 OR locked_until IS NOT NULL) AND delivered_at IS NULL AND failed_at IS NULL' \"\$WEBHOOK_DB_URL\"   # only when the worker tried events while the backlog was made"
        wh_psql "$db" "UPDATE webhook_deliveries SET next_attempt_at = created_at, attempts = 0, locked_until = NULL,
            last_status = NULL, last_error = NULL
            WHERE (attempts > 0 OR locked_until IS NOT NULL) AND delivered_at IS NULL AND failed_at IS NULL" >/dev/null
    fi
    analyze_db "$db"
    rec "$key" "$round" made "$made"
    rec "$key" "$round" tried_before "$tried"
    rec "$key" "$round" made_s "$(calc "$t1 - $t0" 1)"
    log "webhooks: $made events made in $(calc "$t1 - $t0" 1) s; draining"

    wh_endpoint "$db" "$BENCH_CLIENT_ID" "$WH_RECEIVER/hooks/1"
    note_cmd "target/release/intake-api webhook set CLIENT_ID http://127.0.0.1:$WH_RECEIVER_PORT/hooks/1 --webhook-allow-insecure true --show-secret   # with that intake-api stopped; then one started with the default INTAKE_WEBHOOK_POLL_MS"
    checkpoint
    local received0 cpu0 cpu1 start
    received0=$(wh_received)
    start=$(date +%s.%N)
    wh_start "$db"
    t0=$(date +%s.%N)
    cpu0=$(wh_cpu)
    wh_drain "$db" "$(calc "$t0 + $WH_DRAIN_SECS")"
    cpu1=$(wh_cpu)
    local delivered pending elapsed
    read -r delivered pending <<<"$(wh_psql "$db" "SELECT count(delivered_at), count(*) FILTER (WHERE delivered_at IS NULL AND failed_at IS NULL) FROM webhook_deliveries")"
    elapsed=$(calc "$WH_END - $t0")
    rec "$key" "$round" ready_s "$(calc "$t0 - $start" 1)"
    rec "$key" "$round" delivered "$delivered"
    rec "$key" "$round" pending "$pending"
    rec "$key" "$round" received "$(wh_received_since "$received0")"
    rec "$key" "$round" drain_s "$(calc "$elapsed" 1)"
    rec "$key" "$round" delivered_per_s "$(calc "$delivered / $elapsed" 1)"
    local names=(intake-api postgres nginx) before after i
    read -ra before <<<"$cpu0"
    read -ra after <<<"$cpu1"
    for i in 0 1 2; do
        ((delivered > 0)) &&
            rec "$key" "$round" "cpu_us_per_event_${names[$i]}" "$(calc "(${after[$i]} - ${before[$i]}) * 1000000 / $delivered" 0)"
        rec "$key" "$round" "cpu_share_${names[$i]}" "$(calc "(${after[$i]} - ${before[$i]}) / ($elapsed * $CORES)" 3)"
    done
    local state
    state="drained in $(calc "$elapsed" 1) s"
    ((pending > 0)) && state="not drained in $(calc "$elapsed" 1) s, $pending pending"
    log "webhooks backlog round $round: $delivered of $made delivered ($(calc "$delivered / $elapsed" 1)/s), $state"
    wh_stop
    psql_admin -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null
}

# The whole section: the receiver, the partners, then round by round the receiver's limit
# and every load.
webhooks_run() {
    local main_commands=$COMMANDS r rate
    WH_COMMANDS=$WORK/webhooks-commands.txt
    : >"$WH_COMMANDS"
    COMMANDS=$WH_COMMANDS
    log "webhooks: starting the receiver"
    wh_receiver_start
    wh_partners
    for r in $(seq "$WH_ROUNDS"); do
        wh_receiver_limit "$r"
        for rate in "${WH_RATES[@]}"; do
            wh_steady "wh_1_$rate" "$r" "$rate" 1
        done
        wh_steady "wh_${WH_PARTNERS}_$WH_PARTNERS_RATE" "$r" "$WH_PARTNERS_RATE" "$WH_PARTNERS"
        wh_backlog "$r"
    done
    kill -TERM "$WH_RECEIVER_PID" 2>/dev/null || true
    wait "$WH_RECEIVER_PID" 2>/dev/null || true
    COMMANDS=$main_commands
}

# ---------------------------------------------------------------------------------------------
# The report

# A lag percentile of key $1 (metric $2) in seconds: a lower bound (≥) when events were left
# pending, as they count with what they had waited when the wait ended.
wh_lag() {
    local v
    v=$(med "$1" "$2")
    [[ $v == n/a ]] && { echo n/a; return; }
    if [[ $(med "$1" pending) != 0 ]]; then echo "≥ $v s"; else echo "$v s"; fi
}

# The drain column of key $1: the time from the load's end until nothing was pending, or
# what was left when the wait ended.
wh_drain_cell() {
    local pending
    pending=$(med "$1" pending)
    if [[ $pending == 0 ]]; then
        echo "$(med "$1" drain_s) s"
    else
        echo "**not drained**, $(thousands "$(calc "$pending" 0)") pending after $(med "$1" drain_s) s"
    fi
}

# Section 8, as run.sh's report has its sections.
webhooks_section() {
    ((WEBHOOKS)) || return 0
    local key rate name
    cat <<EOF

## 8. Webhooks

The intake-api's webhook worker sending events to a receiver that answers at once: nginx
$(nginx -v 2>&1 | sed 's|.*nginx/||') (Debian's) on 127.0.0.1, \`return 204;\`, one worker process, no access
log, keep-alive. Each load below runs on an intake-api of its own (the settings of the other
sections' intake-apis, with \`INTAKE_WEBHOOK_ALLOW_INSECURE=true\` so that events may go to http
on the loopback, and the default webhook poll period and back-off; see the commands below)
and a fresh database, so that events one load left pending are not sent during the next. The
figures are the database's: an event is made when its row in \`webhook_deliveries\` is
(\`created_at\`, in the create's transaction) and delivered when the worker has recorded the
receiver's 2xx (\`delivered_at\`). PostgreSQL has \`autovacuum = $(psql_admin -c 'SHOW autovacuum' 2>/dev/null)\`: each database is
analyzed (\`ANALYZE\`) as its load ends (the backlog's once it is made), as autovacuum would
once the tables had grown; before that the planner has no statistics for the queue's
queries, as on any new database in the first minute or so.

**The receiver's limit**: wrk posting what the worker sends (a 204-byte event, the Standard
Webhooks headers; \`bench/webhook_receiver.lua\`), $THREADS threads, $WH_CONNS connections:
**$(med wh_receiver rps) requests/s** (by round: $(rounds wh_receiver rps)). No delivery rate below
can pass it; one that comes near it is held by the receiver, not the worker.

**Steady intake**: creates (\`bench/webhook_create.lua\`: a new case each, so one
\`case.created\` event each) for $SECS s at a steady rate, paced by wrk's \`delay()\` on a
fixed schedule (rate asked; "max" is unpaced: each of the $WH_CONNS connections sends its next create
when the last is answered), from one partner whose endpoint is the receiver; then from
$WH_PARTNERS partners at once, each a client of its own with its own token and its own path on
the receiver (the script goes round their tokens). Each load starts 1.2 s after its endpoints
were set (by \`intake-api webhook set\`, another process, which the worker learns of at its next
look, a poll period away at most), so the lags are those of partners whose endpoints were set
before they sent. Rate achieved: creates answered per second,
by wrk. Delivered: within the load and the $WH_DRAIN_SECS s after it the run waits for the
queue to drain; delivered/s is those over the time from the load's start until the last one
(or until the wait ended). Drain: from the load's end until nothing was pending. Lag:
\`delivered_at - created_at\`, p50 and p99 by \`percentile_cont\` over the load's events;
where some were still pending when the wait ended, they count with what they had waited so
far, so the percentiles are lower bounds (≥). Received: the requests the receiver was sent
(its \`stub_status\`), retries and repeats included.

| partners | rate asked | rate achieved | made | delivered | received | delivered/s | lag p50 | lag p99 | drain | delivered/s by round |
|---|---|---|---|---|---|---|---|---|---|---|
EOF
    for rate in "${WH_RATES[@]}"; do
        key=wh_1_$rate
        name="$rate/s"
        [[ $rate == max ]] && name="max (unpaced)"
        echo "| 1 | $name | $(med "$key" achieved)/s | $(med "$key" made) | $(med "$key" delivered) | $(med "$key" received) | **$(med "$key" delivered_per_s)** | $(wh_lag "$key" lag_p50_s) | $(wh_lag "$key" lag_p99_s) | $(wh_drain_cell "$key") | $(rounds "$key" delivered_per_s) |"
    done
    key=wh_${WH_PARTNERS}_$WH_PARTNERS_RATE
    echo "| $WH_PARTNERS | $WH_PARTNERS_RATE/s | $(med "$key" achieved)/s | $(med "$key" made) | $(med "$key" delivered) | $(med "$key" received) | **$(med "$key" delivered_per_s)** | $(wh_lag "$key" lag_p50_s) | $(wh_lag "$key" lag_p99_s) | $(wh_drain_cell "$key") | $(rounds "$key" delivered_per_s) |"
    key=wh_backlog
    local tried_note=""
    [[ $(med "$key" tried_before) == 0 ]] ||
        tried_note=" $(med "$key" tried_before) of the events were tried (against the closed port) while the backlog was made: the worker did not wait for its poll period. Those were made due again, as if never tried (\`UPDATE webhook_deliveries\`, below), so that the drain does not wait out their back-off."
    cat <<EOF

**Backlog**: $(thousands "$WH_BACKLOG") events for one partner whose endpoint was down, then drained
once it is back. They are made by creates at full speed (unpaced, $WH_CONNS connections; $(med "$key" made)
made in $(med "$key" made_s) s) on an intake-api whose worker looks for due events once a day, with
the partner's endpoint at a closed port besides; then that intake-api is stopped, the
endpoint pointed at the receiver (\`intake-api webhook set\`), and an intake-api with the
default poll period started on the same database (ready in $(med "$key" ready_s) s). Timed from its
readiness until nothing is pending, for at most $WH_DRAIN_SECS s.$tried_note CPU: each
process's user and system time over the drain (PostgreSQL: every backend's and the server's
own), per event delivered, and as a share of the $CORES cores' time.

| events | delivered | received | delivered/s | drain | CPU per event: intake-api | PostgreSQL | receiver | share of the cores: intake-api | PostgreSQL | receiver | delivered/s by round |
|---|---|---|---|---|---|---|---|---|---|---|---|
| $(med "$key" made) | $(med "$key" delivered) | $(med "$key" received) | **$(med "$key" delivered_per_s)** | $(wh_drain_cell "$key") | $(med "$key" cpu_us_per_event_intake-api) µs | $(med "$key" cpu_us_per_event_postgres) µs | $(med "$key" cpu_us_per_event_nginx) µs | $(med "$key" cpu_share_intake-api) | $(med "$key" cpu_share_postgres) | $(med "$key" cpu_share_nginx) | $(rounds "$key" delivered_per_s) |

How to read it: the receiver's limit is the ceiling, and the creates' own rate (section 2)
the most a partner can make. Where delivery keeps up with a load, delivered/s is the rate
achieved, the drain is about a poll period and the lags are well under the load's length;
where it does not, delivered/s is the worker's own rate for that many partners, the lag
grows with the load's length (the p99 is about the last events' wait), and the events not
delivered within the wait are reported pending. The backlog's rate is the worker's top
speed for one partner, with no creates beside it; with the cores' shares it tells whether
that speed is spent working (the shares near 1 together) or waiting (far from it).

Commands (PORT $WH_PORT: the section's intake-api; $WH_RECEIVER_PORT: the receiver; $WH_CLOSED_PORT: closed):

\`\`\`sh
$(printf '%s ' "${INTAKE_ENV[@]}" | sed -E "s#INTAKE_BIND=[^ ]+#INTAKE_BIND=127.0.0.1:$WH_PORT#; s#INTAKE_DATABASE_URL=[^ ]+#INTAKE_DATABASE_URL=\$WEBHOOK_DB_URL#")INTAKE_WEBHOOK_ALLOW_INSECURE=true RUST_LOG=info LOG_FORMAT=json target/release/intake-api serve 2>intake-api.log
target/release/intake-api webhook set CLIENT_ID http://127.0.0.1:$WH_RECEIVER_PORT/hooks/N --webhook-allow-insecure true --show-secret
$(cat "$WH_COMMANDS")
\`\`\`
EOF
}

# BENCH_ONLY=webhooks: section 8 written into BENCH_RESULTS in place of the one there (or
# before "## Targets" when it has none), marked as from a later run than the rest; a file
# that does not exist gets a report of its own.
webhooks_only_report() {
    local section=$WORK/webhooks-section.md commit
    commit=$(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)
    [[ $commit != unknown && -n $(cd "$ROOT" && git status --porcelain --untracked-files=no 2>/dev/null) ]] &&
        commit+=" with uncommitted changes"
    local note
    note="*From a later run than the rest of the report: \`BENCH_SECS=$SECS$(webhooks_settings) BENCH_ONLY=webhooks bench/run.sh\` on $commit, $STARTED_AT (1-minute load average ${LOAD_AT_START%% *} at the start).*"
    webhooks_section | awk -v note="$note" 'NR == 1 && /^$/ { next } { print } /^## 8\./ && !n { print ""; print note; n = 1 }' >"$section"
    if [[ -f $RESULTS ]]; then
        awk -v f="$section" '
            BEGIN { while ((getline line < f) > 0) s = s line "\n" }
            /^## 8\. Webhooks/ { skip = 1; if (!done) { printf "%s\n", s; done = 1 }; next }
            skip && /^## / { skip = 0 }
            skip { next }
            /^## Targets/ && !done { printf "%s\n", s; done = 1 }
            { print }
            END { if (!done) printf "\n%s", s }' "$RESULTS" >"$RESULTS.tmp"
    else
        {
            printf '# Benchmark results\n\n'
            # The backquotes are Markdown's.
            # shellcheck disable=SC2016
            printf 'Written by %s on %s: section 8 alone, on %s cores (%s), commit %s, wrk %s.\n\n' \
                '`BENCH_ONLY=webhooks bench/run.sh`' "$STARTED_AT" "$CORES" "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')" \
                "$commit" "$(wrk --version 2>&1 | head -1 | sed -E 's/^wrk ([^ ]+).*/\1/')"
            webhooks_section | sed '1{/^$/d}'
        } >"$RESULTS.tmp"
    fi
    mv "$RESULTS.tmp" "$RESULTS"
}
