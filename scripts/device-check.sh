#!/usr/bin/env bash
# The device memory pool on a real GPU (docs/devpool.md, "On a GPU"): builds the load benchmark
# in Release and runs it with the CUDA backend, which loads libcudart at run time. It reports,
# from one run, the pinned host→device bandwidth (the backend's own cudaMemcpyAsync from a
# pinned buffer on every stream: the baseline) against the pool's load bandwidth through the
# loader: from a pinned host cache, from a pageable host cache (staged), and from a file
# (warm and cold page cache). It also runs the node agent's NVML discovery alone
# (bench/nvml_discover.cc: every card as the agent sees it, CUDA compute capability and MIG
# instances included, which the DRA driver publishes) and saves it as nvml-discovery.json.
#
# Only the modules the benchmark needs are compiled (common, the safetensors part of profile,
# devpool), from a small CMake project generated under the build folder, so the check does not
# depend on the rest of the tree's dependencies (gRPC, SQLite, ...). Needs cmake, ninja or
# make, g++ >= 12, nlohmann-json and CLI11 (scripts/install-deps.sh) and a CUDA runtime
# (libcudart.so*, found on the loader path or under /usr/local/cuda*/lib64). Takes about
# 1–3 minutes: the build, then 1 and 2 GiB files, 2 repetitions.
#
# Usage: scripts/device-check.sh [--sizes-gib 1,2] [--repeat 2] [--out DIR]
# Exit status: 0 when the CUDA backend ran, 1 when it could not (the message says why).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
sizes="1,2"
repeat=2
out="${OUT:-$root/build-device-check}"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --sizes-gib) sizes="$2"; shift 2 ;;
    --repeat) repeat="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "device-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
build="$root/build-device-check/build"
project="$root/build-device-check/project"
mkdir -p "$build" "$project"

# Make a CUDA runtime findable by dlopen when it sits only under /usr/local/cuda*.
for dir in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64; do
  if compgen -G "$dir/libcudart.so*" > /dev/null; then
    export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    break
  fi
done

echo "== device"
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,pcie.link.gen.current,pcie.link.width.current \
    --format=csv,noheader || true
else
  echo "nvidia-smi not found"
fi

cat > "$project/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.25)
project(tessera_device_check LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 23)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
add_compile_options(-Wall -Wextra -Wno-restrict)  # no -Werror: a new warning must not stop a measurement
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
set(src "$root/src")
file(GLOB devpool_sources \${src}/common/*.cc \${src}/devpool/*.cc)
list(FILTER devpool_sources EXCLUDE REGEX "_test\\\\.cc\$")
add_library(devpool_check STATIC \${devpool_sources}
            \${src}/profile/safetensors.cc \${src}/profile/safetensors_writer.cc
            \${src}/profile/dtype.cc \${src}/profile/json_util.cc)
target_include_directories(devpool_check PUBLIC \${src})
target_link_libraries(devpool_check PUBLIC nlohmann_json::nlohmann_json Threads::Threads \${CMAKE_DL_LIBS})
add_executable(devpool_load_bench "$root/bench/load_bench.cc")
target_link_libraries(devpool_load_bench PRIVATE devpool_check CLI11::CLI11)
add_executable(nvml_discover "$root/bench/nvml_discover.cc" \${src}/agent/nvml.cc)
target_link_libraries(nvml_discover PRIVATE devpool_check)
EOF

echo "== build (Release)"
generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
start=$(date +%s)
cmake -S "$project" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release > "$out/cmake.log" 2>&1 ||
  { tail -20 "$out/cmake.log"; echo "device-check: cmake failed (log: $out/cmake.log)" >&2; exit 1; }
cmake --build "$build" --target devpool_load_bench nvml_discover -j "$(nproc)" > "$out/build.log" 2>&1 ||
  { tail -30 "$out/build.log"; echo "device-check: build failed (log: $out/build.log)" >&2; exit 1; }
echo "built in $(( $(date +%s) - start )) s"

echo "== the agent's NVML discovery"
if "$build/nvml_discover" > "$out/nvml-discovery.json" 2> "$out/nvml-discovery.err"; then
  cat "$out/nvml-discovery.json"
else
  echo "device-check: NVML discovery failed: $(cat "$out/nvml-discovery.err")" >&2
fi

echo "== CUDA backend: pinned host→device (raw_copy) vs the pool's loads, same run"
dir="${TMPDIR:-/var/tmp}"
if "$build/devpool_load_bench" --backend cuda --sizes-gib "$sizes" --repeat "$repeat" \
     --threads 4 --streams 4 --dir "$dir" --json "$out/device-check.json" 2>&1 | tee "$out/device-check.txt"; then
  echo "== results in $out/device-check.json"
  python3 - "$out/device-check.json" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1]))
print("GB/s (1e9 bytes/s), medians")
print(f"{'GiB':>5} {'pinned H2D':>11} {'pinned cache→pool':>18} {'pageable cache→pool':>20} {'warm file→pool':>15} {'cold file→pool':>15} {'cold O_DIRECT→pool':>19} {'cold read':>10}")
for r in d["results"]:
    g = r["gb_per_s"]
    print(f"{r['file_gib']:>5} {g.get('raw_copy',0):>11.2f} {g.get('pinned_cache_to_pool',0):>18.2f} "
          f"{g.get('cache_to_pool',0):>20.2f} {g.get('warm_to_pool',0):>15.2f} {g.get('cold_to_pool',0):>15.2f} "
          f"{g.get('cold_to_pool_odirect',0):>19.2f} {g.get('cold_read',0):>10.2f}")
    for k, v in r.get("ratios", {}).items():
        print(f"      {k:<36} {100*v:6.1f} %")
PY
else
  echo "device-check: the CUDA backend did not run (see the message above)" >&2
  exit 1
fi
