"""The benchmark's targets table (bench/targets.py), the end-to-end driver's rows
(bench/e2e_bench.py), the in-run rate the drivers share (bench/run_rate.py), over results stored
in bench/results/, and the programs bench/run_all.sh asks for: what `make bench-gpu` prints on a GPU
host, checked without one. No torch: the scripts import it only where they measure.

    python3 tests/bench/bench_targets_test.py   (ctest: BenchScripts, label unit)
"""
import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import types
import unittest

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(SOURCE, "bench")
RESULTS = os.path.join(BENCH, "results")
sys.path.insert(0, BENCH)
import e2e_bench  # noqa: E402
import run_rate  # noqa: E402

RUN_ALL = "2026-11-28-2xH200-run-all-eight-steps"
# One stored file of each driver that bench/targets.py reads.
STORED = {
    "bench/gpu_bench.py": f"{RUN_ALL}/gpu/bench-results.json",
    "bench/dp_bench.py": f"{RUN_ALL}/dp/dp-bench-results.json",
    "bench/speed_bench.py": f"{RUN_ALL}/speed/speed-bench.json",
    "bench/divergence_bench.py": f"{RUN_ALL}/divergence/divergence-bench.json",
    "bench/launcher_bench.py": "2026-11-22-2xH200-run-all/launcher/launcher-bench.json",
    "bench/allreduce_sweep.py": f"{RUN_ALL}/allreduce/allreduce-sweep.json",
    "bench/strongest_bench.py": f"{RUN_ALL}/strongest/strongest-bench.json",
    "bench/e2e_bench.py": "2026-11-28-2xH200-e2e-graphed-and-dispatch-binding/call2-e2e/e2e-bench.json",
    "bench/gpu_decode_bench.sh": "2026-11-28-2xH200-run-all-partial-and-gpu-decode/gpu-decode/gpu-decode.json",
    "bench/loader_throughput.sh": "2026-11-25-1xH100-loader/loader.json",
}
VERDICTS = {"met", "missed", "not applicable", "reported"}
ONE_GPU_RUN_ALL = "2026-11-29-1xH200-run-all"  # a whole run_all on a one-GPU host


def run_targets(*paths):
    """bench/targets.py over `paths`: (exit code, [(issue, target, measured, verdict, from)], stderr)."""
    done = subprocess.run([sys.executable, os.path.join(BENCH, "targets.py"), *paths], capture_output=True, text=True)
    rows = [tuple(cell.strip() for cell in line.strip("|").split(" | "))
            for line in done.stdout.splitlines()[2:] if line.startswith("| ")]
    return done.returncode, rows, done.stderr


def stored(relative):
    return os.path.join(RESULTS, relative)


class TargetsTableTest(unittest.TestCase):
    def test_every_driver_file_gives_rows_each_with_a_verdict_and_its_file(self):
        code, rows, err = run_targets(*(stored(p) for p in STORED.values()))
        self.assertEqual(code, 0, err)
        sources = {row[4] for row in rows}
        for relative in STORED.values():
            self.assertIn(os.path.basename(relative), sources)
        for row in rows:
            self.assertEqual(len(row), 5, row)
            self.assertIn(row[3], VERDICTS, row)
            self.assertNotEqual(row[2], "", row)
        self.assertFalse([row for row in rows if row[1].startswith("targets measured by")])

    def test_a_driver_without_a_file_is_listed_as_not_measured(self):
        code, rows, err = run_targets(stored(STORED["bench/e2e_bench.py"]))
        self.assertEqual(code, 0, err)
        absent = {row[4] for row in rows if row[3] == "not measured"}
        self.assertEqual(absent, set(STORED) - {"bench/e2e_bench.py"})

    def test_a_one_gpu_hosts_gpu_file_names_the_ddp_targets_it_cannot_measure(self):
        code, rows, err = run_targets(stored(ONE_GPU_RUN_ALL + "/gpu/bench-results.json"))
        self.assertEqual(code, 0, err)
        ddp = [row for row in rows if row[0] == "4"]
        self.assertEqual(len(ddp), 1, rows)
        self.assertEqual(ddp[0][3], "not measured")
        self.assertIn("scaling >= 95%", ddp[0][1])
        self.assertIn("this host has 1 GPU", ddp[0][1])
        code, rows, err = run_targets(stored(STORED["bench/gpu_bench.py"]))  # two GPUs: every DDP row measured
        self.assertEqual(code, 0, err)
        self.assertEqual([row for row in rows if row[0] == "4" and row[3] == "not measured"], [])
        self.assertTrue([row for row in rows if row[0] == "4" and "scaling" in row[1] and row[3] in VERDICTS])

    def test_a_file_it_cannot_read_or_place_stops_it_naming_the_file(self):
        with tempfile.TemporaryDirectory() as folder:
            truncated, foreign = os.path.join(folder, "truncated.json"), os.path.join(folder, "foreign.json")
            with open(stored(STORED["bench/e2e_bench.py"])) as f:
                text = f.read()
            with open(truncated, "w") as f:
                f.write(text[: len(text) // 2])
            with open(foreign, "w") as f:
                json.dump({"rows_of_something_else": []}, f)
            for path, why in ((truncated, "cannot read it as JSON"), (foreign, "not a result file")):
                code, rows, err = run_targets(path)
                self.assertNotEqual(code, 0)
                self.assertIn(path, err)
                self.assertIn(why, err)
                self.assertEqual(rows, [])

    def test_e2e_verdicts_follow_the_stored_rates(self):
        """Each stored e2e row's verdicts, recomputed from its rates: >= 95% of synthetic (at >= 12
        cores per GPU), >= 1.0x PyTorch on one GPU and >= 1.5x on more."""
        for relative in (STORED["bench/e2e_bench.py"], f"{RUN_ALL}/e2e/e2e-bench.json"):
            with open(stored(relative)) as f:
                data = json.load(f)
            cores = data["meta"]["cores"]
            for row in data["e2e"]:
                found = dict((target, verdict) for target, _, verdict in e2e_bench.targets(row, cores / row["world"]))
                self.assertEqual([t for t, _, _ in row["targets"]], list(found), relative)
                for kind in e2e_bench.e2e_rows(row):
                    rate = row[kind]["images_per_second"]
                    share = rate / row["mgpu synthetic"]["images_per_second"]
                    ratio = rate / row["PyTorch"]["images_per_second"]
                    need = 1.0 if row["world"] == 1 else 1.5
                    shares = [v for t, v in found.items() if "of synthetic" in t and (("--decode gpu" in t) ==
                                                                                     (kind == e2e_bench.GPU_DECODE_ROW))]
                    ratios = [v for t, v in found.items() if "x PyTorch" in t and (("--decode gpu" in t) ==
                                                                                  (kind == e2e_bench.GPU_DECODE_ROW))]
                    self.assertEqual(shares, ["met" if share >= 0.95 else "missed"], (relative, row["model"], kind))
                    self.assertEqual(ratios, ["met" if ratio >= need else "missed"], (relative, row["model"], kind))

    def test_a_share_just_below_the_target_never_reads_as_the_target(self):
        self.assertEqual(e2e_bench.floor_percent(0.94955), "94.9%")
        self.assertEqual(e2e_bench.floor_percent(0.95), "95.0%")


class E2eRowsTest(unittest.TestCase):
    """e2e_bench.mgpu_rows with mgpu-worker replaced: which runs it starts, with which flags."""

    def setUp(self):
        self.runs = []

        def fake_run(args, name, flags, world):
            self.runs.append((name, flags))
            return {"images_per_second": 1000.0, "parameters": 1}

        self.saved, e2e_bench.mgpu_run = e2e_bench.mgpu_run, fake_run

    def tearDown(self):
        e2e_bench.mgpu_run = self.saved

    def args(self, **changes):
        base = dict(mgpu_flags="--cuda-graphs true", e2e_flags="", data_dir="/jpegs", images=80000,
                    no_gpu_decode=False, gpu_decode_workers=12, synthetic_rows={})
        return types.SimpleNamespace(**dict(base, **changes))

    def threads(self, name):
        flags = dict(self.runs)[name]
        return int(flags[flags.index("--num-workers") + 1])

    def test_the_gpu_decode_row_runs_at_most_gpu_decode_workers_threads_and_says_so(self):
        rows = e2e_bench.mgpu_rows(self.args(), "resnet18", 1, 32)
        self.assertEqual([name for name, _ in self.runs],
                         ["resnet18-x1-e2e", "resnet18-x1-e2e-decode-gpu", "resnet18-x1-synthetic"])
        self.assertEqual((self.threads("resnet18-x1-e2e"), self.threads("resnet18-x1-e2e-decode-gpu"),
                          self.threads("resnet18-x1-synthetic")), (32, 12, 32))
        self.assertEqual(rows[e2e_bench.GPU_DECODE_ROW]["workers"], 12)
        for _, flags in self.runs:
            self.assertIn("--cuda-graphs", flags)
            self.assertEqual(flags.count("--num-workers"), 1)
        row = {"model": "resnet18", "world": 1, "workers": 32, **rows, "PyTorch": {"images_per_second": 500.0}}
        labels = [target for target, _, _ in e2e_bench.targets(row, 32)]
        self.assertIn("e2e (--decode gpu, 12 threads/GPU) >= 1.0x PyTorch", labels)
        self.assertIn("e2e >= 1.0x PyTorch", labels)

    def test_fewer_workers_than_the_cap_run_the_gpu_decode_row_at_the_same_count(self):
        rows = e2e_bench.mgpu_rows(self.args(), "resnet50", 2, 8)
        self.assertEqual(self.threads("resnet50-x2-e2e-decode-gpu"), 8)
        row = {"model": "resnet50", "world": 2, "workers": 8, **rows, "PyTorch": {"images_per_second": 500.0}}
        self.assertIn("e2e (--decode gpu) >= 1.5x PyTorch", [t for t, _, _ in e2e_bench.targets(row, 16)])

    def test_reused_synthetic_rows_are_not_measured_again(self):
        reused = {"images_per_second": 2000.0, "note": "from an earlier run"}
        rows = e2e_bench.mgpu_rows(self.args(synthetic_rows={("resnet18", 2): reused}), "resnet18", 2, 16)
        self.assertNotIn("resnet18-x2-synthetic", dict(self.runs))
        self.assertIs(rows["mgpu synthetic"], reused)

    def earlier_results(self, **meta_changes):
        """The stored e2e results as a run timed by this driver's clock would have written them."""
        with open(stored(STORED["bench/e2e_bench.py"])) as f:  # measured with --mgpu-flags "--cuda-graphs true"
            results = json.load(f)
        results["meta"].update(dict(dict(mgpu_clock=e2e_bench.MGPU_CLOCK), **meta_changes))
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder)
        path = os.path.join(folder, "e2e-bench.json")
        with open(path, "w") as f:
            json.dump(results, f)
        return path

    def test_synthetic_rows_of_a_run_with_other_mgpu_flags_are_not_taken(self):
        path = self.earlier_results()
        self.assertEqual(len(e2e_bench.earlier_synthetic_rows(path, "--cuda-graphs true")), 4)
        with contextlib.redirect_stdout(io.StringIO()) as said:
            self.assertEqual(e2e_bench.earlier_synthetic_rows(path, ""), {})
        self.assertIn("--mgpu-flags differ", said.getvalue())

    def test_synthetic_rows_timed_by_another_clock_are_not_taken(self):
        for path in (stored(STORED["bench/e2e_bench.py"]), self.earlier_results(mgpu_clock=None)):
            with contextlib.redirect_stdout(io.StringIO()) as said:
                self.assertEqual(e2e_bench.earlier_synthetic_rows(path, "--cuda-graphs true"), {})
            self.assertIn("timed by another clock", said.getvalue())


class InRunRateTest(unittest.TestCase):
    """run_rate.in_run_throughput: the device's clock after the warm-up, not the host's at launch."""

    def run_folder(self, text):
        folder = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, folder)
        with open(os.path.join(folder, "metrics.csv"), "w") as f:
            f.write(text)
        return folder

    def test_the_rate_adds_up_the_steps_times_after_the_warm_up_whatever_the_launch_clock_says(self):
        # Rows of 10 steps; the host launched steps 11-20 in 0.05 s (its lead over the device grew),
        # the device took 0.1 s for them and for steps 21-30.
        folder = self.run_folder("step,step_seconds,elapsed_seconds\n10,0.05,1.0\n20,0.01,1.05\n30,0.01,1.15\n")
        self.assertAlmostEqual(run_rate.in_run_throughput(folder, 10, 256), 256 * 20 / 0.2)
        self.assertAlmostEqual(run_rate.in_run_throughput(folder, 20, 256), 256 * 10 / 0.1)

    def test_no_rate_without_a_row_at_the_warm_ups_last_step_or_after_it(self):
        folder = self.run_folder("step,step_seconds,elapsed_seconds\n10,0.05,1.0\n20,0.01,1.05\n")
        self.assertIsNone(run_rate.in_run_throughput(folder, 15, 256))
        self.assertIsNone(run_rate.in_run_throughput(folder, 20, 256))

    def test_a_graphed_run_reads_as_the_driver_saw_its_rows_complete(self):
        # ResNet-18's graphed synthetic run of 2026-11-28 on one H200: by the host's launch clock it read
        # 19,692 img/s; by the device's the same as the driver saw its rows complete.
        results = os.path.join(RESULTS, "2026-11-28-1xH200-loader-decode-e2e-16-cores", "e2e")
        with open(os.path.join(results, "e2e-bench.json")) as f:
            row = json.load(f)["e2e"][1]["mgpu synthetic"]
        with open(os.path.join(results, "resnet18-x1-synthetic-metrics.csv")) as f:
            folder = self.run_folder(f.read())
        rate = run_rate.in_run_throughput(folder, e2e_bench.WARMUP, e2e_bench.BATCH)
        self.assertAlmostEqual(rate / row["rows_seen_images_per_second"], 1.0, delta=0.005)
        self.assertGreater(row["images_per_second"] / rate, 1.05)  # what the launch clock made of it


class RunAllProgramsTest(unittest.TestCase):
    """bench/run_all.sh asks for the programs of the steps it is to run, and no others."""

    def run_all(self, build, *args, python="/bin/false"):
        env = dict(os.environ, MGPU_PYTHON=python)
        return subprocess.run(["bash", os.path.join(BENCH, "run_all.sh"), *args, build], env=env,
                              capture_output=True, text=True, timeout=30)

    def setUp(self):
        self.build = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.build)
        os.mkdir(os.path.join(self.build, "bin"))

    def give(self, program):
        path = os.path.join(self.build, "bin", program)
        with open(path, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(path, 0o755)

    def test_a_step_without_its_program_stops_before_anything_runs_naming_the_program(self):
        done = self.run_all(self.build, "--only", "loader,gpu-decode")
        self.assertEqual(done.returncode, 2)
        self.assertIn("has no mgpu-worker mgpu-loader-bench", done.stderr)
        self.assertNotIn("mgpu-allreduce-bench", done.stderr)

    def test_the_programs_of_steps_not_run_are_not_asked_for(self):
        self.give("mgpu-loader-bench")
        done = self.run_all(self.build, "--only", "loader")
        self.assertEqual(done.returncode, 2)  # stopped at the next check: the Python without torch
        self.assertIn("cannot import torch", done.stderr)

    def test_a_whole_run_asks_for_every_program(self):
        done = self.run_all(self.build)
        self.assertEqual(done.returncode, 2)
        named = re.search(r"has no ([a-z -]+), which", done.stderr)
        self.assertIsNotNone(named, done.stderr)
        self.assertEqual(set(named.group(1).split()),
                         {"mgpu-worker", "mgpu", "mgpu-allreduce-bench", "mgpu-loader-bench"})


if __name__ == "__main__":
    unittest.main()
