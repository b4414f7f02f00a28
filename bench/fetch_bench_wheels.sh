#!/usr/bin/env bash
# Downloads the wheels of bench/bench-requirements.txt (torchvision, Pillow) for a host that has
# torch but no package registry, such as the GPU host, so that bench/cpu_lenet_workers.sh can run
# its PyTorch + torchvision side there (BENCH_WHEELS=DEST). A set-up step: the only part that
# downloads; run it on the build machine and send DEST along with the working tree.
#   bash bench/fetch_bench_wheels.sh DEST [PYTHON_VERSION] [BUILD_DIR]
# PYTHON_VERSION is the target host's (default 3.12: Ubuntu 24.04's); pip is the build's venv's.
set -euo pipefail
DEST=${1:?"usage: bash bench/fetch_bench_wheels.sh DEST [PYTHON_VERSION] [BUILD_DIR]"}
PYTHON_VERSION=${2:-3.12}
BUILD_DIR=${3:-build}
here=$(cd "$(dirname "$0")" && pwd)
. "$BUILD_DIR/.setup.env"
mkdir -p "$DEST"
"${MGPU_PYTHON:?"$BUILD_DIR/.setup.env does not name MGPU_PYTHON"}" -m pip download --quiet --only-binary=:all: --no-deps --python-version "$PYTHON_VERSION" \
  --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d "$DEST" -r "$here/bench-requirements.txt"
ls -1 "$DEST"/*.whl
