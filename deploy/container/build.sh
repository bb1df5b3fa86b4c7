#!/usr/bin/env bash
# Build the image with podman. IMAGE: its tag. BASE: the base image (unset: one made here
# from Debian's packages, deploy/container/base.sh). PODMAN_BUILD_FLAGS: podman's own.
set -euo pipefail
cd "$(dirname "$0")/../.."
image=${IMAGE:-localhost/llm-server:local}
base=${BASE:-}
if [ -z "$base" ]; then
  base=localhost/llm-server-base:bookworm
  bash deploy/container/base.sh "$base"
fi
# chroot isolation builds where podman's default runtime cannot (hybrid cgroups); the
# docker format keeps the HEALTHCHECK, which the OCI format has no field for.
# shellcheck disable=SC2086
podman build ${PODMAN_BUILD_FLAGS:---isolation chroot} --format docker \
  --build-arg BASE="$base" --tag "$image" --file Containerfile .
