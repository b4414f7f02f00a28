#!/bin/bash
# Builds .pack/pack.tar.xz on the Debian 12 machine: what the GPU host lacks, small enough to travel with the tree
# in one device call (64 MiB in all). /opt/deps: every package of .devdeps (../shared/device/fetch-debs.sh) and
# Fashion-MNIST's, unpacked, Open MPI's alternatives linked, static libraries dropped but GoogleTest's (CMake's
# GTest config checks that they exist), docs and man pages dropped, the IDX files uncompressed (xz packs them
# smaller than gzip; the device call gzips them again). /tmp/site: the wheels of .whl unpacked (torchvision,
# Pillow, nvJPEG). About 54 MB; two minutes of xz -9 on two cores.
set -e
stage=$(mktemp -d); trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/opt/deps" "$stage/tmp/site" .pack
for f in .devdeps/*.deb .mnist/*.deb; do dpkg -x "$f" "$stage/opt/deps"; done
for f in "$stage"/opt/deps/usr/bin/*.openmpi; do ln -sf "/opt/deps/usr/bin/$(basename "$f")" "${f%.openmpi}"; done
touch "$stage/opt/deps/.unpacked"  # activate.sh then unpacks nothing
find "$stage/opt/deps" -name '*.a' ! -name 'libgtest*.a' ! -name 'libgmock*.a' -delete
rm -rf "$stage"/opt/deps/usr/share/{doc,man,locale}
gunzip "$stage"/opt/deps/usr/share/datasets/fashion-mnist/*.gz
for w in .whl/*.whl; do python3 -m zipfile -e "$w" "$stage/tmp/site"; done
tar cf - -C "$stage" opt tmp | xz -T2 -9 > .pack/pack.tar.xz
cp .devdeps/activate.sh .pack/
ls -la .pack
