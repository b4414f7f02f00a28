#!/usr/bin/env bash
# Installs what mgpu needs on a Debian 12 machine, idempotently, and says what it installs.
#   scripts/setup.sh ENV_FILE
# Writes ENV_FILE (sourced by the Makefile) with TORCH_PREFIX (LibTorch's CMake prefix),
# MGPU_PYTHON (a Python that imports the same torch, for the PyTorch reference benchmarks)
# and MGPU_TEST_PYTHON (a Python with the pinned `tensorboard` package, whose own event reader
# the tests check our event files against). The tests also open report.html in Debian's
# chromium, one of the packages below.
#
# LibTorch comes from, in order: Torch_DIR or TORCH_PREFIX if set; `python3 -c 'import torch'`
# if that works; else the pinned torch wheel in a virtual environment cached outside the
# checkout (MGPU_CACHE, default ~/.cache/mgpu).
# NVJPEG_INCLUDE_DIR in ENV_FILE: the folder of nvjpeg.h for `--decode gpu`, from the
# nvidia-nvjpeg wheel installed beside that torch (empty where none: the feature is compiled out).
# CUDA_TOOLKIT_ROOT in ENV_FILE: a CUDA toolkit for LibTorch's CMake config, which a CUDA build of
# torch needs (nvcc, CUDA's headers and libraries) and the torch wheel does not bring. Empty where
# the machine has one (nvcc on PATH, /usr/local/cuda, CUDA_HOME or CUDAToolkit_ROOT given) or torch
# is a CPU build; else assembled in the cache from NVIDIA's PyPI wheels (nvcc, NVVM, CRT, CCCL)
# installed beside that torch.
set -euo pipefail

readonly TORCH_VERSION=2.11.0
readonly ENV_FILE=${1:?usage: scripts/setup.sh ENV_FILE}
readonly CACHE_DIR=${MGPU_CACHE:-$HOME/.cache/mgpu}
readonly VENV=$CACHE_DIR/venv-torch-$TORCH_VERSION
readonly TENSORBOARD_VERSION=2.21.0
# nvJPEG for `--decode gpu`: the release series of the torch wheel's CUDA (13.0). Only its header is
# used at build time; libnvjpeg is opened at run time (dlopen).
readonly NVJPEG_SPEC='nvidia-nvjpeg==13.0.*'
# The CUDA wheels beside the torch wheel's own (runtime, NVRTC, cuBLAS, ...) that make a toolkit
# LibTorch's CMake config accepts: it runs enable_language(CUDA), so nvcc must compile a test
# program (nvcc, NVVM's cicc, CRT's and CCCL's headers). Installed as CUDA_SERIES.* (torch.version.cuda).
readonly CUDA_TOOLKIT_WHEELS=(nvidia-cuda-nvcc nvidia-nvvm nvidia-cuda-crt nvidia-cuda-cccl)
# Its own small venv, not the torch one: MGPU_PYTHON may be a system Python that pip must not
# change, and the tests need nothing from torch.
readonly TEST_VENV=$CACHE_DIR/venv-tensorboard-$TENSORBOARD_VERSION

# Build and run dependencies (Debian 12 package names).
readonly DEBIAN_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config python3 python3-venv zlib1g-dev
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev libfmt-dev libopenmpi-dev openmpi-bin
  libgtest-dev libgmock-dev nlohmann-json3-dev libyaml-cpp-dev libcli11-dev libgloo-dev
  libjpeg62-turbo-dev libpng-dev
  libutfcpp-dev
  clang libclang-rt-14-dev  # the fuzz targets (tests/fuzz/): clang and its libFuzzer and sanitizer runtimes
  openssl
  dataset-fashion-mnist
  chromium
  # The `slurm` tests' one-node Slurm. Installing starts nothing that a test relies on or that
  # gets in its way: munge's service (with systemd) serves its own socket and key, which the tests
  # do not use, and slurmctld's and slurmd's services start only with an /etc/slurm/slurm.conf.
  slurm-wlm munge
  # The `container` tests' engine (scripts/container_engine.sh): podman with runc (crun refuses
  # this kind of machine's cgroups), netavark and aardvark-dns for a network whose containers
  # find each other by name, iptables for netavark's rules, and mmdebstrap for the Debian 12 base
  # where no image registry can be reached. Run as root, so none of rootless podman's helpers.
  podman runc netavark aardvark-dns iptables mmdebstrap
)

say() { printf '[setup] %s\n' "$*"; }

install_debian_packages() {
  local missing=()
  for p in "${DEBIAN_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    say "Debian packages: all ${#DEBIAN_PACKAGES[@]} present"
    return
  fi
  say "Debian packages: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# Prints LibTorch's CMake prefix and the Python that goes with it (empty if none), one per line.
find_torch() {
  if [ -n "${Torch_DIR:-}" ]; then
    say "LibTorch: Torch_DIR=$Torch_DIR (given)" >&2
    printf '%s\n%s\n' "$(cd "$Torch_DIR/.." && pwd)" ""
  elif [ -n "${TORCH_PREFIX:-}" ]; then
    say "LibTorch: TORCH_PREFIX=$TORCH_PREFIX (given)" >&2
    printf '%s\n%s\n' "$TORCH_PREFIX" ""
  elif prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null); then
    say "LibTorch: from python3's torch $(python3 -c 'import torch; print(torch.__version__)')" >&2
    printf '%s\n%s\n' "$prefix" "$(command -v python3)"
  else
    if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
      say "LibTorch: installing torch==$TORCH_VERSION into $VENV (about 5 GB, once)" >&2
      python3 -m venv "$VENV"
      "$VENV/bin/pip" install -q --upgrade pip >&2
      "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" numpy >&2
    else
      say "LibTorch: cached torch==$TORCH_VERSION in $VENV" >&2
    fi
    printf '%s\n%s\n' "$("$VENV/bin/python" -c 'import torch; print(torch.utils.cmake_prefix_path)')" \
      "$VENV/bin/python"
  fi
}

# The test environment's Python: tensorboard==$TENSORBOARD_VERSION, installed once.
install_test_python() {
  if "$TEST_VENV/bin/python" -c "import tensorboard, sys; sys.exit(tensorboard.__version__ != '$TENSORBOARD_VERSION')" \
      2>/dev/null; then
    say "tests: cached tensorboard==$TENSORBOARD_VERSION in $TEST_VENV"
    return
  fi
  say "tests: installing tensorboard==$TENSORBOARD_VERSION into $TEST_VENV (about 45 MB, once)"
  python3 -m venv "$TEST_VENV"
  "$TEST_VENV/bin/pip" install -q --disable-pip-version-check "tensorboard==$TENSORBOARD_VERSION"
}

# Prints the folder holding nvjpeg.h beside the Python `python` (installing the wheel into a venv
# this script made), or nothing.
find_nvjpeg_header() {
  local python=$1
  [ -n "$python" ] || return 0
  if [ "$python" = "$VENV/bin/python" ] && [ -z "$(find_nvjpeg_in "$python")" ]; then
    say "nvJPEG: installing $NVJPEG_SPEC into $VENV (about 10 MB, once)" >&2
    "$VENV/bin/pip" install -q --disable-pip-version-check "$NVJPEG_SPEC" >&2
  fi
  find_nvjpeg_in "$python"
}

find_nvjpeg_in() {
  "$1" - <<'PY' 2>/dev/null || true
import glob, os, site
for root in site.getsitepackages():
    for header in sorted(glob.glob(os.path.join(root, "nvidia", "*", "include", "nvjpeg.h"))):
        print(os.path.dirname(header))
        raise SystemExit
PY
}

# True where the machine already has a CUDA toolkit that CMake finds by itself or is told of.
machine_has_cuda_toolkit() {
  nvcc --version >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || [ -n "${CUDA_HOME:-}" ] \
    || [ -n "${CUDAToolkit_ROOT:-}" ]
}

# Prints the folder of a CUDA toolkit assembled from PyPI wheels for the torch of the Python
# `python` (installing them into a venv this script made), or nothing where none is needed or
# none can be made here.
find_cuda_toolkit() {
  local python=$1 series
  [ -n "$python" ] || return 0
  series=$("$python" -c 'import torch; print(torch.version.cuda or "")' 2>/dev/null) || return 0
  [ -n "$series" ] || return 0
  if machine_has_cuda_toolkit; then
    say "CUDA toolkit: this machine's (torch is a CUDA $series build)" >&2
    return 0
  fi
  if [ "$python" != "$VENV/bin/python" ]; then
    say "CUDA toolkit: none here, and torch (CUDA $series) is $python's, which this script does not change;" \
      "install CUDA $series (nvcc) or set CUDAToolkit_ROOT, else LibTorch's CMake config fails" >&2
    return 0
  fi
  local specs=("${CUDA_TOOLKIT_WHEELS[@]/%/==$series.*}")
  if ! "$python" -c 'import importlib.metadata as m, sys; [m.version(n) for n in sys.argv[1:]]' \
      "${CUDA_TOOLKIT_WHEELS[@]}" 2>/dev/null; then
    say "CUDA toolkit: none here; installing ${specs[*]} into $VENV (about 100 MB, once)" >&2
    "$VENV/bin/pip" install -q --disable-pip-version-check "${specs[@]}" >&2
  fi
  assemble_cuda_toolkit "$python" "$CACHE_DIR/cuda-toolkit-$series"
}

# Makes ROOT a CUDA toolkit folder as CMake and nvcc expect one, from the wheels' nvidia/cuMAJOR
# folder: bin/ (hard-linked or copied: nvcc finds nvcc.profile, nvvm/ and targets/ beside its own
# real path), include/, nvvm/, lib64/ with the unversioned .so names find_library looks for, and
# targets/x86_64-linux/ (nvcc.profile's include and library folders). Prints ROOT.
assemble_cuda_toolkit() {
  local python=$1 root=$2 wheels
  if [ -x "$root/bin/nvcc" ] && "$root/bin/nvcc" --version >/dev/null 2>&1; then
    say "CUDA toolkit: cached in $root" >&2
    printf '%s\n' "$root"
    return
  fi
  wheels=$("$python" -c 'import nvidia, os, glob
print(next(os.path.dirname(os.path.dirname(nvcc)) for path in nvidia.__path__
           for nvcc in glob.glob(os.path.join(path, "cu*", "bin", "nvcc"))))')
  say "CUDA toolkit: assembling $root from $wheels" >&2
  rm -rf "$root.tmp" && mkdir -p "$root.tmp/lib64" "$root.tmp/targets/x86_64-linux"
  cp -rl "$wheels/bin" "$root.tmp/bin" 2>/dev/null || cp -r "$wheels/bin" "$root.tmp/bin"
  ln -s "$wheels/include" "$root.tmp/include"
  ln -s "$wheels/nvvm" "$root.tmp/nvvm"
  local lib name
  for lib in "$wheels"/lib/*; do
    name=$(basename "$lib")
    ln -s "$lib" "$root.tmp/lib64/$name"
    case $name in
      *.so.*) [ -e "$root.tmp/lib64/${name%%.so.*}.so" ] || ln -s "$lib" "$root.tmp/lib64/${name%%.so.*}.so" ;;
    esac
  done
  ln -s lib64 "$root.tmp/lib"
  ln -s ../../include "$root.tmp/targets/x86_64-linux/include"
  ln -s ../../lib64 "$root.tmp/targets/x86_64-linux/lib"
  rm -rf "$root" && mv "$root.tmp" "$root"
  printf '%s\n' "$root"
}

install_debian_packages
install_test_python
mapfile -t torch_info < <(find_torch)
nvjpeg_include=$(find_nvjpeg_header "${torch_info[1]}")
if [ -n "$nvjpeg_include" ]; then
  say "nvJPEG: header in $nvjpeg_include"
else
  say "nvJPEG: no nvjpeg.h beside this torch; --decode gpu is compiled out"
fi
cuda_toolkit_root=$(find_cuda_toolkit "${torch_info[1]}")
[ -z "$cuda_toolkit_root" ] || say "CUDA toolkit: $cuda_toolkit_root (for LibTorch's CMake config and mgpu's own CUDA kernels)"
mkdir -p "$(dirname "$ENV_FILE")"
cat > "$ENV_FILE.tmp" <<ENV
TORCH_PREFIX=${torch_info[0]}
MGPU_PYTHON=${torch_info[1]}
MGPU_TEST_PYTHON=$TEST_VENV/bin/python
NVJPEG_INCLUDE_DIR=$nvjpeg_include
CUDA_TOOLKIT_ROOT=$cuda_toolkit_root
ENV
mv "$ENV_FILE.tmp" "$ENV_FILE"
say "wrote $ENV_FILE"
