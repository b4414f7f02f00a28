"""One table of every performance target the issues set, read from the benchmark drivers' JSON
files, each shown met, missed (with the measured value) or not measured (with the driver that
measures it). bench/run_all.sh calls it at the end; it also reads stored results:

    python3 bench/targets.py FILE.json [FILE.json ...]

Recognized files: gpu_bench.py's bench-results.json (DDP/DataParallel/precision rows),
dp_bench.py's dp-bench-results.json, speed_bench.py's speed-bench.json, divergence_bench.py's
divergence-bench.json, launcher_bench.py's launcher-bench.json, allreduce_sweep.py's
allreduce-sweep.json, strongest_bench.py's strongest-bench.json, e2e_bench.py's e2e-bench.json and
gpu_decode_bench.sh's gpu-decode.json and loader_throughput.sh's loader.json.
A gpu_bench.py run with --mgpu-flags (run_all.sh's gpu-graphs step:
--cuda-graphs true) adds its DDP rows only, each target named with the flags; its one-GPU rows
serve as those rows' scaling baseline, not as issue 6's eager precision rows. A gpu_bench.py run
on a one-GPU host lists issue 4's DDP targets as not measured, saying how many GPUs the host has.
"""
import json
import sys

from e2e_bench import floor_percent  # bench/ is on the path: run as bench/targets.py


def kind_of(data):
    if "gpu_decode" in data:
        return "gpu-decode"
    if "machine" in data and "runs" in data:
        return "loader"
    if "divergence" in data:
        return "divergence"
    if "strongest" in data:
        return "strongest"
    if "e2e" in data:
        return "e2e"
    if "rows" in data:
        return "gpu"
    if "mgpu" in data and "pytorch" in data:
        return "allreduce"
    results = data.get("results", {})
    if "lenet-synthetic" in results or "resnet18-bf16" in results or "mnist-epoch" in results:
        return "speed"
    if "mgpu run" in results:
        return "launcher"
    if any(k.startswith("lenet-w") or k == "resnet18" for k in results):
        return "dp"
    return None


def ok(value, key):
    return isinstance(value, dict) and key in value and "error" not in value and "failed" not in value


class Table:
    def __init__(self):
        self.rows = []

    def add(self, issue, target, measured, met, source):
        self.rows.append((issue, target, measured, "met" if met else "missed", source))

    def report(self, issue, target, measured, source):  # a number the issue asks to see, no threshold
        self.rows.append((issue, target, measured, "reported", source))

    def absent(self, issue, target, driver):
        self.rows.append((issue, target, "-", "not measured", driver))

    def print(self):
        print("| issue | target | measured | verdict | from |\n| --- | --- | --- | --- | --- |")
        for row in self.rows:
            print("| " + " | ".join(str(c) for c in row) + " |")


def gpu_targets(table, data, source):
    flags = data.get("meta", {}).get("mgpu_flags", "")
    singles = {(r["model"], r["precision"]): r for r in data["rows"] if r["world"] == 1}
    if not flags and not any(r["world"] > 1 for r in data["rows"]):  # a one-GPU host: name what it cannot measure
        gpus = data.get("meta", {}).get("gpus", "?")
        table.absent(4, f"DDP on 2+ GPUs: mgpu >= PyTorch img/s, scaling >= 95%, exposed comm <= 10% of the step "
                        f"(eager and graphed; this host has {gpus} GPU)", source)
    for r in data["rows"]:
        m, p = r["mgpu"], r["pytorch"]
        ok_rows = ok(m, "images_per_second") and ok(p, "images_per_second")
        if flags and r["world"] == 1 and ok_rows:  # a baseline only (a failed one is still reported)
            continue
        ddp = f"DDP x{r['world']}" + (f" (mgpu {flags})" if flags else "")
        if not ok_rows:
            table.add(4 if r["world"] > 1 else 6, f"{r['model']} {r['precision']} x{r['world']} {r.get('mode', '')} runs",
                      (m.get("error") or p.get("error") or "")[:80], False, source)
            continue
        ratio = m["images_per_second"] / p["images_per_second"]
        if r["world"] > 1 and r.get("mode", "ddp") == "ddp":
            table.add(4, f"{r['model']} {r['precision']} {ddp}: mgpu >= PyTorch img/s", f"{ratio:.2f}x",
                      ratio >= 1.0, source)
            single = singles.get((r["model"], r["precision"]))
            if single and ok(single["mgpu"], "images_per_second"):
                scaling = m["images_per_second"] / (single["mgpu"]["images_per_second"] * r["world"])
                table.add(4, f"{r['model']} {r['precision']} {ddp}: scaling >= 95%", f"{scaling:.0%}",
                          scaling >= 0.95, source)
            exposed, step = (m.get("device_seconds_per_step") or {}).get("exposed_comm"), m.get("step_seconds")
            if exposed is not None and step and not flags:  # a graphed step has no exposed phase of its own
                table.add(4, f"{r['model']} {r['precision']} {ddp}: exposed comm <= 10% of the step",
                          f"{exposed / step:.1%} ({exposed * 1e3:.2f} of {step * 1e3:.2f} ms)", exposed <= 0.1 * step,
                          source)
        elif r["world"] == 1 and r["precision"] in ("amp-fp16", "amp-bf16") and r["model"] in ("resnet18", "vgg19"):
            table.add(6, f"{r['model']} {r['precision']}: mgpu >= PyTorch img/s", f"{ratio:.2f}x", ratio >= 1.0, source)
            memory = m["peak_memory_bytes"] / p["peak_memory_bytes"]
            table.add(6, f"{r['model']} {r['precision']}: peak memory <= PyTorch + 5%", f"{memory:.2f}x",
                      memory <= 1.05, source)


def dp_over_one_gpu(lenet, dp_name, one_name):
    """dp's epoch over the one-GPU epoch, and how it was taken: the median of interleaved pairs where
    dp_bench.py ran them (--repeats), else the ratio of the single runs; None if either failed."""
    pairs = lenet.get(f"{dp_name} / {one_name}")
    if isinstance(pairs, dict) and "median" in pairs:
        ratios = ", ".join(f"{x:.2f}" for x in pairs["pair_ratios"])
        return pairs["median"], f" (median of {len(pairs['pair_ratios'])} pairs: {ratios})"
    one, dp = lenet.get(one_name), lenet.get(dp_name)
    if ok(one, "epoch_seconds") and ok(dp, "epoch_seconds"):
        return dp["epoch_seconds"] / one["epoch_seconds"], ""
    return None


def dp_targets(table, data, source):
    results = data["results"]
    resnet = results.get("resnet18", {})
    one, dp, torch_dp = resnet.get("mgpu 1 GPU"), resnet.get("mgpu dp"), resnet.get("PyTorch nn.DataParallel")
    if ok(one, "images_per_second") and ok(dp, "images_per_second"):
        x = dp["images_per_second"] / one["images_per_second"]
        table.add(5, "ResNet-18 fp32 batch 512: mgpu dp >= 1.7x one GPU", f"{x:.2f}x", x >= 1.7, source)
    if ok(dp, "images_per_second") and ok(torch_dp, "images_per_second"):
        x = dp["images_per_second"] / torch_dp["images_per_second"]
        table.add(5, "ResNet-18 fp32 batch 512: mgpu dp >= 1.5x nn.DataParallel", f"{x:.2f}x", x >= 1.5, source)
    lenet = results.get("lenet-w4", {})
    one, dp, torch_dp = lenet.get("mgpu 1 GPU"), lenet.get("mgpu dp"), lenet.get("PyTorch nn.DataParallel")
    for suffix, label in (("", ""), (" --cuda-graphs", ", --cuda-graphs on both")):
        paired = dp_over_one_gpu(lenet, "mgpu dp" + suffix, "mgpu 1 GPU" + suffix)
        if paired:
            x, how = paired
            table.add(5, f"LeNet batch 32, 4 workers{label}: mgpu dp epoch <= 1.2x one GPU", f"{x:.2f}x{how}", x <= 1.2,
                      source)
    # dp with --cuda-graphs against the eager one-GPU epoch (the default run).
    dp_graphed = lenet.get("mgpu dp --cuda-graphs")
    if ok(one, "epoch_seconds") and ok(dp_graphed, "epoch_seconds"):
        x = dp_graphed["epoch_seconds"] / one["epoch_seconds"]
        table.add(5, "LeNet batch 32, 4 workers: mgpu dp --cuda-graphs epoch <= 1.2x one GPU (eager)", f"{x:.2f}x",
                  x <= 1.2, source)
    if ok(dp, "epoch_seconds"):
        if ok(torch_dp, "epoch_seconds"):
            x = dp["epoch_seconds"] / torch_dp["epoch_seconds"]
            table.add(5, "LeNet batch 32, 4 workers: mgpu dp epoch <= 0.3x nn.DataParallel", f"{x:.2f}x", x <= 0.3, source)
        elif ok(torch_dp, "epoch_seconds_projected"):
            x = dp["epoch_seconds"] / torch_dp["epoch_seconds_projected"]
            table.add(5, "LeNet batch 32, 4 workers: mgpu dp epoch <= 0.3x nn.DataParallel",
                      f"{x:.2f}x (nn.DataParallel's epoch projected from {torch_dp['steps_measured']} steps)",
                      x <= 0.3, source)
        elif isinstance(torch_dp, dict) and "failed" in torch_dp:
            table.add(5, "LeNet batch 32, 4 workers: mgpu dp epoch <= 0.3x nn.DataParallel",
                      f"nn.DataParallel {torch_dp['failed'][:60]}", False, source)


def speed_targets(table, data, source):
    results = data["results"]
    lenet = results.get("lenet-synthetic", {})
    base, fast = lenet.get("PyTorch eager"), lenet.get("mgpu --data-on-device --cuda-graphs")
    if ok(base, "images_per_second") and ok(fast, "images_per_second"):
        x = fast["images_per_second"] / base["images_per_second"]
        table.add(10, "LeNet batch 32 --cuda-graphs: >= 3x PyTorch steps/s", f"{x:.2f}x", x >= 3, source)
    resnet = results.get("resnet18-bf16", {})
    base = resnet.get("PyTorch eager")
    fast = resnet.get("mgpu --data-on-device --channels-last --cuda-graphs")
    if ok(base, "images_per_second") and ok(fast, "images_per_second"):
        x = fast["images_per_second"] / base["images_per_second"]
        table.add(10, "ResNet-18 amp-bf16 channels-last + graphs: >= 1.15x PyTorch eager", f"{x:.2f}x", x >= 1.15,
                  source)


def launcher_targets(table, data, source):
    runs = data["results"]
    means = {how: sum(r["images_per_second"] for r in rs) / len(rs) for how, rs in runs.items()
             if rs and all("images_per_second" in r for r in rs)}
    if "mgpu run" in means and "mpirun" in means:
        x = means["mgpu run"] / means["mpirun"]
        table.add(7, "mgpu run within 3% of mpirun (DDP, NCCL)", f"{x:.3f}x", x >= 0.97, source)


def allreduce_targets(table, data, source):
    rows = data["mgpu"].get("rows", [])
    if rows:
        biggest = max(rows, key=lambda r: r["bytes"])
        theirs = {r["bytes"]: r["busbw_gbps"] for r in data["pytorch"].get("rows", [])}.get(biggest["bytes"])
        measured = f"{biggest['busbw_gbps']:.0f} GB/s at {biggest['bytes'] >> 20} MiB" + (
            f" (PyTorch {theirs:.0f})" if theirs else "")
        table.add(10, "all-reduce busbw sweep through mgpu's communicator, next to NCCL's", measured, True, source)


def divergence_targets(table, data, source):
    target = "fp16 without scaling at a high lr stops with exit 3; amp-fp16 + dynamic scaling stays finite"
    sweep, meta = data["divergence"], data["meta"]
    for point in sweep:  # files written before --seeds hold one run pair per rate
        if "seeds" not in point:
            point["seeds"] = [{"seed": 42, "runs": point["runs"]}]
            point["pytorch"] = {mode: [row] for mode, row in (point.get("pytorch") or {}).items()} \
                if "error" not in (point.get("pytorch") or {}) else point["pytorch"]
    recipe = f"{meta['model']} on {meta.get('dataset', 'synthetic')}"

    def pytorch(point):  # PyTorch's runs of the same recipe, where the driver ran them
        runs = point.get("pytorch") or {}
        if "error" in runs or not runs:
            return ""
        fp16 = sum(row["first_nonfinite_step"] is not None for row in runs.get("fp16-none", []))
        amp = sum(row.get("stays_finite", row["first_nonfinite_step"] is None) for row in runs.get("amp-dynamic", []))
        return (f" (PyTorch: fp16 non-finite in {fp16}/{len(runs.get('fp16-none', []))}, amp-fp16 finite in "
                f"{amp}/{len(runs.get('amp-dynamic', []))})")

    def outcome(point):
        seeds = point["seeds"]
        fp16 = sum(s["runs"]["fp16 --loss-scale none"]["exit_code"] == 3 for s in seeds)
        amp = sum(s["runs"]["amp-fp16 --loss-scale dynamic"]["exit_code"] == 0 for s in seeds)
        return f"lr {point['lr']:g}: fp16 exit 3 in {fp16}/{len(seeds)}, amp-fp16 exit 0 in {amp}/{len(seeds)}"

    point = next((p for p in sweep if p["reproduced"]), None)
    if point:
        table.add(6, target, f"{recipe}, {outcome(point)} seeds{pytorch(point)}", True, source)
    else:
        table.add(6, target, f"{recipe}: " + "; ".join(outcome(p) + pytorch(p) for p in sweep), False, source)


def strongest_targets(table, data, source):
    for model, rows in data["strongest"].items():
        need = 1.2 if model == "lenet" else 1.0
        target = (f"{model}: mgpu's best >= {need}x PyTorch's strongest (graphed, compiled where it compiles, "
                  "fused SGD, in the fastest of the precisions and layouts tried)")
        anchors = {name: r["images_per_second"] for name, r in rows.items()
                   if name.startswith("PyTorch") and ok(r, "images_per_second")}
        mgpu = rows.get("mgpu best", {})
        if not anchors or not ok(mgpu, "images_per_second"):
            reasons = "; ".join(f"{name}: {r.get('error', '')[:60]}" for name, r in rows.items() if "error" in r)
            table.add(39, target, reasons or "no result", False, source)
            continue
        anchor = max(anchors, key=anchors.get)
        x = mgpu["images_per_second"] / anchors[anchor]
        table.add(39, target, f"{x:.2f}x ({anchor})", x >= need, source)


def e2e_targets(table, data, source):
    for row in data["e2e"]:
        for target, measured, verdict in row["targets"]:
            label = f"{row['model']} e2e x{row['world']}, {row['workers']} workers/GPU: {target}"
            if verdict == "not measured":
                errors = "; ".join(f"{k}: {r['error'][:60]}" for k, r in row.items()
                                   if isinstance(r, dict) and "error" in r)
                table.add(39, label, errors or "-", False, source)
            elif verdict == "not applicable":
                table.rows.append((39, label, measured, "not applicable", source))
            else:
                table.add(39, label, measured, verdict == "met", source)


# Issue 40: --decode gpu's end-to-end rate as a share of synthetic, with at most this many threads per GPU.
DECODE_TARGETS = {"resnet18": (0.90, 4), "resnet50": (0.95, 2)}


def gpu_decode_targets(table, data, source):
    lines = data["gpu_decode"]["decode_only"]
    for line in (l for l in lines if l.get("decode") == "gpu"):
        cpu = next((l for l in lines if l.get("decode") == "cpu" and l.get("num_workers") == line.get("num_workers")),
                   None)
        beside = (f"; the CPU loader {cpu['images_per_second'] / max(cpu['num_workers'], 1):,.0f} img/s per core"
                  if cpu else "")
        backend = "the JPEG engines" if "hardware" in line.get("decoder", "") else "the CUDA decoder"
        table.report(40, f"decode-only img/s per GPU, {line['num_workers']} threads, {backend}",
                     f"{line['images_per_second']:,.0f}{beside}", source)
    for run in data["gpu_decode"]["e2e"]:
        need, threads = DECODE_TARGETS[run["model"]]
        if "result" not in run:
            table.add(40, f"{run['model']} --decode gpu >= {need:.0%} of synthetic", run.get("error", "-"), False,
                      source)
            continue
        for row in run["result"]["e2e"]:
            target = (f"{row['model']} --decode gpu x{row['world']}, {row['workers']} threads/GPU (at most {threads}): "
                      f">= {need:.0%} of synthetic")
            e2e, synthetic = row["mgpu e2e"], row["mgpu synthetic"]
            if not (ok(e2e, "images_per_second") and ok(synthetic, "images_per_second")):
                errors = "; ".join(f"{k}: {r['error'][:60]}" for k, r in (("e2e", e2e), ("synthetic", synthetic))
                                   if "error" in r)
                table.add(40, target, errors or "no result", False, source)
                continue
            share = e2e["images_per_second"] / synthetic["images_per_second"]
            table.add(40, target, f"{floor_percent(share)} ({e2e['images_per_second']:,.0f} / "
                      f"{synthetic['images_per_second']:,.0f} img/s)", share >= need and row["workers"] <= threads, source)


def loader_targets(table, data, source):
    timed = [r for r in data["runs"] if not r.get("rss_run")]
    cores = data["machine"].get("cores")
    for workers in sorted({r["num_workers"] for r in timed}):
        rate = {r["loader"]: r["images_per_second"] for r in timed if r["num_workers"] == workers}
        target = f"streaming loader, {workers} workers, {cores} cores: >= 2x PyTorch's DataLoader + torchvision"
        if "mgpu" not in rate or "pytorch" not in rate:
            table.add("30, 39", target, f"only {', '.join(rate) or 'no'} rows", False, source)
            continue
        x = rate["mgpu"] / rate["pytorch"]
        table.add("30, 39", target, f"{x:.2f}x ({rate['mgpu']:,.0f} / {rate['pytorch']:,.0f} img/s)", x >= 2.0, source)


HANDLERS = {"gpu": gpu_targets, "dp": dp_targets, "speed": speed_targets, "divergence": divergence_targets,
            "launcher": launcher_targets, "allreduce": allreduce_targets, "strongest": strongest_targets,
            "e2e": e2e_targets, "gpu-decode": gpu_decode_targets, "loader": loader_targets}
DRIVERS = {"gpu": "bench/gpu_bench.py", "dp": "bench/dp_bench.py", "speed": "bench/speed_bench.py",
           "divergence": "bench/divergence_bench.py", "launcher": "bench/launcher_bench.py",
           "allreduce": "bench/allreduce_sweep.py", "strongest": "bench/strongest_bench.py", "e2e": "bench/e2e_bench.py",
           "gpu-decode": "bench/gpu_decode_bench.sh", "loader": "bench/loader_throughput.sh"}


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    table, seen = Table(), set()
    for path in sys.argv[1:]:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"{path}: cannot read it as JSON ({e})")
        kind = kind_of(data)
        if kind is None:
            raise SystemExit(f"{path}: not a result file of any bench driver (see --help)")
        seen.add(kind)
        HANDLERS[kind](table, data, path.split("/")[-1])
    for kind, driver in DRIVERS.items():
        if kind not in seen:
            table.absent("-", f"targets measured by {driver}", driver)
    table.print()


if __name__ == "__main__":
    main()
