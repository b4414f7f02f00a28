# Profile PyTorch's strongest step (strongest_reference's graphed step, compiled or not): Chrome trace of N replays.
import sys, os, torch, torch.nn.functional as F
sys.path.insert(0, "bench")
from strongest_reference import build, make_optimizer, graphed_step
from reference_train import INPUT_SHAPE
model_name, mode, steps, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
torch.backends.cudnn.benchmark = True
dev = torch.device("cuda")
model = build(model_name).to(dev).to(memory_format=torch.channels_last)
c, s = INPUT_SHAPE.get(model_name, (3, 32))
images = torch.randn(256, c, s, s, device=dev).to(memory_format=torch.channels_last)
labels = torch.randint(0, 10, (256,), device=dev)
opt = make_optimizer("sgd", "fused", model.parameters())
fwd = model
if mode != "none":
    fwd = torch.compile(model)
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
        F.cross_entropy(fwd(images), labels).backward()
    opt.zero_grad(set_to_none=True)
g = graphed_step(fwd, opt, images, labels, True)
for _ in range(10): g.replay()
torch.cuda.synchronize()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
    for _ in range(steps): g.replay()
    torch.cuda.synchronize()
p.export_chrome_trace(out)
