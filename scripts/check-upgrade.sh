#!/usr/bin/env bash
# Rehearses a rolling upgrade and its rollback under load (scripts/upgrade_rehearsal.py),
# on the PostgreSQL at TEST_POSTGRES_URL and the Redis at TEST_REDIS_URL.
#
# The previous release is the newest one in RELEASES whose servers run on a database a
# later release migrated (the start-up rule 0.2.0 brought); it is built from its commit in
# a worktree of its own, into a target directory kept under UPGRADE_CACHE, so it is built
# once per machine. The next release is this build with one more migration (the
# `upgrade-rehearsal` feature): every run proves that this build rolls from and back to
# the release operators run now, and that this build's servers keep working on a schema a
# later release has expanded. A change that cannot roll from that release fails here.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${UPGRADE_CACHE:-/var/cache/partner-intake/releases}
work=$(mktemp -d)
worktree=
cleanup() {
    [ -n "$worktree" ] && git worktree remove --force "$worktree" >/dev/null 2>&1
    rm -rf "$work"
}
trap cleanup EXIT

python3 -c 'import standardwebhooks' 2>/dev/null ||
    { echo "the standardwebhooks Python package is not installed (pip install standardwebhooks)" >&2; exit 1; }

# RELEASES: "version commit rolling" lines; rolling is yes from the release whose servers
# run on a database a later release migrated.
previous=$(awk '!/^#/ && NF == 3 && $3 == "yes" { v = $1; c = $2 } END { if (v) print v, c }' RELEASES)
[ -n "$previous" ] || { echo "RELEASES lists no release with the rolling start-up rule" >&2; exit 1; }
mkdir -p "$work/previous" "$work/next"
read -r version commit <<<"$previous"
target="$cache/$version-$commit"
if [ ! -x "$target/debug/intake-api" ] || [ ! -x "$target/debug/auth-server" ]; then
    echo "building release $version ($commit) into $target"
    worktree="$work/source"
    git worktree add --detach "$worktree" "$commit" >/dev/null
    (cd "$worktree" && CARGO_TARGET_DIR="$target" cargo build -j2 --locked -p auth-server -p intake-api)
fi
cp "$target/debug/auth-server" "$target/debug/intake-api" "$work/previous/"
echo "previous release: $version ($commit)"

cargo build -j2 -p auth-server -p intake-api --features auth-server/upgrade-rehearsal,intake-api/upgrade-rehearsal
cp target/debug/auth-server target/debug/intake-api "$work/next/"
# target/debug holds this build's own binaries again for whatever runs next.
cargo build -j2 -p auth-server -p intake-api
echo "next release: this build with one more migration"

started=$SECONDS
REDIS_URL=${TEST_REDIS_URL:-redis://127.0.0.1:6379} python3 scripts/upgrade_rehearsal.py "$work/previous" "$work/next"
echo "the rehearsal from $version to this build and back took $((SECONDS - started)) s"
