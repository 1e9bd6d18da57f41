#!/usr/bin/env bash
# Installs everything Tessera needs to build and test, from Debian 12's own packages.
# Idempotent: when every package is already installed it changes nothing and needs no
# network (set TESSERA_FORCE_APT=1 to run apt-get anyway). Uses sudo only when not root.
#
#   scripts/install-deps.sh               build, test and image tools (what CI needs)
#   scripts/install-deps.sh --build-only  only what building the tessera binary needs in the
#                                         release preset without tests and benchmarks (the
#                                         Dockerfile's build stage)
set -euo pipefail

build_only=0
case "${1:-}" in
  "") ;;
  --build-only) build_only=1 ;;
  *)
    echo "usage: scripts/install-deps.sh [--build-only]" >&2
    exit 2
    ;;
esac

# The one list of build and test dependencies. Keep it in step with the find_package calls
# in CMakeLists.txt and with docs/architecture.md. First what the binary needs to build:
BUILD_PACKAGES=(
  build-essential      # make, libc headers, dpkg-dev
  g++                  # g++ 12: C++23 with std::expected
  cmake                # >= 3.25 for presets v6
  ninja-build          # the presets' generator
  pkg-config
  libyaml-cpp-dev      # cluster, request and profile files
  nlohmann-json3-dev   # JSON output, plugin arguments, API codecs
  libcli11-dev         # the tessera command line
  libfmt-dev           # formatting (g++ 12 has no <format>)
  libspdlog-dev        # logging
  libsqlite3-dev       # the embedded store
  libcpp-httplib-dev   # HTTP API and the Kubernetes extender
  libgrpc++-dev        # the kubelet device plugin (gRPC over a unix socket)
  libprotobuf-dev
  protobuf-compiler    # protoc, for the device plugin's v1beta1 and PodResources v1 protos
  protobuf-compiler-grpc  # grpc_cpp_plugin
)
# then the tests, benchmarks and tools around them.
TEST_PACKAGES=(
  ccache               # picked up by CMakeLists.txt when present
  libgtest-dev         # unit and CLI tests (through CTest)
  libgmock-dev
  libbenchmark-dev     # Google Benchmark suites (bench/)
  libprotoc-dev        # the tests read kubelet's own .proto files to check ours against them
  clang-format         # formatting check
  openssl              # test certificates (TLS tests of the server and the Kubernetes client)
  chromium             # the dashboard's browser test (headless, driven over DevTools)
  python3              # runs that test (standard library only)
  kubernetes-client    # kubectl (1.20, kustomize v2.0): the deploy tests build deploy/ with it
  mmdebstrap           # the container image's Debian tree (scripts/build-image.sh, image test)
  umoci                # packs that tree and the binary as an OCI image
  skopeo               # pushes the image or converts it for kind (docs/kubernetes.md)
)
PACKAGES=("${BUILD_PACKAGES[@]}")
if [[ ${build_only} -eq 0 ]]; then
  PACKAGES+=("${TEST_PACKAGES[@]}")
fi

# kubectl: any from 1.20 on will do (the deploy tests build deploy/ with it). Debian's
# kubernetes-client conflicts with other kubectl packages (the Google Cloud SDK's), so a
# kubectl that is already installed is kept.
if command -v kubectl >/dev/null 2>&1; then
  kept=()
  for pkg in "${PACKAGES[@]}"; do
    [[ "${pkg}" == "kubernetes-client" ]] || kept+=("${pkg}")
  done
  PACKAGES=("${kept[@]}")
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
  status="$(dpkg-query -W -f='${db:Status-Status}' "${pkg}" 2>/dev/null || true)"
  if [[ "${status}" != "installed" ]]; then
    missing+=("${pkg}")
  fi
done

if [[ ${#missing[@]} -eq 0 && "${TESSERA_FORCE_APT:-0}" != "1" ]]; then
  echo "install-deps: all ${#PACKAGES[@]} packages are installed"
  exit 0
fi

SUDO=()
if [[ "$(id -u)" -ne 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps: not root and sudo is not installed; run as root or install sudo" >&2
    exit 1
  fi
  SUDO=(sudo)
fi

echo "install-deps: installing ${missing[*]:-${PACKAGES[*]}}"
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${PACKAGES[@]}"
