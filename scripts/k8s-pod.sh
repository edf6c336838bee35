#!/usr/bin/env bash
# Runs one container of the rendered manifests as its pod would, for scripts/check-k8s.sh:
# started by it under `unshare -m`, so every mount below is this process's alone. The
# image's binaries at /usr/local/bin, the cluster's names in /etc/hosts, the test
# certificate authority trusted, the root file system read-only with the pod's emptyDir
# volumes on it, then the command as the pod's user with no capabilities and no way to
# gain any, in the pod's environment alone.
#   k8s-pod.sh SPEC_DIR BIN_DIR HOSTS CA_BUNDLE UID
set -euo pipefail
spec=$1 bin_dir=$2 hosts=$3 ca_bundle=$4 uid=$5
# Read before the mounts below can hide them.
mapfile -d '' argv <"$spec/argv"
mapfile -d '' envs <"$spec/env"
mapfile -t volumes <"$spec/mounts"
mount --bind "$bin_dir" /usr/local/bin
mount --bind "$hosts" /etc/hosts
mount --bind "$ca_bundle" /etc/ssl/certs/ca-certificates.crt
mount -o remount,bind,ro /
for volume in "${volumes[@]}"; do
    read -r path size <<<"$volume"
    mount -t tmpfs -o "size=$size,mode=1777" tmpfs "$path"
done
cd /
exec setpriv --reuid "$uid" --regid "$uid" --clear-groups --no-new-privs \
    --inh-caps=-all --bounding-set=-all \
    env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/tmp "${envs[@]}" "${argv[@]}"
