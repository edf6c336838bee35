#!/bin/bash
# As the official image's entrypoint: redis-server runs as redis, owning its /data; Debian's
# build keeps protected mode on, so it is turned off here as the official build does.
set -euo pipefail
if [ "${1:-}" = redis-server ]; then
    shift
    set -- redis-server --protected-mode no "$@"
    if [ "$(id -u)" = 0 ]; then
        chown -R redis:redis .
        umask 0077
        exec setpriv --reuid=redis --regid=redis --init-groups -- "$@"
    fi
fi
exec "$@"
