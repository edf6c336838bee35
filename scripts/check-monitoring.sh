#!/usr/bin/env bash
# Checks what docker-compose.yml gives Prometheus and Grafana: the Prometheus configuration
# and its alert rules (promtool check config, which checks the rules too), the rules' unit
# tests (promtool test rules), and the Grafana dashboards (valid JSON, every PromQL query
# parses). Given scrapes of the services' /metrics (scripts/check-metrics.sh with
# SCRAPES_DIR), also that every metric the alerts and dashboards name is in one of them:
#   scripts/check-monitoring.sh [SCRAPE.prom...]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v promtool >/dev/null || { echo "promtool is not installed (Debian: apt-get install prometheus)" >&2; exit 1; }
python3 -c 'import yaml' 2>/dev/null || pip install -q pyyaml

promtool check config deploy/prometheus/prometheus.yml
promtool test rules deploy/prometheus/alerts.test.yml
scrapes=()
for s in "$@"; do scrapes+=(--scrape "$s"); done
[ $# -gt 0 ] || echo "note: no scrapes given; the metric names are not checked"
python3 scripts/check_dashboards.py --rules deploy/prometheus/alerts.yml "${scrapes[@]}" \
    deploy/grafana/dashboards/*.json
