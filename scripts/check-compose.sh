#!/usr/bin/env bash
# Validates docker-compose.yml without a Docker engine, with the example environment.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v docker-compose >/dev/null || { echo "docker-compose is not installed (Debian: apt-get install docker-compose)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp docker-compose.yml "$tmp/"
cp -r deploy "$tmp/"
cp deploy/env.example "$tmp/.env"
sed -i 's/^AUTH_KEY_ENCRYPTION_KEY=$/AUTH_KEY_ENCRYPTION_KEY=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=/' "$tmp/.env"
: > "$tmp/Dockerfile"
services=$(cd "$tmp" && docker-compose config --services | sort | tr '\n' ' ')
expected="auth-server intake-api-1 intake-api-2 intake-lb postgres redis "
if [ "$services" != "$expected" ]; then
    echo "unexpected services: $services" >&2
    exit 1
fi
(cd "$tmp" && docker-compose config -q)
echo "docker-compose.yml is valid: $services"
