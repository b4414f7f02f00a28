"""PyTorch's strongest single-GPU training step for bench/strongest_bench.py (issue 39): the model
channels_last (or not: --layout), autocast bf16 (or float32 with TF32 matmuls and convolutions:
--precision), the whole step (forward, backward, optimizer) captured once with torch.cuda.graph
and replayed, and, with --compile MODE, the model compiled by torch.compile before the capture.
Synthetic data held on the GPU, the shapes and models of bench/reference_train.py (mgpu's
layouts). Prints one JSON line per combination of --precision, --layout and --compile.

    python3 bench/strongest_reference.py --model resnet18 [--batch 256] [--steps 200] [--warmup 20]
        [--compile none,default|max-autotune-no-cudagraphs|reduce-overhead] [--optimizer sgd|adam]
        [--precision bf16,tf32] [--layout channels-last,nchw] [--optimizer-impl foreach,fused]

Which precision and layout is strongest depends on the model: for LeNet at batch 32 on an H100,
float32/TF32 in NCHW compiled to 5,900-6,600 steps/s against 5,500-5,700 for bf16 (2026-11-26),
so the driver tries both there. Likewise the optimizer's implementation (--optimizer-impl):
torch.optim's default, foreach (a few multi-tensor kernels), or fused (one kernel per step, as
mgpu's own optimizers run).

The optimizer: SGD with momentum, as every other row of the benchmark. torch 2.11's SGD has no
`capturable` flag and needs none (it keeps no step count; its momentum buffers exist after the
warm-up steps, before the capture); --optimizer adam takes Adam(capturable=True), whose step
count lives on the GPU. Throughput: images over the replayed steps' time, between two
synchronizations, so neither CUDA start-up nor compilation is in it. Several --compile modes run
one after the other in one process (one start-up), each printing its line as soon as it is done.

A failure prints {"error": "..."} with the stage that failed (compile, capture, replay) and
exits 0, so the driver reports it as the row's reason instead of losing the other rows.
"""
import argparse
import gc
import itertools
import json
import os
import sys
import time
import traceback

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference_train import INPUT_SHAPE, build  # noqa: E402


def make_optimizer(name, impl, params):
    """`name` (sgd or adam) in implementation `impl`: foreach or fused."""
    choice = {"foreach": True, "fused": False} if impl == "foreach" else {"foreach": False, "fused": True}
    if name == "adam":
        return torch.optim.Adam(params, lr=1e-3, capturable=True, **choice)
    return torch.optim.SGD(params, lr=0.01, momentum=0.9, **choice)


def graphed_step(model, optimizer, images, labels, bf16=True):
    """Warms up on a side stream (as torch.cuda.graph requires), captures one whole step and
    returns the graph; replaying it trains on `images`, `labels` (static tensors), under autocast
    bf16 where `bf16`."""
    def step():
        # cache_enabled=False: autocast's cache of cast weights must not outlive a capture
        # (PyTorch's CUDA-graph notes on whole-network capture).
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False, enabled=bf16):
            loss = F.cross_entropy(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            optimizer.zero_grad(set_to_none=True)
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)  # the graph's backward allocates .grad from its own pool
    with torch.cuda.graph(graph):
        step()
    return graph


def measure(args, compile_mode, precision, layout, optimizer_impl):
    stage = "build"
    bf16 = precision == "bf16"
    variant = {"compile": compile_mode, "precision": precision, "layout": layout, "optimizer_impl": optimizer_impl}
    try:
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
        memory_format = torch.channels_last if layout == "channels-last" else torch.contiguous_format
        device = torch.device("cuda")
        torch.cuda.reset_peak_memory_stats(device)
        model = build(args.model).to(device).to(memory_format=memory_format)
        params = sum(p.numel() for p in model.parameters())
        channels, side = INPUT_SHAPE.get(args.model, (3, 32))
        images = torch.randn(args.batch, channels, side, side, device=device).to(memory_format=memory_format)
        labels = torch.randint(0, 10, (args.batch,), device=device)
        optimizer = make_optimizer(args.optimizer, optimizer_impl, model.parameters())
        forward = model
        if compile_mode != "none":
            stage = "compile"
            started = time.perf_counter()
            forward = torch.compile(model, mode=None if compile_mode == "default" else compile_mode)
            # Compiles forward and backward now, under the captured step's autocast settings.
            with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False, enabled=bf16):
                F.cross_entropy(forward(images), labels).backward()
            optimizer.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            compile_seconds = time.perf_counter() - started
        stage = "capture"
        graph = graphed_step(forward, optimizer, images, labels, bf16)
        stage = "replay"
        for _ in range(args.warmup):
            graph.replay()
        torch.cuda.synchronize()
        started = time.perf_counter()
        for _ in range(args.steps):
            graph.replay()
        torch.cuda.synchronize()
        seconds = time.perf_counter() - started
    except Exception as e:  # noqa: BLE001  (every failure becomes the row's stated reason)
        reason = f"{type(e).__name__}: {e}".splitlines()[0][:300]
        traceback.print_exc(file=sys.stderr)
        return {"impl": "pytorch", "model": args.model, **variant, "error": f"{stage} failed: {reason}", "stage": stage}
    row = {"impl": "pytorch", "model": args.model, **variant, "optimizer": args.optimizer,
           "batch": args.batch, "parameters": params, "steps": args.steps,
           "images_per_second": args.batch * args.steps / seconds, "steps_per_second": args.steps / seconds,
           "peak_memory_bytes": torch.cuda.max_memory_allocated(device)}
    if compile_mode != "none":
        row["compile_seconds"] = compile_seconds
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="resnet18", choices=["lenet", "resnet18", "vgg19", "resnet50"])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--compile", default="none",
                        help="none (eager), default, max-autotune-no-cudagraphs or reduce-overhead; several, "
                        "separated by commas, run one after the other in this process (one line each)")
    parser.add_argument("--optimizer", default="sgd", choices=["sgd", "adam"])
    parser.add_argument("--precision", default="bf16", help="bf16 (autocast) or tf32 (float32, TF32 math); both, "
                        "separated by a comma, run one after the other")
    parser.add_argument("--optimizer-impl", default="foreach", help="foreach (torch.optim's default on CUDA) or "
                        "fused; both, separated by a comma, run one after the other")
    parser.add_argument("--layout", default="channels-last", help="channels-last or nchw; both, separated by a "
                        "comma, run one after the other")
    args = parser.parse_args()
    lists = {"--compile": (args.compile, {"none", "default", "max-autotune-no-cudagraphs", "reduce-overhead"}),
             "--precision": (args.precision, {"bf16", "tf32"}), "--layout": (args.layout, {"channels-last", "nchw"}),
             "--optimizer-impl": (args.optimizer_impl, {"foreach", "fused"})}
    for flag, (given, known) in lists.items():
        if not set(given.split(",")) <= known:
            parser.error(f"{flag} {given}: expected a comma-separated list of {', '.join(sorted(known))}")
    for precision, layout, impl, mode in itertools.product(args.precision.split(","), args.layout.split(","),
                                                           args.optimizer_impl.split(","), args.compile.split(",")):
        if not torch.cuda.is_available():
            row = {"impl": "pytorch", "model": args.model, "compile": mode, "precision": precision, "layout": layout,
                   "optimizer_impl": impl, "error": "no CUDA device: the strongest configuration is a CUDA-graph one"}
        else:
            row = measure(args, mode, precision, layout, impl)
            gc.collect()  # the graph, its memory pool and the model go before the next mode's
            torch.cuda.empty_cache()
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
