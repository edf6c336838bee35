#!/usr/bin/env bash
# Loads each service's /docs page in headless Chromium and checks the interactive page
# rendered the API's operations; then, on the intake-api's, authorizes with the demo client
# and runs "Try it out" with every named request example (scripts/docs_try_it_out.py). Starts the one-process stack (target/debug/partner-intake,
# or target/release/ when given --release) on free ports in a temporary directory.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/stack.sh
. scripts/stack.sh
chrome=$(command -v chromium || command -v chromium-browser || true)
[ -n "$chrome" ] || { echo "chromium is not installed (Debian: apt-get install chromium)" >&2; exit 1; }
start_stack "$@"

render() { # url -> rendered DOM on stdout
    "$chrome" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$work/profile-$RANDOM" --virtual-time-budget=10000 \
        --dump-dom "$1" 2>/dev/null
}

fail=0
check() { # name, url, text the rendered page must contain...
    local name=$1 url=$2; shift 2
    local dom
    dom=$(render "$url")
    for want in "$@"; do
        if ! grep -qF -- "$want" <<<"$dom"; then
            echo "FAIL $name: '$want' not rendered at $url" >&2
            fail=1
        fi
    done
    [ $fail -eq 0 ] && echo "ok   $name: $url rendered"
}
check auth-server "http://127.0.0.1:$auth_port/docs" "opblock-summary-path" "data-path=\"/oauth/token\"" "data-path=\"/.well-known/jwks.json\""
check intake-api "http://127.0.0.1:$intake_port/docs" "opblock-summary-path" "data-path=\"/partners/external/intake\"" "data-path=\"/partners/external/intake/attach\"" "btn authorize"

# Then as a partner: Authorize, and "Try it out" with every named example.
python3 -c 'import playwright' 2>/dev/null || pip install -q playwright
python3 scripts/docs_try_it_out.py "$intake" "$work/data/demo-client.json" "$chrome" || fail=1
exit $fail
