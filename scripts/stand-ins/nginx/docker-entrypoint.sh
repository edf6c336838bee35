#!/bin/bash
# The official image's entrypoint contract, for `nginx` commands:
#   NGINX_ENTRYPOINT_LOCAL_RESOLVERS set: NGINX_LOCAL_RESOLVERS is the nameservers of
#     /etc/resolv.conf (the container engine's DNS, wherever it listens);
#   /etc/nginx/templates/NAME.template is written to $NGINX_ENVSUBST_OUTPUT_DIR/NAME
#     (default /etc/nginx/conf.d), with only the environment's variables substituted.
# Then, as Debian's nginx is 1.22: a configuration's `http2 on;` (1.25.1 and later) is said
# the older way, `listen ... ssl http2;` (every server here that turns it on listens with ssl).
set -euo pipefail
if [ "${1:-}" = nginx ] || [ "${1:-}" = nginx-debug ]; then
    if [ -n "${NGINX_ENTRYPOINT_LOCAL_RESOLVERS:-}" ]; then
        NGINX_LOCAL_RESOLVERS=$(awk 'BEGIN{ORS=" "} $1=="nameserver" {if ($2 ~ ":") print "["$2"]"; else print $2}' /etc/resolv.conf)
        export NGINX_LOCAL_RESOLVERS=${NGINX_LOCAL_RESOLVERS% }
    fi
    out=${NGINX_ENVSUBST_OUTPUT_DIR:-/etc/nginx/conf.d}
    defined=$(printf '${%s} ' $(env | cut -d= -f1))
    for template in /etc/nginx/templates/*.template; do
        [ -e "$template" ] || continue
        target=$out/$(basename "$template" .template)
        mkdir -p "$(dirname "$target")"
        envsubst "$defined" <"$template" >"$target"
        echo "$0: $template written to $target"
    done
    conf=/etc/nginx/nginx.conf
    if grep -qE '^\s*http2 on;' "$conf"; then
        sed -E -e '/^\s*http2 on;/d' -e 's/(listen\s[^;]*\bssl)\s*;/\1 http2;/' "$conf" >/run/nginx.conf
        set -- "$@" -c /run/nginx.conf
        echo "$0: nginx $(nginx -v 2>&1 | sed 's|.*/||'): 'http2 on;' given as 'listen ... ssl http2;' in /run/nginx.conf"
    fi
fi
exec "$@"
