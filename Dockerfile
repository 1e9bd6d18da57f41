# Tessera's container image, for those with a container engine and a registry:
#
#   docker build -t tessera:0.1.0 \
#     --build-arg REVISION="$(git rev-parse HEAD)" \
#     --build-arg CREATED="$(date -u -d @"$(git log -1 --format=%ct)" +%Y-%m-%dT%H:%M:%SZ)" .
#
# scripts/build-image.sh builds the same image (the same packages, user, entrypoint, labels
# and /licenses) as an OCI archive from Debian's packages alone, without a registry or a
# container engine; docs/kubernetes.md, "The image", shows both ways. RUN --mount needs
# BuildKit: docker 23 and later use it by default, podman and buildah support it too.

# The build: the release binary, with only the packages building it needs.
FROM debian:12 AS build
COPY scripts/install-deps.sh /src/scripts/install-deps.sh
RUN /src/scripts/install-deps.sh --build-only && rm -rf /var/lib/apt/lists/*
COPY . /src
WORKDIR /src
RUN cmake --preset release -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF \
 && cmake --build --preset release --target tessera \
 && install -D -m 0755 build/release/apps/tessera/tessera /out/usr/bin/tessera \
 && scripts/image-licenses.sh /out/licenses

# The image: Debian 12 slim with the runtime libraries in scripts/image-packages.txt (the
# list build-image.sh reads too), the binary and /licenses.
FROM debian:12-slim
# VERSION: what `tessera --version` prints (project(VERSION) in CMakeLists.txt).
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=
ARG SOURCE=
# An SPDX expression; NOASSERTION while the tree names no licence (as build-image.sh).
ARG LICENSES=NOASSERTION
RUN --mount=type=bind,source=scripts/image-packages.txt,target=/tmp/image-packages.txt \
    apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      $(sed -e 's/#.*//' /tmp/image-packages.txt | awk 'NF { print $1 }') \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 nonroot \
 && useradd --uid 65532 --gid 65532 --home-dir /home/nonroot --create-home \
      --shell /usr/sbin/nologin nonroot
COPY --from=build /out/ /
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
LABEL org.opencontainers.image.title="tessera" \
      org.opencontainers.image.description="Tessera, a control plane for GPU inference fleets: the server, the node agent and the CLI in one binary" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.licenses="${LICENSES}" \
      org.opencontainers.image.vendor="The Tessera project" \
      org.opencontainers.image.base.name="docker.io/library/debian:12-slim"
USER 65532:65532
WORKDIR /
ENTRYPOINT ["/usr/bin/tessera"]
