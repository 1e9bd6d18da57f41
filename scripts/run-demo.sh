#!/usr/bin/env bash
# Command (1) of the README, the main job: install the dependencies, build the optimised
# release preset and start the demo, `tessera serve --demo`, on 127.0.0.1:8080: a built-in
# fleet of 20 virtual GPUs on 6 nodes, four models with autoscaled deployments and synthetic
# traffic, in memory. Open the printed URL for the dashboard (docs/dashboard.md); Ctrl-C stops.
# No GPU and no cluster needed.
#
# Extra arguments go to `tessera serve`, e.g. `--demo-speed 4` (a faster day) or
# `--listen 127.0.0.1:9090`. The FGD simulator, the main job before, is one argument away:
#   ./scripts/run-demo.sh fgd [ARGS...]     # = tessera simulate fgd [ARGS...] (docs/simulator.md)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

./scripts/install-deps.sh

cmake --preset release
cmake --build --preset release --target tessera
tessera=./build/release/apps/tessera/tessera

if [[ "${1:-}" == "fgd" ]]; then
  shift
  echo >&2
  echo "+ tessera simulate fgd $*" >&2
  exec "${tessera}" simulate fgd "$@"
fi

# The dashboard's address: --listen if given, else 127.0.0.1:8080.
listen=127.0.0.1:8080
args=("$@")
given=0
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    --listen=*) listen="${args[i]#--listen=}"; given=1 ;;
    --listen) listen="${args[i + 1]:-}"; given=1 ;;
  esac
done
if [[ ${given} -eq 0 ]]; then
  args=(--listen "${listen}" "${args[@]}")
fi

echo >&2
echo "+ tessera serve --demo ${args[*]}" >&2
echo "  dashboard: http://${listen}/   (Ctrl-C to stop)" >&2
echo >&2
exec "${tessera}" serve --demo "${args[@]}"
