# Compare a single-GPU trace with a DDP rank's (mgpu --profile-steps, Chrome traces): per step, the time the
# device runs compute kernels (union of intervals), NCCL kernels alone, both at once, and nothing; then the
# compute kernels whose per-step time grew most in the DDP trace.
import collections, json, sys

def load(path):
    events = json.load(open(path))
    events = events["traceEvents"] if isinstance(events, dict) else events
    return [e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]

def union(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]: out[-1][1] = max(out[-1][1], b)
        else: out.append([a, b])
    return out

def length(iv): return sum(b - a for a, b in iv)

def intersect(x, y):
    i = j = 0; out = []
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if a < b: out.append([a, b])
        if x[i][1] < y[j][1]: i += 1
        else: j += 1
    return out

def summary(path, steps):
    dev = load(path)
    iv = lambda es: union([(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in es])
    nccl = [e for e in dev if "nccl" in e["name"].lower()]
    comp = [e for e in dev if "nccl" not in e["name"].lower()]
    c, n = iv(comp), iv(nccl)
    start = min(float(e["ts"]) for e in dev); end = max(float(e["ts"]) + float(e.get("dur", 0)) for e in dev)
    both = length(intersect(c, n)) if n else 0.0
    span = end - start
    idle = span - length(union(c + n))
    print(f"{path}: span {span / steps:.1f} us/step; compute {length(c) / steps:.1f}; nccl alone "
          f"{(length(n) - both) / steps:.1f}; overlapped {both / steps:.1f}; idle {idle / steps:.1f}; "
          f"nccl kernels {len(nccl) / steps:.1f}/step, {sum(float(e['dur']) for e in nccl) / steps:.1f} us")
    by = collections.defaultdict(float)
    for e in comp: by[e["name"][:90]] += float(e.get("dur", 0)) / steps
    return by

steps = int(sys.argv[3])
single, ddp = summary(sys.argv[1], steps), summary(sys.argv[2], steps)
grew = sorted(((ddp.get(k, 0) - single.get(k, 0), k) for k in set(single) | set(ddp)), reverse=True)
print(f"  compute kernel time: single {sum(single.values()):.1f}, ddp {sum(ddp.values()):.1f} us/step; grew most:")
for d, k in grew[:12]: print(f"    {d:+8.1f} us  {single.get(k, 0):8.1f} -> {ddp.get(k, 0):8.1f}  {k}")
