#!/usr/bin/env bash
# The benchmark suite of issue 6: builds release, starts the auth-server and the intake-api
# on fresh PostgreSQL databases, and measures each figure against a limit measured in the same
# run on the same machine, interleaved (limit, ours, limit, ours, ...), reported as medians in
# bench/RESULTS.md.
#
#   bench/run.sh                      # full run, about 10 minutes after the build
#   BENCH_SECS=2 bench/run.sh         # a quick check that everything works
#
# Settings (environment):
#   BENCH_SECS      seconds per measurement (default 10)
#   BENCH_ROUNDS    interleaved rounds per figure (default 3, at least 3 for a real run)
#   BENCH_PG_URL    PostgreSQL admin URL (default postgres://postgres@127.0.0.1:5432/postgres);
#                   must point at 127.0.0.1 or localhost, the user must be able to create databases
#   BENCH_AUTH_PORT, BENCH_INTAKE_PORT   ports for the services (default 18081, 18082)
#   BENCH_RESULTS   where to write the report (default bench/RESULTS.md)
#   BENCH_KEEP=1    keep the work directory (service logs, raw wrk/pgbench output); a
#                   failed run always keeps it
#   BENCH_PROFILE=0 skip the perf profiles (taken when perf works)
#   BENCH_SCALE=0   skip the scale run (section 6): create, update, attach and an activation
#                   pass against 10,000 existing cases and against BENCH_SCALE_CASES, loaded
#                   with SQL (bench/scale_load.sql) into databases of their own
#   BENCH_SCALE_CASES    existing cases of the large database (default 10000000; loading
#                   10 million takes about half an hour and some 30 GB of disk)
#   BENCH_SCALE_KEEP_DB  a name (bench_...) for the large database, kept after the run; a
#                   later run with the same name, the same BENCH_SCALE_CASES and an unchanged
#                   bench/scale_load.sql reuses it instead of loading again (it then also
#                   holds what earlier runs wrote); otherwise it is dropped and loaded anew
#   BENCH_SCALE_PASSES   activation passes per round and database (default 200)
#   BENCH_SCALE_PORT     first of the two ports of the scale run's intake-apis (default
#                   BENCH_INTAKE_PORT + 2)
#   BENCH_BASELINE  a directory holding another build's release auth-server and intake-api
#                   (say, the last release): section 7 then runs the token, create, update and
#                   attach loads against it and this build, interleaved round by round, each
#                   on services and databases of its own
#   BENCH_BASELINE_NAME  what to call that build in the report (default: its directory)
#   BENCH_BASELINE_SQL   the baseline's bench/ directory (its intake.sql and attach.sql, made
#                   into scripts with the baseline's intake-api where they are templates):
#                   section 7 then also runs each build's own statements in pgbench on that
#                   build's database, beside its loads, and compares the ratios to pgbench
#                   (the figures of sections 2 and 3) before and after
#   BENCH_AB_ROUNDS rounds of section 7 (default 5): its verdicts are on changes of 5%, finer
#                   than one round's noise
#   BENCH_AB_PORT   first of the four ports of section 7's services (default BENCH_AUTH_PORT + 10)
#   BENCH_AB_INSTRUCTIONS=0  skip section 7c, the intake-api's instructions per request in
#                   each build, counted by callgrind at one connection (some 3 minutes)
#   BENCH_WEBHOOKS=0  skip section 8, webhook delivery (bench/webhooks.sh): the receiver's
#                   limit, steady creates from one partner and from many, and a backlog
#                   drained, on an intake-api and databases of its own (some 6 minutes at
#                   BENCH_SECS=10 while delivery is slower than the creates)
#   BENCH_ONLY=webhooks  run section 8 alone, after the build and the auth-server (as
#                   bench/webhooks.sh does); its section is written into BENCH_RESULTS in
#                   place of the one there, marked as from a later run (a file that does not
#                   exist gets a report of that section alone)
#   BENCH_WEBHOOK_RATES  the steady creates per second from one partner (default
#                   "200 1000 max"; max: unpaced)
#   BENCH_WEBHOOK_PARTNERS, BENCH_WEBHOOK_PARTNERS_RATE  the load from many partners at once
#                   (default 100 partners, 1000 creates per second in all)
#   BENCH_WEBHOOK_BACKLOG  events of the backlog drained (default 100000)
#   BENCH_WEBHOOK_DRAIN_SECS  how long the queue is given to drain after each load (default
#                   120); what is left is reported pending
#   BENCH_WEBHOOK_ROUNDS  rounds of section 8 (default 1: its drains take minutes)
#   BENCH_WEBHOOK_PORT  first of the three ports of section 8 (default BENCH_INTAKE_PORT + 4):
#                   its intake-api, the receiver, and one kept closed
#
# Needs: cargo, wrk, pgbench and psql (PostgreSQL client), openssl, curl, pgrep (procps), python3;
# valgrind for section 7c; nginx for section 8.
# Missing Debian packages are installed with apt-get when running as root. Only 127.0.0.1 is
# ever contacted.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
BENCH_DIR=$ROOT/bench
SECS=${BENCH_SECS:-10}
ROUNDS=${BENCH_ROUNDS:-3}
AB_ROUNDS=${BENCH_AB_ROUNDS:-5}
PG_URL=${BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}
AUTH_PORT=${BENCH_AUTH_PORT:-18081}
INTAKE_PORT=${BENCH_INTAKE_PORT:-18082}
RESULTS=${BENCH_RESULTS:-$BENCH_DIR/RESULTS.md}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
CORES=$(nproc)
# wrk and pgbench each get one thread per core: the load generator shares the machine.
THREADS=$CORES
INTAKE_CONNS=32
# The intake-api's database pool (see INTAKE_ENV below).
INTAKE_POOL=$((8 * CORES))
# Seconds from a case's creation to its activation, for every intake-api and pgbench here: a
# day, so no case a load made falls due within the run. With the service's default of 15
# minutes, the cases of one measurement would be activated, in a burst at the database's
# pace, inside a measurement a quarter of an hour later. Activation is measured on its own
# (section 6).
ACTIVATION_DELAY=86400
TOKEN_CONNS=(32 64)
SCOPE="enquiry:case:intake:create"
AUTH_URL="http://127.0.0.1:$AUTH_PORT"
INTAKE_URL="http://127.0.0.1:$INTAKE_PORT"
RUN_ID="$(date +%s)_$$"
AUTH_DB="bench_auth_$RUN_ID"
INTAKE_DB="bench_intake_$RUN_ID"
# The scale run (section 6): the same operations against a small and a large number of
# existing cases.
SCALE=${BENCH_SCALE:-1}
SCALE_CASES=(10000 "${BENCH_SCALE_CASES:-10000000}")
SCALE_KEEP_DB=${BENCH_SCALE_KEEP_DB:-}
SCALE_PASSES=${BENCH_SCALE_PASSES:-200}
SCALE_PORT=${BENCH_SCALE_PORT:-$((INTAKE_PORT + 2))}
# Before and after (section 7).
BASELINE=${BENCH_BASELINE:-}
BASELINE_NAME=${BENCH_BASELINE_NAME:-$BASELINE}
BASELINE_SQL=${BENCH_BASELINE_SQL:-}
AB_PORT=${BENCH_AB_PORT:-$((AUTH_PORT + 10))}
AB_INSTRUCTIONS=${BENCH_AB_INSTRUCTIONS:-1}
# Webhook delivery (section 8, bench/webhooks.sh), and the one section a run may be limited to.
WEBHOOKS=${BENCH_WEBHOOKS:-1}
ONLY=${BENCH_ONLY:-}

# Progress goes to the original stderr, kept as fd 3: a trap may run inside a redirection.
exec 3>&2
log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&3; }
die() {
    log "error: $*"
    exit 1
}

[[ $SECS =~ ^[0-9]+$ && $SECS -ge 1 ]] || die "BENCH_SECS must be a whole number of seconds"
[[ $ROUNDS =~ ^[0-9]+$ && $ROUNDS -ge 1 ]] || die "BENCH_ROUNDS must be a positive number"
[[ $AB_ROUNDS =~ ^[0-9]+$ && $AB_ROUNDS -ge 1 ]] || die "BENCH_AB_ROUNDS must be a positive number"
[[ $SCALE == [01] ]] || die "BENCH_SCALE must be 0 or 1"
[[ $AB_INSTRUCTIONS == [01] ]] || die "BENCH_AB_INSTRUCTIONS must be 0 or 1"
[[ ${SCALE_CASES[1]} =~ ^[0-9]+$ && ${SCALE_CASES[1]} -gt ${SCALE_CASES[0]} ]] ||
    die "BENCH_SCALE_CASES must be a whole number over ${SCALE_CASES[0]}"
[[ $SCALE_PASSES =~ ^[0-9]+$ && $SCALE_PASSES -ge 1 ]] || die "BENCH_SCALE_PASSES must be a positive number"
# Only a database of the benchmark's own is ever kept, reused or dropped by name.
[[ -z $SCALE_KEEP_DB || $SCALE_KEEP_DB =~ ^bench_[a-z0-9_]+$ ]] ||
    die "BENCH_SCALE_KEEP_DB must be bench_ followed by lower-case letters, digits or _"
[[ $WEBHOOKS == [01] ]] || die "BENCH_WEBHOOKS must be 0 or 1"
[[ -z $ONLY || $ONLY == webhooks ]] || die "BENCH_ONLY must be webhooks (or unset)"
if [[ -n $ONLY ]]; then
    ((WEBHOOKS)) || die "BENCH_ONLY=webhooks with BENCH_WEBHOOKS=0 runs nothing"
    # The other sections' settings do not apply.
    SCALE=0 BASELINE='' BASELINE_SQL=''
fi
# Section 8's settings, checked with the others before anything is made.
# shellcheck source=bench/webhooks.sh
source "$BENCH_DIR/webhooks.sh"

# ---------------------------------------------------------------------------------------------
# Tools

ensure_tools() {
    local missing=()
    command -v wrk >/dev/null || missing+=(wrk)
    command -v pgbench >/dev/null || missing+=(postgresql-client)
    command -v psql >/dev/null || missing+=(postgresql-client)
    command -v openssl >/dev/null || missing+=(openssl)
    command -v curl >/dev/null || missing+=(curl)
    command -v pgrep >/dev/null || missing+=(procps)
    command -v python3 >/dev/null || missing+=(python3)
    if [[ -n $BASELINE ]] && ((AB_INSTRUCTIONS)); then
        command -v callgrind_control >/dev/null || missing+=(valgrind)
    fi
    if ((WEBHOOKS)); then
        command -v nginx >/dev/null || missing+=(nginx)
    fi
    command -v cargo >/dev/null || die "cargo is needed (a Rust toolchain, see README.md)"
    if ((${#missing[@]})); then
        if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
            log "installing ${missing[*]} with apt-get"
            apt-get update -qq >/dev/null
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
        else
            die "missing tools: ${missing[*]} (Debian packages; install them and rerun)"
        fi
    fi
}

# ---------------------------------------------------------------------------------------------
# PostgreSQL

# The host of BENCH_PG_URL: traffic goes to this machine only.
pg_host=$(sed -E 's#^[a-z]+://([^@/]*@)?([^:/?]+).*#\2#' <<<"$PG_URL")
case $pg_host in
127.0.0.1 | localhost) ;;
*) die "BENCH_PG_URL must point at 127.0.0.1 or localhost, not $pg_host" ;;
esac
[[ $PG_URL =~ ^postgres(ql)?://[^/]+/[^?]* ]] || die "BENCH_PG_URL must be postgres://USER@127.0.0.1:PORT/DB"

# BENCH_PG_URL with another database name.
db_url() { sed -E "s#^(postgres(ql)?://[^/]+)/[^?]*#\1/$1#" <<<"$PG_URL"; }

psql_admin() { psql "$PG_URL" -v ON_ERROR_STOP=1 -qAt "$@"; }

# What pgbench's statements need in intake database $1 beside the service's tables: the
# sequence its case references come from (bench/intake.sql), and its row ids, time-ordered
# like the service's UUIDv7: the milliseconds of the transaction's start, then bits of
# md5(seed). One seed gives one id within a statement.
pgbench_setup() {
    psql "$(db_url "$1")" -v ON_ERROR_STOP=1 -qc 'CREATE SEQUENCE bench_reference' >/dev/null
    psql "$(db_url "$1")" -v ON_ERROR_STOP=1 -qc "CREATE FUNCTION bench_id(seed text) RETURNS uuid
        LANGUAGE sql STABLE AS \$\$ SELECT (lpad(to_hex((extract(epoch FROM now()) * 1000)::bigint), 12, '0')
        || substr(md5(seed), 13))::uuid \$\$" >/dev/null
}

# Gives the planner statistics of database $1's tables now, as autovacuum would once they had
# grown: without them (a server with autovacuum off, or a run shorter than its naptime) a
# lookup by e-mail is planned for thousands of rows, in parallel workers.
analyze_db() { psql "$(db_url "$1")" -v ON_ERROR_STOP=1 -qc ANALYZE >/dev/null; }

# Writes out every dirty page before a measurement. Left to itself, PostgreSQL checkpoints
# when its WAL fills (every minute or so under these loads), inside whichever measurement is
# running, and the first change to each page after a checkpoint writes the whole page to the
# WAL: measurements that caught one ran slower than their neighbours by chance. Each starts
# right after one instead.
checkpoint() { psql_admin -c CHECKPOINT >/dev/null; }

# ---------------------------------------------------------------------------------------------
# Clean-up: whatever happens, stop what was started and drop what was created.

WORK=$(mktemp -d "${TMPDIR:-/tmp}/partner-intake-bench.XXXXXX")
PIDS=()
DBS=()
CHILD=

# Runs a command in the background and waits for it, so that a signal reaches the trap at
# once rather than when the command ends; the clean-up stops the command.
run_child() {
    "$@" &
    CHILD=$!
    local rc=0
    wait "$CHILD" || rc=$?
    CHILD=
    return "$rc"
}

cleanup() {
    local status=$?
    trap - EXIT INT TERM
    [[ -n $CHILD ]] && kill -TERM "$CHILD" 2>/dev/null
    for pid in "${PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    for db in "${DBS[@]}"; do
        psql_admin -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >/dev/null 2>&1 ||
            log "could not drop database $db"
    done
    # A failed run keeps its logs and raw output for a look.
    if [[ ${BENCH_KEEP:-0} == 1 || $status == 1 ]]; then
        log "work directory kept: $WORK"
    else
        rm -rf "$WORK"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "terminated"; exit 143' TERM

# ---------------------------------------------------------------------------------------------
# Measurements are kept as "key round metric value" lines in $DATA.

DATA=$WORK/data.tsv
: >"$DATA"
COMMANDS=$WORK/commands.txt
: >"$COMMANDS"

rec() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$DATA"; }

# The median of one metric over the rounds.
med() {
    awk -F'\t' -v k="$1" -v m="$2" '$1 == k && $3 == m { print $4 }' "$DATA" | sort -g |
        awk '{ a[NR] = $1 } END { if (NR == 0) print "n/a"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# The values of one metric, round by round.
rounds() {
    awk -F'\t' -v k="$1" -v m="$2" '$1 == k && $3 == m { printf "%s%s", sep, $4; sep = ", " }' "$DATA"
}

# Records each command once, as it was run (secrets and tokens stay in the environment).
note_cmd() { grep -qxF -- "$*" "$COMMANDS" || printf '%s\n' "$*" >>"$COMMANDS"; }

# Arithmetic on decimals.
calc() { awk "BEGIN { x = $1; printf \"%.${2:-3}f\", x }"; }

# CPU seconds (user + system) used so far by process $1.
proc_cpu() {
    local ticks
    ticks=$(sed -E 's/^.*\) //' "/proc/$1/stat" | awk '{ print $12 + $13 }')
    calc "$ticks / $(getconf CLK_TCK)" 3
}

# CPU seconds used so far by every PostgreSQL process of this machine's server, counting
# backends that have exited (the postmaster's reaped children) and the server's own writers:
# the database's side of a load, beside the service's own.
postgres_cpu() {
    local ticks
    # A process may end between the listing and the reading: cat then fails, the rest counts.
    ticks=$({ cat /proc/[0-9]*/stat 2>/dev/null || true; } | awk '{
        lp = index($0, "("); rp = index($0, ") ")
        if (substr($0, lp + 1, rp - lp - 1) != "postgres") next
        split(substr($0, rp + 2), f, " ")
        t += f[12] + f[13] + f[14] + f[15] } END { print t + 0 }')
    calc "$ticks / $(getconf CLK_TCK)" 3
}

# PostgreSQL's processes now, ended ones not yet reaped included.
postgres_procs() { pgrep -cx postgres || true; }

# Waits (at most 5 s) until PostgreSQL has at most $1 processes: the backends of a client
# that has just exited must have been reaped, their CPU passed to the postmaster, before
# postgres_cpu reads it, or it is counted nowhere.
postgres_settle() {
    local _
    for _ in $(seq 100); do
        (($(postgres_procs) <= $1)) && return 0
        sleep 0.05
    done
}

# Context switches of all of a process's threads so far: "voluntary involuntary". Voluntary:
# a thread waited (for work, a lock); involuntary: the scheduler preempted it for another.
proc_switches() {
    cat /proc/"$1"/task/*/status 2>/dev/null |
        awk '/^voluntary_ctxt_switches/ { v += $2 } /^nonvoluntary_ctxt_switches/ { n += $2 } END { print v + 0, n + 0 }'
}

# CPU seconds used by this shell's finished children (wrk, pgbench, openssl, ...). `times`
# must run in this shell, not in a $(...) subshell, so it writes to a file.
children_cpu() {
    times >"$WORK/times.txt"
    awk 'NR == 2 {
        s = 0
        for (i = 1; i <= 2; i++) { split($i, p, "m"); sub("s", "", p[2]); s += p[1] * 60 + p[2] }
        printf "%.3f", s }' "$WORK/times.txt" >"$WORK/children_cpu.txt"
}

# A /proc/PID/status field in MiB.
mem_mib() { awk -v f="$2:" '$1 == f { printf "%.1f", $2 / 1024 }' "/proc/$1/status"; }

# ---------------------------------------------------------------------------------------------
# Load generators

# Runs wrk; records rps, p50_ms, p99_ms, PostgreSQL's CPU per request and, for each PID given
# after --, its CPU per request. Fails the run when any response was an error: a benchmark of
# refusals is no benchmark.
run_wrk() {
    local key=$1 round=$2 conns=$3 script=$4 path=$5
    shift 5
    local pids=()
    [[ ${1:-} == -- ]] && shift && pids=("$@")
    local out=$WORK/wrk-$key-$round.txt cpu_before=() cpu_after=() cs_before=() cs_after=() c0 c1 pg0 pg1
    checkpoint
    pg0=$(postgres_cpu)
    for p in "${pids[@]}"; do
        cpu_before+=("$(proc_cpu "$p")")
        cs_before+=("$(proc_switches "$p")")
    done
    children_cpu
    c0=$(cat "$WORK/children_cpu.txt")
    note_cmd "wrk -t$THREADS -c$conns -d${SECS}s --timeout 10s -s bench/$script http://127.0.0.1:PORT$path"
    run_child wrk -t"$THREADS" -c"$conns" -d"${SECS}s" --timeout 10s -s "$BENCH_DIR/$script" \
        "http://127.0.0.1:$(port_of "$path")$path" >"$out" 2>&1 || die "wrk failed: $(cat "$out")"
    children_cpu
    c1=$(cat "$WORK/children_cpu.txt")
    pg1=$(postgres_cpu)
    for p in "${pids[@]}"; do
        cpu_after+=("$(proc_cpu "$p")")
        cs_after+=("$(proc_switches "$p")")
    done
    wrk_summary "$out" "$key round $round"
    local line=$WRK_LINE requests rps p50 p99
    requests=$(field requests "$line")
    rps=$(field rps "$line")
    p50=$(field p50_ms "$line")
    p99=$(field p99_ms "$line")
    rec "$key" "$round" requests "$requests"
    rec "$key" "$round" rps "$rps"
    rec "$key" "$round" p50_ms "$p50"
    rec "$key" "$round" p99_ms "$p99"
    rec "$key" "$round" wrk_cpu_share "$(calc "($c1 - $c0) / ($SECS * $CORES)")"
    rec "$key" "$round" cpu_us_per_req_postgres "$(calc "($pg1 - $pg0) * 1000000 / $requests" 1)"
    local i name before after
    for i in "${!pids[@]}"; do
        name=${PROC_NAME[${pids[$i]}]}
        rec "$key" "$round" "cpu_us_per_req_$name" \
            "$(calc "(${cpu_after[$i]} - ${cpu_before[$i]}) * 1000000 / $requests" 1)"
        read -ra before <<<"${cs_before[$i]}"
        read -ra after <<<"${cs_after[$i]}"
        rec "$key" "$round" "vol_cs_per_req_$name" "$(calc "(${after[0]} - ${before[0]}) / $requests" 3)"
        rec "$key" "$round" "invol_cs_per_req_$name" "$(calc "(${after[1]} - ${before[1]}) / $requests" 3)"
    done
    log "$key round $round: $rps req/s, p50 $p50 ms, p99 $p99 ms"
}

# Sets WRK_LINE to the summary line of wrk's output $1 (bench/report.lua's), for what $2
# names; dies when there is none, or any response was an error, or none came.
wrk_summary() {
    local out=$1 what=$2 requests status_errors socket_errors
    WRK_LINE=$(grep '^BENCH ' "$out") || die "wrk printed no summary: $(cat "$out")"
    requests=$(field requests "$WRK_LINE")
    status_errors=$(field status_errors "$WRK_LINE")
    socket_errors=$(field socket_errors "$WRK_LINE")
    if ((status_errors > 0 || socket_errors > 0 || requests == 0)); then
        die "$what: $status_errors error statuses, $socket_errors socket errors out of $requests requests (see $out)"
    fi
}

port_of() {
    if [[ -n ${PORT_OVERRIDE:-} ]]; then
        echo "$PORT_OVERRIDE"
    elif [[ $1 == /oauth/* ]]; then
        echo "$AUTH_PORT"
    else
        echo "$INTAKE_PORT"
    fi
}
field() { sed -E "s/.* $1=([^ ]+).*/\1/" <<<" $2"; }

# pgbench's scripts (intake.sql, attach.sql) in directory $3, made of the templates in
# directory $2 and the statements intake-api binary $1 sends (bench/pgbench_script.py). A
# template that is already a script, from a build before the service printed its statements,
# is taken as it is.
pgbench_scripts() {
    local binary=$1 from=$2 to=$3 script
    mkdir -p "$to"
    for script in intake.sql attach.sql; do
        if grep -q '^\\statement ' "$from/$script"; then
            [[ $from == "$BENCH_DIR" ]] &&
                note_cmd "bench/pgbench_script.py bench/$script target/release/intake-api >$script"
            python3 "$BENCH_DIR/pgbench_script.py" "$from/$script" "$binary" >"$to/$script" ||
                die "making pgbench's $script of $from/$script failed"
        else
            cp "$from/$script" "$to/$script"
        fi
    done
}

# Runs pgbench with the script made of bench/$script (or a script of BASELINE_SQL, named by its path) against
# the intake database (or PGBENCH_DB); records tps, p50_ms, p99_ms from its per-transaction log
# and PostgreSQL's CPU per transaction.
run_pgbench() {
    local key=$1 round=$2 script=$3 db=${PGBENCH_DB:-$INTAKE_DB}
    shift 3
    # A script in BASELINE_SQL is the baseline's (section 7).
    local file=$WORK/pgbench/$script shown_file=$script
    if [[ -n $BASELINE_SQL && $script == "$BASELINE_SQL"/* ]]; then
        file=$script shown_file="\$BENCH_BASELINE_SQL/${script#"$BASELINE_SQL"/}"
    fi
    local out=$WORK/pgbench-$key-$round.txt prefix=$WORK/pgblog-$key-$round
    local shown=() arg
    for arg in "$@"; do
        # The long values are shown as the shell variables they came from.
        # shellcheck disable=SC2016
        case $arg in
        enquiry=*) shown+=('enquiry="$ENQUIRY_JSON"') ;;
        payload=*) shown+=('payload="$PAYLOAD_JSON"') ;;
        client=*) shown+=('client="$CLIENT_ID"') ;;
        tag=r*) [[ $script == intake.sql ]] && shown+=('tag=r$ROUND') || shown+=("$arg") ;;
        *) shown+=("$arg") ;;
        esac
    done
    note_cmd "pgbench -n -M prepared -c $INTAKE_CONNS -j $THREADS -T $SECS -f $shown_file ${shown[*]} -l --log-prefix=PREFIX \"\$INTAKE_DB_URL\""
    local c0 c1 pg0 pg1 procs
    checkpoint
    procs=$(postgres_procs)
    pg0=$(postgres_cpu)
    children_cpu
    c0=$(cat "$WORK/children_cpu.txt")
    run_child pgbench -n -M prepared -c "$INTAKE_CONNS" -j "$THREADS" -T "$SECS" \
        -f "$file" "$@" -l --log-prefix="$prefix" "$(db_url "$db")" \
        >"$out" 2>&1 || die "pgbench failed: $(tail -20 "$out")"
    children_cpu
    c1=$(cat "$WORK/children_cpu.txt")
    postgres_settle "$procs"
    pg1=$(postgres_cpu)
    local tps
    tps=$(awk '/^tps = / { printf "%.1f", $3 }' "$out")
    [[ -n $tps ]] || die "pgbench printed no tps: $(cat "$out")"
    grep -q 'number of failed transactions: 0 ' "$out" ||
        ! grep -q 'number of failed transactions' "$out" ||
        die "pgbench: failed transactions (see $out)"
    # Per-transaction log: client, transaction, latency (us), ...
    local pct
    pct=$(cat "$prefix".* | awk '{ print $3 }' | sort -n |
        awk '{ a[NR] = $1 } END { printf "%.3f %.3f", a[int(NR * 0.50) + 1] / 1000, a[int(NR * 0.99) + 1] / 1000 }')
    rm -f "$prefix".*
    rec "$key" "$round" rps "$tps"
    rec "$key" "$round" pgbench_cpu_share "$(calc "($c1 - $c0) / ($SECS * $CORES)")"
    local txs
    txs=$(awk '/^number of transactions actually processed: / { print $6 }' "$out")
    [[ -n $txs && $txs -gt 0 ]] &&
        rec "$key" "$round" cpu_us_per_req_postgres "$(calc "($pg1 - $pg0) * 1000000 / $txs" 1)"
    rec "$key" "$round" p50_ms "${pct% *}"
    rec "$key" "$round" p99_ms "${pct#* }"
    log "$key round $round: $tps tx/s, p50 ${pct% *} ms, p99 ${pct#* } ms"
}

# openssl's signing rate on every core: the token endpoint's ceiling. Recorded under key $2
# (default rsa2048) for openssl's algorithm $3 (default rsa2048; ecdsap256 for ES256); the
# environment may mask CPU features (OPENSSL_ia32cap).
run_openssl() {
    local round=$1 key=${2:-rsa2048} alg=${3:-rsa2048}
    local out=$WORK/openssl-$key-$round.txt
    note_cmd "${OPENSSL_ia32cap:+OPENSSL_ia32cap=\"$OPENSSL_ia32cap\" }openssl speed -multi $CORES -seconds $SECS $alg"
    local c0 c1 signs
    children_cpu
    c0=$(cat "$WORK/children_cpu.txt")
    run_child openssl speed -multi "$CORES" -seconds "$SECS" "$alg" >"$out" 2>&1 || die "openssl speed failed"
    children_cpu
    c1=$(cat "$WORK/children_cpu.txt")
    # "rsa 2048 bits <sign s> <verify s> <sign/s> ..." or
    # "256 bits ecdsa (nistp256) <sign s> <verify s> <sign/s> ...".
    case $alg in
    rsa2048) signs=$(awk '/^rsa 2048 bits/ { print $6 }' "$out") ;;
    ecdsap256) signs=$(awk '/ecdsa \(nistp256\)/ { print $7 }' "$out") ;;
    *) die "run_openssl: no reading of openssl's $alg output" ;;
    esac
    [[ -n $signs ]] || die "openssl printed no $alg sign/s: $(tail -5 "$out")"
    rec "$key" "$round" sign_per_s "$signs"
    # openssl speed verifies for as long as it signed: half its CPU time went to signing.
    rec "$key" "$round" cpu_us_per_sign "$(calc "($c1 - $c0) / 2 * 1000000 / ($signs * $SECS)" 1)"
    # Nothing of ours runs beside openssl: the share of the cores it got is what others left.
    rec "$key" "$round" cpu_share "$(calc "($c1 - $c0) / (2 * $SECS * $CORES)" 2)"
    log "$key round $round: $signs sign/s"
}

# ---------------------------------------------------------------------------------------------
# Services

declare -A PROC_NAME

# The services see only the settings given here: none inherited from the caller's
# environment, and no Redis.
UNSET_ENV=(-u REDIS_URL)
for var in $(compgen -e | grep -E '^(AUTH|INTAKE)_' || true); do UNSET_ENV+=(-u "$var"); done

# pgbench's side of load $3 (create, update, one or attach) of round $2, recorded as key $1:
# creates under tag $4; updates and attaches of the cases create round $4 made, $5 per thread;
# updates of the one case PG_UPDATE_EMAIL; as partner $6; with the statements of directory $7
# (default bench/).
pgbench_load() {
    local key=$1 r=$2 load=$3 tag=$4 pool=$5 client=$6 sql=${7:-}
    local vars=(-D "enquiry=$ENQUIRY_JSON" -D "payload=$PAYLOAD_JSON" -D "client=$client"
        -D "delay=$ACTIVATION_DELAY")
    case $load in
    create) run_pgbench "$key" "$r" "${sql}intake.sql" -D mode=create -D "tag=$tag" -D pool=1 -D threads=1 -D email=- "${vars[@]}" ;;
    update) run_pgbench "$key" "$r" "${sql}intake.sql" -D mode=spread -D "tag=$tag" -D "pool=$pool" -D "threads=$THREADS" -D email=- "${vars[@]}" ;;
    one) run_pgbench "$key" "$r" "${sql}intake.sql" -D mode=one -D "email=$PG_UPDATE_EMAIL" -D tag=- -D pool=1 -D threads=1 "${vars[@]}" ;;
    attach) run_pgbench "$key" "$r" "${sql}attach.sql" -D "tag=$tag" -D "pool=$pool" -D "threads=$THREADS" -D "client=$client" ;;
    esac
}

# Starts a service binary in the background with its log in $WORK; sets STARTED_PID. The
# binary is this build's unless BIN_DIR names another directory (LOG_NAME then names the log);
# INTAKE_WRAPPER, a command line, runs the intake-api under it (valgrind's, which keeps the PID).
# Each server migrates its own fresh database at start (the *_MIGRATE variables; builds from
# before them migrated at start anyway and ignore them). Every intake-api gets the same
# key-encryption key (builds from before it ignore it).
start_service() {
    local name=$1 wrapper=()
    shift
    [[ $name == intake-api && -n ${INTAKE_WRAPPER:-} ]] && read -ra wrapper <<<"$INTAKE_WRAPPER"
    env "${UNSET_ENV[@]}" RUST_LOG=info LOG_FORMAT=json AUTH_MIGRATE=true INTAKE_MIGRATE=true \
        INTAKE_KEY_ENCRYPTION_KEY="$INTAKE_KEK" "$@" "${wrapper[@]}" "${BIN_DIR:-$TARGET_DIR/release}/$name" serve \
        >>"$WORK/${LOG_NAME:-$name}.log" 2>&1 &
    STARTED_PID=$!
    PIDS+=("$STARTED_PID")
    PROC_NAME[$STARTED_PID]=$name
}

# Waits for the service at $1 (PID $2) to answer /readyz, for up to two minutes: under
# valgrind, start-up and migrations take tens of seconds.
wait_ready() {
    local url=$1 pid=$2
    for _ in $(seq 600); do
        kill -0 "$pid" 2>/dev/null || die "$url: the service exited (log: $(tail -5 "$WORK"/*.log))"
        [[ $(curl -s -o /dev/null -w '%{http_code}' "$url/readyz") == 200 ]] && return 0
        sleep 0.2
    done
    die "$url did not become ready"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# A fresh access token, with client_secret_post, from the auth-server at $1 (default
# $AUTH_URL) for the client in BENCH_CLIENT_ID and BENCH_CLIENT_SECRET.
get_token() {
    curl -sf "${1:-$AUTH_URL}/oauth/token" -H 'Content-Type: application/json' \
        -d "{\"grant_type\":\"client_credentials\",\"client_id\":\"$BENCH_CLIENT_ID\",\"client_secret\":\"$BENCH_CLIENT_SECRET\",\"scope\":\"$SCOPE\"}" |
        sed -E 's/.*"access_token":"([^"]+)".*/\1/'
}

# Creates client $2 granted scopes $3 with the auth-server binary in directory $1, the rest of
# the arguments being its environment; sets CREATED_ID and CREATED_SECRET, both empty when the
# build refuses (one older than the scope).
create_client() {
    local dir=$1 name=$2 scopes=$3 json
    shift 3
    json=$(env "${UNSET_ENV[@]}" "$@" RUST_LOG=warn "$dir/auth-server" \
        client create --name "$name" --scopes "$scopes" 2>>"$WORK/cli.log") || true
    CREATED_ID=$(sed -nE 's/.*"client_id": *"([^"]+)".*/\1/p' <<<"$json" | head -1)
    CREATED_SECRET=$(sed -nE 's/.*"client_secret": *"([^"]+)".*/\1/p' <<<"$json" | head -1)
}

# Creates the bench partner, as create_client does; sets CREATED_ID and CREATED_SECRET.
create_bench_client() {
    create_client "$1" "Bench Partner" "$SCOPE" "${@:2}"
    [[ -n $CREATED_ID && -n $CREATED_SECRET ]] || die "client create printed no credentials"
}

# Sets READER_ENV to the intake-api's settings for the client it reads the revocation list
# with, made with the auth-server in directory $1 (the rest: its environment). Builds from
# before 0.2.0 know no such scope and read the list without a token: READER_ENV is empty.
reader_env() {
    create_client "$1" "Bench intake-api" revocations:read "${@:2}"
    READER_ENV=()
    [[ -n $CREATED_ID ]] && READER_ENV=(INTAKE_REVOCATIONS_CLIENT_ID="$CREATED_ID"
        INTAKE_REVOCATIONS_CLIENT_SECRET="$CREATED_SECRET")
    return 0
}

# The cases each wrk thread updates and attaches to, from the $1 create responses of a first
# round made by $2 threads (default THREADS): half of what each thread created (cases known
# to exist), at most 5,000.
cases_pool() {
    local pool=$(($1 / (2 * ${2:-$THREADS})))
    ((pool > 5000)) && pool=5000
    ((pool < 1)) && pool=1
    echo "$pool"
}

# POSTs one enquiry for $1 through the service (creates its case); prints the status.
post_enquiry() {
    local body
    body=$(enquiry_json "$1")
    curl -s -o /dev/null -w '%{http_code}' "$INTAKE_URL/partners/external/intake" \
        -H 'Content-Type: application/json' -H "Authorization: Bearer $BENCH_TOKEN" -d "$body"
}

# The enquiry bench/enquiry.lua sends, for e-mail $1.
enquiry_json() { sed "s/EMAIL/$1/" "$BENCH_DIR/enquiry.json" | tr -d '\n'; }

# ---------------------------------------------------------------------------------------------
# Before and after (section 7)

declare -A AB_AUTH_PID AB_INTAKE_PID AB_AUTH_PORT AB_INTAKE_PORT AB_CLIENT_ID AB_CLIENT_SECRET

# Starts side $1 (base or new): an auth-server and an intake-api of the build in directory $2,
# on ports $3 and $3 + 1 and databases of their own, with a client like the main run's.
ab_start() {
    local side=$1 dir=$2 port=$3 db
    local auth_db="bench_auth_${side}_$RUN_ID" intake_db="bench_intake_${side}_$RUN_ID"
    local auth_url="http://127.0.0.1:$port"
    for db in "$auth_db" "$intake_db"; do
        psql_admin -c "CREATE DATABASE \"$db\"" >/dev/null
        DBS+=("$db")
    done
    # Later settings win: the main run's, with this side's addresses and databases.
    local auth_env=("${AUTH_ENV[@]}" AUTH_BIND="127.0.0.1:$port"
        AUTH_DATABASE_URL="$(db_url "$auth_db")" AUTH_ISSUER="$auth_url")
    # No activation pass at all: a baseline's own bench/intake.sql may make its cases due
    # sooner than ACTIVATION_DELAY.
    local intake_env=("${INTAKE_ENV[@]}" INTAKE_BIND="127.0.0.1:$((port + 1))"
        INTAKE_DATABASE_URL="$(db_url "$intake_db")" INTAKE_ISSUER="$auth_url"
        INTAKE_JWKS_URL="$auth_url/.well-known/jwks.json"
        INTAKE_ACTIVATION_POLL_MS=$((ACTIVATION_DELAY * 1000)))
    BIN_DIR=$dir LOG_NAME=auth-server-$side start_service auth-server "${auth_env[@]}"
    AB_AUTH_PID[$side]=$STARTED_PID
    wait_ready "$auth_url" "$STARTED_PID"
    reader_env "$dir" "${auth_env[@]}"
    BIN_DIR=$dir LOG_NAME=intake-api-$side start_service intake-api "${intake_env[@]}" \
        "${READER_ENV[@]}"
    AB_INTAKE_PID[$side]=$STARTED_PID
    wait_ready "http://127.0.0.1:$((port + 1))" "$STARTED_PID"
    pgbench_setup "$intake_db"
    create_bench_client "$dir" "${auth_env[@]}"
    AB_CLIENT_ID[$side]=$CREATED_ID
    AB_CLIENT_SECRET[$side]=$CREATED_SECRET
    AB_AUTH_PORT[$side]=$port
    AB_INTAKE_PORT[$side]=$((port + 1))
}

# Makes side $1's partner the one the wrk scripts speak for, with a fresh access token.
ab_partner() {
    local side=$1
    export BENCH_CLIENT_ID=${AB_CLIENT_ID[$side]} BENCH_CLIENT_SECRET=${AB_CLIENT_SECRET[$side]}
    BENCH_BASIC=$(printf '%s:%s' "$BENCH_CLIENT_ID" "$BENCH_CLIENT_SECRET" | openssl base64 -A)
    BENCH_TOKEN=$(get_token "http://127.0.0.1:${AB_AUTH_PORT[$side]}")
    [[ $BENCH_TOKEN == *.*.* ]] || die "$side: no access token"
    export BENCH_BASIC BENCH_TOKEN
}

# Runs load $1 (token, create, update or attach) of round $2 against side $3, recorded as
# ab_$1_$3. Updates and attaches go to cases the first round's creates made (AB_POOL each).
ab_load() {
    local load=$1 r=$2 side=$3
    ab_partner "$side"
    export BENCH_TAG=ab1 BENCH_POOL=${AB_POOL:-1}
    local key=ab_${load}_$side pid=${AB_INTAKE_PID[$side]}
    export PORT_OVERRIDE=${AB_INTAKE_PORT[$side]}
    case $load in
    token)
        PORT_OVERRIDE=${AB_AUTH_PORT[$side]}
        run_wrk "$key" "$r" 64 token_post.lua /oauth/token -- "${AB_AUTH_PID[$side]}"
        ;;
    create)
        BENCH_TAG=ab$r
        run_wrk "$key" "$r" "$INTAKE_CONNS" intake_create.lua /partners/external/intake -- "$pid"
        ;;
    update) run_wrk "$key" "$r" "$INTAKE_CONNS" intake_update.lua /partners/external/intake -- "$pid" ;;
    attach) run_wrk "$key" "$r" "$INTAKE_CONNS" attach.lua /partners/external/intake/attach -- "$pid" ;;
    esac
    unset PORT_OVERRIDE
}

# Runs load $1 (create, update or attach) of round $2 in pgbench, with side $3's own
# statements on its own database, as sections 2 and 3 do; recorded as ab_pg_$1_$3.
ab_pgbench() {
    local load=$1 r=$2 side=$3 sql='' tag=ab1
    [[ $side == base ]] && sql=$BASELINE_SQL/
    [[ $load == create ]] && tag=abp$r
    # Seen by run_pgbench (bash scopes locals dynamically), gone on return.
    local PGBENCH_DB=bench_intake_${side}_$RUN_ID
    pgbench_load "ab_pg_${load}_$side" "$r" "$load" "$tag" "${AB_POOL:-1}" "${AB_CLIENT_ID[$side]}" "$sql"
}

AB_LOADS=(token create update attach)

# Section 7: every load against the baseline build and this one, alternating which goes first.
ab_run() {
    local p r load side sides saved=("$BENCH_CLIENT_ID" "$BENCH_CLIENT_SECRET" "$BENCH_BASIC")
    for p in $(seq "$AB_PORT" $((AB_PORT + 3))); do
        port_free "$p" || die "port $p is in use (set BENCH_AB_PORT)"
    done
    log "before and after: starting $BASELINE_NAME and this build side by side"
    ab_start base "$BASELINE" "$AB_PORT"
    ab_start new "$TARGET_DIR/release" $((AB_PORT + 2))
    for r in $(seq "$AB_ROUNDS"); do
        if ((r % 2)); then sides=(base new); else sides=(new base); fi
        for load in "${AB_LOADS[@]}"; do
            if [[ $load == update && -z ${AB_POOL:-} ]]; then
                analyze_db "bench_intake_base_$RUN_ID"
                analyze_db "bench_intake_new_$RUN_ID"
                # From the side that created fewer.
                AB_POOL=$(cases_pool "$(awk -F'\t' '$1 ~ /^ab_create_/ && $2 == 1 && $3 == "requests" { print $4 }' "$DATA" |
                    sort -g | head -1)")
            fi
            for side in "${sides[@]}"; do
                if [[ -n $BASELINE_SQL && $load != token ]]; then
                    ab_pgbench "$load" "$r" "$side"
                fi
                ab_load "$load" "$r" "$side"
            done
        done
    done
    for side in base new; do
        kill -TERM "${AB_AUTH_PID[$side]}" "${AB_INTAKE_PID[$side]}" 2>/dev/null || true
        wait "${AB_AUTH_PID[$side]}" "${AB_INTAKE_PID[$side]}" 2>/dev/null || true
    done
    BENCH_CLIENT_ID=${saved[0]} BENCH_CLIENT_SECRET=${saved[1]} BENCH_BASIC=${saved[2]}
}

# One connection's requests of load $1 (create, update or attach) for $2 seconds against
# the intake-api on port $3, on the cases of BENCH_TAG; sets CG_REQUESTS to how many.
cg_wrk() {
    local load=$1 secs=$2 port=$3 script=intake_$1.lua path=/partners/external/intake out
    [[ $load == attach ]] && script=attach.lua path=$path/attach
    out=$WORK/callgrind-wrk-$load-$BENCH_TAG.txt
    note_cmd "wrk -t1 -c1 -d${secs}s --timeout 60s -s bench/$script http://127.0.0.1:PORT$path"
    run_child wrk -t1 -c1 -d"${secs}s" --timeout 60s -s "$BENCH_DIR/$script" \
        "http://127.0.0.1:$port$path" >"$out" 2>&1 || die "wrk failed: $(cat "$out")"
    wrk_summary "$out" "callgrind $load ($BENCH_TAG)"
    CG_REQUESTS=$(field requests "$WRK_LINE")
}

# A DPoP-bound token of side $1's partner and proofs for enough creates on the intake-api at
# port $2 for $3 seconds (under callgrind a request takes milliseconds), made ahead by the
# partner client's example into BENCH_DPOP_FILE: each proof is good once.
cg_proofs() {
    export BENCH_DPOP_FILE=$WORK/dpop-proofs.txt
    env "${UNSET_ENV[@]}" PARTNER_CLIENT_ID="$BENCH_CLIENT_ID" PARTNER_CLIENT_SECRET="$BENCH_CLIENT_SECRET" \
        PARTNER_TOKEN_URL="http://127.0.0.1:${AB_AUTH_PORT[$1]}/oauth/token" \
        "$TARGET_DIR/release/examples/dpop_proofs" "http://127.0.0.1:$2/partners/external/intake" \
        $(($3 * 1000 + 2000)) >"$BENCH_DPOP_FILE" 2>"$WORK/dpop-proofs.log" ||
        die "no DPoP proofs: $(cat "$WORK/dpop-proofs.log")"
}

# The instructions of callgrind dump $1 over $2 requests, once the dump is written out.
cg_totals() {
    local total _
    for _ in $(seq 600); do
        total=$(awk '$1 == "totals:" { print $2; exit }' "$1" 2>/dev/null)
        [[ -n $total ]] && calc "$total / $2" 0 && return 0
        sleep 0.1
    done
    die "callgrind wrote no dump $1"
}

# Section 7c: the intake-api's own work per request in each build, as instructions counted
# by callgrind (the same count for the same binary and requests, however busy the machine
# is), one connection at a time: create, then update and attach of the cases it made. A
# warm-up of every load first (connections, keys, prepared statements); then the counter
# is zeroed before each load and dumped after it.
ab_instructions() {
    local side dir tag load secs pid dumps port=$((AB_PORT + 1))
    for side in base new; do
        dir=$BASELINE
        [[ $side == new ]] && dir=$TARGET_DIR/release
        log "instructions per request: $side under callgrind"
        # Seen by start_service (bash scopes locals dynamically). Under callgrind a request
        # takes milliseconds, and this build's checks for new keys and webhook deliveries,
        # each second by default, would count as some percent of every request: they wait
        # here (the baseline ignores the settings).
        local INTAKE_WRAPPER="env INTAKE_KEYS_POLL_MS=60000 INTAKE_WEBHOOK_POLL_MS=$((ACTIVATION_DELAY * 1000))"
        INTAKE_WRAPPER+=" valgrind --tool=callgrind --callgrind-out-file=$WORK/callgrind-$side.out"
        ab_start "cg_$side" "$dir" "$AB_PORT"
        ab_partner "cg_$side"
        pid=${AB_INTAKE_PID[cg_$side]}
        dumps=0
        local loads=(create update attach)
        # This build also takes DPoP-bound tokens: a create with one, beside the bearer one.
        [[ $side == new ]] && loads+=(create_dpop)
        for tag in cgw cg1; do
            export BENCH_TAG=$tag BENCH_POOL=1
            secs=3
            [[ $tag == cg1 ]] && secs=$SECS
            for load in "${loads[@]}"; do
                [[ $load == create_dpop ]] && cg_proofs "cg_$side" "$port" "$secs"
                [[ $tag == cg1 ]] && callgrind_control -z "$pid" >/dev/null 2>&1
                cg_wrk "$load" "$secs" "$port"
                if [[ $load == create ]]; then
                    BENCH_POOL=$(cases_pool "$CG_REQUESTS" 1)
                fi
                [[ $tag == cg1 ]] || continue
                callgrind_control -d "$load" "$pid" >/dev/null 2>&1
                dumps=$((dumps + 1))
                rec "cg_${load}_$side" 1 requests "$CG_REQUESTS"
                rec "cg_${load}_$side" 1 instructions "$(cg_totals "$WORK/callgrind-$side.out.$dumps" "$CG_REQUESTS")"
            done
        done
        kill -TERM "${AB_AUTH_PID[cg_$side]}" "$pid" 2>/dev/null || true
        wait "${AB_AUTH_PID[cg_$side]}" "$pid" 2>/dev/null || true
        log "instructions per request, $side: create $(med "cg_create_$side" instructions), update $(med "cg_update_$side" instructions), attach $(med "cg_attach_$side" instructions)"
        [[ $side == new ]] && log "instructions per request, DPoP-bound create: $(med cg_create_dpop_new instructions)"
    done
}

# ---------------------------------------------------------------------------------------------
# Scale run (section 6)

# Due cases in each database when activation is measured. bench/activate.sql rolls each pass
# back, so 500 would do; the spare keeps a pass full however the backlog's oldest fall.
SCALE_DUE=1000
# Cases per load statement: each is one transaction, whose foreign-key checks are queued in
# memory until it ends.
SCALE_BATCH=250000
# The cases each wrk thread's updates and attaches cycle through at $1 existing cases: all
# the brand_a ones bench/scale_load.sql numbers for it, spread over the whole table, so
# that at every scale the requests find their case where an existing customer's case is.
scale_pool() { echo $((($1 - $1 / 3) / THREADS)); }
SCALE_COMMANDS=$WORK/scale-commands.txt
: >"$SCALE_COMMANDS"
# The template bench/scale_load.sql varies: the request body bench/enquiry.lua sends.
PAYLOAD_TEMPLATE=$(tr -d '\n' <"$BENCH_DIR/enquiry.json")
declare -A SCALE_DB SCALE_PID

scale_psql() {
    local db=$1
    shift
    psql "$(db_url "$db")" -v ON_ERROR_STOP=1 -qAt "$@"
}

# The comment bench/run.sh leaves on a database it loaded completely, or nothing.
scale_comment() {
    psql_admin -c "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = '$1'"
}

# A field of such a comment: "bench scale load: cases=N script=MD5 next=K load_s=S
# vacuum_s=V at=DATE".
comment_field() { sed -nE "s/.* $1=([^ ]+).*/\1/p" <<<" $2"; }

# Which bench/scale_load.sql made a database: another version numbers cases differently.
SCALE_SCRIPT=$(md5sum "$BENCH_DIR/scale_load.sql" | cut -c1-12)

# Whether database $1 is the kept database, loaded completely with $2 cases by this
# bench/scale_load.sql.
scale_reusable() {
    local comment
    [[ -n $SCALE_KEEP_DB && $1 == "$SCALE_KEEP_DB" ]] || return 1
    comment=$(scale_comment "$1")
    [[ $(comment_field cases "$comment") == "$2" && $(comment_field script "$comment") == "$SCALE_SCRIPT" ]]
}

# Loading needs about 3 KB of disk per case (cases, submissions, events, indexes) and room
# for the WAL; better to stop now than with a full disk half an hour in. Checked again
# before every batch with the cases still to load: whatever else shares the disk may grow
# meanwhile, and a server out of space fails everyone's writes, not just the load's.
scale_check_disk() {
    local cases=$1 dir avail need
    need=$((cases * 3500 + 5 * 1024 * 1024 * 1024))
    dir=$(psql_admin -c 'SHOW data_directory' 2>/dev/null) || dir=
    if [[ -z $dir || ! -d $dir ]]; then
        [[ -n ${DISK_UNSEEN:-} ]] || log "PostgreSQL's data directory is not visible here: disk space not checked"
        DISK_UNSEEN=1
        return 0
    fi
    avail=$(df -B1 --output=avail "$dir" | tail -1)
    ((avail >= need)) || die "loading $cases more cases needs about $((need / 1024 ** 3)) GiB free where PostgreSQL keeps its data ($dir), and there are $((avail / 1024 ** 3)) GiB (set BENCH_SCALE_CASES lower, or BENCH_SCALE=0)"
}

# Writes case numbers $2..$3-1 of bench/scale_load.sql into database $1 (see the script for
# the other arguments).
scale_load_batch() {
    local db=$1 lo=$2 hi=$3 total=$4 active_below=$5 end=$6 now0=$7
    # A name to find the loading backend by in pg_stat_activity (to renice it, say).
    run_child env PGAPPNAME=bench-scale-load psql "$(db_url "$db")" -v ON_ERROR_STOP=1 -qAt \
        -v lo="$lo" -v hi="$hi" -v total="$total" -v active_below="$active_below" -v end="$end" \
        -v threads="$THREADS" -v now0="$now0" -v enquiry="$ENQUIRY_JSON" \
        -v payload="$PAYLOAD_TEMPLATE" -f "$BENCH_DIR/scale_load.sql" >>"$WORK/scale-load.log" 2>&1 ||
        die "loading cases $lo..$hi into $db failed: $(tail -5 "$WORK/scale-load.log")"
}

# VACUUM ANALYZE of database $1; prints the seconds it took.
scale_vacuum() {
    local t0
    t0=$(date +%s.%N)
    run_child env PGAPPNAME=bench-scale-load psql "$(db_url "$1")" -v ON_ERROR_STOP=1 -qAt -c 'VACUUM ANALYZE' \
        >>"$WORK/scale-load.log" 2>&1 ||
        die "VACUUM ANALYZE of $1 failed: $(tail -5 "$WORK/scale-load.log")"
    calc "$(date +%s.%N) - $t0" 1
}

# Makes database $2 hold $1 existing cases, recorded under key scale$1: made and migrated by
# the intake-api, then loaded and vacuumed; or, when it is the kept database and holds a
# complete load of as many, reused, with due cases added when earlier runs used them up.
scale_prepare() {
    local cases=$1 db=$2 key=scale$1 comment now0 t0 load_s vacuum_s
    if scale_reusable "$db" "$cases"; then
        comment=$(scale_comment "$db")
        log "scale $cases: reusing database $db ($comment)"
        rec "$key" 1 reused 1
        rec "$key" 1 load_s "$(comment_field load_s "$comment")"
        rec "$key" 1 loaded_at "$(comment_field at "$comment")"
        local due next
        due=$(scale_psql "$db" -c "SELECT count(*) FROM cases WHERE status = 'pending_activation' AND activates_at <= now()")
        if ((due < SCALE_DUE)); then
            next=$(comment_field next "$comment")
            log "scale $cases: adding $((SCALE_DUE - due)) due cases"
            scale_load_batch "$db" "$next" "$((next + SCALE_DUE - due))" "$cases" "$next" \
                "$((next + SCALE_DUE - due))" "$(date +%s)"
            next=$((next + SCALE_DUE - due))
            comment="bench scale load: cases=$cases script=$SCALE_SCRIPT next=$next load_s=$(comment_field load_s "$comment") vacuum_s=$(comment_field vacuum_s "$comment") at=$(comment_field at "$comment")"
            psql_admin -c "COMMENT ON DATABASE \"$db\" IS '$comment'" >/dev/null
        fi
        # Earlier runs' writes left dead rows behind (this server may not vacuum by itself).
        vacuum_s=$(scale_vacuum "$db")
        rec "$key" 1 vacuum_s "$vacuum_s"
    else
        if [[ -n $(psql_admin -c "SELECT 1 FROM pg_database WHERE datname = '$db'") ]]; then
            log "scale $cases: dropping $db, which holds no complete load of $cases cases by this bench/scale_load.sql"
            psql_admin -c "DROP DATABASE \"$db\" WITH (FORCE)" >/dev/null
        fi
        scale_check_disk "$cases"
        psql_admin -c "CREATE DATABASE \"$db\"" >/dev/null
        # Dropped at the end unless complete and kept.
        DBS+=("$db")
        note_cmd "INTAKE_DATABASE_URL=\$SCALE_DB_URL target/release/intake-api migrate"
        env "${UNSET_ENV[@]}" RUST_LOG=warn INTAKE_DATABASE_URL="$(db_url "$db")" \
            "$TARGET_DIR/release/intake-api" migrate >>"$WORK/cli.log" 2>&1 ||
            die "intake-api migrate failed on $db: $(tail -5 "$WORK/cli.log")"
        note_cmd "psql -v lo=K -v hi=K+$SCALE_BATCH -v total=N -v active_below=N-$SCALE_DUE -v end=N -v threads=$THREADS -v now0=\$(date +%s) -v enquiry=\"\$ENQUIRY_JSON\" -v payload=\"\$(tr -d '\\n' <bench/enquiry.json)\" -f bench/scale_load.sql \"\$SCALE_DB_URL\"   # K = 0, $SCALE_BATCH, ... < N"
        note_cmd "psql -c 'VACUUM ANALYZE' \"\$SCALE_DB_URL\""
        log "scale $cases: loading $db"
        now0=$(date +%s)
        t0=$(date +%s.%N)
        local lo hi
        for ((lo = 0; lo < cases; lo += SCALE_BATCH)); do
            hi=$((lo + SCALE_BATCH < cases ? lo + SCALE_BATCH : cases))
            scale_check_disk "$((cases - lo))"
            scale_load_batch "$db" "$lo" "$hi" "$cases" "$((cases - SCALE_DUE))" "$cases" "$now0"
            if ((hi < cases)); then
                log "scale $cases: $hi cases loaded ($(calc "$(date +%s.%N) - $t0" 0) s)"
            fi
        done
        load_s=$(calc "$(date +%s.%N) - $t0" 1)
        vacuum_s=$(scale_vacuum "$db")
        log "scale $cases: loaded in $load_s s, VACUUM ANALYZE in $vacuum_s s"
        rec "$key" 1 reused 0
        rec "$key" 1 load_s "$load_s"
        rec "$key" 1 vacuum_s "$vacuum_s"
        # The mark of a complete load, and what a later run reusing the database needs.
        psql_admin -c "COMMENT ON DATABASE \"$db\" IS 'bench scale load: cases=$cases script=$SCALE_SCRIPT next=$cases load_s=$load_s vacuum_s=$vacuum_s at=$(date -u +%Y-%m-%dT%H:%MZ)'" >/dev/null
        if [[ $db == "$SCALE_KEEP_DB" ]]; then
            local keep=() d
            for d in "${DBS[@]}"; do [[ $d == "$db" ]] || keep+=("$d"); done
            DBS=("${keep[@]}")
        fi
    fi
    rec "$key" 1 cases "$(scale_psql "$db" -c 'SELECT count(*) FROM cases')"
    rec "$key" 1 db_bytes "$(scale_psql "$db" -c 'SELECT pg_database_size(current_database())')"
    local table
    for table in cases submissions case_events redirect_tokens; do
        rec "$key" 1 "${table}_bytes" "$(scale_psql "$db" -c "SELECT pg_total_relation_size('$table')")"
    done
}

# The server's WAL written so far: "bytes full-page-images" (pg_stat_wal), or nothing
# where the server has no such view. It counts every database's writes, but while one
# measurement runs the others are idle.
wal_so_far() { psql_admin -c 'SELECT wal_bytes, wal_fpi FROM pg_stat_wal' -F ' ' 2>/dev/null || true; }

# Records under key $1, round $2 the WAL written since $3 (from wal_so_far) per request
# ($4 requests): wal_kb_per_req and fpi_per_req, the full-page images among it. A page's
# first change after each checkpoint writes the whole page to the WAL: the more scattered
# the pages a request changes, the more of its changes are first ones.
rec_wal() {
    local key=$1 round=$2 since=$3 requests=$4 now b0 f0 b1 f1
    now=$(wal_so_far)
    [[ -n $since && -n $now ]] || return 0
    read -r b0 f0 <<<"$since"
    read -r b1 f1 <<<"$now"
    rec "$key" "$round" wal_kb_per_req "$(calc "($b1 - $b0) / 1024 / $requests" 1)"
    rec "$key" "$round" fpi_per_req "$(calc "($f1 - $f0) / $requests" 2)"
}

# run_wrk for the scale run, on the intake-api at port $3 (process $4), with the WAL the
# requests wrote.
scale_wrk() {
    local key=$1 round=$2 port=$3 pid=$4 script=$5 path=$6 wal
    wal=$(wal_so_far)
    PORT_OVERRIDE=$port run_wrk "$key" "$round" "$INTAKE_CONNS" "$script" "$path" -- "$pid"
    rec_wal "$key" "$round" "$wal" \
        "$(awk -F'\t' -v k="$key" -v r="$round" '$1 == k && $2 == r && $3 == "requests" { print $4 }' "$DATA")"
}

# Activation passes (bench/activate.sql) on database $3, recorded under key $1: the passes'
# p50 and p99, and the first pass's latency (the one that finds the rows coldest).
run_activate() {
    local key=$1 round=$2 db=$3
    local out=$WORK/pgbench-$key-$round.txt prefix=$WORK/pgblog-$key-$round
    note_cmd "pgbench -n -M prepared -c 1 -j 1 -t $SCALE_PASSES -f bench/activate.sql -l --log-prefix=PREFIX \"\$SCALE_DB_URL\""
    local wal
    wal=$(wal_so_far)
    run_child pgbench -n -M prepared -c 1 -j 1 -t "$SCALE_PASSES" -f "$BENCH_DIR/activate.sql" \
        -l --log-prefix="$prefix" "$(db_url "$db")" >"$out" 2>&1 || die "pgbench failed: $(tail -5 "$out")"
    grep -q "actually processed: $SCALE_PASSES/$SCALE_PASSES" "$out" ||
        die "pgbench did not run every activation pass (see $out)"
    rec_wal "$key" "$round" "$wal" "$SCALE_PASSES"
    local pct first
    first=$(awk 'NR == 1 { printf "%.3f", $3 / 1000 }' "$prefix".*)
    pct=$(cat "$prefix".* | awk '{ print $3 }' | sort -n |
        awk '{ a[NR] = $1 } END { printf "%.3f %.3f", a[int(NR * 0.50) + 1] / 1000, a[int(NR * 0.99) + 1] / 1000 }')
    rm -f "$prefix".*
    rec "$key" "$round" p50_ms "${pct% *}"
    rec "$key" "$round" p99_ms "${pct#* }"
    rec "$key" "$round" first_ms "$first"
    log "$key round $round: p50 ${pct% *} ms, p99 ${pct#* } ms, first pass $first ms"
}

# Where an activation pass's time goes on database $2: its UPDATE's plan with the buffers it
# read and the WAL it wrote, from EXPLAIN ANALYZE in a transaction rolled back, to
# $WORK/explain-$1.txt.
scale_explain() {
    note_cmd "psql -c 'BEGIN' -c 'EXPLAIN (ANALYZE, BUFFERS, WAL, COSTS OFF) UPDATE ... (bench/activate.sql)' -c 'ROLLBACK' \"\$SCALE_DB_URL\""
    scale_psql "$2" >"$WORK/explain-$1.txt" <<'SQL' || die "EXPLAIN on $2 failed"
BEGIN;
EXPLAIN (ANALYZE, BUFFERS, WAL, COSTS OFF)
UPDATE "cases" SET "status" = 'active', "activated_at" = now()
WHERE "id" IN (SELECT "id" FROM "cases" WHERE "status" = 'pending_activation'
    AND "activates_at" <= now() ORDER BY "activates_at" ASC LIMIT 500 FOR UPDATE SKIP LOCKED)
RETURNING "id", "brand", "activates_at";
ROLLBACK;
SQL
}

# Waits until the intake-api on database $1 has activated every due case, so that the loads
# measured next do not share the machine with a backlog being drained.
scale_wait_drained() {
    local db=$1 due
    for _ in $(seq 1200); do
        due=$(scale_psql "$db" -c "SELECT count(*) FROM cases WHERE status = 'pending_activation' AND activates_at <= now()")
        ((due == 0)) && return 0
        sleep 0.5
    done
    die "the intake-api on $db still has $due due cases after ten minutes"
}

# The whole scale run: both databases prepared, the activation passes measured, then an
# intake-api on each and the wrk loads, interleaved by round and by scale.
scale_run() {
    local i cases db port pid r op main_commands=$COMMANDS
    COMMANDS=$SCALE_COMMANDS
    for i in 0 1; do
        cases=${SCALE_CASES[$i]}
        db="bench_scale${cases}_$RUN_ID"
        ((i == 1)) && [[ -n $SCALE_KEEP_DB ]] && db=$SCALE_KEEP_DB
        SCALE_DB[$cases]=$db
        scale_prepare "$cases" "$db"
    done
    # Before the services start: their activation workers would take the due cases.
    for r in $(seq "$ROUNDS"); do
        for cases in "${SCALE_CASES[@]}"; do
            run_activate "scale${cases}_activate" "$r" "${SCALE_DB[$cases]}"
        done
    done
    for cases in "${SCALE_CASES[@]}"; do
        scale_explain "$cases" "${SCALE_DB[$cases]}"
    done
    for i in 0 1; do
        cases=${SCALE_CASES[$i]}
        port=$((SCALE_PORT + i))
        log "scale $cases: starting an intake-api on ${SCALE_DB[$cases]}"
        start_service intake-api "${INTAKE_ENV[@]}" "${MAIN_READER_ENV[@]}" \
            INTAKE_BIND="127.0.0.1:$port" INTAKE_DATABASE_URL="$(db_url "${SCALE_DB[$cases]}")"
        SCALE_PID[$cases]=$STARTED_PID
        wait_ready "http://127.0.0.1:$port" "$STARTED_PID"
    done
    for cases in "${SCALE_CASES[@]}"; do
        scale_wait_drained "${SCALE_DB[$cases]}"
    done
    local since
    since=$(date +%s)
    for r in $(seq "$ROUNDS"); do
        BENCH_TOKEN=$(get_token)
        export BENCH_TOKEN
        for op in create update attach; do
            for i in 0 1; do
                cases=${SCALE_CASES[$i]}
                port=$((SCALE_PORT + i))
                pid=${SCALE_PID[$cases]}
                case $op in
                create)
                    # New e-mail addresses in every run, also in a kept database.
                    export BENCH_TAG="x${RUN_ID}r$r"
                    scale_wrk "scale${cases}_create" "$r" "$port" "$pid" intake_create.lua /partners/external/intake
                    ;;
                update)
                    export BENCH_TAG=load BENCH_POOL
                    BENCH_POOL=$(scale_pool "$cases")
                    scale_wrk "scale${cases}_update" "$r" "$port" "$pid" intake_update.lua /partners/external/intake
                    ;;
                attach)
                    # Attach finds only cases the calling partner has submitted on; the
                    # loaded ones carry other partners' submissions. This round's updates
                    # went through the same sequence of cases from its start (from the
                    # second for wrk's thread 1, bench/threads.lua), so attaches keep to
                    # the first half of what each thread updated, from the second case.
                    export BENCH_TAG=load BENCH_POOL BENCH_FIRST=3
                    BENCH_POOL=$(awk -F'\t' -v k="scale${cases}_update" -v r="$r" \
                        '$1 == k && $2 == r && $3 == "requests" { print int($4 / (2 * t)) - 1 }' t="$THREADS" "$DATA")
                    ((BENCH_POOL > $(scale_pool "$cases") - 1)) && BENCH_POOL=$(($(scale_pool "$cases") - 1))
                    ((BENCH_POOL < 1)) && BENCH_POOL=1
                    scale_wrk "scale${cases}_attach" "$r" "$port" "$pid" attach.lua /partners/external/intake/attach
                    unset BENCH_FIRST
                    ;;
                esac
            done
        done
    done
    # Cases made since the first create: the creates' own (a few more for requests in flight
    # when wrk stopped), none from the updates, which must all have found their loaded case.
    local responses made
    for cases in "${SCALE_CASES[@]}"; do
        responses=$(awk -F'\t' -v k="scale${cases}_create" '$1 == k && $3 == "requests" { s += $4 } END { print s }' "$DATA")
        made=$(scale_psql "${SCALE_DB[$cases]}" -c "SELECT count(*) FROM cases WHERE status IN ('pending_activation', 'active') AND activates_at > to_timestamp($since) + interval '$ACTIVATION_DELAY seconds'")
        ((made >= responses)) ||
            die "scale $cases: wrk counted $responses create responses but only $made cases were made"
        ((made <= responses + ROUNDS * INTAKE_CONNS)) ||
            die "scale $cases: $made cases were made for $responses create responses: updates made cases"
        rec "scale$cases" 1 cases_made "$made"
    done
    for cases in "${SCALE_CASES[@]}"; do
        kill -TERM "${SCALE_PID[$cases]}" 2>/dev/null || true
    done
    COMMANDS=$main_commands
}

# ---------------------------------------------------------------------------------------------
# The run

ensure_tools
STARTED_AT=$(date -u '+%Y-%m-%d %H:%M UTC')
LOAD_AT_START=$(cut -d' ' -f1-3 /proc/loadavg)
log "work directory $WORK; load average $LOAD_AT_START"
port_free "$AUTH_PORT" || die "port $AUTH_PORT is in use (set BENCH_AUTH_PORT)"
port_free "$INTAKE_PORT" || die "port $INTAKE_PORT is in use (set BENCH_INTAKE_PORT)"
psql_admin -c 'SELECT 1' >/dev/null || die "PostgreSQL does not answer at $PG_URL"
if [[ -n $BASELINE ]]; then
    [[ -x $BASELINE/auth-server && -x $BASELINE/intake-api ]] ||
        die "BENCH_BASELINE ($BASELINE) must hold release auth-server and intake-api binaries"
    if [[ -n $BASELINE_SQL ]]; then
        [[ -f $BASELINE_SQL/intake.sql && -f $BASELINE_SQL/attach.sql ]] ||
            die "BENCH_BASELINE_SQL ($BASELINE_SQL) must hold the baseline's intake.sql and attach.sql"
        BASELINE_SQL=$(cd "$BASELINE_SQL" && pwd)
    fi
elif [[ -n $BASELINE_SQL ]]; then
    die "BENCH_BASELINE_SQL needs BENCH_BASELINE"
fi
if ((WEBHOOKS)); then
    webhooks_ports_free
fi
if ((SCALE)); then
    { port_free "$SCALE_PORT" && port_free "$((SCALE_PORT + 1))"; } ||
        die "ports $SCALE_PORT and $((SCALE_PORT + 1)) must be free for the scale run (set BENCH_SCALE_PORT)"
    scale_reusable "$SCALE_KEEP_DB" "${SCALE_CASES[1]}" || scale_check_disk "${SCALE_CASES[1]}"
fi

log "building release binaries"
BUILD_CMD=(cargo build --release -j2 -p auth-server -p intake-api)
BEARER_CMD=(cargo bench -j2 -p intake-api --bench bearer)
SIGNING_CMD=(cargo bench -j2 -p auth-server --bench signing)
run_child "${BUILD_CMD[@]}" >"$WORK/build.log" 2>&1 || die "build failed: $(tail -20 "$WORK/build.log")"
if [[ -n $BASELINE ]] && ((AB_INSTRUCTIONS)); then
    # Section 7c's DPoP-bound creates: the partner client makes their tokens and proofs.
    run_child cargo build --release -j2 -p partner-client --example dpop_proofs >>"$WORK/build.log" 2>&1 ||
        die "build failed: $(tail -20 "$WORK/build.log")"
fi
# pgbench's scripts, of the statements each build's intake-api sends.
pgbench_scripts "$TARGET_DIR/release/intake-api" "$BENCH_DIR" "$WORK/pgbench"
if [[ -n $BASELINE_SQL ]]; then
    pgbench_scripts "$BASELINE/intake-api" "$BASELINE_SQL" "$WORK/pgbench-baseline"
    BASELINE_SQL=$WORK/pgbench-baseline
fi
if [[ -z $ONLY ]]; then
    { run_child "${BEARER_CMD[@]}" --no-run && run_child "${SIGNING_CMD[@]}" --no-run; } >>"$WORK/build.log" 2>&1 ||
        die "bench build failed: $(tail -20 "$WORK/build.log")"
fi

# The median of a criterion benchmark, in ns, and criterion's own summary line.
criterion_median() {
    local estimates=$TARGET_DIR/criterion/$1/new/estimates.json ns
    ns=$(sed -nE 's/.*"median":\{"confidence_interval":\{[^}]*\},"point_estimate":([0-9.eE+-]+).*/\1/p' "$estimates")
    [[ -n $ns ]] || die "no median in $estimates"
    echo "$ns"
}
criterion_line() { grep -A1 "^$1" "$WORK/criterion.txt" | grep -m1 -o 'time: .*' || true; }

# Sections 4 and 1c are skipped by BENCH_ONLY, as are 1 to 3 and 5 to 7 below.
if [[ -z $ONLY ]]; then
    # 4. Bearer verification, while nothing else of ours runs.
    log "bearer verification micro-benchmark"
    run_child "${BEARER_CMD[@]}" >"$WORK/criterion.txt" 2>&1 || die "criterion failed: $(tail -20 "$WORK/criterion.txt")"
    # A token seen for the first time: the RSA verification. Seen before: remembered.
    BEARER_FIRST_NS=$(criterion_median authenticate_valid_token_first_sight)
    BEARER_FIRST_LINE=$(criterion_line authenticate_valid_token_first_sight)
    BEARER_NS=$(criterion_median authenticate_valid_token_seen_before)
    BEARER_LINE=$(criterion_line authenticate_valid_token_seen_before)
    log "bearer: first sight $(calc "$BEARER_FIRST_NS / 1000" 1) us, seen before $(calc "$BEARER_NS / 1000" 2) us"

    # 1c. Signing a token with the key parsed once, against jsonwebtoken::encode (which parses
    # the private key for every token) and the RSA signature alone.
    log "token signing micro-benchmark"
    run_child "${SIGNING_CMD[@]}" >>"$WORK/criterion.txt" 2>&1 || die "criterion failed: $(tail -20 "$WORK/criterion.txt")"
    SIGN_PREPARED_NS=$(criterion_median sign_token_prepared_key)
    SIGN_ENCODE_NS=$(criterion_median sign_token_jsonwebtoken_encode)
    SIGN_RSA_NS=$(criterion_median sign_token_rsa_signature_alone)
    log "signing: prepared key $(calc "$SIGN_PREPARED_NS / 1000" 1) us, jsonwebtoken::encode $(calc "$SIGN_ENCODE_NS / 1000" 1) us, RSA alone $(calc "$SIGN_RSA_NS / 1000" 1) us"
fi

log "creating databases $AUTH_DB and $INTAKE_DB"
for db in "$AUTH_DB" "$INTAKE_DB"; do
    psql_admin -c "CREATE DATABASE \"$db\"" >/dev/null
    DBS+=("$db")
done

INTAKE_KEK=$(openssl rand -base64 32)
AUTH_ENV=(
    AUTH_BIND="127.0.0.1:$AUTH_PORT"
    AUTH_DATABASE_URL="$(db_url "$AUTH_DB")"
    AUTH_ISSUER="$AUTH_URL"
    AUTH_KEY_ENCRYPTION_KEY="$(openssl rand -base64 32)"
    # Out of the way: one client from one address makes every request here.
    AUTH_TOKEN_RATE_LIMIT=1000000000
    AUTH_SOURCE_RATE_LIMIT=1000000000
    AUTH_FAILED_AUTH_LIMIT=1000000000
)
INTAKE_ENV=(
    INTAKE_BIND="127.0.0.1:$INTAKE_PORT"
    INTAKE_DATABASE_URL="$(db_url "$INTAKE_DB")"
    INTAKE_JWKS_URL="$AUTH_URL/.well-known/jwks.json"
    INTAKE_ISSUER="$AUTH_URL"
    INTAKE_RATE_LIMIT=1000000000
    # PostgreSQL shares these cores and commits in groups: more connections than cores keep
    # them busy and let commits share WAL flushes. Submissions for one case take turns in
    # the service, so the update load holds one connection whatever the pool's size.
    # Submissions and attach use all but two of the pool's connections.
    INTAKE_DATABASE_MAX_CONNECTIONS="$INTAKE_POOL"
    INTAKE_ACTIVATION_DELAY_SECS="$ACTIVATION_DELAY"
)

log "starting the services"
start_service auth-server "${AUTH_ENV[@]}"
AUTH_PID=$STARTED_PID
wait_ready "$AUTH_URL" "$AUTH_PID"
reader_env "$TARGET_DIR/release" "${AUTH_ENV[@]}"
[[ ${#READER_ENV[@]} -gt 0 ]] || die "no client for the intake-api to read the revocation list with"
MAIN_READER_ENV=("${READER_ENV[@]}")
start_service intake-api "${INTAKE_ENV[@]}" "${MAIN_READER_ENV[@]}"
INTAKE_PID=$STARTED_PID
wait_ready "$INTAKE_URL" "$INTAKE_PID"

create_bench_client "$TARGET_DIR/release" "${AUTH_ENV[@]}"
BENCH_CLIENT_ID=$CREATED_ID BENCH_CLIENT_SECRET=$CREATED_SECRET
BENCH_BASIC=$(printf '%s:%s' "$BENCH_CLIENT_ID" "$BENCH_CLIENT_SECRET" | openssl base64 -A)
export BENCH_DIR BENCH_CLIENT_ID BENCH_CLIENT_SECRET BENCH_BASIC
BENCH_TOKEN=$(get_token)
[[ $BENCH_TOKEN == *.*.* ]] || die "no access token"

if [[ $ONLY == webhooks ]]; then
    webhooks_run
    # shellcheck source=bench/report.sh
    source "$BENCH_DIR/report.sh"
    webhooks_only_report
    log "wrote section 8 to $RESULTS"
    exit 0
fi

pgbench_setup "$INTAKE_DB"

# Seeds: the case the update load hits, the one pgbench's update hits, and one create so the
# stored enquiry JSON can be handed to pgbench exactly as the service writes it.
UPDATE_EMAIL=update@bench.example.com
PG_UPDATE_EMAIL=pgbench-update@bench.example.com
for email in "$UPDATE_EMAIL" "$PG_UPDATE_EMAIL"; do
    [[ $(post_enquiry "$email") == 201 ]] || die "seeding the case for $email failed"
done
ENQUIRY_JSON=$(psql "$(db_url "$INTAKE_DB")" -qAt -c \
    "SELECT enquiry::text FROM cases WHERE email = '$PG_UPDATE_EMAIL'")
PAYLOAD_JSON=$(enquiry_json "$PG_UPDATE_EMAIL")

sleep 2
MEM_IDLE_AUTH=$(mem_mib "$AUTH_PID" VmRSS)
MEM_IDLE_INTAKE=$(mem_mib "$INTAKE_PID" VmRSS)
log "idle VmRSS: auth-server $MEM_IDLE_AUTH MiB, intake-api $MEM_IDLE_INTAKE MiB"

# 1. Token endpoint against openssl's RSA-2048 signing rate.
for r in $(seq "$ROUNDS"); do
    run_openssl "$r"
    for method in post basic; do
        for c in "${TOKEN_CONNS[@]}"; do
            run_wrk "token_${method}_$c" "$r" "$c" "token_$method.lua" /oauth/token -- "$AUTH_PID"
        done
    done
done

# 1b. Where the CPU has AVX-512 IFMA, which makes RSA-2048 signing about twice as fast, the
# same comparison with that feature masked for openssl and the auth-server's aws-lc alike
# (both read OPENSSL_ia32cap): the signing limit of a CPU without it, such as the one the
# issue's figure of about 2,250 signatures/s comes from. A second auth-server on the same
# database serves it; client_secret_post at 64 connections.
IFMA_MASK=":~0x200000"
NOIFMA=0
if grep -qw avx512ifma /proc/cpuinfo; then
    NOIFMA=1
    NOIFMA_PORT=${BENCH_AUTH_NOIFMA_PORT:-$((AUTH_PORT + 2))}
    port_free "$NOIFMA_PORT" || die "port $NOIFMA_PORT is in use (set BENCH_AUTH_NOIFMA_PORT)"
    log "starting an auth-server with AVX-512 IFMA masked"
    start_service auth-server "${AUTH_ENV[@]}" AUTH_BIND="127.0.0.1:$NOIFMA_PORT" OPENSSL_ia32cap="$IFMA_MASK"
    NOIFMA_PID=$STARTED_PID
    wait_ready "http://127.0.0.1:$NOIFMA_PORT" "$NOIFMA_PID"
    for r in $(seq "$ROUNDS"); do
        OPENSSL_ia32cap=$IFMA_MASK run_openssl "$r" rsa2048_noifma
        PORT_OVERRIDE=$NOIFMA_PORT run_wrk token_post_64_noifma "$r" 64 token_post.lua /oauth/token -- "$NOIFMA_PID"
    done
    kill -TERM "$NOIFMA_PID" 2>/dev/null || true
fi

# 1d. ES256: an auth-server on a database of its own, moved to ES256 the way a security team
# does it (`auth-server key rotate --alg ES256`), against openssl's ECDSA P-256 signing rate;
# client_secret_post at 64 connections.
ES_DB="bench_auth_es_$RUN_ID"
ES_PORT=${BENCH_AUTH_ES_PORT:-$((AUTH_PORT + 3))}
port_free "$ES_PORT" || die "port $ES_PORT is in use (set BENCH_AUTH_ES_PORT)"
psql_admin -c "CREATE DATABASE \"$ES_DB\"" >/dev/null
DBS+=("$ES_DB")
ES_ENV=("${AUTH_ENV[@]}" AUTH_BIND="127.0.0.1:$ES_PORT" AUTH_DATABASE_URL="$(db_url "$ES_DB")"
    AUTH_ISSUER="http://127.0.0.1:$ES_PORT")
log "starting an auth-server moved to ES256"
LOG_NAME=auth-server-es256 start_service auth-server "${ES_ENV[@]}"
ES_PID=$STARTED_PID
wait_ready "http://127.0.0.1:$ES_PORT" "$ES_PID"
env "${UNSET_ENV[@]}" "${ES_ENV[@]}" RUST_LOG=warn "$TARGET_DIR/release/auth-server" \
    key rotate --alg ES256 --publish-ahead-secs 0 >>"$WORK/cli.log" 2>&1 || die "key rotate --alg ES256 failed"
create_client "$TARGET_DIR/release" "Bench Partner ES256" "$SCOPE" "${ES_ENV[@]}"
ES_CLIENT_ID=$CREATED_ID ES_CLIENT_SECRET=$CREATED_SECRET
[[ -n $ES_CLIENT_ID ]] || die "client create printed no credentials (ES256)"
es_alg() {
    BENCH_CLIENT_ID=$ES_CLIENT_ID BENCH_CLIENT_SECRET=$ES_CLIENT_SECRET get_token "http://127.0.0.1:$ES_PORT" |
        cut -d. -f1 | tr '_-' '/+' | base64 -d 2>/dev/null | sed -nE 's/.*"alg":"([^"]+)".*/\1/p'
}
for _ in $(seq 50); do
    [[ $(es_alg) == ES256 ]] && break
    sleep 0.2
done
[[ $(es_alg) == ES256 ]] || die "the ES256 auth-server does not sign with ES256"
for r in $(seq "$ROUNDS"); do
    run_openssl "$r" ecdsap256 ecdsap256
    BENCH_CLIENT_ID=$ES_CLIENT_ID BENCH_CLIENT_SECRET=$ES_CLIENT_SECRET PORT_OVERRIDE=$ES_PORT \
        run_wrk token_post_64_es256 "$r" 64 token_post.lua /oauth/token -- "$ES_PID"
done
kill -TERM "$ES_PID" 2>/dev/null || true

# 2. Intake create and update against the same transaction run by pgbench. Updates go to
# cases the first create round made, each thread of wrk cycling through its own, and to one
# case every time (every request then waits for the one before it on the same row).
for r in $(seq "$ROUNDS"); do
    BENCH_TOKEN=$(get_token)
    export BENCH_TOKEN
    pgbench_load pg_create "$r" create "r$r" 1 "$BENCH_CLIENT_ID"
    export BENCH_TAG="r$r"
    run_wrk intake_create "$r" "$INTAKE_CONNS" intake_create.lua \
        /partners/external/intake -- "$INTAKE_PID"
    if ((r == 1)); then
        analyze_db "$INTAKE_DB"
        CASES_POOL=$(cases_pool "$(awk -F'\t' '$1 == "intake_create" && $2 == 1 && $3 == "requests" { print $4 }' "$DATA")")
    fi
    pgbench_load pg_update "$r" update r1 "$CASES_POOL" "$BENCH_CLIENT_ID"
    export BENCH_TAG=r1 BENCH_POOL=$CASES_POOL
    run_wrk intake_update "$r" "$INTAKE_CONNS" intake_update.lua \
        /partners/external/intake -- "$INTAKE_PID"
    pgbench_load pg_update_one "$r" one - 1 "$BENCH_CLIENT_ID"
    export BENCH_EMAIL=$UPDATE_EMAIL
    run_wrk intake_update_one "$r" "$INTAKE_CONNS" intake_update_one.lua \
        /partners/external/intake -- "$INTAKE_PID"
done

# Every create response counted must be a case in the database, and the updates must not
# have made any (a few more than the responses may exist: requests still in flight when wrk
# stopped, at most one per connection and round).
CREATE_RESPONSES=$(awk -F'\t' '$1 == "intake_create" && $3 == "requests" { s += $4 } END { print s }' "$DATA")
CREATED_CASES=$(psql "$(db_url "$INTAKE_DB")" -qAt -c "SELECT count(*) FROM cases WHERE email LIKE 'c-r%'")
((CREATED_CASES >= CREATE_RESPONSES)) ||
    die "wrk counted $CREATE_RESPONSES create responses but only $CREATED_CASES cases exist"
((CREATED_CASES <= CREATE_RESPONSES + ROUNDS * INTAKE_CONNS)) ||
    die "$CREATED_CASES cases exist for $CREATE_RESPONSES create responses: updates made cases"
UPDATED_EVENTS=$(psql "$(db_url "$INTAKE_DB")" -qAt -c \
    "SELECT count(*) FROM case_events e JOIN cases c ON c.id = e.case_id WHERE e.kind = 'updated' AND c.email LIKE 'c-r1-%'")
UPDATE_RESPONSES=$(awk -F'\t' '$1 == "intake_update" && $3 == "requests" { s += $4 } END { print s }' "$DATA")
((UPDATED_EVENTS >= UPDATE_RESPONSES)) ||
    die "wrk counted $UPDATE_RESPONSES update responses but the cases have $UPDATED_EVENTS updates"

# 3. Attach, over the same cases as the updates, against the same transaction in pgbench.
for r in $(seq "$ROUNDS"); do
    BENCH_TOKEN=$(get_token)
    export BENCH_TOKEN
    pgbench_load pg_attach "$r" attach r1 "$CASES_POOL" "$BENCH_CLIENT_ID"
    export BENCH_TAG=r1 BENCH_POOL=$CASES_POOL
    run_wrk attach "$r" "$INTAKE_CONNS" attach.lua \
        /partners/external/intake/attach -- "$INTAKE_PID"
done

# Where the CPU goes: one extra, unmeasured run each of the token and create loads under perf.
PROFILED=()
if [[ ${BENCH_PROFILE:-1} == 1 ]] && command -v perf >/dev/null &&
    perf record -q -o "$WORK/perf-check.data" -- true >/dev/null 2>&1; then
    profile() {
        local key=$1 pid=$2
        shift 2
        log "profiling $key"
        perf record -q -F 999 -p "$pid" -o "$WORK/perf-$key.data" -- sleep "$SECS" >/dev/null 2>&1 &
        local perf_pid=$!
        PIDS+=("$perf_pid")
        run_wrk "profile_$key" 1 "$@"
        wait "$perf_pid" || true
        local bin=${PROC_NAME[$pid]} symbols=$WORK/perf-$key.txt
        perf report -i "$WORK/perf-$key.data" --no-children --sort dso,sym --stdio -g none \
            2>/dev/null | grep '%' | grep -v '^#' >"$symbols" || true
        {
            echo "by crate (self time; kernel and libc as a whole):"
            awk -v bin="$bin" -f "$BENCH_DIR/crates.awk" "$symbols" | sort -rn | head -16
            echo
            echo "by function (over 1%):"
            awk '{ p = $1; sub(/%/, "", p) } p >= 1' "$symbols" | head -25 | cut -c1-150
        } >"$WORK/profile-$key.txt"
        PROFILED+=("$key")
    }
    BENCH_TOKEN=$(get_token)
    export BENCH_TOKEN BENCH_TAG=profile
    profile token_post_64 "$AUTH_PID" 64 token_post.lua /oauth/token
    profile intake_create "$INTAKE_PID" "$INTAKE_CONNS" intake_create.lua /partners/external/intake
elif [[ ${BENCH_PROFILE:-1} == 1 ]]; then
    log "perf is not usable here: no profiles in the report"
fi

sleep 2
# 5. Resident memory: after the load, and the peak (high-water mark) over the whole run.
MEM_AFTER_AUTH=$(mem_mib "$AUTH_PID" VmRSS)
MEM_AFTER_INTAKE=$(mem_mib "$INTAKE_PID" VmRSS)
MEM_PEAK_AUTH=$(mem_mib "$AUTH_PID" VmHWM)
MEM_PEAK_INTAKE=$(mem_mib "$INTAKE_PID" VmHWM)
LOAD_AT_END=$(cut -d' ' -f1-3 /proc/loadavg)
grep -q '"level":"ERROR"' "$WORK/intake-api.log" "$WORK/auth-server.log" &&
    log "warning: the services logged errors during the run"
LOG_LINES=$(cat "$WORK/auth-server.log" "$WORK/intake-api.log" | wc -l)

# 7. Before and after, on services of their own, before the scale run fills the disk.
if [[ -n $BASELINE ]]; then
    ab_run
    if ((AB_INSTRUCTIONS)); then
        ab_instructions
    fi
fi

# 8. Webhook delivery, on an intake-api and databases of its own.
if ((WEBHOOKS)); then
    webhooks_run
fi

# 6. Scale: the same operations against 10,000 and against many existing cases, on
# databases and intake-apis of their own, after everything above.
if ((SCALE)); then
    scale_run
fi

# ---------------------------------------------------------------------------------------------
# The report

# shellcheck source=bench/report.sh
source "$BENCH_DIR/report.sh"
write_report >"$RESULTS.tmp"
mv "$RESULTS.tmp" "$RESULTS"
log "wrote $RESULTS"
