"""What nvJPEG's hardware backend does per image on the producer thread, from a Kineto trace of
mgpu-worker --decode gpu --profile-steps (call 4): its kernels and copies, their queueing behind
the training's kernels, and the producer thread's CUDA runtime calls per 64-image chunk (between
two launches of mgpu's crop resize kernel).
    python3 nvjpeg_calls.py trace-rank0.json.gz"""
import collections
import gzip
import json
import statistics
import sys


def main(path):
    events = json.load(gzip.open(path))["traceEvents"]
    runtime = {e["args"].get("correlation"): e for e in events if e.get("cat") == "cuda_runtime"}
    device = {e["args"].get("correlation"): e for e in events if e.get("cat") in ("kernel", "gpu_memcpy")}
    convert = [e for e in events if e.get("cat") == "kernel" and "rgba2rgb" in e["name"]]
    waits = sorted(e["ts"] - runtime[e["args"]["correlation"]]["ts"] for e in convert)
    producer = collections.Counter(runtime[e["args"]["correlation"]]["tid"] for e in convert).most_common(1)[0][0]
    print(f"nvjpeg::rgba2rgb kernels: {len(convert)} in the 5 traced steps, on "
          f"{len({e['args']['stream'] for e in convert})} streams of nvJPEG's own; "
          f"{statistics.median(e['dur'] for e in convert):.1f} us each; launch to start: median "
          f"{statistics.median(waits):.0f} us, p90 {waits[int(0.9 * len(waits))]:.0f} us, max {waits[-1]:.0f} us")
    copies = [e for e in events if e.get("cat") == "gpu_memcpy" and "Pageable" in e["name"]]
    print(f"pageable host-to-device copies (the bitstreams): {len(copies)}, median "
          f"{statistics.median(e['args'].get('bytes', 0) for e in copies):.0f} bytes")
    calls = collections.defaultdict(lambda: [0, 0.0])
    for e in runtime.values():
        if e["tid"] == producer:
            calls[e["name"]][0] += 1
            calls[e["name"]][1] += e["dur"]
    print("producer thread's CUDA runtime calls (count, mean us):")
    for name, (count, total) in sorted(calls.items(), key=lambda kv: -kv[1][1])[:8]:
        print(f"  {name:28s} {count:6d} {total / count:7.1f}")
    ordered = sorted((e for e in runtime.values() if e["tid"] == producer), key=lambda e: e["ts"])
    marks = [e for e in ordered if e["name"] == "cudaLaunchKernel"
             and "CropResize" in device.get(e["args"].get("correlation"), {}).get("name", "")]
    print("per chunk (64 images): span ms, of which in CUDA runtime calls ms")
    for a, b in zip(marks, marks[1:]):
        busy = sum(e["dur"] for e in ordered if a["ts"] < e["ts"] < b["ts"])
        print(f"  {(b['ts'] - a['ts']) / 1000:5.2f} {busy / 1000:5.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
