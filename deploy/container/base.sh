#!/usr/bin/env bash
# A Debian 12 base image made from Debian's packages (mmdebstrap, then podman import),
# for machines that reach Debian's mirror but no container registry. Usage: base.sh TAG
set -euo pipefail
tag=${1:-localhost/llm-server-base:bookworm}
if podman image exists "$tag"; then
  exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# What the image's stages would otherwise apt-get: Python with venv (the builder), tini
# (PID 1) and the OpenMP runtime llama.cpp links to.
mmdebstrap --quiet --variant=minbase --include=python3,python3-venv,libgomp1,tini \
  bookworm "$work/rootfs.tar"
podman import --quiet "$work/rootfs.tar" "$tag" >/dev/null
echo "made $tag from Debian's packages"
