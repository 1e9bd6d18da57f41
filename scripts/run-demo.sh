#!/usr/bin/env bash
# Command (1) of the README: install the dependencies, build the optimised release preset
# and run the main job on its built-in default, the bundled example cluster.
# Extra arguments go to `tessera place` (e.g. `-o json`, `--mode sequential`, `--explain ID`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

./scripts/install-deps.sh

cmake --preset release
cmake --build --preset release --target tessera

echo
echo "+ tessera place --cluster examples/cluster.yaml --requests examples/requests.yaml --profile examples/profile.yaml $*"
./build/release/apps/tessera/tessera place \
  --cluster examples/cluster.yaml \
  --requests examples/requests.yaml \
  --profile examples/profile.yaml \
  "$@"
