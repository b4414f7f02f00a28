#!/bin/bash
# Uncommitted A/B switch (session 19, call 3): MGPU_AB_CHUNK_IMAGES sets the images per nvJPEG call (default 64), the
# chunk's output bound scaled with it. Apply in the working tree before the device call; revert with git checkout.
set -e
f=data/gpu_jpeg_batches.cpp
python3 - "$f" <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
s = s.replace("NvjpegDecoder::TryCreate(lib, backend, static_cast<int>(kChunkImages))",
              "NvjpegDecoder::TryCreate(lib, backend, static_cast<int>(chunk_images))")
s = s.replace("static_cast<int64_t>(chunks.back().size()) >= kChunkImages ||\n          bytes + need > kDecodeBufferBytes",
              "static_cast<int64_t>(chunks.back().size()) >= chunk_images ||\n          bytes + need > kDecodeBufferBytes * chunk_images / 64")
s = s.replace("  std::unique_ptr<NvjpegDecoder> decoder;\n",
              "  std::unique_ptr<NvjpegDecoder> decoder;\n  const int64_t chunk_images = std::getenv(\"MGPU_AB_CHUNK_IMAGES\") ? std::atoi(std::getenv(\"MGPU_AB_CHUNK_IMAGES\")) : kChunkImages;\n")
s = s.replace("#include <atomic>\n", "#include <atomic>\n#include <cstdlib>\n", 1)
open(p, "w").write(s)
PY
grep -n "chunk_images" $f
