#!/usr/bin/env bash
# Fuzzes the services' parsers of hostile input (fuzz/): every target runs for SECONDS
# (default 60) and any crash, panic or sanitizer report fails the script; the input that caused
# it is left in fuzz/artifacts/<target>/.
#
# cargo-fuzz needs nightly compiler flags (-Zsanitizer); RUSTC_BOOTSTRAP=1 lets the stable
# toolchain accept them, so no second toolchain has to be installed.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [seconds per target]" >&2; exit 2; }

log() { printf '==> %s\n' "$*"; }

if ! cargo fuzz --version >/dev/null 2>&1; then
    log "installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

export RUSTC_BOOTSTRAP=1
export CARGO_BUILD_JOBS=${CARGO_BUILD_JOBS:-2}
# -a: overflow checks and debug assertions on, so arithmetic bugs show up as crashes.
# 16 codegen units instead of cargo-fuzz's 1: for runs of minutes the build is the cost that
# matters, and the instrumented dependency tree (sea-orm, poem, aws-lc) is large.
build_flags=(--fuzz-dir fuzz --debug-assertions --codegen-units 16)
# FUZZ_TARGET_DIR keeps the instrumented build somewhere that outlives the checkout (CI sets
# one under /var/cache), so a clean clone rebuilds only what changed.
[ -n "${FUZZ_TARGET_DIR:-}" ] && build_flags+=(--target-dir "$FUZZ_TARGET_DIR")

log "cargo fuzz build"
cargo fuzz build "${build_flags[@]}"

# target:max_len. The enquiry cap sits above any real body; the bearer and DPoP ones above the
# 4096-byte token and proof limits, and the assertion one above the 4096-character
# client_assertion limit with room for a JWKS, so the too-long paths are fuzzed as well.
for spec in enquiry:70000 bearer:8192 dpop:8192 assertion:12288; do
    target=${spec%%:*}
    max_len=${spec#*:}
    # New inputs go to a scratch corpus under fuzz/target/ (ignored); the committed seeds in
    # fuzz/corpus/ are only read, so a run leaves the work tree as it was.
    work="$PWD/fuzz/target/corpus/$target"
    mkdir -p "$work"
    log "fuzzing $target for ${seconds}s"
    cargo fuzz run "${build_flags[@]}" "$target" "$work" "$PWD/fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -print_final_stats=1
done
log "no crash in ${seconds}s per target"
