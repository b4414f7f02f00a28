#!/bin/bash
# Uncommitted A/B switch (session 19, call 5): MGPU_AB_PAGEABLE=1 hands nvJPEG the samples' own (pageable) bytes, as
# before the pinned bitstreams. Apply before the device call; revert with git checkout data/gpu_jpeg_batches.cpp.
set -e
f=data/gpu_jpeg_batches.cpp
python3 - "$f" <<'PY'
import sys
p = sys.argv[1]; s = open(p).read()
old = "      chunk.push_back(EncodedCrop{bitstream, p.bytes.size(), p.full, p.plan.window});"
new = "      chunk.push_back(EncodedCrop{std::getenv(\"MGPU_AB_PAGEABLE\") ? p.bytes.data() : bitstream, p.bytes.size(), p.full, p.plan.window});"
assert old in s; s = s.replace(old, new)
s = s.replace("#include <atomic>\n", "#include <atomic>\n#include <cstdlib>\n", 1)
open(p, "w").write(s)
PY
grep -n "MGPU_AB_PAGEABLE" $f
