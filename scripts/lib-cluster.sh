# shellcheck shell=bash
# Sourced by scripts/cluster-test and scripts/bench-cluster: a few Docker
# containers on a private network, each a host of its own (name, address),
# running the gpubench built here. The caller defines `say` and `fail`.
#
#   cluster_up BIN N     # hosts n0..n(N-1); sets run_id, net, D (a temp dir; D/shared is /shared on every host)
#   ex nI CMD...         # a command on host nI
#   (removed on exit by the trap cluster_up sets; the base image is kept)

# The base image: Debian bookworm from the mirror apt uses, with Slurm and
# munge, made with debootstrap and `docker import` (no registry); rebuilt
# only when its recipe changes.
cluster_packages=slurmctld,slurmd,slurm-client,munge,tini,iproute2,procps,ca-certificates

cluster_mirror() {
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

cluster_build_image() {
  local image=$1 mirror=$2 root rc t0=$SECONDS
  command -v debootstrap >/dev/null || {
    say "installing debootstrap (once)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1 \
      || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null 2>&1; } \
      || return 1
  }
  root=$(mktemp -d /var/tmp/gpubench-rootfs.XXXXXX)
  # It becomes "/": munge's postinst runs `su munge`, which needs o+x on it.
  chmod 0755 "$root"
  say "building $image from $mirror (debootstrap, about 2 minutes, once)"
  if ! debootstrap --variant=minbase --include="$cluster_packages" bookworm "$root" "$mirror" \
    >/var/tmp/gpubench-debootstrap.log 2>&1; then
    tail -n 20 /var/tmp/gpubench-debootstrap.log >&2
    rm -rf --one-file-system "$root"
    return 1
  fi
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import --change "LABEL gpubench-cluster-image=1" \
    --change 'CMD ["/usr/bin/tini","--","sleep","infinity"]' - "$image" >/dev/null
  rc=$?
  rm -rf --one-file-system "$root"
  say "built $image in $((SECONDS - t0)) s"
  return $rc
}

# Prints the image's name, building it first when it is not there.
cluster_image() {
  local mirror image
  mirror=$(cluster_mirror)
  image=gpubench-cluster:$(echo "bookworm minbase $cluster_packages $mirror" | sha256sum | cut -c1-12)
  (
    # Two callers at once: the second waits, then finds the image.
    flock 9
    docker image inspect "$image" >/dev/null 2>&1 || cluster_build_image "$image" "$mirror" >&2
  ) 9>/var/tmp/gpubench-cluster-image.lock || return 1
  echo "$image"
}

# Removes every container and network labelled $1, whatever their state
# (and whether or not the caller runs under `set -e`).
cluster_down() {
  local ids
  ids=$(docker ps -aq --filter "label=$1")
  if [ -n "$ids" ]; then
    # A paused container is unpaused first: not every engine removes one.
    # shellcheck disable=SC2046
    docker unpause $(docker ps -q --filter "label=$1" --filter status=paused) >/dev/null 2>&1 || true
    # shellcheck disable=SC2086
    docker rm -f $ids >/dev/null 2>&1 || true
  fi
  ids=$(docker network ls -q --filter "label=$1")
  # shellcheck disable=SC2086
  [ -z "$ids" ] || docker network rm $ids >/dev/null 2>&1 || true
}

cluster_teardown() {
  cluster_down "gpubench-cluster-test=$run_id"
  rm -rf --one-file-system "$D"
}

ex() {
  local n=$1
  shift
  docker exec "$n-$run_id" "$@"
}

cluster_up() {
  local bin=$1 nodes=$2 image torchlib site n i l
  image=$(cluster_image) || fail "could not build the cluster's base image"
  run_id=gbt$$
  net=gpubench-$run_id
  D=$(mktemp -d /tmp/gpubench-cluster.XXXXXX)
  chmod 0755 "$D"
  mkdir -p "$D/shared" "$D/log"
  trap cluster_teardown EXIT
  trap 'exit 1' INT TERM
  # Leftovers of an earlier run whose script is gone (killed before its trap).
  for l in $( (docker ps -a --format '{{.Label "gpubench-cluster-test"}}' --filter label=gpubench-cluster-test
    docker network ls --format '{{.Label "gpubench-cluster-test"}}' --filter label=gpubench-cluster-test) | sort -u); do
    kill -0 "${l#gbt}" 2>/dev/null || cluster_down "gpubench-cluster-test=$l"
  done
  # The binary finds libtorch by its absolute path (its rpath): the
  # site-packages above it go in read-only, at the same path.
  torchlib=$(ldd "$bin" | awk '/libtorch_cpu/{print $3; exit}')
  [ -n "$torchlib" ] || fail "ldd $bin names no libtorch_cpu"
  site=$(dirname "$(dirname "$(dirname "$torchlib")")")
  docker network create --label "gpubench-cluster-test=$run_id" "$net" >/dev/null || fail "docker network create"
  for ((i = 0; i < nodes; i++)); do
    n=n$i
    docker run -d --name "$n-$run_id" --hostname "$n" --network "$net" --network-alias "$n" \
      --label "gpubench-cluster-test=$run_id" -v "$bin:/opt/gpubench:ro" -v "$site:$site:ro" -v "$D/shared:/shared" \
      "$image" >/dev/null || fail "starting container $n"
  done
  for ((i = 0; i < nodes; i++)); do
    ex "n$i" getent hosts n0 "n$((nodes - 1))" >/dev/null || fail "n$i cannot resolve the others by name"
  done
  ex n0 /opt/gpubench --version >/dev/null 2>"$D/log/version" || fail "gpubench does not start in a container"
  say "$nodes hosts up ($image) on network $net"
}
