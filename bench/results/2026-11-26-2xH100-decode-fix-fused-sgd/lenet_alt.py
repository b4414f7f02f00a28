# LeNet bs32 TF32 NCHW: where can ATen-only (no compiler) reformulations save GPU time?
import time, torch, torch.nn as nn, torch.nn.functional as F
torch.backends.cudnn.benchmark = True
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.allow_tf32 = True
dev = "cuda"
def graph_time(fn, reps=50, rounds=200):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps): fn()
    for _ in range(20): g.replay()
    torch.cuda.synchronize(); best = 1e9
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(rounds): g.replay()
        torch.cuda.synchronize(); best = min(best, (time.perf_counter() - t) / rounds / reps * 1e6)
    return best
g1 = torch.randn(32, 6, 28, 28, device=dev); g2 = torch.randn(32, 16, 10, 10, device=dev)
for name, g in (("conv1 grad", g1), ("conv2 grad", g2)):
    N, C = g.shape[:2]
    print(f"{name}: sum(0,2,3) {graph_time(lambda: g.sum((0, 2, 3))):.2f} us; "
          f"view.sum(2).sum(0) {graph_time(lambda: g.view(N, C, -1).sum(2).sum(0)):.2f} us; "
          f"bmm-ones {graph_time(lambda: torch.matmul(g.view(N, C, -1), torch.ones(g.shape[2]*g.shape[3], device=dev)).sum(0)):.2f} us", flush=True)
x = torch.randn(32, 1, 28, 28, device=dev); w = torch.randn(6, 1, 5, 5, device=dev)
gy = torch.randn(32, 6, 28, 28, device=dev)
cudnn_wgrad = lambda: torch.ops.aten.convolution_backward(gy, x, w, None, [1, 1], [2, 2], [1, 1], False, [0, 0], 1, [False, True, False])
def unfold_wgrad():
    cols = F.unfold(x, 5, padding=2)  # (32, 25, 784)
    return torch.bmm(gy.view(32, 6, 784), cols.transpose(1, 2)).sum(0)
def unfold_wgrad_mm():
    cols = F.unfold(x, 5, padding=2)  # (32, 25, 784)
    return gy.transpose(0, 1).reshape(6, -1).mm(cols.transpose(0, 1).reshape(25, -1).t())
print(f"conv1 wgrad: cuDNN {graph_time(cudnn_wgrad):.2f} us; unfold+bmm+sum {graph_time(unfold_wgrad):.2f} us; unfold+mm {graph_time(unfold_wgrad_mm):.2f} us", flush=True)
diff = (cudnn_wgrad()[1].view(6, 25) - unfold_wgrad()).abs().max().item(); print("  max |diff|", diff)
x2 = torch.randn(32, 6, 14, 14, device=dev); w2 = torch.randn(16, 6, 5, 5, device=dev); gy2 = torch.randn(32, 16, 10, 10, device=dev)
print(f"conv2 wgrad+dgrad cuDNN {graph_time(lambda: torch.ops.aten.convolution_backward(gy2, x2, w2, None, [1,1], [0,0], [1,1], False, [0,0], 1, [True, True, False])):.2f} us", flush=True)

class ConvBiasReLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b, pad, unfold):
        y = F.conv2d(x, w, None, padding=pad).add_(b.view(1, -1, 1, 1)).relu_()
        ctx.save_for_backward(x, w, y); ctx.pad = pad; ctx.unfold = unfold
        return y
    @staticmethod
    def backward(ctx, gy):
        x, w, y = ctx.saved_tensors
        gz = torch.ops.aten.threshold_backward(gy, y, 0)
        N, C = gz.shape[:2]
        gb = gz.view(N, C, -1).sum(2).sum(0)
        if ctx.unfold:
            cols = F.unfold(x, w.shape[-1], padding=ctx.pad)
            gw = torch.bmm(gz.view(N, C, -1), cols.transpose(1, 2)).sum(0).view_as(w)
            gx = None
        else:
            gx, gw, _ = torch.ops.aten.convolution_backward(gz, x, w, None, [1, 1], [ctx.pad] * 2, [1, 1], False, [0, 0], 1,
                                                            [ctx.needs_input_grad[0], True, False])
        return gx, gw, gb, None, None
class LeNet(nn.Module):
    def __init__(self, variant):
        super().__init__(); self.variant = variant
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2); self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(400, 120); self.fc2 = nn.Linear(120, 84); self.fc3 = nn.Linear(84, 10)
    def conv(self, m, x, pad, unfold):
        if self.variant == "aten": return F.relu(m(x))
        return ConvBiasReLU.apply(x, m.weight, m.bias, pad, unfold and self.variant == "bias+unfold")
    def forward(self, x):
        x = F.max_pool2d(self.conv(self.conv1, x, 2, True), 2)
        x = F.max_pool2d(self.conv(self.conv2, x, 0, False), 2)
        x = x.flatten(1); x = F.relu(self.fc1(x)); x = F.relu(self.fc2(x)); return self.fc3(x)
for variant in ("aten", "bias", "bias+unfold", "aten", "bias", "bias+unfold"):
    torch.manual_seed(0); model = LeNet(variant).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
    xb = torch.randn(32, 1, 28, 28, device=dev); yb = torch.randint(0, 10, (32,), device=dev)
    def step():
        loss = F.cross_entropy(model(xb), yb); loss.backward(); opt.step(); return loss
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3): opt.zero_grad(set_to_none=True); step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph(); opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g): step()
    for _ in range(500): g.replay()
    torch.cuda.synchronize(); best = 0
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(5000): g.replay()
        torch.cuda.synchronize(); best = max(best, 5000 / (time.perf_counter() - t))
    print(f"graphed LeNet step, {variant}, fused SGD: {best:.0f} steps/s ({1e6/best:.1f} us)", flush=True)
