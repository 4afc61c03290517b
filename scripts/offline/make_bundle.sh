#!/bin/bash
# Build an offline install bundle of TransformerEngine and lightning-thunder for a GPU host that has
# Python 3.12 and a CUDA 13 build of torch but no network (run this where PyPI is reachable).
#
# usage: make_bundle.sh TE_VERSION [THUNDER_VERSION] [DEST_DIR]
#        defaults: THUNDER_VERSION=0.2.6, DEST_DIR=.gpu/te-TE_VERSION (add /.gpu/ to .git/info/exclude)
# env:   ARCHS=90 (compute capabilities whose device code is kept; H100/H200 = 90)
#        EXTRA="pkg==ver ..." (more wheels for the host, e.g. a test dependency it lacks)
#
# The core wheel (transformer_engine_cu13, ~270 MB) is slimmed to ARCHS (~32 MB). The torch extension
# (transformer_engine_torch) exists only as a source package. A prebuilt/ folder beside this script may
# hold it compiled for the host's torch, named transformer_engine_torch-TE-torchTORCH-cp312.so (none is
# shipped in this repository); it is copied into the bundle when present. install_bundle.sh uses it
# when the host's torch matches its tag, and otherwise compiles the source on the host (about a minute
# on 32 cores, three on 16) and keeps the result in the bundle for the next install.
# TransformerEngine publishes CUDA 13 core wheels from 2.9.0 on; 1.x releases need source builds.
set -euo pipefail
TE=${1:?usage: make_bundle.sh TE_VERSION [THUNDER_VERSION] [DEST_DIR]}
THUNDER=${2:-0.2.6}
DEST=${3:-.gpu/te-$TE}
HERE=$(cd "$(dirname "$0")" && pwd)
HOST=(--only-binary=:all: --python-version 3.12 --implementation cp
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
mkdir -p "$DEST"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
python3 -m pip download -q --no-deps -d "$tmp" "transformer-engine-cu13==$TE"
python3 "$HERE/slim_wheel.py" "$tmp"/transformer_engine_cu13-*.whl "$DEST" "${ARCHS:-90}"
# thunder and TE's Python dependencies that the host image lacks (pydantic pinned to one that fits its typing-extensions)
python3 -m pip download -q --no-deps "${HOST[@]}" -d "$DEST" \
  "transformer-engine==$TE" "lightning-thunder==$THUNDER" \
  looseversion==1.3.0 dill optree pydantic==2.11.9 pydantic-core==2.33.2 \
  annotated-types typing-inspection importlib-metadata ${EXTRA:-}
python3 -m pip download -q --no-deps -d "$DEST" "transformer-engine-torch==$TE"
cp "$HERE"/prebuilt/transformer_engine_torch-"$TE"-torch*-cp312.so "$DEST/" 2>/dev/null || true
cp "$HERE/install_bundle.sh" "$DEST/"
du -sh "$DEST"
