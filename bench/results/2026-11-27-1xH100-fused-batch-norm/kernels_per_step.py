# Kernels per step in a Chrome trace (mgpu --profile-steps or torch.profiler): count and busy us per step.
import collections, json, sys
path, steps = sys.argv[1], int(sys.argv[2])
events = json.load(open(path))
events = events["traceEvents"] if isinstance(events, dict) else events
by = collections.defaultdict(lambda: [0, 0.0])
for e in events:
    if e.get("cat") == "kernel" and e.get("ph") == "X":
        by[e["name"]][0] += 1
        by[e["name"]][1] += float(e.get("dur", 0))
count = sum(v[0] for v in by.values()); busy = sum(v[1] for v in by.values())
print(f"{path}: {count / steps:.1f} kernels/step, busy {busy / steps:.1f} us/step")
for name, (n, d) in sorted(by.items(), key=lambda kv: -kv[1][1])[:int(sys.argv[3]) if len(sys.argv) > 3 else 14]:
    print(f"  {d / steps:7.1f} us/step {n / steps:4.1f}x  {name[:110]}")

def category(name):
    n = name.lower()
    for key, pattern in [("triton", "triton"), ("batch_norm", "batch_norm|bn_"), ("conv/gemm", "cudnn|xmma|cutlass|gemm|conv|sm90|sm80|implicit|wgrad|dgrad|nhwc"),
                         ("optimizer", "sgd|multi_tensor|fused_"), ("elementwise", "elementwise|vectorized|unrolled"), ("reduce", "reduce")]:
        if re.search(pattern, n): return key
    return "other"
import re
cats = collections.defaultdict(lambda: [0, 0.0])
for name, (n, d) in by.items():
    cats[category(name)][0] += n; cats[category(name)][1] += d
for c, (n, d) in sorted(cats.items(), key=lambda kv: -kv[1][1]):
    print(f"  [{c}] {d / steps:8.1f} us/step {n / steps:5.1f} kernels")
