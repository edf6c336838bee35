#!/usr/bin/env bash
# Checks deploy/k8s: every kustomization renders; the output is valid for Kubernetes
# (kubernetes-validate, strict) and the Prometheus Operator (our schemas of its kinds,
# scripts/k8s_check.py); checkov finds nothing that is not justified in the manifest; the
# settings agree with one another and with alerts.yml and the OpenAPI documents. Then it
# runs what the production overlay describes: the migration Jobs to completion, then the
# Deployments, each as its pod would run (scripts/k8s-pod.sh), behind nginx standing in
# for the ingress controller; every probe must pass within the time the manifest gives
# it, /metrics must answer on the admin port, a partner's token and enquiry must go
# through the Ingress, bearer and DPoP-bound (requests-oauth2client, installed when
# missing), and each server must drain within its grace period.
#   BIN_DIR=target/debug scripts/check-k8s.sh
# Needs root (mount namespaces, port 443), PostgreSQL on 127.0.0.1:5432 (trust, user
# postgres; a database per service is created and dropped) and Redis on 127.0.0.1:6379;
# installs kubernetes-validate when missing (checkov: scripts/checkov.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BIN_DIR:?set BIN_DIR to the directory of the auth-server and intake-api binaries}"
BIN_DIR=$(cd "$BIN_DIR" && pwd)
postgres=${K8S_CHECK_POSTGRES:-postgres://postgres@127.0.0.1:5432}
redis=${K8S_CHECK_REDIS:-redis://127.0.0.1:6379}
# The Kubernetes versions validated against: the oldest the manifests are meant for, and
# the newest kubernetes-validate knows.
k8s_versions=(1.29.0 1.37.0)
ingress_ip=127.0.0.10

fail() { echo "FAIL $*" >&2; exit 1; }
for tool in kubectl nginx openssl psql curl unshare setpriv; do
    command -v "$tool" >/dev/null || fail "$tool is not installed"
done
[ -x "$BIN_DIR/auth-server" ] && [ -x "$BIN_DIR/intake-api" ] ||
    fail "$BIN_DIR has no auth-server and intake-api binaries"
python3 -c 'import yaml, jsonschema' 2>/dev/null || pip install -q pyyaml jsonschema
command -v kubernetes-validate >/dev/null || pip install -q kubernetes-validate==1.37.0
python3 -c 'import requests_oauth2client' 2>/dev/null || pip install -q 'requests-oauth2client==1.8.0'

work=$(mktemp -d)
pids=()
databases=()
ingress_pid=
cleanup() {
    local pid db
    # nginx's master stops its workers on TERM; killed outright, it would leave them.
    if [ -n "$ingress_pid" ]; then kill -TERM "$ingress_pid" 2>/dev/null && wait "$ingress_pid" 2>/dev/null || true; fi
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    for db in "${databases[@]}"; do
        psql -q "$postgres/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

# 1. Every kustomization renders (components only through the ones that use them).
mkdir "$work/rendered"
while IFS= read -r file; do
    dir=$(dirname "$file")
    grep -q '^kind: Component' "$file" && continue
    name=${dir#deploy/k8s/}
    out="$work/rendered/${name//\//-}.yaml"
    kubectl kustomize "$dir" >"$out" 2>"$work/kustomize.err" ||
        fail "kubectl kustomize $dir: $(cat "$work/kustomize.err")"
    echo "ok   rendered $dir"
done < <(find deploy/k8s -name kustomization.yaml | sort)
rendered=("$work"/rendered/*.yaml)

# 2. Built-in kinds against Kubernetes' schemas, rejecting unknown fields. kubernetes-validate
# only warns on a kind it has no schema for, so the Prometheus Operator's kinds are taken
# out and checked against ours (strict in the same way), and any warning left fails.
for file in "${rendered[@]}"; do
    python3 scripts/k8s_check.py split "$file" "$work/k8s.yaml" "$work/crds.yaml"
    for version in "${k8s_versions[@]}"; do
        if ! kubernetes-validate --strict --quiet -k "$version" "$work/k8s.yaml" >"$work/validate.out" 2>&1 ||
            grep -q . "$work/validate.out"; then
            fail "$(basename "$file") against Kubernetes $version: $(cat "$work/validate.out")"
        fi
    done
    python3 scripts/k8s_check.py crds "$work/crds.yaml" >/dev/null
    echo "ok   $(basename "$file") is valid for Kubernetes ${k8s_versions[*]} and the Prometheus Operator"
done

# 3. checkov, every check on what is deployed; the bases alone name no release, so their
# image tag (CKV_K8S_14) is checked through the overlays. Findings the manifests justify
# are skipped there, each with its reason.
checkov_run() {
    scripts/checkov.sh --quiet --compact --skip-download --framework kubernetes "$@" \
        >"$work/checkov.out" 2>&1 || fail "checkov: $(cat "$work/checkov.out")"
}
mkdir "$work/deployed" "$work/bases"
for file in "${rendered[@]}"; do
    case $(basename "$file") in
        overlays-* | ingress-nginx.yaml) cp "$file" "$work/deployed/" ;;
        *) cp "$file" "$work/bases/" ;;
    esac
done
checkov_run -d "$work/deployed"
checkov_run -d "$work/bases" --skip-check CKV_K8S_14
echo "ok   checkov: no unjustified finding"

# 4. What no schema says.
python3 scripts/k8s_check.py lint "${rendered[@]}"

# 5. The production overlay, run. Its Secrets are the check's to supply: a fresh database
# per service, the local Redis, a new key-encryption key and a certificate for the
# Ingresses' hosts from a certificate authority made here.
production="$work/production.yaml"
cat "$work/rendered/overlays-production-migrate.yaml" "$work/rendered/overlays-production.yaml" >"$production"
mapfile -t ingress_hosts < <(python3 scripts/k8s_check.py ingress-hosts "$production")
tls="$work/ca"
mkdir "$tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=check-k8s CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
san=$(printf 'DNS:%s,' "${ingress_hosts[@]}")
openssl req -newkey rsa:2048 -nodes -subj "/CN=${ingress_hosts[0]}" \
    -keyout "$tls/tls.key" -out "$tls/tls.csr" 2>/dev/null
openssl x509 -req -in "$tls/tls.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial -days 1 \
    -extfile <(printf 'subjectAltName=%s\n' "${san%,}") -out "$tls/tls.crt" 2>/dev/null
cat /etc/ssl/certs/ca-certificates.crt "$tls/ca.crt" >"$work/ca-bundle.crt"
for service in auth intake; do
    db="k8s_check_${service}_$$"
    psql -q "$postgres/postgres" -c "CREATE DATABASE $db" >/dev/null
    databases+=("$db")
done
# The intake-api's own client, made as README.md says: with the auth-server's command line,
# once its database is migrated (the migration Job below then finds nothing left to do).
kek=$(openssl rand -base64 32)
AUTH_DATABASE_URL="$postgres/k8s_check_auth_$$" "$BIN_DIR/auth-server" migrate >/dev/null 2>&1 ||
    fail "auth-server migrate"
AUTH_DATABASE_URL="$postgres/k8s_check_auth_$$" AUTH_KEY_ENCRYPTION_KEY=$kek "$BIN_DIR/auth-server" \
    client create --name intake-api --scopes revocations:read -o json >"$work/reader.json" ||
    fail "auth-server client create --scopes revocations:read"
AUTH_DB="$postgres/k8s_check_auth_$$" INTAKE_DB="$postgres/k8s_check_intake_$$" REDIS="$redis" \
    KEK=$kek INTAKE_KEK=$(openssl rand -base64 32) TLS_DIR="$tls" READER="$work/reader.json" \
    python3 - >"$work/secrets.json" <<'PY'
import json, os
reader = json.load(open(os.environ["READER"]))
tls = {k: open(os.path.join(os.environ["TLS_DIR"], k)).read() for k in ("tls.crt", "tls.key")}
print(json.dumps({
    "auth-database": {"url": os.environ["AUTH_DB"]},
    "intake-database": {"url": os.environ["INTAKE_DB"]},
    "auth-key-encryption-key": {"key": os.environ["KEK"]},
    "intake-key-encryption-key": {"key": os.environ["INTAKE_KEK"]},
    "intake-revocations-client": {k: reader[k] for k in ("client_id", "client_secret")},
    "redis": {"url": os.environ["REDIS"]},
    "auth-server-tls": tls,
    "intake-api-tls": tls,
}))
PY
plan="$work/plan"
python3 scripts/k8s_check.py plan "$production" "$work/secrets.json" "$plan"

logs="$work/logs"
mkdir "$logs"
show_log() { echo "--- $1's log (last lines)" >&2; tail -n 30 "$logs/$1.log" >&2; }

# Each setting a manifest gives must be one the command reads: a misspelt name would
# otherwise leave the built-in default in force, unnoticed.
while read -r kind name ip uid grace memory admin; do
    mapfile -d '' argv <"$plan/$name/argv"
    env -i "$BIN_DIR/${argv[0]}" "${argv[@]:1}" --help >"$work/help" 2>&1 ||
        fail "$name: ${argv[*]} --help: $(cat "$work/help")"
    python3 scripts/k8s_check.py env-names "$work/help" >"$work/known"
    while read -r var; do
        grep -qx "$var" "$work/known" || fail "$kind $name sets $var, which \`${argv[*]}\` does not read"
    done <"$plan/$name/env-names"
done <"$plan/workloads"
echo "ok   every environment variable the manifests set is one their command reads"

# A pod: its own loopback address (127.0.0.0/8 is all the loopback's) for its Service's
# names (plan/hosts), its own mount namespace. Logs go where the script reads them.
start_pod() { # name ip uid
    unshare -m --propagation private bash scripts/k8s-pod.sh "$plan/$1" "$BIN_DIR" "$plan/hosts" \
        "$work/ca-bundle.crt" "$3" </dev/null >"$logs/$1.log" 2>&1 &
    pids+=("$!")
    pod_pid=$!
}

# Waits, up to a deadline, for a URL to answer 200; fails early if the pod's process died.
wait_200() { # name pid url seconds
    local deadline=$((SECONDS + $4))
    until curl -fsS -o /dev/null -m 2 "$3" 2>/dev/null; do
        kill -0 "$2" 2>/dev/null || { show_log "$1"; fail "$1 exited before $3 answered 200"; }
        [ "$SECONDS" -lt "$deadline" ] || { show_log "$1"; fail "$1: $3 did not answer 200 within $4 s"; }
        sleep 0.2
    done
}

# Waits, up to a deadline, for a pod's process to exit 0.
wait_exit() { # name pid seconds
    local deadline=$((SECONDS + $3)) code=0
    while kill -0 "$2" 2>/dev/null; do
        [ "$SECONDS" -lt "$deadline" ] || { show_log "$1"; fail "$1 still running after $3 s"; }
        sleep 0.2
    done
    wait "$2" || code=$?
    [ "$code" -eq 0 ] || { show_log "$1"; fail "$1 exited with $code"; }
}

declare -A pod_pids
# Jobs first, each to completion within its deadline, as the release's first step.
while read -r kind name ip uid deadline memory admin; do
    [ "$kind" = Job ] || continue
    start_pod "$name" "$ip" "$uid"
    wait_exit "$name" "$pod_pid" "$deadline"
    echo "ok   $name completed"
done <"$plan/workloads"

# nginx in the ingress controller's place, its upstreams found through the cluster's names.
unshare -m --propagation private bash -c 'mount --bind "$1" /etc/hosts && exec nginx -e stderr -c "$2" -g "daemon off;"' \
    _ "$plan/hosts" "$plan/nginx.conf" </dev/null >"$logs/ingress.log" 2>&1 &
pids+=("$!")
ingress_pid=$!
deadline=$((SECONDS + 10))
until curl -s -o /dev/null -k "https://$ingress_ip/"; do
    kill -0 "$ingress_pid" 2>/dev/null || { show_log ingress; fail "nginx did not start"; }
    [ "$SECONDS" -lt "$deadline" ] || { show_log ingress; fail "nginx did not answer within 10 s"; }
    sleep 0.2
done

while read -r kind name ip uid grace memory admin; do
    [ "$kind" = Deployment ] || continue
    start_pod "$name" "$ip" "$uid"
    pod_pids[$name]=$pod_pid
done <"$plan/workloads"

# Every probe at the port and path the manifest names, the startup probe first, each
# within the time the manifest gives it before the kubelet would act.
while read -r kind name ip uid grace memory admin; do
    [ "$kind" = Deployment ] || continue
    while read -r probe port path bound; do
        wait_200 "$name" "${pod_pids[$name]}" "http://$ip:$port$path" "$bound"
        echo "ok   $name: $probe http://$ip:$port$path answers 200 (bound ${bound} s)"
    done <"$plan/$name/probes"
    [ "$admin" != - ] || fail "$name has no port named admin"
    curl -fsS -m 5 "http://$ip:$admin/metrics" | grep -q '^build_info{' ||
        { show_log "$name"; fail "$name: /metrics on the admin port $admin has no build_info"; }
    echo "ok   $name: /metrics answers on the admin port $admin"
done <"$plan/workloads"

# A partner, through the Ingress: a token from the auth-server's host and an enquiry to the
# intake-api's, which verifies it with the keys it fetched from the issuer's https URL.
# The paths and limits the Ingresses set hold too.
host_of() { # Ingress name
    awk -v n="$1" '$2 == n { print $1 }' "$plan/ingress-hosts"
}
auth_host=$(host_of auth-server)
intake_host=$(host_of intake-api)
via_ingress() {
    curl -sS -m 10 -o "$work/body" -w '%{http_code}' --cacert "$tls/ca.crt" \
        --resolve "$auth_host:443:$ingress_ip" --resolve "$intake_host:443:$ingress_ip" "$@"
}
auth_db_url=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["auth-database"]["url"])' "$work/secrets.json")
AUTH_DATABASE_URL=$auth_db_url AUTH_KEY_ENCRYPTION_KEY=$kek "$BIN_DIR/auth-server" client create --name check-k8s \
    --scopes enquiry:case:intake:create -o json >"$work/client.json"
field() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$@"; }
status=$(via_ingress "https://$auth_host/oauth/token" -d grant_type=client_credentials \
    -d "client_id=$(field "$work/client.json" client_id)" \
    -d "client_secret=$(field "$work/client.json" client_secret)" -d scope=enquiry:case:intake:create)
[ "$status" = 200 ] || fail "token through the Ingress: $status $(cat "$work/body")"
token=$(field "$work/body" access_token)
enquiry=$(sed 's/EMAIL/check-k8s@example.com/' bench/enquiry.json)
status=$(via_ingress "https://$intake_host/partners/external/intake" \
    -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$enquiry")
case $status in 2??) ;; *) fail "enquiry through the Ingress: $status $(cat "$work/body")" ;; esac
echo "ok   a token from https://$auth_host/ is accepted by https://$intake_host/ ($status)"
# DPoP as a partner's library does it: the proofs name the public https URLs, so the
# services must know them behind the controller's TLS (AUTH_ISSUER, INTAKE_PUBLIC_URL).
# requests has no --resolve: the partner gets the cluster's hosts file, which sends the
# Ingresses' hosts to nginx.
dpop=$(unshare -m --propagation private bash -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' \
    _ "$plan/hosts" env REQUESTS_CA_BUNDLE="$tls/ca.crt" python3 scripts/dpop_through_proxy.py \
    "https://$auth_host/oauth/token" "https://$intake_host" "$(field "$work/client.json" client_id)" \
    "$(field "$work/client.json" client_secret)" check-k8s-dpop@example.com 2>&1) ||
    { show_log intake-api; fail "DPoP through the Ingress: $dpop"; }
echo "ok   DPoP through the Ingress: $dpop"
for host in "$auth_host" "$intake_host"; do
    for path in /metrics /healthz /readyz; do
        status=$(via_ingress "https://$host$path")
        [ "$status" = 404 ] || fail "https://$host$path answered $status through the Ingress, not 404"
    done
done
echo "ok   /metrics, /healthz and /readyz are not routed from outside"
head -c 9000 /dev/zero | tr '\0' a >"$work/9k"
head -c 70000 /dev/zero | tr '\0' a >"$work/70k"
status=$(via_ingress "https://$auth_host/oauth/token" --data-binary "@$work/9k")
[ "$status" = 413 ] || fail "9 kB to the token endpoint answered $status, not 413"
status=$(via_ingress "https://$intake_host/partners/external/intake" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' --data-binary "@$work/70k")
[ "$status" = 413 ] || fail "70 kB to the intake answered $status, not 413"
echo "ok   bodies over the Ingresses' limits are refused (413)"

# Within the memory limit, and drained within the grace period the manifest gives after
# its preStop pause, on SIGTERM as the kubelet sends it.
while read -r kind name ip uid grace memory admin; do
    [ "$kind" = Deployment ] || continue
    pid=${pod_pids[$name]}
    peak=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
    [ "$memory" -eq 0 ] || [ "$peak" -lt "$memory" ] ||
        fail "$name peaked at $peak kB, over its memory limit of $memory kB"
    kill -TERM "$pid"
    wait_exit "$name" "$pid" "$grace"
    echo "ok   $name: peak memory $((peak / 1024)) MiB of $((memory / 1024)); stopped within ${grace} s of SIGTERM"
done <"$plan/workloads"
echo "deploy/k8s checked: rendered, validated, scanned, and run as the production overlay describes"
