#!/usr/bin/env python3
"""Where the GPU sat idle in a trace from `mgpu-worker --profile-steps` (or torch.profiler).

    python3 bench/trace_gaps.py RUN/trace-rank0.json [--min-gap-us 20] [--top 15]

Reads the Chrome trace that LibTorch's profiler (Kineto) writes and prints, for the stream that
ran the most kernel time (the compute stream):
  - the span from its first to its last kernel, its busy share and its idle time in total;
  - idle time per profiled step (the "mgpu step N" ranges, placed on the device through the
    kernels their host launches led to);
  - the longest idle gaps, each with the kernels around it and what the host was doing then
    (CUDA runtime calls that took long, such as cudaStreamSynchronize or a blocking cudaMemcpy,
    and the outermost operators);
  - the host's blocking CUDA calls in total: the synchronizations that drain the device's queue.
Standard library only, so it runs where the trace is (any Python 3.8+).
"""
import argparse
import bisect
import collections
import json
import sys

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
BLOCKING_CALLS = ("Synchronize", "cudaMemcpy", "cudaHostAlloc", "cudaFreeHost", "cudaMalloc", "cudaFree")


def load(path):
    try:
        with open(path) as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"trace_gaps.py: cannot read {path} as a Chrome trace: {e}")
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    if not isinstance(events, list):
        sys.exit(f"trace_gaps.py: {path} has no traceEvents list; give a trace from --profile-steps")
    return [e for e in events if e.get("ph") == "X" and "ts" in e and "dur" in e]


def is_blocking(name):
    return any(k in name for k in BLOCKING_CALLS) and "Async" not in name


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trace")
    parser.add_argument("--min-gap-us", type=float, default=20.0, help="shorter idle gaps are not listed")
    parser.add_argument("--top", type=int, default=15, help="how many of the longest gaps to list")
    args = parser.parse_args()
    events = load(args.trace)
    device = [e for e in events if e.get("cat") in DEVICE_CATEGORIES]
    if not device:
        sys.exit(f"trace_gaps.py: {args.trace} has no kernels: was it taken on a GPU (--device cuda)?")
    busy_by_stream = collections.Counter()
    for e in device:
        busy_by_stream[(e.get("args", {}).get("device"), e.get("args", {}).get("stream"))] += e["dur"]
    compute = busy_by_stream.most_common(1)[0][0]
    kernels = sorted((e for e in device if (e.get("args", {}).get("device"), e.get("args", {}).get("stream")) == compute),
                     key=lambda e: e["ts"])
    runtime = sorted((e for e in events if e.get("cat") == "cuda_runtime"), key=lambda e: e["ts"])
    ops = sorted((e for e in events if e.get("cat") in ("cpu_op", "user_annotation")), key=lambda e: e["ts"])
    steps = sorted((e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("mgpu step ")),
                   key=lambda e: e["ts"])

    # Idle gaps between consecutive kernels of the compute stream (overlapping ones merged).
    gaps, end = [], kernels[0]["ts"] + kernels[0]["dur"]
    previous = kernels[0]
    for k in kernels[1:]:
        if k["ts"] > end:
            gaps.append((k["ts"] - end, end, previous, k))
        if k["ts"] + k["dur"] >= end:
            end, previous = k["ts"] + k["dur"], k
    span = end - kernels[0]["ts"]
    idle = sum(g[0] for g in gaps)
    print(f"compute stream: device {compute[0]} stream {compute[1]}, {len(kernels)} kernels and copies")
    print(f"span {span / 1000:.2f} ms, busy {100 * (span - idle) / span:.1f}%, idle {idle / 1000:.2f} ms "
          f"in {len(gaps)} gaps ({sum(1 for g in gaps if g[0] >= args.min_gap_us)} of them >= {args.min_gap_us:g} us)")
    for stream, busy in busy_by_stream.most_common():
        if stream != compute:
            print(f"  other stream: device {stream[0]} stream {stream[1]}: busy {busy / 1000:.2f} ms")

    # A host launch and its kernel share a correlation id: each step's kernels are those launched
    # inside its host range.
    launch_step, step_starts = {}, [s["ts"] for s in steps]
    for r in runtime:
        corr = r.get("args", {}).get("correlation")
        i = bisect.bisect_right(step_starts, r["ts"]) - 1
        if corr is not None and i >= 0 and r["ts"] <= steps[i]["ts"] + steps[i]["dur"]:
            launch_step[corr] = steps[i]["name"]
    if steps:
        print("\nper step (device time from its first to its last kernel on the compute stream):")
        by_step = collections.defaultdict(list)
        for k in kernels:
            name = launch_step.get(k.get("args", {}).get("correlation"))
            if name:
                by_step[name].append(k)
        for s in steps:
            ks = by_step.get(s["name"], [])
            if not ks:
                print(f"  {s['name']}: no kernels on the compute stream")
                continue
            first, last = ks[0]["ts"], max(k["ts"] + k["dur"] for k in ks)
            step_idle = sum(g[0] for g in gaps if first <= g[1] < last)
            print(f"  {s['name']}: {(last - first) / 1000:.2f} ms, idle inside {step_idle / 1000:.2f} ms, "
                  f"host range {s['dur'] / 1000:.2f} ms")

    print("\nlongest idle gaps (the host calls and operators running while the stream waited):")
    starts = [o["ts"] for o in ops]
    for length, at, before, after in sorted(gaps, key=lambda g: -g[0])[:args.top]:
        if length < args.min_gap_us:
            break
        print(f"  {length:8.1f} us at +{(at - kernels[0]['ts']) / 1000:.3f} ms: after {before['name'][:60]!r}, "
              f"before {after['name'][:60]!r}")
        host = [r for r in runtime if r["ts"] < at + length and r["ts"] + r["dur"] > at and r["dur"] >= 10]
        for r in sorted(host, key=lambda r: -r["dur"])[:3]:
            print(f"      host call {r['name']} {r['dur']:.1f} us")
        lo = max(bisect.bisect_left(starts, at - 1e6), 0)
        outer = [o for o in ops[lo:bisect.bisect_right(starts, at + length)]
                 if o["ts"] + o["dur"] > at and o["dur"] >= length / 4 and not o["name"].startswith("mgpu step ")]
        for o in sorted(outer, key=lambda o: o["ts"])[:3]:
            print(f"      during {o['name'][:70]} ({o['dur']:.1f} us)")

    blocking = collections.defaultdict(lambda: [0, 0.0])
    for r in runtime:
        if is_blocking(r["name"]):
            blocking[r["name"]][0] += 1
            blocking[r["name"]][1] += r["dur"]
    print("\nhost calls that block on the device:" + ("" if blocking else " none"))
    for name, (count, total) in sorted(blocking.items(), key=lambda kv: -kv[1][1]):
        print(f"  {name}: {count} calls, {total / 1000:.2f} ms")


if __name__ == "__main__":
    main()
