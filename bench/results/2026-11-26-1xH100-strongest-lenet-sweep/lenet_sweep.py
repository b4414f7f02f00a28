# PyTorch's graphed LeNet bs32 step over precision x layout x compile mode: steps/s.
import sys, time, torch, itertools, gc
sys.path.insert(0, "bench")
from reference_train import INPUT_SHAPE, build
import torch.nn.functional as F
torch.backends.cudnn.benchmark = True
def graphed(model, opt, x, y, bf16):
    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False, enabled=bf16):
            loss = F.cross_entropy(model(x), y)
        loss.backward(); opt.step(); return loss
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            opt.zero_grad(set_to_none=True); step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph(); opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g): step()
    return g
for prec, cl, mode in itertools.product(sys.argv[1].split(","), ("cl", "nchw"), sys.argv[2].split(",")):
    bf16 = prec == "bf16"
    torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
    torch.backends.cudnn.allow_tf32 = prec == "tf32"
    fmt = torch.channels_last if cl == "cl" else torch.contiguous_format
    model = build("lenet").cuda().to(memory_format=fmt)
    c, s = INPUT_SHAPE.get("lenet", (3, 32))
    x = torch.randn(32, c, s, s, device="cuda").to(memory_format=fmt)
    y = torch.randint(0, 10, (32,), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    fwd = model
    if mode != "none":
        fwd = torch.compile(model, mode=None if mode == "default" else mode)
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False, enabled=bf16):
            F.cross_entropy(fwd(x), y).backward()
        opt.zero_grad(set_to_none=True)
    g = graphed(fwd, opt, x, y, bf16)
    for _ in range(1000): g.replay()
    torch.cuda.synchronize()
    best = 0
    for rep in range(3):
        t = time.perf_counter()
        for _ in range(5000): g.replay()
        torch.cuda.synchronize()
        best = max(best, 5000 / (time.perf_counter() - t))
    print(f"pytorch {prec} {cl} {mode}: {best:.0f} steps/s", flush=True)
    del g, opt, fwd, model; gc.collect(); torch.cuda.empty_cache()
