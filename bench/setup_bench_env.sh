#!/usr/bin/env bash
# One-time set-up for bench/cpu_lenet_workers.sh: a bench-only virtual environment that sees the
# pinned torch of the build's venv (through a .pth file, nothing copied or changed there) and
# adds bench/bench-requirements.txt (torchvision built for that torch, and Pillow, which its
# transforms need). This is the only step that downloads anything; the benchmark never does.
#   bash bench/setup_bench_env.sh [BUILD_DIR]
set -euo pipefail
BUILD_DIR=${1:-build}
. "$BUILD_DIR/.setup.env"
TORCH_PY=${MGPU_PYTHON:?"$BUILD_DIR/.setup.env does not name MGPU_PYTHON"}
BENCH_VENV=${MGPU_BENCH_VENV:-${MGPU_CACHE:-$HOME/.cache/mgpu}/venv-bench}
if [ ! -x "$BENCH_VENV/bin/python" ]; then
  "$TORCH_PY" -m venv "$BENCH_VENV"
fi
torch_site=$("$TORCH_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
bench_site=$("$BENCH_VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$torch_site" > "$bench_site/mgpu-torch-venv.pth"
if ! "$BENCH_VENV/bin/python" -c 'import torchvision, PIL' 2>/dev/null; then
  "$BENCH_VENV/bin/python" -m pip install --quiet --no-deps -r "$(dirname "$0")/bench-requirements.txt"
fi
"$BENCH_VENV/bin/python" -c 'import torch, torchvision, PIL; print("bench venv:", torch.__version__, torchvision.__version__, "Pillow", PIL.__version__)'
