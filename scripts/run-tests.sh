#!/usr/bin/env bash
# Command (2) of the README, and what CI runs: install the dependencies, build everything in
# the debug preset with AddressSanitizer + UndefinedBehaviorSanitizer and run every test,
# then build the optimised release binary, smoke-test it and build and check the container
# image around it (tests/image). Exits non-zero on any failure.
#
# Environment: TESSERA_TEST_JOBS (default 2) build and test parallelism;
#              TESSERA_TEST_TIMEOUT (default 300) seconds allowed per test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

jobs="${TESSERA_TEST_JOBS:-2}"
timeout="${TESSERA_TEST_TIMEOUT:-300}"

step() { printf '\n==> %s\n' "$*"; }

step "dependencies"
./scripts/install-deps.sh

step "debug-asan: configure and build"
cmake --preset debug-asan
cmake --build --preset debug-asan --parallel "${jobs}"

step "debug-asan: tests"
ctest --preset debug-asan --parallel "${jobs}" --timeout "${timeout}" --no-tests=error

step "release: configure and build tessera"
cmake --preset release
cmake --build --preset release --parallel "${jobs}" --target tessera

step "release: smoke checks"
tessera=./build/release/apps/tessera/tessera
"${tessera}" --version
"${tessera}" catalog >/dev/null
"${tessera}" place --cluster examples/cluster.yaml --requests examples/requests.yaml \
  --profile examples/profile.yaml
"${tessera}" place --cluster examples/cluster.yaml --requests examples/requests.yaml \
  --profile examples/profile.yaml -o json >/dev/null

# The image around this binary, built from Debian's packages and run (about 15 s; it skips
# without mmdebstrap, umoci or the Debian mirror). Only this test runs in the release tree.
step "release: the container image"
ctest --preset release -L image --timeout "${timeout}" --no-tests=error

step "all checks passed"
