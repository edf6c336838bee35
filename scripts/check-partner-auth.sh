#!/usr/bin/env bash
# Partners' own OAuth libraries, unchanged, against the one-process stack
# (target/debug/partner-intake, or target/release/ when given --release):
# requests-oauth2client with DPoP and private_key_jwt, Authlib with private_key_jwt
# (scripts/partner_auth_check.py). The auth-server binary beside it registers the keyed client.
# Then requests-oauth2client against the stack with the FAPI 2.0 profile on
# (scripts/fapi2_partner_check.py).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/stack.sh
. scripts/stack.sh
python3 -c 'import requests_oauth2client, authlib, jwskate' 2>/dev/null ||
    { echo "requests-oauth2client and Authlib are not installed (pip install requests-oauth2client authlib)" >&2; exit 1; }
profile=debug
[ "${1:-}" = "--release" ] && profile=release
auth_bin="${CARGO_TARGET_DIR:-$PWD/target}/$profile/auth-server"
[ -x "$auth_bin" ] || { echo "$auth_bin not built: cargo build -p auth-server" >&2; exit 1; }
start_stack "$@"

field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
id=$(field client_id <"$work/data/demo-client.json")
secret=$(field client_secret <"$work/data/demo-client.json")
AUTH_DATABASE_URL="sqlite://$work/data/auth.db?mode=rwc" \
    AUTH_KEY_ENCRYPTION_KEY="$(cat "$work/data/key-encryption-key")" RUST_LOG=warn \
    python3 scripts/partner_auth_check.py "$auth" "$intake" "$id" "$secret" "$auth_bin"

# The same libraries against a FAPI 2.0 deployment: keys and DPoP only.
stop_stack
start_stack "$@" AUTH_FAPI2=true INTAKE_FAPI2=true
python3 scripts/fapi2_partner_check.py "$auth" "$intake" "$work/data"
