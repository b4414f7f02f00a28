# Run from the repository root with a Python that has torch: python bench/results/2026-11-26-cpu2core-e2e-in-run-method/check.py
# e2e_bench.py's measurement on a CPU run (LeNet, Fashion-MNIST, batch 256): its in-run rates against
# the two-run-length difference of the same configuration, three times.
import os, sys, tempfile
sys.path.insert(0, "bench")
import e2e_bench as e
class Args: pass
a = Args(); a.images = 40000; a.build = "build"; a.out = tempfile.mkdtemp(prefix="e2e-in-run-"); a.run_timeout = 600
flags = ["--model", "lenet", "--device", "cpu", "--threads", "1", "--optimizer", "sgd", "--lr", "0.01", "--epochs", "1000", "--progress", "lines"]
for rep in range(3):
    row = e.mgpu_run(a, f"lenet-{rep}", flags, 1)
    walls = {}
    for steps in (30, 150):
        out = os.path.join(a.out, f"diff-{rep}-{steps}")
        cmd = ["build/bin/mgpu-worker", *flags, "--batch-size", "256", "--max-steps", str(steps), "--out", out]
        walls[steps], err = e.launch(cmd, 1, out + ".log", 600)
    diff = 256 * 120 / (walls[150] - walls[30])
    print(rep, {k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items()}, "two lengths", round(diff), flush=True)
