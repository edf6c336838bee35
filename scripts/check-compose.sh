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
expected="auth-server intake-api-1 intake-api-2 postgres proxy redis "
if [ "$services" != "$expected" ]; then
    echo "unexpected services: $services" >&2
    exit 1
fi
(cd "$tmp" && docker-compose config -q)
# Only the TLS proxy publishes ports; everything else stays on the internal network.
python3 -c 'import yaml' 2>/dev/null || pip install -q pyyaml
(cd "$tmp" && docker-compose config) | python3 -c '
import sys, yaml
services = yaml.safe_load(sys.stdin)["services"]
published = sorted(name for name, s in services.items() if s.get("ports"))
if published != ["proxy"]:
    sys.exit(f"services publishing ports: {published} (only the proxy may)")
for name, s in services.items():
    nets = s.get("networks") or {}
    if name != "proxy" and "edge" in nets:
        sys.exit(f"{name} is on the edge network")
'
echo "docker-compose.yml is valid: $services"
