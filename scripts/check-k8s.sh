#!/usr/bin/env bash
# Checks deploy/k8s: every kustomization renders; the output is valid for Kubernetes
# (kubernetes-validate, strict) and the Prometheus Operator (our schemas of its kinds,
# scripts/k8s_check.py); checkov finds nothing that is not justified in the manifest; the
# settings agree with one another and with alerts.yml and the OpenAPI documents. Then
# podman plays the production overlay with the image: the Secrets made as README.md says,
# the migration Jobs to completion (the auth-server's making the intake-api's own client),
# then the Deployments, behind nginx standing in for the ingress controller; every probe
# must pass within the time the manifest gives it, each pod must run as its manifest says,
# /metrics must answer on the admin port, a partner's token and enquiry must go through
# the Ingress, bearer and DPoP-bound (requests-oauth2client, installed when missing), the
# Job applied again must change nothing, and each server must drain within its grace period.
#   scripts/check-k8s.sh
# IMAGE (default localhost/partner-intake:check, which scripts/check-image.sh builds) is
# played under the name the overlay gives; the stand-ins for PostgreSQL, Redis and nginx
# are scripts/base-images.sh's. Needs root (podman, port 443 on its network), and the
# podman network 10.244.0.0/24 free; installs kubernetes-validate when missing (checkov:
# scripts/checkov.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
image=${IMAGE:-localhost/partner-intake:check}
# The Kubernetes versions validated against: the oldest the manifests are meant for, and
# the newest kubernetes-validate knows.
k8s_versions=(1.29.0 1.37.0)
# podman's network for the pods: inside the pod network the production overlay trusts
# for X-Forwarded-For (10.244.0.0/16), as the ingress controller's pods are.
net=pik8s
prefix=10.244.0

fail() { echo "FAIL $*" >&2; exit 1; }
for tool in kubectl podman openssl curl unshare; do
    command -v "$tool" >/dev/null || fail "$tool is not installed"
done
# podman, kube play included, with runc (scripts/podman-runtime.sh).
. scripts/podman-runtime.sh
python3 -c 'import yaml, jsonschema' 2>/dev/null || pip install -q pyyaml jsonschema
command -v kubernetes-validate >/dev/null || pip install -q kubernetes-validate==1.37.0
python3 -c 'import requests_oauth2client' 2>/dev/null || pip install -q 'requests-oauth2client==1.8.0'

work=$(mktemp -d)
cleanup() { rm -rf "$work"; }
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

# 5. The production overlay, played by podman on a network of its own inside the pod
# network the overlay trusts (AUTH_TRUSTED_PROXIES), with PostgreSQL and Redis beside it as
# the managed services, and the Secrets made as README.md tells operators to make them.
production="$work/production.yaml"
cat "$work/rendered/overlays-production-migrate.yaml" "$work/rendered/overlays-production.yaml" >"$production"
mapfile -t ingress_hosts < <(python3 scripts/k8s_check.py ingress-hosts "$production")
mapfile -t release_images < <(sed -n 's/^ *image: //p' "$production" | sort -u)
tls="$work/ca"
mkdir "$tls"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=check-k8s CA" \
    -keyout "$tls/ca.key" -out "$tls/ca.crt" 2>/dev/null
san=$(printf 'DNS:%s,' "${ingress_hosts[@]}")
openssl req -newkey rsa:2048 -nodes -subj "/CN=${ingress_hosts[0]}" \
    -keyout "$tls/tls.key" -out "$tls/tls.csr" 2>/dev/null
openssl x509 -req -in "$tls/tls.csr" -CA "$tls/ca.crt" -CAkey "$tls/ca.key" -CAcreateserial -days 1 \
    -extfile <(printf 'subjectAltName=%s\n' "${san%,}") -out "$tls/tls.crt" 2>/dev/null
# The cluster's trust store: the system's and the certificate authority the Ingresses' is from.
cat /etc/ssl/certs/ca-certificates.crt "$tls/ca.crt" >"$work/ca-bundle.crt"

# The engine's default limits are above what runc may set here (scripts/podman-limits.sh).
printf '[containers]\ndefault_ulimits = [%s]\n' \
    "$(scripts/podman-limits.sh | sed 's/[^ ]*/"&"/g; s/ /, /')" >"$work/containers.conf"
export CONTAINERS_CONF=$work/containers.conf
# The stand-ins base-images.sh makes for the compose file's images, by name.
names=$(scripts/base-images.sh --names) || fail "scripts/base-images.sh cannot name the base images"
mapfile -t stand_ins <<<"$names"
stand_in() { printf '%s\n' "${stand_ins[@]}" | grep -m1 "/$1:" || fail "base-images.sh makes no $1 image"; }
postgres_image=$(stand_in postgres)
redis_image=$(stand_in redis)
nginx_image=$(stand_in nginx)
for base in "$image" "$postgres_image" "$redis_image" "$nginx_image"; do
    podman image exists "$base" || fail "no image $base (scripts/check-image.sh and scripts/base-images.sh make them)"
done
secret_names=(auth-database intake-database auth-key-encryption-key intake-key-encryption-key redis
    intake-revocations-client auth-server-tls intake-api-tls)
play="$work/play"
remove_all() {
    local pod
    if [ -f "$play/workloads" ]; then
        while read -r _ _ pod _; do podman pod rm -f -t 0 "$pod" >/dev/null 2>&1 || true; done <"$play/workloads"
        xargs -r podman volume rm -f <"$play/volumes" >/dev/null 2>&1 || true
    fi
    podman rm -f -v -t 0 "$net-ingress" "$net-postgres" "$net-redis" >/dev/null 2>&1 || true
    podman network rm -f "$net" >/dev/null 2>&1 || true
    podman secret rm "${secret_names[@]}" >/dev/null 2>&1 || true
    for tagged in "${release_images[@]}"; do
        [ "$tagged" = "$image" ] || podman untag "$tagged" "$tagged" >/dev/null 2>&1 || true
    done
}
# What a run cut off before its clean-up left: its pods are found by their names.
for pod in $(podman pod ls --format '{{.Name}}' | grep -E '^(auth-server|intake-api)' || true); do
    podman pod rm -f -t 0 "$pod" >/dev/null
done
remove_all
trap 'remove_all; cleanup' EXIT
podman network create --subnet "$prefix.0/24" "$net" >/dev/null ||
    fail "podman network create --subnet $prefix.0/24 (does another network hold it? podman network ls)"
pg_password=$(openssl rand -hex 16)
podman run -d --name "$net-postgres" --network "$net" --ip "$prefix.2" \
    -e POSTGRES_USER=partner -e POSTGRES_PASSWORD="$pg_password" -e POSTGRES_DB=partner \
    -v "$PWD/deploy/postgres/init.sql:/docker-entrypoint-initdb.d/init.sql:ro" "$postgres_image" >/dev/null
podman run -d --name "$net-redis" --network "$net" --ip "$prefix.3" "$redis_image" >/dev/null
for tagged in "${release_images[@]}"; do podman tag "$image" "$tagged"; done

mkdir "$work/secrets"
secret() { # kubectl create secret's arguments
    kubectl -n partner-intake create secret "$@" --dry-run=client -o json >"$work/secrets/$2.json"
}
secret generic auth-database --from-literal=url="postgres://partner:$pg_password@$prefix.2:5432/auth"
secret generic intake-database --from-literal=url="postgres://partner:$pg_password@$prefix.2:5432/intake"
secret generic auth-key-encryption-key --from-literal=key="$(openssl rand -base64 32)"
secret generic intake-key-encryption-key --from-literal=key="$(openssl rand -base64 32)"
secret generic redis --from-literal=url="redis://$prefix.3:6379"
secret generic intake-revocations-client --from-literal=client_id=intake-api \
    --from-literal=client_secret="$(openssl rand -base64 32)"
secret tls auth-server-tls --cert="$tls/tls.crt" --key="$tls/tls.key"
secret tls intake-api-tls --cert="$tls/tls.crt" --key="$tls/tls.key"
# podman 4.3's kube play takes no Secret: a secretKeyRef reads the podman secret of that
# name, which holds the Secret's data.
for name in "${secret_names[@]}"; do
    [ -f "$work/secrets/$name.json" ] || fail "no Secret $name made"
    python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["data"]))' \
        "$work/secrets/$name.json" | podman secret create "$name" - >/dev/null
done
python3 scripts/k8s_check.py play "$production" "$work/secrets" "$prefix" "$work/ca-bundle.crt" "$play"

show_log() { echo "--- $1's log (last lines)" >&2; podman logs --tail 30 "$1" >&2 2>&1 || true; }
state() { podman inspect --format '{{.State.Status}} {{.State.ExitCode}}' "$1" 2>/dev/null || echo gone; }

# Each setting a manifest gives must be one the command reads: a misspelt name would
# otherwise leave the built-in default in force, unnoticed.
for argv_file in "$play"/commands/*.argv; do
    mapfile -d '' argv <"$argv_file"
    { read -r what; mapfile -t names; } <"${argv_file%.argv}.env"
    podman run --rm --network none "$image" "${argv[@]}" --help >"$work/help" 2>&1 ||
        fail "$what: ${argv[*]} --help: $(cat "$work/help")"
    python3 scripts/k8s_check.py env-names "$work/help" >"$work/known"
    for var in "${names[@]}"; do
        grep -qx "$var" "$work/known" || fail "$what sets $var, which \`${argv[*]}\` does not read"
    done
done
echo "ok   every environment variable the manifests set is one their command reads"

deadline=$((SECONDS + 60))
until podman exec "$net-postgres" pg_isready -q -h 127.0.0.1 -U partner -d partner; do
    [ "$SECONDS" -lt "$deadline" ] || { show_log "$net-postgres"; fail "PostgreSQL did not start within 60 s"; }
    sleep 0.5
done

# Runs a Job's pod to completion within its deadline; prints its log.
run_job() { # name ip container deadline
    podman kube play --network "$net" --ip "$2" "$play/$1.yaml" >"$work/play.log" 2>&1 ||
        { show_log "$3"; fail "podman kube play $1: $(grep -v syslog "$work/play.log" | tail -n 5)"; }
    local until=$((SECONDS + $4)) now
    while now=$(state "$3") && [ "$now" != "exited 0" ]; do
        case $now in exited* | gone) show_log "$3"; fail "Job $1: $3 ended $now" ;; esac
        [ "$SECONDS" -lt "$until" ] || { show_log "$3"; fail "Job $1 still running after $4 s"; }
        sleep 0.2
    done
    podman logs "$3" 2>&1
}
# The release's first step: its Jobs, each to completion. The auth-server's makes the
# intake-api's own client from the intake-revocations-client Secret.
outcome() { sed -n 's/.*"outcome": "\([a-z]*\)".*/\1/p' "$work/job.log"; }
while read -r kind name pod container ip uid deadline memory admin; do
    [ "$kind" = Job ] || continue
    run_job "$name" "$ip" "$container" "$deadline" >"$work/job.log"
    if [ -n "$(outcome)" ]; then
        [ "$(outcome)" = created ] || fail "Job $name: the intake-api's client was $(outcome), not created"
        client_job=("$name" "$pod" "$container" "$ip" "$deadline")
        echo "ok   Job $name completed: the intake-api's client created"
    else
        echo "ok   Job $name completed"
    fi
done <"$play/workloads"
[ -n "${client_job[0]:-}" ] || fail "no Job makes the intake-api's own client"

# nginx in the ingress controller's place, sending each route to its Service's pods.
podman run -d --name "$net-ingress" --network "$net" --ip "$prefix.10" \
    -v "$play/nginx.conf:/etc/nginx/nginx.conf:ro" -v "$play/tls:/etc/ingress/tls:ro" \
    "$nginx_image" nginx -e stderr -g 'daemon off;' >/dev/null
ingress_ip=$prefix.10
deadline=$((SECONDS + 10))
until curl -s -o /dev/null -k "https://$ingress_ip/"; do
    [ "$(state "$net-ingress")" = "running 0" ] || { show_log "$net-ingress"; fail "nginx did not start"; }
    [ "$SECONDS" -lt "$deadline" ] || { show_log "$net-ingress"; fail "nginx did not answer within 10 s"; }
    sleep 0.2
done

declare -A ips_of
while read -r kind name pod container ip rest; do
    [ "$kind" = Deployment ] && ips_of[$name]+=" --ip $ip"
done <"$play/workloads"
for name in "${!ips_of[@]}"; do
    # shellcheck disable=SC2086 # one --ip per replica
    podman kube play --network "$net" ${ips_of[$name]} "$play/$name.yaml" >"$work/play.log" 2>&1 ||
        fail "podman kube play $name: $(grep -v syslog "$work/play.log" | tail -n 5)"
done

# Every pod as its manifest says: its user, no capabilities and no way to gain any, its
# memory limit; every probe at the port and path the manifest names, the startup probe
# first, each within the time the manifest gives it before the kubelet would act.
while read -r kind name pod container ip uid grace memory admin; do
    [ "$kind" = Deployment ] || continue
    while read -r probe port path bound; do
        until=$((SECONDS + bound))
        until curl -fsS -o /dev/null -m 2 "http://$ip:$port$path" 2>/dev/null; do
            [ "$(state "$container")" = "running 0" ] || { show_log "$container"; fail "$container: $(state "$container")"; }
            [ "$SECONDS" -lt "$until" ] || { show_log "$container"; fail "$pod: $path did not answer 200 within $bound s"; }
            sleep 0.2
        done
        echo "ok   $pod: $probe http://$ip:$port$path answers 200 (bound $bound s)"
    done <"$play/$name.probes"
    pid=$(podman inspect --format '{{.State.Pid}}' "$container")
    read -r real_uid < <(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")
    [ "$real_uid" = "$uid" ] || fail "$container runs as uid $real_uid, not $uid"
    grep -q '^CapEff:[[:space:]]*0*$' "/proc/$pid/status" || fail "$container has capabilities"
    grep -q '^NoNewPrivs:[[:space:]]*1$' "/proc/$pid/status" || fail "$container may gain privileges"
    [ "$(podman inspect --format '{{.HostConfig.ReadonlyRootfs}} {{.HostConfig.Memory}}' "$container")" = "true $memory" ] ||
        fail "$container: not a read-only root with the memory limit $memory"
    [ "$admin" != - ] || fail "$name has no port named admin"
    # Read whole before the match: grep -q stops at the first line, and under pipefail the
    # curl it leaves writing into a closed pipe would fail the check.
    metrics=$(curl -fsS -m 5 "http://$ip:$admin/metrics") && grep -q '^build_info{' <<<"$metrics" ||
        { show_log "$container"; fail "$pod: /metrics on the admin port $admin has no build_info"; }
    echo "ok   $pod: uid $uid, no capabilities, read-only root, $((memory >> 20)) MiB limit, /metrics on the admin port"
done <"$play/workloads"

# A partner, through the Ingress: a token from the auth-server's host and an enquiry to the
# intake-api's, which verifies it with the keys it fetched from the issuer's https URL.
# The paths and limits the Ingresses set hold too.
host_of() { # Ingress name
    awk -v n="$1" '$2 == n { print $1 }' "$play/ingress-hosts"
}
auth_host=$(host_of auth-server)
intake_host=$(host_of intake-api)
via_ingress() {
    curl -sS -m 10 -o "$work/body" -w '%{http_code}' --cacert "$tls/ca.crt" \
        --resolve "$auth_host:443:$ingress_ip" --resolve "$intake_host:443:$ingress_ip" "$@"
}
# An operator's command, in a replica (kubectl exec deploy/auth-server -- ...).
auth_container=$(awk '$1 == "Deployment" && $2 == "auth-server" { print $4; exit }' "$play/workloads")
podman exec "$auth_container" auth-server client create --name check-k8s \
    --scopes enquiry:case:intake:create -o json >"$work/client.json" || fail "client create in $auth_container"
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
# requests has no --resolve: the partner gets a hosts file that sends the Ingresses' hosts
# to nginx.
dpop=$(unshare -m --propagation private bash -c 'mount --bind "$1" /etc/hosts && shift && exec "$@"' \
    _ "$play/hosts" env REQUESTS_CA_BUNDLE="$tls/ca.crt" python3 scripts/dpop_through_proxy.py \
    "https://$auth_host/oauth/token" "https://$intake_host" "$(field "$work/client.json" client_id)" \
    "$(field "$work/client.json" client_secret)" check-k8s-dpop@example.com 2>&1) ||
    fail "DPoP through the Ingress: $dpop"
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

# The next release's Job, or the same one applied again, finds the client as declared.
podman pod rm -f -t 0 "${client_job[1]}" >/dev/null 2>>"$work/podman.log"
run_job "${client_job[0]}" "${client_job[3]}" "${client_job[2]}" "${client_job[4]}" >"$work/job.log"
[ "$(outcome)" = unchanged ] || fail "Job ${client_job[0]} again: the intake-api's client was $(outcome), not unchanged"
echo "ok   Job ${client_job[0]} again: the intake-api's client unchanged"

# Within the memory limit, and drained within the grace period the manifest gives after
# its preStop pause, on SIGTERM as the kubelet sends it.
while read -r kind name pod container ip uid grace memory admin; do
    [ "$kind" = Deployment ] || continue
    pid=$(podman inspect --format '{{.State.Pid}}' "$container")
    peak=$(awk '/^VmHWM:/ { print $2 }' "/proc/$pid/status")
    [ "$memory" -eq 0 ] || [ "$peak" -lt $((memory >> 10)) ] ||
        fail "$pod peaked at $peak kB, over its memory limit of $((memory >> 10)) kB"
    start=$SECONDS
    podman stop -t "$grace" "$container" >/dev/null 2>>"$work/podman.log"
    [ "$(state "$container")" = "exited 0" ] || { show_log "$container"; fail "$container stopped as $(state "$container")"; }
    echo "ok   $pod: peak memory $((peak >> 10)) MiB of $((memory >> 20)); stopped within $((SECONDS - start)) s of SIGTERM (grace ${grace} s)"
done <"$play/workloads"
echo "deploy/k8s checked: rendered, validated, scanned, and played by podman as the production overlay describes"
