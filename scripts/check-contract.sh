#!/usr/bin/env bash
# Checks the published contract as partners' tools read it (scripts/contract_check.py):
# YAML 1.1 loading, openapi-spec-validator, openapi-python-client and openapi-typescript
# generation, calls through the generated client, every request example, and the enquiry
# schema against the service. Starts the one-process stack (target/debug/partner-intake, or
# target/release/ with --release) on free ports.
#   scripts/check-contract.sh [--release]
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -c 'import openapi_spec_validator, openapi_schema_validator, yaml, httpx, jwskate' 2>/dev/null ||
    pip install -q openapi-spec-validator openapi-schema-validator pyyaml httpx jwskate
command -v openapi-python-client >/dev/null || pip install -q openapi-python-client
command -v openapi-typescript >/dev/null || npm install -g -s openapi-typescript
# shellcheck source=scripts/stack.sh
. scripts/stack.sh
profile=debug
[ "${1:-}" = "--release" ] && profile=release
auth_bin="${CARGO_TARGET_DIR:-$PWD/target}/$profile/auth-server"
[ -x "$auth_bin" ] || { echo "$auth_bin not built: cargo build -p auth-server" >&2; exit 1; }
# The webhook examples' addresses are reserved names (partner.example) that resolve nowhere:
# the check that an endpoint is public is left out here (the API's tests hold it).
start_stack "$@" INTAKE_RATE_LIMIT=1000000 INTAKE_WEBHOOK_ALLOW_INSECURE=true
# The private_key_jwt example is sent with a client this registers on the stack's database.
AUTH_SERVER_BIN=$auth_bin AUTH_DATABASE_URL="sqlite://$work/data/auth.db?mode=rwc" \
    AUTH_KEY_ENCRYPTION_KEY="$(cat "$work/data/key-encryption-key")" RUST_LOG=warn \
    python3 scripts/contract_check.py "$auth" "$intake" "$work/data/demo-client.json" "$work"
