#!/usr/bin/env bash
# Builds Tessera's container image as an OCI archive from Debian 12's packages alone: no
# registry, no base image, no container engine. mmdebstrap unpacks the packages of
# scripts/image-packages.txt (and what they depend on) into a Debian 12 tree, umoci stacks
# that tree and the binary into an OCI image, and the image layout is packed as OUT.tar
# (an "oci-archive", as skopeo and podman call it). The Dockerfile builds the same image
# for those with a registry.
#
#   scripts/build-image.sh OUT.tar [--binary PATH]
#
# PATH defaults to build/release/apps/tessera/tessera, which is built with the release preset
# when it is missing. The image is tagged tessera:<version>, <version> being what
# `tessera --version` prints; the last line on stdout is that tag, everything else goes to
# stderr. docs/kubernetes.md ("The image") says how to push it or load it into kind.
#
# The image: three layers (the Debian packages; users, CA bundle and package list; the
# binary and /licenses), user 65532:65532 (nonroot), entrypoint /usr/bin/tessera, the
# org.opencontainers.image.* labels. No shell, no apt, no dpkg.
#
# Needs mmdebstrap and umoci (scripts/install-deps.sh installs both) and the Debian mirror.
# Runs as root. mmdebstrap's unshare mode (TESSERA_IMAGE_MODE=unshare, or auto for a user
# with subordinate ids in /etc/subuid and /etc/subgid) should let others run it too, but only
# root has been tried. Only the machine's own architecture is built.
#
# Environment:
#   SOURCE_DATE_EPOCH  every timestamp in the image (default: the commit time of HEAD): the
#                      same commit, binary and mirror content give a byte-identical archive
#                      (pin the mirror to snapshot.debian.org to rebuild an old one)
#   TESSERA_IMAGE_MIRROR           default http://deb.debian.org/debian
#   TESSERA_IMAGE_SECURITY_MIRROR  default http://deb.debian.org/debian-security
#   TESSERA_IMAGE_SOURCE    the org.opencontainers.image.source label (default: the URL of
#                           the git remote `origin`; no label when there is none)
#   TESSERA_IMAGE_LICENSES  the org.opencontainers.image.licenses label, an SPDX expression
#                           (default NOASSERTION: the tree names no licence; keep it in step
#                           with the Dockerfile's LICENSES)
#
# Exit status: 0 built, 1 failed, 2 bad arguments or a missing tool.
set -euo pipefail
umask 022

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
default_binary="${root}/build/release/apps/tessera/tessera"

say() { echo "build-image: $*" >&2; }
die() {
  say "$*"
  exit 1
}
usage() {
  echo "usage: scripts/build-image.sh OUT.tar [--binary PATH]" >&2
  exit 2
}

out=""
binary=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --binary)
      [[ $# -ge 2 ]] || usage
      binary="$2"
      shift 2
      ;;
    --binary=*)
      binary="${1#--binary=}"
      shift
      ;;
    -h | --help) usage ;;
    -*)
      say "unknown option $1"
      usage
      ;;
    *)
      [[ -z "${out}" ]] || usage
      out="$1"
      shift
      ;;
  esac
done
[[ -n "${out}" ]] || usage

# Tools: say which Debian package is missing rather than failing half-way.
missing=()
command -v mmdebstrap >/dev/null 2>&1 || missing+=(mmdebstrap)
command -v mmtarfilter >/dev/null 2>&1 || missing+=(mmdebstrap)
command -v umoci >/dev/null 2>&1 || missing+=(umoci)
command -v dpkg-deb >/dev/null 2>&1 || missing+=(dpkg)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [[ ${#missing[@]} -gt 0 ]]; then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  say "missing Debian package(s): ${missing[*]}"
  say "install them with: apt-get install ${missing[*]}   (or scripts/install-deps.sh)"
  exit 2
fi

# The binary.
if [[ -z "${binary}" ]]; then
  binary="${default_binary}"
  if [[ ! -x "${binary}" ]]; then
    say "no ${binary#"${root}"/}: building it (release preset)"
    (cd "${root}" && cmake --preset release >&2 && cmake --build --preset release --target tessera >&2)
  fi
fi
[[ -f "${binary}" && -x "${binary}" ]] || {
  say "not an executable: ${binary}"
  exit 2
}
version_line="$("${binary}" --version)" || die "${binary} --version failed"
version="${version_line##* }"
[[ "${version}" =~ ^[0-9A-Za-z][0-9A-Za-z._+-]*$ ]] ||
  die "cannot read a version from \`${binary} --version\`: ${version_line}"
tag="tessera:${version}"

# Labels and timestamps.
if [[ -z "${SOURCE_DATE_EPOCH:-}" ]]; then
  SOURCE_DATE_EPOCH="$(git -C "${root}" log -1 --format=%ct 2>/dev/null || true)"
  if [[ -z "${SOURCE_DATE_EPOCH}" ]]; then
    SOURCE_DATE_EPOCH="$(date +%s)"
    say "not a git checkout and no SOURCE_DATE_EPOCH: using the current time (not reproducible)"
  fi
fi
[[ "${SOURCE_DATE_EPOCH}" =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH is not a number: ${SOURCE_DATE_EPOCH}"
export SOURCE_DATE_EPOCH
created="$(date -u -d "@${SOURCE_DATE_EPOCH}" +%Y-%m-%dT%H:%M:%SZ)"
revision="$(git -C "${root}" rev-parse HEAD 2>/dev/null || echo unknown)"
if [[ "${revision}" != unknown ]] && ! git -C "${root}" diff --quiet HEAD -- 2>/dev/null; then
  revision="${revision}-dirty"
fi
source_url="${TESSERA_IMAGE_SOURCE-$(git -C "${root}" remote get-url origin 2>/dev/null || true)}"
licenses="${TESSERA_IMAGE_LICENSES:-NOASSERTION}"
mirror="${TESSERA_IMAGE_MIRROR:-http://deb.debian.org/debian}"
security="${TESSERA_IMAGE_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"

# The package list: names, and which of them are unpacked without their dependencies.
packages=()
data_packages=()
while read -r name kind rest; do
  [[ -n "${name}" ]] || continue
  [[ -z "${rest}" ]] || die "scripts/image-packages.txt: more than two words on the line of ${name}"
  case "${kind}" in
    "") packages+=("${name}") ;;
    data) data_packages+=("${name}") ;;
    *) die "scripts/image-packages.txt: unknown kind \"${kind}\" for ${name}" ;;
  esac
done < <(sed -e 's/#.*//' "${root}/scripts/image-packages.txt")
[[ ${#packages[@]} -gt 0 ]] || die "scripts/image-packages.txt lists no package"

work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-image.XXXXXX")"
trap 'rm -rf "${work}"' EXIT
chmod 0755 "${work}"
started=$SECONDS

# Layer 1, the Debian packages. The extract variant unpacks the packages and their
# dependencies without running a maintainer script (there is no shell to run them). The
# setup hook makes the tree merged-/usr like every Debian 12 system; the extract hooks fetch
# the data-only packages and copy every downloaded .deb out, for layer 2.
say "Debian 12 packages from ${mirror}: ${packages[*]}"
mkdir -p "${work}/debs"
include="$(IFS=,; echo "${packages[*]}")"
hooks=()
if [[ ${#data_packages[@]} -gt 0 ]]; then
  # shellcheck disable=SC2016 # $1 and $MMDEBSTRAP_APT_CONFIG are the hook's, not ours
  hooks+=(--extract-hook='cd "$1/var/cache/apt/archives" && APT_CONFIG="$MMDEBSTRAP_APT_CONFIG" apt-get --quiet -o APT::Sandbox::User=root download '"${data_packages[*]}")
fi
hooks+=(--extract-hook="copy-out /var/cache/apt/archives/ ${work}/debs")
# shellcheck disable=SC2016 # the hooks' $1 is theirs, not ours
mmdebstrap --variant=extract --format=tar --mode="${TESSERA_IMAGE_MODE:-auto}" \
  --include="${include}" \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --dpkgopt='path-exclude=/usr/share/info/*' \
  --dpkgopt='path-exclude=/usr/share/lintian/*' \
  --dpkgopt='path-exclude=/usr/share/gdb/*' \
  --dpkgopt='path-exclude=/usr/share/gcc/*' \
  --dpkgopt='path-exclude=/usr/share/bash-completion/*' \
  --setup-hook='for d in bin sbin lib lib64; do mkdir -p "$1/usr/$d" && ln -s "usr/$d" "$1/$d"; done' \
  "${hooks[@]}" \
  bookworm "${work}/debian.tar" \
  "deb ${mirror} bookworm main" \
  "deb ${mirror} bookworm-updates main" \
  "deb ${security} bookworm-security main" >&2 ||
  die "mmdebstrap failed (is ${mirror} reachable?)"
# Drop what only the build needed: device nodes (the runtime makes /dev), apt's and dpkg's
# configuration and caches, the host's resolv.conf and hostname, empty directories of
# excluded files. The package list is written again, filled in, in layer 2.
mmtarfilter \
  --path-exclude='/dev/*' \
  --path-exclude='/etc/apt' --path-exclude='/etc/apt/*' \
  --path-exclude='/etc/dpkg/dpkg.cfg.d' --path-exclude='/etc/dpkg/dpkg.cfg.d/*' \
  --path-exclude='/etc/fstab' --path-exclude='/etc/hostname' --path-exclude='/etc/resolv.conf' \
  --path-exclude='/var/cache/apt' --path-exclude='/var/cache/apt/*' \
  --path-exclude='/var/lib/apt' --path-exclude='/var/lib/apt/*' \
  --path-exclude='/var/log/apt' --path-exclude='/var/log/apt/*' \
  --path-exclude='/var/lib/dpkg/*' \
  --path-exclude='/usr/share/gcc' --path-exclude='/usr/share/gdb' \
  --path-exclude='/usr/share/lintian' \
  <"${work}/debian.tar" >"${work}/layer-debian.tar"
rm -f "${work}/debian.tar"

# Layer 2: the data-only packages, users, the CA bundle, the package list.
sys="${work}/system"
mkdir -p "${sys}/usr"
for d in bin sbin lib lib64; do
  mkdir -p "${sys}/usr/${d}"
  ln -s "usr/${d}" "${sys}/${d}"
done
for name in "${data_packages[@]}"; do
  debs=("${work}"/debs/archives/"${name}"_*.deb)
  [[ -f "${debs[0]}" ]] || die "apt-get download did not fetch ${name}"
  dpkg-deb --fsys-tarfile "${debs[0]}" |
    tar -x -p -C "${sys}" --keep-directory-symlink --no-same-owner
done
# What dpkg's path-exclude did for layer 1.
rm -rf "${sys}"/usr/share/{man,locale,info,lintian,bash-completion}
if [[ -d "${sys}/usr/share/doc" ]]; then
  find "${sys}/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
  find "${sys}/usr/share/doc" -mindepth 1 -type d -empty -delete
fi
# ca-certificates' postinst would build the bundle with update-ca-certificates: every
# certificate it ships, each ending in a newline. SSL_CERT_FILE (below) points OpenSSL at it.
if [[ -d "${sys}/usr/share/ca-certificates" ]]; then
  mkdir -p "${sys}/etc/ssl/certs"
  # shellcheck disable=SC1003 # sed's "$a\": add a newline where the last line has none
  find "${sys}/usr/share/ca-certificates" -type f -name '*.crt' | LC_ALL=C sort |
    while read -r crt; do sed -e '$a\' "${crt}"; done >"${sys}/etc/ssl/certs/ca-certificates.crt"
  grep -q 'BEGIN CERTIFICATE' "${sys}/etc/ssl/certs/ca-certificates.crt" ||
    die "ca-certificates gave an empty bundle"
fi
# The user the manifests run as (runAsUser 65532), by name too.
cat >"${sys}/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/usr/sbin/nologin
nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin
EOF
cat >"${sys}/etc/group" <<'EOF'
root:x:0:
nonroot:x:65532:
EOF
cat >"${sys}/etc/nsswitch.conf" <<'EOF'
passwd: files
group: files
hosts: files dns
EOF
mkdir -p "${sys}/home/nonroot"
chmod 0700 "${sys}/home/nonroot"
# dpkg's status file, as if the packages were installed: image scanners read it to know
# which Debian packages, at which versions, the image holds.
mkdir -p "${sys}/var/lib/dpkg"
for deb in "${work}"/debs/archives/*.deb; do
  dpkg-deb --field "${deb}" | awk 'NR == 1 { print; print "Status: install ok installed"; next } { print }'
  echo
done >"${work}/status.unsorted"
python3 - "${work}/status.unsorted" "${sys}/var/lib/dpkg/status" <<'EOF'
import sys
paragraphs = [p for p in open(sys.argv[1]).read().split("\n\n") if p.strip()]
paragraphs.sort(key=lambda p: p.split("\n", 1)[0])
open(sys.argv[2], "w").write("\n\n".join(paragraphs) + "\n")
EOF
package_count=$(grep -c '^Package:' "${sys}/var/lib/dpkg/status")

# Layer 3: the binary and the licences.
app="${work}/app"
install -D -m 0755 "${binary}" "${app}/usr/bin/tessera"
"${root}/scripts/image-licenses.sh" "${app}/licenses"
chmod 0755 "${app}" "${app}/usr" "${app}/usr/bin"

# One tar per layer: sorted names, clamped times, owners fixed (root, except the home of
# nonroot), so the same input gives the same bytes.
pack() { # DIR OUT [tar options]
  local dir="$1" tarball="$2"
  shift 2
  tar --create --file="${tarball}" --directory="${dir}" --sort=name --format=posix \
    --pax-option='exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime' \
    --mtime="@${SOURCE_DATE_EPOCH}" --clamp-mtime --numeric-owner "$@"
}
pack "${sys}" "${work}/layer-system.tar" --owner=0 --group=0 --exclude=./home/nonroot .
tar --append --file="${work}/layer-system.tar" --directory="${sys}" --format=posix \
  --pax-option='exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime' \
  --mtime="@${SOURCE_DATE_EPOCH}" --clamp-mtime --numeric-owner --owner=65532 --group=65532 \
  ./home/nonroot
pack "${app}" "${work}/layer-tessera.tar" --owner=0 --group=0 .

# The image.
layout="${work}/oci"
image="${layout}:${tag}"
history=(--history.created="${created}" --history.author="scripts/build-image.sh")
umoci init --layout "${layout}"
umoci new --image "${image}"
umoci raw add-layer --image "${image}" "${history[@]}" \
  --history.created_by="mmdebstrap --variant=extract bookworm: ${packages[*]}" \
  "${work}/layer-debian.tar"
umoci raw add-layer --image "${image}" "${history[@]}" \
  --history.created_by="${data_packages[*]} (data only), nonroot 65532:65532, CA bundle, dpkg status" \
  "${work}/layer-system.tar"
umoci raw add-layer --image "${image}" "${history[@]}" \
  --history.created_by="/usr/bin/tessera ${version}, /licenses" \
  "${work}/layer-tessera.tar"
labels=(
  --config.label="org.opencontainers.image.title=tessera"
  --config.label="org.opencontainers.image.description=Tessera, a control plane for GPU inference fleets: the server, the node agent and the CLI in one binary"
  --config.label="org.opencontainers.image.version=${version}"
  --config.label="org.opencontainers.image.revision=${revision}"
  --config.label="org.opencontainers.image.created=${created}"
  --config.label="org.opencontainers.image.licenses=${licenses}"
  --config.label="org.opencontainers.image.vendor=The Tessera project"
  # No image lies below this one; this names the Debian release its packages come from.
  --config.label="org.opencontainers.image.base.name=debian:12"
)
if [[ -n "${source_url}" ]]; then
  labels+=(--config.label="org.opencontainers.image.source=${source_url}")
fi
umoci config --image "${image}" --no-history --created="${created}" \
  --config.user=65532:65532 \
  --config.entrypoint=/usr/bin/tessera \
  --config.workingdir=/ \
  --config.env=PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env=SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  "${labels[@]}"
umoci gc --layout "${layout}"

# The archive: the layout's files, packed the same reproducible way.
mkdir -p "$(dirname "${out}")"
pack "${layout}" "${work}/image.tar" --owner=0 --group=0 --mode=a+rX oci-layout index.json blobs
mv "${work}/image.tar" "${out}"

size=$(stat -c %s "${out}")
say "built ${out}: ${tag}, $((size / 1024 / 1024)) MiB compressed (${size} bytes)," \
  "${package_count} Debian packages, revision ${revision}, created ${created}," \
  "in $((SECONDS - started)) s"
echo "${tag}"
