# Idle time on the GPU in a Chrome trace: device activity (kernels, memsets, memcopies) per step,
# the gaps between them, and what the host was doing during the largest gaps.
import collections, json, sys
path, steps = sys.argv[1], int(sys.argv[2])
events = json.load(open(path))
events = events["traceEvents"] if isinstance(events, dict) else events
dev = sorted([e for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")],
             key=lambda e: float(e["ts"]))
host = [e for e in events if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver", "cpu_op", "user_annotation")]
by_cat = collections.Counter(); n_cat = collections.Counter()
for e in dev: by_cat[e["cat"]] += float(e.get("dur", 0)); n_cat[e["cat"]] += 1
span = float(dev[-1]["ts"]) + float(dev[-1]["dur"]) - float(dev[0]["ts"])
print(f"{path}: device span {span / steps:.1f} us/step; " + ", ".join(f"{c} {by_cat[c] / steps:.1f} us ({n_cat[c] / steps:.1f}/step)" for c in by_cat))
gaps = []; end = float(dev[0]["ts"]) + float(dev[0]["dur"]); prev = dev[0]
for e in dev[1:]:
    ts = float(e["ts"])
    if ts > end: gaps.append((ts - end, end, ts, prev["name"], e["name"]))
    if ts + float(e["dur"]) > end: end = ts + float(e["dur"]); prev = e
total = sum(g[0] for g in gaps)
print(f"  idle {total / steps:.1f} us/step in {len(gaps) / steps:.1f} gaps/step; gaps > 20 us: {sum(g[0] for g in gaps if g[0] > 20) / steps:.1f} us/step")
for g in sorted(gaps, reverse=True)[:10]:
    during = collections.Counter()
    for h in host:
        a, b = float(h["ts"]), float(h["ts"]) + float(h.get("dur", 0))
        if a < g[2] and b > g[1]: during[h["name"][:40]] += min(b, g[2]) - max(a, g[1])
    print(f"  gap {g[0]:8.1f} us after {g[3][:50]} before {g[4][:50]}; host: {[(k, round(v)) for k, v in during.most_common(4)]}")
