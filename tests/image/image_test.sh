#!/usr/bin/env bash
# The container image (docs/kubernetes.md, "The image"). Builds the OCI archive with
# scripts/build-image.sh, or takes the one $TESSERA_IMAGE_ARCHIVE names, and reads it the way
# a container runtime does: index.json, the manifest tagged tessera:<version>, the config and
# the layers, each blob checked against its digest. Then it checks the config (user
# 65532:65532, entrypoint /usr/bin/tessera, the OCI labels), the layers (the binary 0755 and
# root's, nonroot's home, /licenses, no device node, no whiteout), and runs
# `tessera --version` and `tessera serve --help` from the unpacked root filesystem: under
# chroot, as 65532 as well, when that is permitted, else through the image's own dynamic
# loader. Before any of that, without a network, it checks that the manifests, the
# kustomization and the Dockerfile name the same image and version.
#
#   tests/image/image_test.sh [BINARY]     BINARY: default build/release/apps/tessera/tessera
#
# Exit status: 0 passed, 1 failed, 77 skipped (mmdebstrap or umoci missing, the Debian mirror
# unreachable, or not root and no subordinate ids for mmdebstrap's unshare mode), as CTest's
# SKIP_RETURN_CODE.
set -euo pipefail

src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
binary="${1:-${src}/build/release/apps/tessera/tessera}"

failures=0
pass() { echo "ok    $*"; }
fail() {
  echo "FAIL  $*"
  failures=$((failures + 1))
}
skip() {
  echo "SKIP: $*"
  exit 77
}
check() { # DESCRIPTION COMMAND...
  local what="$1"
  shift
  if "$@"; then pass "${what}"; else fail "${what}"; fi
}

[[ -x "${binary}" ]] || {
  echo "FAIL  no tessera binary at ${binary}"
  exit 1
}
version_line="$("${binary}" --version)"
version="${version_line##* }"
tag="tessera:${version}"
echo "binary ${binary}: ${version_line}"

# --- What the repository says about the image (no network, no tools needed) ---------------
kustomization="${src}/deploy/base/kustomization.yaml"
# The images: entry for `tessera` in the base: its newName and newTag.
read -r k_name k_tag < <(awk '
  /^images:/ { inimages = 1; next }
  inimages && /^[^ #-]/ { inimages = 0 }
  inimages && /^  - name:/ { current = $3; next }
  inimages && current == "tessera" && /newName:/ { name = $2 }
  inimages && current == "tessera" && /newTag:/ { tag = $2 }
  END { print (name == "" ? "-" : name), (tag == "" ? "-" : tag) }' "${kustomization}")
k_tag="${k_tag//\"/}"
check "the base's images: entry names ${tag} (found ${k_name}:${k_tag})" \
  test "${k_name}:${k_tag}" = "${tag}"
for manifest in control-plane.yaml agent.yaml; do
  images="$(awk '/^ *image:/ { print $2 }' "${src}/deploy/base/${manifest}" | sort -u | tr '\n' ' ')"
  check "deploy/base/${manifest} runs ${tag} (image: ${images% })" test "${images% }" = "${tag}"
done
dockerfile="${src}/Dockerfile"
check "the Dockerfile's VERSION defaults to ${version}" grep -q "^ARG VERSION=${version}\$" "${dockerfile}"
check "the Dockerfile runs as 65532:65532" grep -q '^USER 65532:65532$' "${dockerfile}"
check "the Dockerfile's entrypoint is /usr/bin/tessera" \
  grep -q '^ENTRYPOINT \["/usr/bin/tessera"\]$' "${dockerfile}"
check "the Dockerfile installs scripts/image-packages.txt" \
  grep -q 'image-packages.txt' "${dockerfile}"
for key in title description version revision created source licenses vendor base.name; do
  check "the Dockerfile sets the label org.opencontainers.image.${key}" \
    grep -q "org\.opencontainers\.image\.${key}=" "${dockerfile}"
done

# --- The archive ---------------------------------------------------------------------------
command -v python3 >/dev/null 2>&1 || skip "python3 is not installed (it reads the image's JSON)"
work="$(mktemp -d "${TMPDIR:-/tmp}/tessera-image-test.XXXXXX")"
cleanup() { rm -rf "${work}"; }
trap cleanup EXIT

if [[ -n "${TESSERA_IMAGE_ARCHIVE:-}" ]]; then
  archive="${TESSERA_IMAGE_ARCHIVE}"
  [[ -f "${archive}" ]] || {
    echo "FAIL  TESSERA_IMAGE_ARCHIVE=${archive} is not a file"
    exit 1
  }
  echo "archive ${archive} (from TESSERA_IMAGE_ARCHIVE)"
else
  for tool in mmdebstrap umoci; do
    command -v "${tool}" >/dev/null 2>&1 ||
      skip "${tool} is not installed (apt-get install mmdebstrap umoci, or scripts/install-deps.sh)"
  done
  if [[ "$(id -u)" -ne 0 ]] && ! grep -q "^$(id -un):" /etc/subuid 2>/dev/null; then
    skip "not root, and $(id -un) has no subordinate ids in /etc/subuid for mmdebstrap's unshare mode"
  fi
  mirror="${TESSERA_IMAGE_MIRROR:-http://deb.debian.org/debian}"
  if ! timeout 30 /usr/lib/apt/apt-helper download-file "${mirror}/dists/bookworm/InRelease" \
    "${work}/InRelease" >/dev/null 2>&1; then
    skip "the Debian mirror ${mirror} is not reachable"
  fi
  archive="${work}/tessera.tar"
  started=$SECONDS
  if ! "${src}/scripts/build-image.sh" "${archive}" --binary "${binary}" >"${work}/stdout" 2>"${work}/stderr"; then
    cat "${work}/stderr"
    echo "FAIL  scripts/build-image.sh failed"
    exit 1
  fi
  built_in=$((SECONDS - started))
  tail -n 1 "${work}/stderr"
  check "build-image.sh prints the tag ${tag} last (printed: $(tail -n 1 "${work}/stdout"))" \
    test "$(tail -n 1 "${work}/stdout")" = "${tag}"
  pass "the archive built in ${built_in} s"
fi
echo "archive size: $(stat -c %s "${archive}") bytes"

# Read the layout as a runtime would and unpack the layers in order.
layout="${work}/layout"
rootfs="${work}/rootfs"
mkdir -p "${layout}" "${rootfs}"
tar -xf "${archive}" -C "${layout}"
if ! python3 - "${layout}" "${tag}" "${version}" "${work}/layers" <<'EOF'; then
import hashlib, json, os, re, sys, tarfile

layout, tag, version, layers_out = sys.argv[1:5]
failures = 0

def check(ok, what):
    global failures
    print(("ok    " if ok else "FAIL  ") + what)
    if not ok:
        failures += 1

def blob(desc):
    algo, digest = desc["digest"].split(":", 1)
    path = os.path.join(layout, "blobs", algo, digest)
    data = open(path, "rb").read()
    check(hashlib.sha256(data).hexdigest() == digest and len(data) == desc["size"],
          f"blob {digest[:12]} matches its digest and size")
    return path, data

check(json.load(open(os.path.join(layout, "oci-layout"))).get("imageLayoutVersion") == "1.0.0",
      "oci-layout says 1.0.0")
index = json.load(open(os.path.join(layout, "index.json")))
tagged = [m for m in index["manifests"]
          if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag]
check(len(tagged) == 1, f"index.json tags one manifest {tag}")
if not tagged:
    sys.exit(1)
_, data = blob(tagged[0])
manifest = json.loads(data)
check(manifest["config"]["mediaType"] == "application/vnd.oci.image.config.v1+json",
      "the manifest's config is an OCI image config")
_, data = blob(manifest["config"])
config = json.loads(data)
c = config.get("config", {})
check(config.get("os") == "linux", f"os linux ({config.get('os')})")
check(c.get("User") == "65532:65532", f"User 65532:65532 ({c.get('User')!r})")
check(c.get("Entrypoint") == ["/usr/bin/tessera"],
      f"Entrypoint [\"/usr/bin/tessera\"] ({c.get('Entrypoint')!r})")
check(not c.get("Cmd"), f"no Cmd: the manifests give the arguments ({c.get('Cmd')!r})")
labels = c.get("Labels") or {}
for key in ("title", "description", "version", "revision", "licenses", "created", "vendor",
            "base.name"):
    value = labels.get("org.opencontainers.image." + key, "")
    check(value != "", f"label org.opencontainers.image.{key} = {value!r}")
check(labels.get("org.opencontainers.image.version") == version, f"the version label is {version}")
check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",
                   labels.get("org.opencontainers.image.created", "")) is not None,
      "the created label is an RFC 3339 time")
check(config.get("created") == labels.get("org.opencontainers.image.created"),
      "the config's created time is the label's")
check(len(config["rootfs"]["diff_ids"]) == len(manifest["layers"]),
      f"{len(manifest['layers'])} layers, one diff_id each")

# The layers: what they hold, then their paths in order for the shell to unpack.
members = {}
paths = []
for desc in manifest["layers"]:
    check(desc["mediaType"] in ("application/vnd.oci.image.layer.v1.tar+gzip",
                                "application/vnd.oci.image.layer.v1.tar"),
          f"layer {desc['digest'][7:19]} is a tar ({desc['mediaType']})")
    path, _ = blob(desc)
    paths.append(path)
    with tarfile.open(path) as t:
        for m in t.getmembers():
            name = os.path.normpath("/" + m.name)
            base = os.path.basename(name)
            if base.startswith(".wh."):
                check(False, f"no whiteout ({name})")
            if m.ischr() or m.isblk() or m.isfifo():
                check(False, f"no device node or fifo ({name})")
            members[name] = m
tessera = members.get("/usr/bin/tessera")
check(tessera is not None and tessera.isfile(), "/usr/bin/tessera is a file")
if tessera is not None:
    check(tessera.mode & 0o7777 == 0o755 and tessera.uid == 0 and tessera.gid == 0,
          f"/usr/bin/tessera is 0755 0:0 ({tessera.mode & 0o7777:o} {tessera.uid}:{tessera.gid})")
home = members.get("/home/nonroot")
check(home is not None and home.isdir() and home.uid == 65532 and home.gid == 65532,
      "/home/nonroot belongs to 65532:65532")
check(any(n.startswith("/licenses/") and m.isfile() for n, m in members.items()),
      "/licenses holds a file")
for link in ("/bin", "/lib", "/lib64", "/sbin"):
    m = members.get(link)
    check(m is not None and m.issym() and m.linkname == "usr" + link,
          f"{link} -> usr{link} (merged /usr)")
open(layers_out, "w").write("\n".join(paths) + "\n")
sys.exit(1 if failures else 0)
EOF
  failures=$((failures + 1))
fi
[[ -f "${work}/layers" ]] || {
  echo "FAIL  the image could not be read"
  exit 1
}
while read -r layer; do
  tar -xf "${layer}" -C "${rootfs}" --numeric-owner --keep-directory-symlink
done <"${work}/layers"

check "/etc/passwd names nonroot 65532:65532" grep -q '^nonroot:x:65532:65532:' "${rootfs}/etc/passwd"
check "/etc/group names nonroot 65532" grep -q '^nonroot:x:65532:' "${rootfs}/etc/group"
check "the CA bundle holds certificates" grep -q 'BEGIN CERTIFICATE' "${rootfs}/etc/ssl/certs/ca-certificates.crt"
check "os-release says Debian 12" grep -q '^VERSION_ID="12"' "${rootfs}/etc/os-release"
check "dpkg's status lists libc6" grep -q '^Package: libc6$' "${rootfs}/var/lib/dpkg/status"
check "no shell in the image" test ! -e "${rootfs}/bin/sh"
if [[ -z "${TESSERA_IMAGE_ARCHIVE:-}" ]]; then
  check "the image's binary is the one given" cmp -s "${binary}" "${rootfs}/usr/bin/tessera"
fi

# --- Run it from the image's root filesystem -----------------------------------------------
run() { # ARGS... : tessera inside the image
  if [[ "${mode}" == chroot ]]; then
    chroot "${rootfs}" /usr/bin/tessera "$@"
  else
    # Not ROOTFS/lib64/ld-linux-x86-64.so.2: that link is absolute, so it names the host's.
    local libdir loader
    libdir="$(find "${rootfs}/usr/lib" -maxdepth 1 -type d -name '*-linux-gnu*' | head -n 1)"
    loader="$(find "${libdir}" -maxdepth 1 -name 'ld-linux*.so*' | head -n 1)"
    "${loader}" --library-path "${libdir}:${rootfs}/usr/lib" "${rootfs}/usr/bin/tessera" "$@"
  fi
}
if chroot "${rootfs}" /usr/bin/tessera --version >/dev/null 2>&1; then
  mode=chroot
else
  mode=loader
  echo "note: chroot is not permitted here; running through the image's dynamic loader"
fi
echo "running from the root filesystem by ${mode}"
inside="$(run --version 2>&1)" || true
check "tessera --version inside the image prints \"${version_line}\" (printed \"${inside}\")" \
  test "${inside}" = "${version_line}"
if run serve --help >"${work}/serve-help" 2>&1; then
  check "tessera serve --help inside the image shows the serve usage" \
    grep -q 'tessera serve' "${work}/serve-help"
else
  cat "${work}/serve-help"
  fail "tessera serve --help inside the image exited non-zero"
fi
if [[ "${mode}" == chroot ]]; then
  as_nonroot="$(chroot --userspec=65532:65532 "${rootfs}" /usr/bin/tessera --version 2>&1)" || true
  check "as 65532:65532 too (printed \"${as_nonroot}\")" test "${as_nonroot}" = "${version_line}"
fi

if [[ ${failures} -gt 0 ]]; then
  echo "${failures} check(s) failed"
  exit 1
fi
echo "all checks passed"
