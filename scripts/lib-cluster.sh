# shellcheck shell=bash
# Sourced by scripts/cluster-test and scripts/bench-cluster: a few Docker
# containers on a private network, each a host of its own (name, address),
# running gpubench's own image (scripts/image) with Slurm and munge added.
# The caller defines `say` and `fail`.
#
#   cluster_up IMAGE N   # hosts n0..n(N-1) from gpubench's IMAGE; sets run_id, net, D (a temp dir; D/shared is /shared on every host)
#   ex nI CMD...         # a command on host nI
#   (removed on exit by the trap cluster_up sets; the base image is kept)

# shellcheck source=scripts/lib-image.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib-image.sh"

# The hosts' image: gpubench's own image (scripts/image, from the local
# bases) with Slurm and munge on top, made once per gpubench image.
cluster_packages="slurmctld slurmd slurm-client munge tini iproute2 procps"

cluster_build() {
  local from=$1 image=$2
  printf '%s\n' "FROM $from" \
    "RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $cluster_packages >/dev/null && rm -rf /var/lib/apt/lists/*" \
    'LABEL gpubench-cluster-image=1' 'ENTRYPOINT ["/usr/bin/tini", "--"]' 'CMD ["sleep", "infinity"]' \
    | DOCKER_BUILDKIT=0 docker build -q -t "$image" - >/var/tmp/gpubench-cluster-build.log 2>&1 \
    || { tail -n 20 /var/tmp/gpubench-cluster-build.log >&2; return 1; }
}

# `cluster_image GPUBENCH_IMAGE`: prints the hosts' image, building it first when it is not there.
cluster_image() {
  local id
  id=$(docker image inspect --format '{{.Id}}' "$1") || return 1
  once "gpubench-cluster:$(digest_of "$id" "$cluster_packages")" cluster_build "$1"
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
  local gpubench_image=$1 nodes=$2 image n i l
  image=$(cluster_image "$gpubench_image") || fail "could not build the hosts' image on $gpubench_image"
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
  docker network create --label "gpubench-cluster-test=$run_id" "$net" >/dev/null || fail "docker network create"
  for ((i = 0; i < nodes; i++)); do
    n=n$i
    docker run -d --name "$n-$run_id" --hostname "$n" --network "$net" --network-alias "$n" \
      --label "gpubench-cluster-test=$run_id" -v "$D/shared:/shared" "$image" >/dev/null || fail "starting container $n"
  done
  for ((i = 0; i < nodes; i++)); do
    ex "n$i" getent hosts n0 "n$((nodes - 1))" >/dev/null || fail "n$i cannot resolve the others by name"
  done
  ex n0 gpubench --version >/dev/null 2>"$D/log/version" || fail "gpubench does not start in a container"
  say "$nodes hosts up ($image, gpubench's image $gpubench_image with Slurm) on network $net"
}
