#!/usr/bin/env bash
# The test command: makes sure what the tests talk to is there (PostgreSQL and Redis
# answering on their standard local ports, SoftHSM2 for the keys kept in a PKCS#11 token),
# starting or installing what is missing, then runs the workspace's tests.
#
#   scripts/test.sh [CARGO TEST ARGS...]   # e.g. scripts/test.sh -p intake-api --test api
#   scripts/test.sh --prepare              # only make sure of the services and SoftHSM2
#
# PostgreSQL and Redis are started with Debian's packages' commands when they do not
# answer, and SoftHSM2 installed with apt-get when missing (both need root); where that
# cannot be done the script says what is missing and stops before any test runs, as a test
# that needs them would fail, never skip, without them. TEST_POSTGRES_URL and
# TEST_REDIS_URL name other servers: they are then only checked, never started.
set -euo pipefail
cd "$(dirname "$0")/.."

export TEST_POSTGRES_URL="${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
export TEST_REDIS_URL="${TEST_REDIS_URL:-redis://127.0.0.1:6379}"

say() { echo "test.sh: $*" >&2; }
die() { say "$*"; exit 1; }

# Up to 30 s for a server just started to answer.
answers_within() { # seconds, command...
    local seconds=$1; shift
    for _ in $(seq 1 "$seconds"); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 1
    done
    return 1
}

local_default() { [ "$1" = "$2" ]; }

postgres_answers() { pg_isready -d "$TEST_POSTGRES_URL" >/dev/null 2>&1; }
if ! postgres_answers; then
    local_default "$TEST_POSTGRES_URL" postgres://postgres@127.0.0.1:5432/postgres ||
        die "PostgreSQL at TEST_POSTGRES_URL does not answer"
    command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ] ||
        die "PostgreSQL does not answer on 127.0.0.1:5432 and is not installed here (Debian: apt-get install postgresql)"
    say "starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
    answers_within 30 postgres_answers || die "PostgreSQL did not come up"
fi

redis_answers() { redis-cli -u "$TEST_REDIS_URL" ping >/dev/null 2>&1; }
if ! redis_answers; then
    local_default "$TEST_REDIS_URL" redis://127.0.0.1:6379 || die "Redis at TEST_REDIS_URL does not answer"
    command -v redis-server >/dev/null ||
        die "Redis does not answer on 127.0.0.1:6379 and is not installed here (Debian: apt-get install redis-server)"
    say "starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no
    answers_within 30 redis_answers || die "Redis did not come up"
fi

# The signing-key store's tests keep keys in a SoftHSM2 token, which test-support makes on
# first use (test_support::softhsm); TEST_PKCS11_MODULE names another PKCS#11 library.
if [ -z "${TEST_PKCS11_MODULE:-}" ] && ! command -v softhsm2-util >/dev/null; then
    [ "$(id -u)" = 0 ] || die "SoftHSM2 is missing: sudo apt-get install softhsm2"
    say "installing SoftHSM2"
    apt-get install -y softhsm2 >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y softhsm2 >/dev/null; } ||
        die "SoftHSM2 could not be installed (apt-get install softhsm2)"
fi

[ "${1:-}" = --prepare ] && exit 0
# The whole workspace, unless the arguments name packages.
for arg in "$@"; do
    case $arg in -p | --package | --package=* | -p*) exec cargo test "$@" ;; esac
done
exec cargo test --workspace "$@"
