# Sourced by the scripts (not run): `gpubench_env` runs the idempotent
# set-up, then loads the environment it wrote (LIBTORCH, headers, font, the
# torch venv's python). Sets $here to the repository root.
# shellcheck shell=bash
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
gpubench_env() {
  "$here/scripts/setup" "$@"
  # shellcheck disable=SC1091
  source "${GPUBENCH_HOME:-${HOME:-/root}/.cache/gpubench}/env.sh"
}
