#!/usr/bin/env bash
# Prints the open-file and process limits containers get here, as `nofile=SOFT:HARD
# nproc=SOFT:HARD`. The engine's defaults (a million open files, four million processes) are
# above what this machine lets runc set, which it then refuses: containers get the host's
# open-file limit, and 16,384 processes (a service runs a few hundred threads at most), or
# the host's limit where that is lower. check-image.sh passes them as --ulimit, and the
# compose and kube runs as containers.conf's default_ulimits.
set -euo pipefail
limit() { [ "$1" = unlimited ] && echo "${2:--1}" || { [ -n "${2:-}" ] && [ "$1" -gt "$2" ] && echo "$2" || echo "$1"; }; }
echo "nofile=$(limit "$(ulimit -Sn)"):$(limit "$(ulimit -Hn)") nproc=$(limit "$(ulimit -Su)" 16384):$(limit "$(ulimit -Hu)" 16384)"
