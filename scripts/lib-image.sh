# shellcheck shell=bash
# Sourced by scripts/image-test and scripts/lib-cluster.sh: gpubench's image
# (scripts/image) built here, where no registry can be reached, from bases
# made locally. The caller defines `say`.
#
#   local_base       Debian bookworm minbase with python3 and venv (debootstrap, docker import)
#   local_old_base   the same on bullseye (glibc 2.31), for the test of a base too old for the binary
#   local_rust       the local base with gcc, g++ and this machine's own Rust toolchain
#   local_image      scripts/image from those two (cu130)
#
# Each prints its image's name and is made once per recipe digest, under a
# lock, then reused by every later call (and every later session on the machine).

image_mirror() {
  local f u
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    u=$(awk '/^URIs:/{print $2; exit}' "$f")
    [ -n "$u" ] && { echo "$u"; return; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    u=$(awk '$1=="deb"{for(i=2;i<=NF;i++) if($i ~ /^https?:/){print $i; exit}}' "$f")
    [ -n "$u" ] && { echo "$u"; return; }
  done
  echo http://deb.debian.org/debian
}

# `once NAME:TAG FUNCTION ARGS...`: runs FUNCTION NAME:TAG ARGS unless the
# image is there; a second caller waits for the first, then finds it.
once() {
  local image=$1
  shift
  (
    flock 9
    docker image inspect "$image" >/dev/null 2>&1 || "$@" "$image" >&2
  ) 9>"/var/tmp/gpubench-${image%%:*}.lock" || return 1
  echo "$image"
}

# `rootfs_import SUITE PACKAGES IMAGE`: debootstrap's minbase of SUITE with
# PACKAGES, imported as IMAGE.
rootfs_import() {
  local suite=$1 packages=$2 image=$3 mirror root rc t0=$SECONDS
  mirror=$(image_mirror)
  command -v debootstrap >/dev/null || {
    say "installing debootstrap (once)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1; } \
      || return 1
  }
  root=$(mktemp -d /var/tmp/gpubench-rootfs.XXXXXX)
  # It becomes "/": munge's postinst runs `su munge`, which needs o+x on it.
  chmod 0755 "$root"
  say "building $image from $mirror (debootstrap $suite, about a minute, once)"
  if ! debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" \
    >/var/tmp/gpubench-debootstrap.log 2>&1; then
    tail -n 20 /var/tmp/gpubench-debootstrap.log >&2
    rm -rf --one-file-system "$root"
    return 1
  fi
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  # This machine's certificate authorities: where a proxy stands before PyPI
  # and crates.io, pip and cargo inside the image trust what this host trusts.
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/" 2>/dev/null
  [ -f "$root/etc/ssl/certs/ca-certificates.crt" ] && cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
  tar -C "$root" -c . | docker import --change "LABEL gpubench-local-base=1" --change 'CMD ["/bin/sh"]' \
    --change 'ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt' - "$image" >/dev/null
  rc=$?
  rm -rf --one-file-system "$root"
  say "built $image in $((SECONDS - t0)) s"
  return $rc
}

base_packages=python3,python3-venv,ca-certificates
digest_of() { { echo "$*"; cat /etc/ssl/certs/ca-certificates.crt 2>/dev/null; } | sha256sum | cut -c1-12; }
local_base() {
  once "gpubench-base:$(digest_of bookworm minbase $base_packages "$(image_mirror)")" rootfs_import bookworm "$base_packages"
}
local_old_base() {
  once "gpubench-base-bullseye:$(digest_of bullseye minbase $base_packages "$(image_mirror)")" rootfs_import bullseye "$base_packages"
}

# `rust_build BASE IMAGE`: BASE with a C/C++ compiler and this machine's Rust
# toolchain (rustup's, without its docs) at /usr/local/rust; no registry is
# needed for it.
rust_build() {
  local base=$1 image=$2 sysroot ctx rc
  sysroot=$(rustc --print sysroot) || return 1
  ctx=$(mktemp -d /var/tmp/gpubench-rust.XXXXXX)
  mkdir -p "$ctx/rust/bin" "$ctx/rust/lib/rustlib"
  cp -a "$sysroot/bin/cargo" "$sysroot/bin/rustc" "$ctx/rust/bin/"
  cp -a "$sysroot"/lib/*.so* "$ctx/rust/lib/"
  cp -a "$sysroot/lib/rustlib/x86_64-unknown-linux-gnu" "$sysroot/lib/rustlib/etc" "$ctx/rust/lib/rustlib/"
  cat >"$ctx/Dockerfile" <<EOF
FROM $base
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends gcc g++ libc6-dev >/dev/null \
    && rm -rf /var/lib/apt/lists/*
COPY rust /usr/local/rust
ENV PATH=/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin CARGO_HOME=/usr/local/cargo
RUN cargo --version
EOF
  say "building $image: $base with gcc and $("$sysroot/bin/rustc" --version | cut -d' ' -f1-2) (once)"
  DOCKER_BUILDKIT=0 docker build -q -t "$image" "$ctx" >/var/tmp/gpubench-rust-build.log 2>&1
  rc=$?
  [ $rc = 0 ] || tail -n 20 /var/tmp/gpubench-rust-build.log >&2
  rm -rf "$ctx"
  return $rc
}
local_rust() {
  local base
  base=$(local_base) || return 1
  once "gpubench-rust:$(digest_of "$(docker image inspect --format '{{.Id}}' "$base")" "$(rustc -vV)")" rust_build "$base"
}

# gpubench's own image, from the local bases: scripts/image, which reuses it
# while its recipe (sources included) is unchanged.
local_image() {
  local base rust
  base=$(local_base) || return 1
  rust=$(local_rust) || return 1
  "$(dirname "${BASH_SOURCE[0]}")/image" --base "$base" --rust-image "$rust" "$@"
}
