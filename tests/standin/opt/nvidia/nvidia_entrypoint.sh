#!/bin/bash
# Stand-in for NGC's /opt/nvidia/nvidia_entrypoint.sh: source every entrypoint.d/*.sh in name order (they
# may print banners and export variables), then run the given command, or an interactive bash without one.
shopt -s nullglob
for part in "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"/entrypoint.d/*.sh; do
  # shellcheck source=/dev/null
  source "$part"
done
shopt -u nullglob
if [[ $# -eq 0 ]]; then
  exec /bin/bash
fi
exec "$@"
