# Sourced by the scripts that run podman (base-images.sh, check-image.sh, check-layout.sh,
# check-k8s.sh): every podman command they run, the API service docker-compose talks to
# included, uses the OCI runtime named here, runc, whatever else the machine has. Where crun
# is installed too (Debian's podman pulls it in unless runc is asked for in the same
# install) podman prefers it, and crun refuses this machine's cgroups ("cgroups in hybrid
# mode not supported"). runc is installed when missing, as .ci/run installs packages.
#   . scripts/podman-runtime.sh       # then `podman ...` runs with --runtime runc
#   bash scripts/podman-runtime.sh    # prints the runtime podman will use, and checks it
# PODMAN_RUNTIME (default runc) names another runtime, for a machine where runc cannot run.

PODMAN_RUNTIME=${PODMAN_RUNTIME:-runc}

podman_runtime_die() { echo "$*" >&2; exit 1; }

type -P podman >/dev/null || podman_runtime_die "podman is not installed (apt-get install podman runc)"
if ! type -P "$PODMAN_RUNTIME" >/dev/null; then
    [ "$PODMAN_RUNTIME" = runc ] || podman_runtime_die "the runtime $PODMAN_RUNTIME (PODMAN_RUNTIME) is not installed"
    echo "  - installing runc: podman's runtime here" >&2
    # apt-get install, with the package lists refreshed only when they are too old to have it.
    apt-get install -y runc >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y runc >/dev/null; } ||
        podman_runtime_die "runc is not installed and could not be (apt-get install runc)"
fi
# Containers find each other by name (check-image's two, the compose file's services): with
# podman's CNI network backend that is the dnsname plugin, which Debian's podman only
# recommends, so an install without recommends leaves networks without DNS and every name
# unresolved.
if [ "$(command podman info --format '{{.Host.NetworkBackend}}' 2>/dev/null)" = cni ] && [ ! -x /usr/lib/cni/dnsname ]; then
    echo "  - installing the dnsname CNI plugin: containers reach each other by name" >&2
    apt-get install -y golang-github-containernetworking-plugin-dnsname >/dev/null 2>&1 ||
        { apt-get update >/dev/null && apt-get install -y golang-github-containernetworking-plugin-dnsname >/dev/null; } ||
        podman_runtime_die "podman's networks have no DNS: apt-get install golang-github-containernetworking-plugin-dnsname"
fi
# A path, so podman looks for no runtime of that name in its own configuration.
PODMAN_RUNTIME_PATH=$(type -P "$PODMAN_RUNTIME")
export PODMAN_RUNTIME PODMAN_RUNTIME_PATH

# Every `podman` of the script that sources this, in functions and subshells too. A build's
# RUN steps do not follow the global flag (podman 4.3): the build is told on its own.
podman() {
    if [ "${1:-}" = build ]; then
        shift
        command podman --runtime "$PODMAN_RUNTIME_PATH" build --runtime "$PODMAN_RUNTIME_PATH" "$@"
    else
        command podman --runtime "$PODMAN_RUNTIME_PATH" "$@"
    fi
}

# The runtime podman reports it will use: the one named, or the scripts stop here rather
# than fail later inside a build.
podman_runtime_check() {
    local used
    used=$(podman info --format '{{.Host.OCIRuntime.Path}}' 2>&1) ||
        podman_runtime_die "podman info with --runtime $PODMAN_RUNTIME_PATH failed: $used"
    [ "$used" = "$PODMAN_RUNTIME_PATH" ] ||
        podman_runtime_die "podman would run containers with $used, not $PODMAN_RUNTIME_PATH"
}
podman_runtime_check

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    echo "podman runs containers with $PODMAN_RUNTIME_PATH ($("$PODMAN_RUNTIME_PATH" --version | head -n1))"
fi
