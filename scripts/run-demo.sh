#!/usr/bin/env bash
# Command (1) of the README: install the dependencies, build the optimised release preset
# and run the main job on its built-in default: `tessera simulate fgd`, the FGD paper's
# experiment (ATC '23) on a built-in synthetic GPU cluster, comparing the placement policies
# in a few seconds (docs/simulator.md). Extra arguments go to `tessera simulate fgd`, e.g.
# `-o json`, `--policy fgd,bestfit`, `--seeds 42-44`, or a trace:
#   --nodes ../shared/data/alibaba-gpu-2023/openb_node_list_gpu_node.csv
#   --pods  ../shared/data/alibaba-gpu-2023/openb_pod_list_default.csv --jobs 2
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

./scripts/install-deps.sh

cmake --preset release
cmake --build --preset release --target tessera

echo >&2
echo "+ tessera simulate fgd $*" >&2
./build/release/apps/tessera/tessera simulate fgd "$@"
