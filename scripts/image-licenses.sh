#!/usr/bin/env bash
# Fills DIR, the container image's /licenses, with Tessera's own licence files: every
# LICENSE*, COPYING* and NOTICE* at the top of the source tree. scripts/build-image.sh and
# the Dockerfile both call it, so that the two images carry the same files. The licences of
# the Debian packages in the image stay where Debian keeps them,
# /usr/share/doc/<package>/copyright (with /usr/share/common-licenses).
#
#   scripts/image-licenses.sh DIR
#
# When the tree has no licence file, DIR gets a README saying so (and a warning goes to
# stderr), rather than staying empty or holding a licence nobody granted.
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: scripts/image-licenses.sh DIR" >&2
  exit 2
fi
dest="$1"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

mkdir -p "${dest}"
chmod 0755 "${dest}"
found=0
shopt -s nullglob
for f in "${src}"/LICENSE* "${src}"/COPYING* "${src}"/NOTICE*; do
  [[ -f "${f}" ]] || continue
  install -m 0644 "${f}" "${dest}/$(basename "${f}")"
  found=1
done

if [[ ${found} -eq 0 ]]; then
  echo "image-licenses: the source tree has no LICENSE, COPYING or NOTICE file;" \
    "/licenses holds only a README saying so" >&2
  cat >"${dest}/README" <<'EOF'
The Tessera source tree this image was built from has no licence file (no LICENSE,
COPYING or NOTICE at its top), so there is no Tessera licence to include here.

The copyright and licence of every Debian package in this image are in
/usr/share/doc/<package>/copyright; the licence texts those files refer to are in
/usr/share/common-licenses.
EOF
  chmod 0644 "${dest}/README"
fi
