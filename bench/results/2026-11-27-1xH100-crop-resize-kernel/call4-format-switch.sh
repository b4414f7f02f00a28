#!/bin/bash
# Uncommitted A/B switch (session 19, call 4): MGPU_AB_NVJPEG_FORMAT=yuv|rgbi asks nvJPEG for that output instead of
# planar RGB (the pixels are then wrong, the timing is what counts). Apply before the device call; revert with git checkout.
set -e
f=data/nvjpeg_decoder.cpp
python3 - "$f" <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
s = s.replace("namespace {\n", """namespace {

nvjpegOutputFormat_t AbFormat() {
  const char* f = std::getenv("MGPU_AB_NVJPEG_FORMAT");
  if (f != nullptr && std::string(f) == "yuv") return NVJPEG_OUTPUT_YUV;
  if (f != nullptr && std::string(f) == "rgbi") return NVJPEG_OUTPUT_RGBI;
  return NVJPEG_OUTPUT_RGB;
}
""", 1)
s = s.replace("lib_.DecodeParamsSetOutputFormat(params, NVJPEG_OUTPUT_RGB);", "lib_.DecodeParamsSetOutputFormat(params, AbFormat());")
s = s.replace("DecodeBatchedInitialize(handle_, state_, call_images_, 1, NVJPEG_OUTPUT_RGB)", "DecodeBatchedInitialize(handle_, state_, call_images_, 1, AbFormat())")
s = s.replace("""      images[k].pitch[c] = static_cast<size_t>(width);
    }""", """      images[k].pitch[c] = static_cast<size_t>(width);
    }
    if (AbFormat() == NVJPEG_OUTPUT_RGBI) images[k].pitch[0] = static_cast<size_t>(3 * width);""")
open(p, "w").write(s)
PY
grep -n "AbFormat" $f
