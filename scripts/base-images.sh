#!/usr/bin/env bash
# Makes the base images the Dockerfile names where no image registry is reachable: a
# `debian:bookworm-slim` from Debian's packages (debootstrap), and a
# `rust:<version>-slim-bookworm` from that root, gcc and this machine's Rust toolchain, laid
# out as the official image is (RUSTUP_HOME=/usr/local/rustup, CARGO_HOME=/usr/local/cargo,
# cargo on PATH). The Dockerfile stays what an operator with Docker Hub builds; these only
# stand where its FROM lines point. Then, from that root and Debian's packages, the images
# docker-compose.yml names for PostgreSQL, Redis, nginx and Prometheus, under the names and
# tags it gives them (scripts/stand-ins/NAME: each honours the contract of the official
# image; Debian has no Grafana, so none stands in for it).
#   scripts/base-images.sh            # makes what is missing (an image already there is kept)
#   REBUILD=1 scripts/base-images.sh  # makes both again (say, after a Debian point release)
#   scripts/base-images.sh --names    # prints the names it makes, one per line
#   scripts/base-images.sh --ensure   # as with no argument, but where every image is there
#                                     # already, says so and needs none of the tools that make them
# DEBIAN_MIRROR (default http://deb.debian.org/debian) is where debootstrap and apt fetch from.
# podman runs with runc (scripts/podman-runtime.sh); any step that fails stops the script
# with what failed, and its exit status is not 0.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '  - %s\n' "$*"; }
die() { echo "$*" >&2; exit 1; }

suite=bookworm
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
rust_version=$(sed -n 's/^FROM rust:\([0-9][0-9.]*\)-slim-'"$suite"'.*/\1/p' Dockerfile | head -n1)
[ -n "$rust_version" ] || die "the Dockerfile names no rust:<version>-slim-$suite image"
grep -q "^FROM debian:$suite-slim" Dockerfile || die "the Dockerfile's runtime base is not debian:$suite-slim"

debian_image=docker.io/library/debian:$suite-slim
rust_image=docker.io/library/rust:$rust_version-slim-$suite
label=org.partner-intake.stand-in

# The compose file's images that have a stand-in here, as the engine names them: a name
# with no registry is Docker Hub's, and one with no namespace is in its library.
compose_images=()
while read -r image; do
    name=${image%%:*}
    [ -d "scripts/stand-ins/${name##*/}" ] || continue
    case $name in
        */*/*) ;;
        */*) image=docker.io/$image ;;
        *) image=docker.io/library/$image ;;
    esac
    compose_images+=("$image")
done < <(sed -n 's/^ *image: *\([^$ ]*\) *$/\1/p' docker-compose.yml | sort -u)

if [ "${1:-}" = --names ]; then
    echo "$debian_image"
    echo "$rust_image"
    for image in "${compose_images[@]}"; do echo "$image"; done
    exit 0
fi

. scripts/podman-runtime.sh
# The first image of the ones named that is not there, if any.
first_missing() {
    local image
    for image in "$debian_image" "$rust_image" "${compose_images[@]}"; do
        podman image exists "$image" || { echo "$image"; return; }
    done
}
all_there() { log "base images: $((2 + ${#compose_images[@]})) there"; }
if [ "${1:-}" = --ensure ] && [ -z "${REBUILD:-}" ] && [ -z "$(first_missing)" ]; then
    all_there
    exit 0
fi

# Only making them needs the tools: the names are read from the files alone.
command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"

# The stand-in must be the toolchain the Dockerfile pins, or the build would prove another one.
machine_rust=$(rustc --version | awk '{print $2}')
case "$machine_rust" in
    "$rust_version" | "$rust_version".*) ;;
    *) die "the Dockerfile pins Rust $rust_version, this machine has $machine_rust: install that toolchain or change the pin" ;;
esac
sysroot=$(rustc --print sysroot)

# An image already there, made here before or pulled from a registry, is kept.
stand_in() { podman image exists "$1"; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -n "${REBUILD:-}" ] || ! stand_in "$debian_image"; then
    start=$SECONDS
    root=$work/root
    debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
        || { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
    # The official image's package sources: the release, its updates and its security fixes.
    rm -f "$root/etc/apt/sources.list"
    cat >"$root/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: ${mirror}
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/log/* "$root"/tmp/*
    tar -C "$root" --numeric-owner -c . | podman import \
        --change 'CMD ["bash"]' --change "LABEL $label=debootstrap-$suite-minbase" \
        - "$debian_image" >"$work/import.log" 2>&1 \
        || { tail -n 20 "$work/import.log" >&2; die "podman import of the debootstrap root failed"; }
    rm -rf "$root"
    log "$debian_image made by debootstrap in $((SECONDS - start)) s"
else
    log "$debian_image: made before, kept"
fi

if [ -n "${REBUILD:-}" ] || ! stand_in "$rust_image"; then
    start=$SECONDS
    ctx=$work/rust
    mkdir -p "$ctx/toolchain" "$ctx/ca"
    # The compiler and its libraries; the toolchain's documentation stays behind.
    cp -a "$sysroot/bin" "$sysroot/lib" "$sysroot/libexec" "$sysroot/etc" "$ctx/toolchain/" 2>/dev/null \
        || cp -a "$sysroot/bin" "$sysroot/lib" "$ctx/toolchain/"
    # Certificate authorities this machine trusts beyond Debian's: on a network that inspects
    # TLS, cargo reaches the crate registry only through them.
    cp /usr/local/share/ca-certificates/*.crt "$ctx/ca/" 2>/dev/null || true
    cat >"$ctx/Containerfile" <<CONTAINERFILE
FROM $debian_image
ENV RUSTUP_HOME=/usr/local/rustup \\
    CARGO_HOME=/usr/local/cargo \\
    PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    RUST_VERSION=$machine_rust
RUN apt-get update \\
 && apt-get install -y --no-install-recommends ca-certificates gcc libc6-dev \\
 && rm -rf /var/lib/apt/lists/*
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
COPY toolchain/ /usr/local/rustup/toolchains/$machine_rust-x86_64-unknown-linux-gnu/
RUN mkdir -p /usr/local/cargo/bin \\
 && for tool in cargo rustc rustdoc; do \\
      ln -s /usr/local/rustup/toolchains/$machine_rust-x86_64-unknown-linux-gnu/bin/\$tool /usr/local/cargo/bin/\$tool; \\
    done \\
 && chmod -R a+w /usr/local/cargo \\
 && cargo --version && rustc --version
LABEL $label=debian-$suite-rust-$machine_rust
CONTAINERFILE
    podman build --format docker -t "$rust_image" "$ctx" >"$work/build.log" 2>&1 \
        || { tail -n 30 "$work/build.log" >&2; die "the rust stand-in did not build"; }
    log "$rust_image made from $debian_image and Rust $machine_rust in $((SECONDS - start)) s"
else
    log "$rust_image: made before, kept"
fi

for image in "${compose_images[@]}"; do
    name=${image%%:*}
    name=${name##*/}
    if [ -z "${REBUILD:-}" ] && stand_in "$image"; then
        log "$image: made before, kept"
        continue
    fi
    start=$SECONDS
    podman build --format docker --label "$label=debian-$suite-$name" -t "$image" \
        "scripts/stand-ins/$name" >"$work/$name.log" 2>&1 \
        || { tail -n 30 "$work/$name.log" >&2; die "the $name stand-in did not build"; }
    log "$image made from $debian_image and Debian's $name in $((SECONDS - start)) s"
done

missing=$(first_missing)
[ -z "$missing" ] || die "no image $missing after making them"
all_there
