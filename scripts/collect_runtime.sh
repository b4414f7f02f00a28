#!/usr/bin/env bash
# Collects what the container image's runtime stage needs from a built tree, the same way for
# both image variants (docker/Dockerfile's build stage runs it inside the image, and
# scripts/build_image.sh --from-tree runs it on the host):
#   scripts/collect_runtime.sh BUILD_DIR DEST
# DEST/bin gets mgpu and mgpu-worker; DEST/lib the shared libraries they load: the `ldd` closure
# of both binaries, plus the libraries LibTorch opens with dlopen at run time (cuDNN's
# sub-libraries, NVRTC and its builtins, torch's lazily loaded linear-algebra library) and their
# own closures. glibc, libstdc++, libgcc_s and Open MPI's libraries are left out: the runtime
# stage's own Debian packages provide them (Open MPI's plugins must match its libmpi).
set -euo pipefail

readonly BUILD_DIR=${1:?usage: scripts/collect_runtime.sh BUILD_DIR DEST}
readonly DEST=${2:?usage: scripts/collect_runtime.sh BUILD_DIR DEST}
readonly BINARIES=("$BUILD_DIR/bin/mgpu" "$BUILD_DIR/bin/mgpu-worker")
# Provided by the runtime stage's packages (libc6, libstdc++6, libgcc-s1, libopenmpi3).
readonly SYSTEM_LIBRARIES='/(ld-linux[^/]*|lib(c|m|dl|rt|pthread|util|resolv|gcc_s|stdc\+\+|mpi|mpi_cxx|open-pal|open-rte|hwloc|event[^/]*|pmix|udev|ltdl)\.so[^/]*)$'
# What LibTorch dlopens (file-name patterns, searched next to the libraries it linked).
readonly DLOPENED=('libcudnn_*.so*' 'libnvrtc*.so*' 'libcaffe2_nvrtc.so' 'libtorch_cuda_linalg.so')

for binary in "${BINARIES[@]}"; do
  [ -x "$binary" ] || { echo "collect_runtime: $binary is missing; run \`make build\` first" >&2; exit 2; }
done

# The libraries `ldd` resolves for the given files, one absolute path a line.
resolved() { ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u; }

mapfile -t linked < <(resolved "${BINARIES[@]}")
# The folders LibTorch's and the CUDA wheels' linked libraries came from hold the dlopened ones.
mapfile -t folders < <(printf '%s\n' "${linked[@]}" | grep -E '/(torch|nvidia)/' | xargs -r -n1 dirname | sort -u)
dlopened=()
for folder in "${folders[@]}"; do
  for pattern in "${DLOPENED[@]}"; do
    for file in "$folder"/$pattern; do [ -f "$file" ] && dlopened+=("$file"); done
  done
done
mapfile -t closure < <({ printf '%s\n' "${linked[@]}" "${dlopened[@]}";
                         [ ${#dlopened[@]} -eq 0 ] || resolved "${dlopened[@]}"; } | sort -u | grep -Ev "$SYSTEM_LIBRARIES")

mkdir -p "$DEST/bin" "$DEST/lib"
cp "${BINARIES[@]}" "$DEST/bin/"
# -L: the file a link names, under the link's own name (the name the loader asks for).
for library in "${closure[@]}"; do cp -L "$library" "$DEST/lib/$(basename "$library")"; done
echo "collect_runtime: ${#BINARIES[@]} binaries, ${#closure[@]} libraries ($(du -sh "$DEST/lib" | cut -f1)) into $DEST"
