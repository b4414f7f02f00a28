#!/usr/bin/env python3
"""Per-step GPU time of a Chrome trace by kind: the batch-norm family split into mgpu's kernels
(by name) and Triton's (reduction or pointwise, forward or backward), then every kernel by
category. Standard library only.

    python3 breakdown.py TRACE.json STEPS [LAST_MS]
LAST_MS: only the kernels that start in the trace's last LAST_MS milliseconds (mgpu's ResNet-18
trace: its first profiled step also holds an epoch end's evaluation, so the last four steps).
"""
import collections
import json
import re
import sys


def kind(name):
    if name.startswith("triton"):
        if "max_pool" in name:
            return "triton max-pool"
        if "batch_norm" not in name and "backward" not in name:
            return "triton other (casts, running statistics)"
        shape = {"_red_": "reduction", "_poi_": "pointwise", "_per_": "persistent reduction"}
        return "triton " + next((v for k, v in shape.items() if k in name), "?") + (
            " backward" if "backward" in name else " forward")
    if "mgpu::kernels" in name:
        return "mgpu " + name.split("(anonymous namespace)::")[-1].split("<")[0].split("(")[0]
    categories = [("convolution/gemm", "cudnn|xmma|cutlass|gemm|conv|sm90|sm80|implicit|wgrad|dgrad|nhwc|nvjet"),
                  ("optimizer, multi-tensor copies", "multi_tensor|sgd|fused_"),
                  ("ATen element-wise", "elementwise|vectorized|unrolled"), ("ATen reduce", "reduce")]
    return next((k for k, p in categories if re.search(p, name.lower())), "other")


def main():
    path, steps = sys.argv[1], int(sys.argv[2])
    last_ms = float(sys.argv[3]) if len(sys.argv) > 3 else 0
    events = json.load(open(path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    end = max(e["ts"] + e["dur"] for e in kernels)
    if last_ms:
        kernels = [e for e in kernels if e["ts"] >= end - last_ms * 1000]
    by = collections.defaultdict(lambda: [0, 0.0])
    for e in kernels:
        by[kind(e["name"])][0] += 1
        by[kind(e["name"])][1] += e["dur"]
    span = end - min(e["ts"] for e in kernels)
    print(f"{path}: {len(kernels) / steps:.1f} kernels, busy {sum(v[1] for v in by.values()) / steps:.1f} us, "
          f"span {span / steps:.1f} us a step")
    for name, (count, busy) in sorted(by.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name:44s} {busy / steps:8.1f} us {count / steps:6.1f} kernels")


if __name__ == "__main__":
    main()
