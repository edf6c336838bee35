#!/bin/bash
# The official image's documented first start: an empty $PGDATA is initialised in UTF-8
# with POSTGRES_USER (default postgres) and POSTGRES_PASSWORD, POSTGRES_DB (default the
# user) is created, and /docker-entrypoint-initdb.d/*.sql and *.sh run against it on a
# server that listens on its socket only; then the server runs as postgres, listening
# everywhere, with password (scram-sha-256) authentication for connections from the network.
set -euo pipefail
if [ "${1:-}" != postgres ]; then exec "$@"; fi
if [ "$(id -u)" = 0 ]; then
    mkdir -p "$PGDATA" /var/run/postgresql
    chown postgres:postgres "$PGDATA" /var/run/postgresql
    chmod 700 "$PGDATA"
    chmod 3777 /var/run/postgresql
    exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    : "${POSTGRES_PASSWORD:?the official image refuses to start without POSTGRES_PASSWORD}"
    user=${POSTGRES_USER:-postgres}
    db=${POSTGRES_DB:-$user}
    initdb --username="$user" --pwfile=<(printf '%s\n' "$POSTGRES_PASSWORD") -D "$PGDATA" >/dev/null
    printf '\nhost all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
    printf "listen_addresses = '*'\n" >>"$PGDATA/postgresql.conf"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    psql=(psql -v ON_ERROR_STOP=1 --username "$user" --no-password --no-psqlrc)
    if [ "$db" != postgres ]; then
        "${psql[@]}" --dbname postgres --set db="$db" <<<'CREATE DATABASE :"db";'
    fi
    for f in /docker-entrypoint-initdb.d/*; do
        case $f in
            *.sql) echo "running $f"; "${psql[@]}" --dbname "$db" -f "$f" ;;
            *.sh) echo "running $f"; . "$f" ;;
            *) [ -e "$f" ] && echo "ignoring $f" ;;
        esac
    done
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    echo "PostgreSQL init process complete; ready for start up."
fi
exec "$@"
