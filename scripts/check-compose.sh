#!/usr/bin/env bash
# Validates docker-compose.yml without a Docker engine, with the example environment, and
# lints it with dclint (npm; every rule on but those .dclintrc turns off, each with its
# reason).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v docker-compose >/dev/null || { echo "docker-compose is not installed (Debian: apt-get install docker-compose)" >&2; exit 1; }
command -v npm >/dev/null || { echo "npm is not installed (Debian: apt-get install npm)" >&2; exit 1; }
dclint_version=3.1.0
dclint=${XDG_CACHE_HOME:-$HOME/.cache}/partner-intake/dclint-$dclint_version
if ! [ -x "$dclint/node_modules/.bin/dclint" ]; then
    mkdir -p "$dclint"
    npm install --silent --no-audit --no-fund --prefix "$dclint" "dclint@$dclint_version" >/dev/null
fi
"$dclint/node_modules/.bin/dclint" --config .dclintrc --max-warnings 0 docker-compose.yml
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp docker-compose.yml "$tmp/"
cp -r deploy "$tmp/"
cp deploy/env.example "$tmp/.env"
sed -i -e 's/^AUTH_KEY_ENCRYPTION_KEY=$/AUTH_KEY_ENCRYPTION_KEY=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=/' \
    -e 's/^INTAKE_KEY_ENCRYPTION_KEY=$/INTAKE_KEY_ENCRYPTION_KEY=AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=/' \
    -e 's/^INTAKE_REVOCATIONS_CLIENT_SECRET=$/INTAKE_REVOCATIONS_CLIENT_SECRET=AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=/' "$tmp/.env"
: > "$tmp/Dockerfile"
services=$(cd "$tmp" && docker-compose config --services | sort | tr '\n' ' ')
expected="auth-migrate auth-server grafana intake-api-1 intake-api-2 intake-client intake-migrate postgres prometheus proxy redis "
if [ "$services" != "$expected" ]; then
    echo "unexpected services: $services" >&2
    exit 1
fi
(cd "$tmp" && docker-compose config -q)
# Only the TLS proxy publishes ports, and Grafana's only on the loopback; everything else
# stays on the internal network. Images pulled are pinned to a version. Prometheus scrapes
# every service's admin port.
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
    image = s.get("image", "")
    if "build" not in s and (":" not in image or image.endswith(":latest")):
        sys.exit(f"{name}: image {image!r} is not pinned to a version")
def port(p):
    if isinstance(p, dict):
        return p.get("host_ip", ""), str(p.get("target"))
    parts = str(p).split(":")
    return (parts[0] if len(parts) == 3 else ""), parts[-1].split("/")[0]
grafana = [ip for ip, target in map(port, services["proxy"]["ports"]) if target == "3443"]
if grafana != ["127.0.0.1"]:
    sys.exit(f"the proxy publishes Grafana on {grafana}, not on 127.0.0.1 alone")
# The image is tagged with this release unless PARTNER_INTAKE_TAG says otherwise.
import tomllib
with open("Cargo.toml", "rb") as f:
    release = tomllib.load(f)["workspace"]["package"]["version"]
for name, s in services.items():
    if s.get("image", "").startswith("partner-intake:") and s["image"] != f"partner-intake:{release}":
        sys.exit(f"{name}: image {s['image']}, but this tree is release {release} (Cargo.toml)")
with open("deploy/prometheus/prometheus.yml") as f:
    prometheus = yaml.safe_load(f)
scraped = {t for job in prometheus["scrape_configs"] for c in job["static_configs"] for t in c["targets"]}
admin = {"auth-server": 9081, "intake-api": 9082}
for name in services:
    kind = "intake-api" if name.startswith("intake-api") else name
    if kind in admin and f"{name}:{admin[kind]}" not in scraped:
        sys.exit(f"{name}: its admin port {admin[kind]} is not in deploy/prometheus/prometheus.yml")
'
echo "docker-compose.yml is valid: $services"
