"""Checks the Grafana dashboards in deploy/grafana/dashboards for scripts/check-monitoring.sh.

Usage: check_dashboards.py --rules ALERTS_YML [--scrape FILE]... DASHBOARD_JSON...

Each dashboard must be valid JSON with a uid, a title and panels, each panel with an id of
its own and a query on every target. Every PromQL expression must parse: they are written
into a temporary rules file as recording rules, one group per panel, and given to
`promtool check rules`. With --scrape (the services' /metrics after traffic, from
scripts/check-metrics.sh), every metric the dashboards and the alert rules name must appear
in one of the scrapes, so a renamed metric cannot leave a panel or an alert empty.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

# Grafana's own variables, replaced by a duration so that promtool can parse the query.
GRAFANA_DURATIONS = ("$__rate_interval", "$__interval", "$__range")
# Series Prometheus makes itself rather than scraping them.
SYNTHETIC = {"up"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
            "or", "unless", "offset", "inf", "nan"}


def promql(expr):
    """The query as Prometheus would get it, Grafana's interval variables filled in."""
    for var in GRAFANA_DURATIONS:
        expr = expr.replace(var, "5m")
    return expr


def metric_names(expr):
    """The metric names a PromQL expression selects (without parsing it fully: strings,
    label matchers, ranges and grouping clauses are dropped; what is left that is neither a
    function, a keyword nor part of a number is a metric name)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"'(?:[^'\\]|\\.)*'", "''", e)
    e = re.sub(r"\{[^}]*\}", " ", e)
    e = re.sub(r"\[[^\]]*\]", " ", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    names = set()
    for m in re.finditer(r"[a-zA-Z_:][a-zA-Z0-9_:]*", e):
        token, before, after = m.group(0), e[: m.start()], e[m.end():].lstrip()
        if after.startswith("(") or token in KEYWORDS:
            continue
        if before and (before[-1].isdigit() or before[-1] == "."):
            continue  # 1e3, 5m
        names.add(token)
    return names


def panels(dashboard):
    """Every panel, rows' collapsed panels included."""
    for p in dashboard.get("panels", []):
        yield p
        yield from p.get("panels", [])


def check_dashboard(path, problems):
    """The dashboard's queries as (panel title, refId, expr); structural problems appended."""
    try:
        with open(path) as f:
            dashboard = json.load(f)
    except (OSError, ValueError) as e:
        problems.append(f"{path}: not valid JSON: {e}")
        return []
    for key in ("uid", "title", "panels"):
        if not dashboard.get(key):
            problems.append(f"{path}: no {key}")
    queries, ids = [], set()
    for p in panels(dashboard):
        title = p.get("title") or "(untitled)"
        if p.get("id") in ids:
            problems.append(f"{path}: panel id {p.get('id')} used twice")
        ids.add(p.get("id"))
        if "gridPos" not in p:
            problems.append(f"{path}: panel {title!r} has no gridPos")
        if p.get("type") == "row":
            continue
        if not p.get("targets"):
            problems.append(f"{path}: panel {title!r} has no query")
        for t in p.get("targets", []):
            expr = (t.get("expr") or "").strip()
            if not expr:
                problems.append(f"{path}: panel {title!r} target {t.get('refId')} has no expr")
                continue
            queries.append((f"{os.path.basename(path)}: {title} (panel {p.get('id')})",
                            t.get("refId", "A"), expr))
    return queries


def check_parses(queries, problems):
    """promtool check rules on the queries, one group per panel."""
    groups = {}
    for group, ref, expr in queries:
        groups.setdefault(group, []).append(
            {"record": f"dashboard:query:{ref.lower()}", "expr": promql(expr)})
    rules = {"groups": [{"name": g, "rules": r} for g, r in groups.items()]}
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        yaml.safe_dump(rules, f, sort_keys=False)
        name = f.name
    try:
        run = subprocess.run(["promtool", "check", "rules", name], capture_output=True, text=True)
    finally:
        os.unlink(name)
    if run.returncode != 0:
        problems.append("PromQL that does not parse:\n" + (run.stdout + run.stderr).strip())


def scraped_names(paths):
    """The sample names in Prometheus text-format scrapes."""
    names = set()
    for path in paths:
        with open(path) as f:
            for line in f:
                m = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line)
                if m:
                    names.add(m.group(0))
    return names


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rules", required=True)
    parser.add_argument("--scrape", action="append", default=[])
    parser.add_argument("dashboards", nargs="+")
    args = parser.parse_args()

    problems, queries = [], []
    for path in args.dashboards:
        queries += check_dashboard(path, problems)
    check_parses(queries, problems)

    if args.scrape:
        with open(args.rules) as f:
            alerts = [(f"{args.rules}: {r.get('alert') or r.get('record')}", r["expr"])
                      for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
        known = scraped_names(args.scrape) | SYNTHETIC
        missing = {}
        for where, expr in [(where, expr) for where, _, expr in queries] + alerts:
            missing.setdefault(where, set()).update(metric_names(expr) - known)
        for where, names in missing.items():
            if names:
                problems.append(f"{where}: not in the services' /metrics: {', '.join(sorted(names))}")

    if problems:
        for p in problems:
            print(f"FAIL {p}", file=sys.stderr)
        sys.exit(1)
    checked = "; every metric they name is scraped" if args.scrape else ""
    print(f"ok   dashboards: {len(args.dashboards)} valid, {len(queries)} queries parse{checked}")


if __name__ == "__main__":
    main()
