# shellcheck shell=bash
# Sourced by the check scripts: starts the one-process stack (target/debug/partner-intake, or
# target/release/ when the script was given --release) on free ports in a temporary
# directory, and stops it and removes the directory when the script exits. Sets auth_port,
# intake_port, auth, intake (their URLs) and work; extra VAR=value arguments go to the stack.
start_stack() {
    local profile=debug flag=
    [ "${1:-}" = "--release" ] && { profile=release flag=" --release"; shift; }
    local bin="${CARGO_TARGET_DIR:-$PWD/target}/$profile/partner-intake"
    [ -x "$bin" ] || { echo "$bin not built: cargo build -p partner-intake$flag" >&2; exit 1; }
    free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
    auth_port=$(free_port)
    intake_port=$(free_port)
    auth=http://127.0.0.1:$auth_port
    intake=http://127.0.0.1:$intake_port
    work=$(mktemp -d)
    trap 'stop_stack' EXIT
    (cd "$work" && exec env AUTH_BIND="127.0.0.1:$auth_port" INTAKE_BIND="127.0.0.1:$intake_port" \
        AUTH_ISSUER="$auth" INTAKE_ISSUER="$auth" INTAKE_JWKS_URL="$auth/.well-known/jwks.json" \
        "$@" "$bin" >stack.log 2>&1) &
    # exec, and env's own: $! is the stack itself, so stop_stack stops it.
    stack_pid=$!
    for _ in $(seq 1 60); do
        curl -fsS "$intake/readyz" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    echo "the stack did not start:" >&2
    cat "$work/stack.log" >&2
    exit 1
}

stop_stack() {
    [ -n "${stack_pid:-}" ] && kill "$stack_pid" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$work"
}
