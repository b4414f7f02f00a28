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
for name, (n, d) in sorted(by.items(), key=lambda kv: -kv[1][1])[:14]:
    print(f"  {d / steps:7.1f} us/step {n / steps:4.1f}x  {name[:110]}")
