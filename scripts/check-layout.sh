#!/usr/bin/env bash
# Starts the production layout as docker-compose.yml writes it, without a Docker engine, and
# checks it through the TLS proxy as a partner would: metadata and JWKS at the public issuer,
# a client made with the auth-server's CLI, a token, an enquiry, an attach, the case read
# back, a DPoP-bound token and enquiry (requests-oauth2client); /metrics not routed; every Prometheus target up; the proxy's limits on body size
# and on slow request heads; requests still answered with one intake-api replica down.
#
#   BIN_DIR=target/release scripts/check-layout.sh      # as root; BIN_DIR holds both binaries
#
# Every service's command, environment, volumes, health check and depends_on come from
# `docker-compose config` on a copy with a .env made from deploy/env.example and test secrets
# (scripts/layout_plan.py reads it), and each runs as a container would:
#   - networks are Linux bridges in a namespace of their own; a network that is not
#     internal has the host as its gateway, and published ports are forwarded to the
#     container by socat on the host, as docker-proxy does;
#   - each service has its own network namespace (so its own 0.0.0.0 and 127.0.0.1; both
#     intake-api replicas bind 0.0.0.0:8082 as written) and its own mount namespace, where
#     /etc/hosts names the other services, volumes are bind mounts and /run is its own;
#   - partner-intake:* runs $BIN_DIR/<command>, with the Dockerfile's ENV, USER, WORKDIR and
#     HEALTHCHECK; the other images run Debian's packages the way their images do: postgres
#     through an emulation of the image's entrypoint (POSTGRES_* and initdb.d), redis-server
#     with the image's build default of protected mode off, nginx and prometheus as is.
# Deviations: Debian's versions (PostgreSQL 15, Redis 7.0, nginx 1.22, Prometheus 2.x)
# stand in for the images'; Grafana is left out, as Debian has no package for it (nothing
# but the proxy's port 3443 leads to it); restart policies are not applied, so a replica
# killed stays down; the subnet of a network with none in the file is chosen here; an nginx
# older than 1.25.1 gets the copy's `http2 on;` as `listen ... ssl http2;`.
# Mount points missing on the host (/app, /data, /prometheus, ...) are made for the run and
# removed afterwards, with every process, namespace and temporary file.
set -euo pipefail

# --container DIR: the process inside a service's fresh mount namespace (its network one
# already entered): lays out the container's filesystem, then becomes the service.
container_env() { # KEY: its value in the service's environment
    local kv
    for kv in "${env[@]}"; do
        [ "${kv%%=*}" = "$1" ] && { printf '%s' "${kv#*=}"; return; }
    done
}

as_user() { # uid:gid command...
    local user=$1; shift
    setpriv --reuid="${user%:*}" --regid="${user#*:}" --clear-groups -- env -i "${env[@]}" "$@"
}

postgres_entrypoint() {
    local pgdata user db pg
    pgdata=$(container_env PGDATA)
    user=$(container_env POSTGRES_USER); user=${user:-postgres}
    db=$(container_env POSTGRES_DB); db=${db:-$user}
    pg="$(id -u postgres):$(id -g postgres)"
    mkdir -p "$pgdata" /run/postgresql
    chown "$pg" "$pgdata" /run/postgresql
    chmod 700 "$pgdata"
    chmod 3777 /run/postgresql
    if [ ! -s "$pgdata/PG_VERSION" ]; then
        (umask 077; container_env POSTGRES_PASSWORD > /run/postgresql/.pwfile; echo >> /run/postgresql/.pwfile)
        chown "$pg" /run/postgresql/.pwfile
        as_user "$pg" initdb --username="$user" --pwfile=/run/postgresql/.pwfile -D "$pgdata"
        rm /run/postgresql/.pwfile
        printf '\nhost all all all scram-sha-256\n' >> "$pgdata/pg_hba.conf"
        printf "listen_addresses = '*'\n" >> "$pgdata/postgresql.conf"
        as_user "$pg" pg_ctl -D "$pgdata" -o "-c listen_addresses=''" -w start
        local psql=(psql -v ON_ERROR_STOP=1 --username "$user" --no-password --no-psqlrc)
        if [ "$db" != postgres ]; then
            as_user "$pg" "${psql[@]}" --dbname postgres --set db="$db" <<<'CREATE DATABASE :"db";'
        fi
        local f
        for f in /docker-entrypoint-initdb.d/*; do
            case $f in
                *.sql) as_user "$pg" "${psql[@]}" --dbname "$db" -f "$f" ;;
                *.sh) as_user "$pg" bash "$f" ;;
                *) echo "ignoring $f" ;;
            esac
        done
        as_user "$pg" pg_ctl -D "$pgdata" -m fast -w stop
    fi
    exec setpriv --reuid="${pg%:*}" --regid="${pg#*:}" --clear-groups -- env -i "${env[@]}" "${argv[@]}"
}

container() {
    local d=$1 kind user workdir src target mode path owner
    kind=$(awk '$1=="kind"{print $2}' "$d/meta")
    user=$(awk '$1=="user"{print $2}' "$d/meta")
    workdir=$(awk '$1=="workdir"{print $2}' "$d/meta")
    mapfile -d '' argv <"$d/argv"
    mapfile -d '' env <"$d/env"
    mount -t tmpfs -o mode=755 tmpfs /run
    mount --bind "$d/hosts" /etc/hosts
    while IFS=$'\t' read -r src target mode; do
        mount --bind "$src" "$target"
        [ "$mode" = ro ] && mount -o remount,bind,ro "$target"
    done <"$d/volumes"
    while read -r path; do mount --bind "$d/fs$path" "$path"; done <"$d/private"
    while read -r path owner; do chown "$owner" "$path"; done <"$d/owned"
    cd "$workdir"
    case $kind in
        postgres) postgres_entrypoint ;;
        redis)
            # As the image's entrypoint: its data belong to redis, which it runs as.
            chown -R redis: .
            user="$(id -u redis):$(id -g redis)"
            umask 077
            ;;
    esac
    exec setpriv --reuid="${user%:*}" --regid="${user#*:}" --clear-groups -- env -i "${env[@]}" "${argv[@]}"
}

if [ "${1:-}" = --container ]; then
    container "$2"
    exit 1
fi

cd "$(dirname "$0")/.."
self=$PWD/scripts/check-layout.sh
[ "$(id -u)" = 0 ] || { echo "run as root: the layout needs namespaces, bridges and mounts" >&2; exit 1; }
[ -n "${BIN_DIR:-}" ] || { echo "set BIN_DIR to the directory of the auth-server and intake-api binaries" >&2; exit 1; }
BIN_DIR=$(cd "$BIN_DIR" && pwd)
for b in auth-server intake-api; do
    [ -x "$BIN_DIR/$b" ] || { echo "$BIN_DIR/$b is missing" >&2; exit 1; }
done
for tool in docker-compose:docker-compose nginx:nginx prometheus:prometheus socat:socat \
    redis-server:redis-server redis-cli:redis-tools wget:wget curl:curl openssl:openssl \
    psql:postgresql-client pg_isready:postgresql-client ip:iproute2 nsenter:util-linux \
    unshare:util-linux setpriv:util-linux ss:iproute2; do
    command -v "${tool%%:*}" >/dev/null || { echo "${tool%%:*} is missing (Debian: apt-get install ${tool#*:})" >&2; exit 1; }
done
python3 -c 'import yaml' 2>/dev/null || { echo "python3 needs PyYAML (Debian: python3-yaml)" >&2; exit 1; }
python3 -c 'import requests_oauth2client' 2>/dev/null ||
    { echo "python3 needs requests-oauth2client (pip install requests-oauth2client)" >&2; exit 1; }
pg_bin=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n1)
[ -x "$pg_bin/initdb" ] || { echo "PostgreSQL server binaries are missing (Debian: apt-get install postgresql)" >&2; exit 1; }

umask 022
tmp=$(mktemp -d /tmp/check-layout.XXXXXX)
chmod 755 "$tmp"
ns=pil$$ # prefix of this run's namespaces and host interfaces
declare -A pid_of=() healthy=() completed=() forwarded=()
started=() socats=() netns=() created=() host_links=()

alive() { # pid: running, not a zombie
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [ "${stat%% *}" != Z ] && [ "${stat%% *}" != X ]
}

meta() { awk -v k="$2" '$1==k{print $2}' "$tmp/plan/svc/$1/meta"; }

cleanup() {
    local status=$? svc pid path deadline
    set +e
    trap '' INT TERM HUP PIPE
    for ((i = ${#started[@]} - 1; i >= 0; i--)); do
        svc=${started[i]} pid=${pid_of[${started[i]}]}
        alive "$pid" && kill -s "$(meta "$svc" stop)" "$pid"
    done
    deadline=$((SECONDS + 15))
    for svc in "${started[@]}"; do
        pid=${pid_of[$svc]}
        while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
        # The service's own children (PostgreSQL's, nginx's workers) share its group.
        kill -KILL -- "-$pid" 2>/dev/null
    done
    # A forwarder's group holds the children it forked per connection.
    for pid in "${socats[@]}"; do kill -- "-$pid" 2>/dev/null; done
    wait 2>/dev/null
    for path in "${host_links[@]}"; do ip link del "$path" 2>/dev/null; done
    for path in "${netns[@]}"; do ip netns del "$path" 2>/dev/null; done
    for ((i = ${#created[@]} - 1; i >= 0; i--)); do
        path=${created[i]}
        if [ -d "$path" ]; then rmdir "$path"; elif [ ! -s "$path" ]; then rm -f "$path"; fi
    done
    rm -rf "$tmp"
    exit "$status"
}
trap cleanup EXIT
# A closed output (`| head`) ends the run like a signal does: through the cleanup.
trap 'exit 130' INT TERM HUP PIPE

tails() { # services whose logs to show
    local svc
    for svc in "$@"; do
        [ -e "$tmp/logs/$svc.log" ] || continue
        echo "--- $svc: last lines of its log" >&2
        tail -n 25 "$tmp/logs/$svc.log" >&2
        if [ -s "$tmp/plan/svc/$svc/fs/var/log/nginx/access.log" ]; then
            echo "--- $svc: last lines of its access log" >&2
            tail -n 10 "$tmp/plan/svc/$svc/fs/var/log/nginx/access.log" >&2
        fi
    done
}
fail() { # message services-whose-logs-to-show...
    local pid
    echo "FAIL $1" >&2
    shift
    tails "$@"
    for pid in "${socats[@]}"; do
        alive "$pid" || echo "--- the forwarder of ${forwarded[$pid]} has exited" >&2
    done
    [ -s "$tmp/logs/ports.log" ] && { echo "--- forwarders' log" >&2; tail -n 10 "$tmp/logs/ports.log" >&2; }
    exit 1
}
ok() { echo "ok   $*"; }

# The compose file resolved against a copy with test secrets and a local certificate.
mkdir -p "$tmp/compose" "$tmp/logs"
cp docker-compose.yml Dockerfile "$tmp/compose/"
cp -r deploy "$tmp/compose/"
rm -rf "$tmp/compose/deploy/tls"
sed -e "s|^POSTGRES_PASSWORD=.*|POSTGRES_PASSWORD=$(openssl rand -hex 16)|" \
    -e "s|^AUTH_KEY_ENCRYPTION_KEY=.*|AUTH_KEY_ENCRYPTION_KEY=$(openssl rand -base64 32)|" \
    -e "s|^INTAKE_KEY_ENCRYPTION_KEY=.*|INTAKE_KEY_ENCRYPTION_KEY=$(openssl rand -base64 32)|" \
    -e "s|^GRAFANA_ADMIN_PASSWORD=.*|GRAFANA_ADMIN_PASSWORD=$(openssl rand -hex 16)|" \
    deploy/env.example >"$tmp/compose/.env"
"$tmp/compose/deploy/make-local-cert.sh" >/dev/null
(cd "$tmp/compose" && docker-compose config) >"$tmp/resolved.yml"
# The image's nginx (1.25.1 or later) takes `http2 on;`; an older one, such as bookworm's
# 1.22, says the same with `listen ... ssl http2;`, so the copy is put in those words.
nginx_version=$(nginx -v 2>&1 | sed 's|.*nginx/||')
if [ "$(printf '%s\n' "$nginx_version" 1.25.1 | sort -V | head -n1)" != 1.25.1 ]; then
    python3 - "$tmp/compose/deploy/nginx/nginx.conf" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
out, depth, block, server_depth = [], 0, [], None
for line in text.splitlines(keepends=True):
    if server_depth is None and re.match(r"\s*server\s*\{", line):
        server_depth, block = depth, []
    depth += line.count("{") - line.count("}")
    if server_depth is None:
        out.append(line)
        continue
    block.append(line)
    if depth == server_depth:
        server = "".join(block)
        if re.search(r"^\s*http2 on;\n", server, re.M):
            server = re.sub(r"^\s*http2 on;\n", "", server, flags=re.M)
            server = re.sub(r"(listen\s[^;]*\bssl)\s*;", r"\1 http2;", server)
        out.append(server)
        server_depth = None
open(path, "w").write("".join(out))
PY
    echo "     nginx $nginx_version: deploy/nginx/nginx.conf's 'http2 on;' given as 'listen ... ssl http2;' (in the copy)"
fi
python3 scripts/layout_plan.py "$tmp/resolved.yml" Dockerfile "$BIN_DIR" "$pg_bin" "$tmp/plan"
while IFS=$'\t' read -r svc why; do echo "skip $svc: $why"; done <"$tmp/plan/skipped"
ca=$tmp/compose/deploy/tls/ca.crt

# Networks: one bridge each in a namespace of their own.
declare -A bridge_of=() prefix_of=() internal_of=()
ip netns add "$ns-net"
netns+=("$ns-net")
ip -n "$ns-net" link set lo up
n=0
while read -r net internal prefix gateway; do
    bridge_of[$net]=br$n prefix_of[$net]=$prefix internal_of[$net]=$internal
    ip -n "$ns-net" link add "br$n" type bridge
    ip -n "$ns-net" link set "br$n" up
    if [ "$internal" = 0 ]; then
        ip link add "$ns-$n" type veth peer name "gw$n" netns "$ns-net"
        host_links+=("$ns-$n")
        ip -n "$ns-net" link set "gw$n" master "br$n" up
        ip addr add "$gateway/$prefix" dev "$ns-$n"
        ip link set "$ns-$n" up
    fi
    n=$((n + 1))
done <"$tmp/plan/networks"

mountpoint_for() { # source target: the target made to exist, as a file or directory like the source
    local src=$1 target=$2 path missing=()
    path=$target
    while [ ! -e "$path" ]; do missing=("$path" "${missing[@]}"); path=$(dirname "$path"); done
    for path in "${missing[@]}"; do
        if [ "$path" = "$target" ] && [ -f "$src" ]; then : >"$path"; else mkdir "$path"; fi
        created+=("$path")
    done
}

start_service() {
    local svc=$1 d=$tmp/plan/svc/$1 net addr src target k=0 n=${#started[@]}
    ip netns add "$ns-$svc"
    netns+=("$ns-$svc")
    ip -n "$ns-$svc" link set lo up
    while read -r net addr; do
        ip -n "$ns-net" link add "s$n-$k" type veth peer name "eth$k" netns "$ns-$svc"
        ip -n "$ns-net" link set "s$n-$k" master "${bridge_of[$net]}" up
        ip -n "$ns-$svc" addr add "$addr/${prefix_of[$net]}" dev "eth$k"
        ip -n "$ns-$svc" link set "eth$k" up
        k=$((k + 1))
    done <"$d/nets"
    while IFS=$'\t' read -r src target _; do mountpoint_for "$src" "$target"; done <"$d/volumes"
    while read -r target; do
        mkdir -p "$d/fs$target"
        mountpoint_for "$d/fs$target" "$target"
    done <"$d/private"
    setsid nsenter --net="/run/netns/$ns-$svc" -- unshare --mount --propagation private -- \
        "$self" --container "$d" >>"$tmp/logs/$svc.log" 2>&1 &
    pid_of[$svc]=$!
    started+=("$svc")
}

in_service() { # service command...: run inside the running service, as `docker compose exec`
    local svc=$1 user env=()
    shift
    user=$(meta "$svc" user)
    mapfile -d '' env <"$tmp/plan/svc/$svc/env"
    nsenter --target "${pid_of[$svc]}" --net --mount --wd -- \
        setpriv --reuid="${user%:*}" --regid="${user#*:}" --clear-groups -- env -i "${env[@]}" "$@"
}

wait_healthy() { # service: its health check passes before it would be declared unhealthy
    local svc=$1 d=$tmp/plan/svc/$1 interval timeout retries start deadline test=()
    [ -n "${healthy[$svc]:-}" ] && return 0
    [ -e "$d/health" ] || fail "$svc has no health check to wait for" "$svc"
    mapfile -d '' test <"$d/health"
    read -r interval timeout retries start <"$d/health_times"
    deadline=$((SECONDS + ${start%.*} + ${interval%.*} * retries + ${timeout%.*}))
    until in_service "$svc" timeout "$timeout" "${test[@]}" >/dev/null 2>&1; do
        alive "${pid_of[$svc]}" || fail "$svc exited while its health check waited" "$svc"
        [ $SECONDS -lt $deadline ] || fail "$svc did not become healthy: ${test[*]}" "$svc"
        sleep 0.5
    done
    healthy[$svc]=1
    ok "$svc healthy (${test[*]})"
}

wait_completed() { # service: a one-shot service exited 0
    local svc=$1 pid=${pid_of[$1]} deadline=$((SECONDS + 120)) rc=0
    [ -n "${completed[$svc]:-}" ] && return 0
    while alive "$pid"; do
        [ $SECONDS -lt $deadline ] || fail "$svc did not finish in 120 s" "$svc"
        sleep 0.2
    done
    wait "$pid" || rc=$?
    [ "$rc" = 0 ] || fail "$svc exited with $rc" "$svc"
    completed[$svc]=1
    ok "$svc completed successfully"
}

publish() { # service: its published ports forwarded from the host, as docker-proxy does
    local svc=$1 d=$tmp/plan/svc/$1 host_ip published target net addr to="" deadline
    while read -r net addr; do
        [ "${internal_of[$net]}" = 0 ] && { to=$addr; break; }
    done <"$d/nets"
    while read -r host_ip published target; do
        [ -n "$to" ] || fail "$svc publishes ports but is on no network the host reaches"
        if ss -ltnH "sport = :$published" | awk '{print $4}' | grep -qE "^(0\.0\.0\.0|\*|\[::\]|${host_ip//./\\.}):"; then
            fail "port $published is taken on the host: $(ss -ltnpH "sport = :$published")"
        fi
        setsid socat "TCP-LISTEN:$published,bind=$host_ip,reuseaddr,fork" "TCP:$to:$target" 2>>"$tmp/logs/ports.log" &
        socats+=($!)
        forwarded[$!]=$host_ip:$published
        deadline=$((SECONDS + 10))
        until ss -ltnH "sport = :$published" | grep -q .; do
            [ $SECONDS -lt $deadline ] || fail "the forwarder for $host_ip:$published did not start" ports
            sleep 0.1
        done
        ok "$svc: $host_ip:$published published (to $to:$target)"
    done <"$d/ports"
}

# The intake-api's own client, made as an operator does on a first start (README, "Docker
# Compose"): with the auth-server's command line once it is healthy, its id and secret put
# in .env before the intake-api replicas start.
reader_made=
make_reader() {
    [ -n "$reader_made" ] && return 0
    [ -n "${pid_of[auth-server]:-}" ] || fail "the intake-api would start before the auth-server"
    wait_healthy auth-server
    local reader
    reader=$(in_service auth-server "$BIN_DIR/auth-server" client create --name intake-api \
        --scopes revocations:read) || fail "auth-server client create --scopes revocations:read" auth-server
    READER=$reader python3 - "$tmp"/plan/svc/*/env <<'PY'
import json, os, sys
reader = json.loads(os.environ["READER"])
client_id, secret, files = reader["client_id"], reader["client_secret"], sys.argv[1:]
values = {b"INTAKE_REVOCATIONS_CLIENT_ID": client_id, b"INTAKE_REVOCATIONS_CLIENT_SECRET": secret}
for path in files:
    entries = open(path, "rb").read().split(b"\0")
    out = [e.split(b"=", 1)[0] + b"=" + values[e.split(b"=", 1)[0]].encode()
           if e.split(b"=", 1)[0] in values else e for e in entries]
    open(path, "wb").write(b"\0".join(out))
PY
    reader_made=1
    ok "the intake-api's client made with auth-server client create --scopes revocations:read"
}

# Services in dependency order, each once its dependencies meet their conditions.
while read -r svc; do
    grep -qz '^INTAKE_REVOCATIONS_CLIENT_ID=$' "$tmp/plan/svc/$svc/env" && make_reader
    while read -r dep condition; do
        case $condition in
            service_started) alive "${pid_of[$dep]}" || fail "$dep is not running" "$dep" ;;
            service_healthy) wait_healthy "$dep" ;;
            service_completed_successfully) wait_completed "$dep" ;;
            *) fail "$svc: unknown depends_on condition $condition" ;;
        esac
    done <"$tmp/plan/svc/$svc/depends"
    start_service "$svc"
    echo "     started $svc: $(tr '\0' ' ' <"$tmp/plan/svc/$svc/argv")($(awk '{print $2}' "$tmp/plan/svc/$svc/nets" | paste -sd ' '))"
    publish "$svc"
done <"$tmp/plan/order"

# Ready: every partner-intake server answers /readyz beside its health URL (for the
# intake-api that means it has fetched the JWKS through the proxy); a service that has
# exited must be a one-shot that succeeded.
for svc in "${started[@]}"; do
    [ -n "${completed[$svc]:-}" ] && continue
    alive "${pid_of[$svc]}" || { wait_completed "$svc"; continue; }
    [ "$(meta "$svc" kind)" = partner ] || continue
    url=$(tr '\0' '\n' <"$tmp/plan/svc/$svc/env" | sed -n 's/^HEALTHCHECK_URL=//p')
    deadline=$((SECONDS + 90))
    until in_service "$svc" curl -fsS -o /dev/null "${url%/healthz}/readyz" 2>/dev/null; do
        alive "${pid_of[$svc]}" || { wait_completed "$svc"; continue 2; }
        [ $SECONDS -lt $deadline ] || fail "$svc is not ready: ${url%/healthz}/readyz" "$svc" proxy
        sleep 0.5
    done
    ok "$svc ready"
done
for svc in "${started[@]}"; do
    [ -n "${completed[$svc]:-}" ] && continue
    alive "${pid_of[$svc]}" || fail "$svc exited" "$svc"
    [ -e "$tmp/plan/svc/$svc/health" ] && wait_healthy "$svc"
done

# --- As a partner: only through the proxy's published ports, names from the host's hosts file.
env_of() { tr '\0' '\n' <"$tmp/plan/svc/$1/env" | sed -n "s/^$2=//p"; }
field() { python3 -c 'import json,sys; v=json.load(sys.stdin)
for k in sys.argv[1:]: v=v[int(k) if isinstance(v,list) else k]
print(v)' "$@"; }
request() { # curl arguments: sets status, the answer in $tmp/answer
    status=$(curl -sS --cacert "$ca" -o "$tmp/answer" -w '%{http_code}' "$@") || status=000
}
expect() { # status what services-whose-logs-to-show...
    local want=$1 what=$2
    shift 2
    [ "$status" = "$want" ] || fail "$what: $status, not $want: $(head -c 300 "$tmp/answer")" "$@"
}

issuer=$(env_of auth-server AUTH_ISSUER)
intake=https://localhost:$(sed -n 's/^PUBLIC_INTAKE_PORT=//p' "$tmp/compose/.env")
deadline=$((SECONDS + 30))
until request "$issuer/.well-known/oauth-authorization-server"; [ "$status" = 200 ] || [ $SECONDS -ge $deadline ]; do
    sleep 0.5
done
expect 200 "metadata at $issuer" auth-server proxy
[ "$(field issuer <"$tmp/answer")" = "$issuer" ] || fail "the metadata names issuer $(field issuer <"$tmp/answer")"
token_endpoint=$(field token_endpoint <"$tmp/answer")
jwks_uri=$(field jwks_uri <"$tmp/answer")
case "$token_endpoint $jwks_uri" in
    "$issuer/"*" $issuer/"*) ;;
    *) fail "the metadata's endpoints are not under the issuer: $token_endpoint $jwks_uri" ;;
esac
ok "metadata at $issuer/.well-known/oauth-authorization-server (token endpoint $token_endpoint)"
request "$jwks_uri"
expect 200 "JWKS at $jwks_uri" auth-server proxy
[ "$(field keys 0 kty <"$tmp/answer")" = RSA ] || fail "the JWKS has no RSA key: $(cat "$tmp/answer")"
ok "JWKS at $jwks_uri"

client=$(in_service auth-server "$BIN_DIR/auth-server" client create --name "Layout check $$" \
    --scopes enquiry:case:intake:create) || fail "auth-server client create" auth-server
client_id=$(field client_id <<<"$client")
client_secret=$(field client_secret <<<"$client")
ok "client $client_id made with auth-server client create"

request "$token_endpoint" -d grant_type=client_credentials -d "client_id=$client_id" \
    --data-urlencode "client_secret=$client_secret" -d scope=enquiry:case:intake:create
expect 200 "token at $token_endpoint" auth-server proxy
token=$(field access_token <"$tmp/answer")
ok "token from $token_endpoint"

email="layout-$$@example.com"
sed "s/EMAIL/$email/" bench/enquiry.json >"$tmp/enquiry.json"
partner() { # path [curl arguments]
    local path=$1
    shift
    request "$intake$path" -H "Authorization: Bearer $token" "$@"
}
partner /partners/external/intake -H 'Content-Type: application/json' -d @"$tmp/enquiry.json"
expect 201 "enquiry" intake-api-1 intake-api-2 proxy
reference=$(field reference <"$tmp/answer")
ok "enquiry: case $reference created"
partner /partners/external/intake/attach -H 'Content-Type: application/json' \
    -d "{\"email\":\"$email\",\"product_uuid\":\"3f1c2a9e-5b7d-4e21-9c3a-8d4f6b2e1a07\"}"
expect 200 "attach" intake-api-1 intake-api-2 proxy
field redirect <"$tmp/answer" | grep -q '^https://' || fail "attach gave no redirect: $(cat "$tmp/answer")"
ok "attach: redirect link"
partner "/partners/external/cases/$reference"
expect 200 "case read back" intake-api-1 intake-api-2 proxy
[ "$(field reference <"$tmp/answer")" = "$reference" ] || fail "case read back: $(cat "$tmp/answer")"
ok "case $reference read back ($(field status <"$tmp/answer"))"

# DPoP as a partner's library does it: the proofs name the public https URLs, so the services
# must know them behind the proxy (AUTH_ISSUER, INTAKE_PUBLIC_URL).
dpop=$(REQUESTS_CA_BUNDLE=$ca python3 scripts/dpop_through_proxy.py "$token_endpoint" "$intake" \
    "$client_id" "$client_secret" "layout-dpop-$$@example.com" 2>&1) ||
    fail "DPoP through the proxy: $dpop" intake-api-1 intake-api-2 proxy
ok "DPoP through the proxy: $dpop"

for url in "$intake/metrics" "$issuer/metrics"; do
    request "$url"
    expect 404 "$url" proxy
done
ok "/metrics not routed by the proxy (404 on $intake and $issuer)"

request "$intake/partners/external/intake" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    --data-binary @<(head -c 70000 /dev/zero | tr '\0' ' ')
expect 413 "a 70,000-byte enquiry" proxy
request "$token_endpoint" --data-binary @<(head -c 9000 /dev/zero | tr '\0' a)
expect 413 "a 9,000-byte token request" proxy
ok "bodies over the proxy's limits refused: 413 (64k intake, 8k token)"

# A client that sends part of a request head and stalls: nginx gives up after
# client_header_timeout and closes the connection without an answer (its log says 408).
slow=$(python3 - "$ca" "${intake##*:}" <<'PY'
import socket, ssl, sys, time
ctx = ssl.create_default_context(cafile=sys.argv[1])
start = time.monotonic()
conn = ctx.wrap_socket(socket.create_connection(("localhost", int(sys.argv[2]))), server_hostname="localhost")
conn.sendall(b"GET /partners/external/cases/1 HTTP/1.1\r\nHost: localhost\r\n")
conn.settimeout(30)
answer = b""
try:
    while chunk := conn.recv(4096):
        answer += chunk
except (ssl.SSLError, ConnectionResetError):
    pass
except socket.timeout:
    answer = b"still open"
print("%.1f %s" % (time.monotonic() - start, answer.split(b"\r\n")[0].decode() or "closed"))
PY
)
timeout_s=$(sed -n 's/.*client_header_timeout \([0-9]*\)s;.*/\1/p' "$tmp/compose/deploy/nginx/nginx.conf")
elapsed=${slow%% *} outcome=${slow#* }
[ "$outcome" = closed ] || fail "a stalled request head: '$outcome' after ${elapsed}s, not closed" proxy
awk -v e="$elapsed" -v t="$timeout_s" 'BEGIN{exit !(e >= t - 0.5 && e <= t + 3)}' ||
    fail "a stalled request head was closed after ${elapsed}s, not about ${timeout_s}s" proxy
deadline=$((SECONDS + 5))
until grep -q '" 408 ' "$tmp/plan/svc/proxy/fs/var/log/nginx/access.log" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "the proxy did not log the stalled request as 408" proxy
    sleep 0.2
done
ok "a stalled request head is closed after ${elapsed}s with no answer (client_header_timeout ${timeout_s}s; logged 408)"

# Prometheus: every target of deploy/prometheus/prometheus.yml scraped and up.
want=$(python3 -c 'import sys,yaml; c=yaml.safe_load(open(sys.argv[1]))
print(sum(len(s["targets"]) for j in c["scrape_configs"] for s in j["static_configs"]))' deploy/prometheus/prometheus.yml)
deadline=$((SECONDS + 90))
while :; do
    targets=$(in_service prometheus curl -fsS http://127.0.0.1:9090/api/v1/targets 2>/dev/null | python3 -c '
import json, sys
active = json.load(sys.stdin)["data"]["activeTargets"]
print(" ".join(t["labels"]["instance"] + "=" + t["health"] for t in active))' 2>/dev/null) || targets=
    up=$(tr ' ' '\n' <<<"$targets" | grep -c '=up$' || true)
    [ -n "$targets" ] && [ "$up" = "$want" ] && break
    [ $SECONDS -lt $deadline ] || fail "Prometheus targets not all up: ${targets:-none}" prometheus
    sleep 1
done
ok "Prometheus: all $want targets up ($targets)"

# One intake-api replica down: nginx passes requests to the other.
victim=$(grep -m1 '^intake-api' "$tmp/plan/order")
kill "${pid_of[$victim]}"
deadline=$((SECONDS + 15))
while alive "${pid_of[$victim]}"; do
    [ $SECONDS -lt $deadline ] || fail "$victim did not stop" "$victim"
    sleep 0.1
done
for i in $(seq 1 10); do
    if [ $((i % 2)) = 0 ]; then
        partner "/partners/external/cases/$reference"
    else
        partner /partners/external/intake -H 'Content-Type: application/json' -d @"$tmp/enquiry.json"
    fi
    case $status in 2??) ;; *) fail "request $i with $victim down: $status $(head -c 300 "$tmp/answer")" proxy intake-api-1 intake-api-2 ;; esac
done
ok "$victim stopped: 10 requests in a row through the proxy all answered 2xx"

echo "the production layout works as written"
