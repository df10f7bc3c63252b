"""PyTorch CUDA peers of bench/gpu.lua's cases, same sizes, same output lines:
  RESULT <case> <peer> <median ms> <figure> <unit>
peer is "torch" (eager) or "torch.compile". Timings call torch.cuda.synchronize()
before reading the clock. TF32 stays off (tide computes float32 matmuls in fp32).
Usage: python3 bench/peers/gpu_torch.py [--small] [case...]
"""
import sys
import time

small = "--small" in sys.argv
want = [a for a in sys.argv[1:] if not a.startswith("--")]
try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("# torch is not installed: no peers")
    sys.exit(0)
if not torch.cuda.is_available():
    print("# torch has no CUDA device: no peers")
    sys.exit(0)
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = "cuda"
print("# device: %s, torch %s" % (torch.cuda.get_device_name(0), torch.__version__))
S = 1 / 64 if small else 1


def wanted(c):
    return not want or c in want


def timed(fn, reps, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        t.append(time.perf_counter() - t0)
    t.sort()
    return t[(len(t) - 1) // 2]


def result(case, peer, sec, fig, unit):
    print("RESULT %s %s %.4f %.4g %s" % (case, peer, sec * 1e3, fig, unit), flush=True)


def compiled(fn):
    try:
        return torch.compile(fn)
    except Exception as e:  # no triton, no compiler: say so, skip the peer
        print("# torch.compile unavailable: %s" % e)
        return None


def both(case, fn, args, reps, figure, unit):
    t = timed(lambda: fn(*args), reps)
    result(case.replace("_compiled", "_eager") if case.endswith("_compiled") else case, "torch", t, figure(t), unit)
    cf = compiled(fn)
    if cf is not None:
        try:
            t = timed(lambda: cf(*args), reps)
            result(case, "torch.compile", t, figure(t), unit)
        except Exception as e:
            print("# torch.compile failed for %s: %s" % (case, str(e).splitlines()[0] if str(e) else e))


with torch.no_grad():
    if wanted("add"):
        n = int(2 ** 26 * S)
        a, b = torch.rand(n, device=dev), torch.rand(n, device=dev)
        t = timed(lambda: a + b, 20)
        result("add", "torch", t, 12 * n / t / 1e9, "GB/s")

    if wanted("w1_eager") or wanted("w1_compiled"):
        n = int(2 ** 24 * S)
        x = torch.randn(n, device=dev)
        both("w1_compiled", lambda y: torch.sin(y) ** 2 + torch.cos(y) ** 2, (x,), 20, lambda t: 8 * n / t / 1e9, "GB/s")

    if wanted("softmax"):
        r, c = int(4096 * S), 4096
        x = torch.randn(r, c, device=dev)
        both("softmax", lambda y: torch.softmax(y, 1), (x,), 20, lambda t: 8 * r * c / t / 1e9, "GB/s")

    if wanted("layer_norm"):
        r, c = int(8192 * S), 1024
        x = torch.randn(r, c, device=dev)
        w, b = torch.randn(c, device=dev), torch.randn(c, device=dev)
        both("layer_norm", lambda y: F.layer_norm(y, (c,), w, b), (x,), 20, lambda t: 8 * r * c / t / 1e9, "GB/s")

    if wanted("sgemm"):
        n = 512 if small else 4096
        a, b = torch.randn(n, n, device=dev), torch.randn(n, n, device=dev)
        t = timed(lambda: a @ b, 20)
        result("sgemm", "torch", t, 2 * n ** 3 / t / 1e12, "TFLOP/s")

    if wanted("launch"):
        a, b = torch.ones(1, device=dev), torch.ones(1, device=dev)
        reps = 1000 if small else 10000

        def many():
            for _ in range(reps):
                a + b
        t = timed(many, 5, 2)
        result("launch", "torch", t / reps, t / reps * 1e6, "us")

if wanted("mlp_step"):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(128, 784, device=dev)
    y = torch.randint(0, 10, (128,), device=dev)

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss
    t = timed(step, 5 if small else 50, 5)
    result("mlp_step", "torch", t, t * 1e3, "ms")

if wanted("sdpa"):
    B, H, T, D = (2, 4, 256, 32) if small else (64, 32, 256, 32)
    q, k, v = (torch.randn(B, H, T, D, device=dev, requires_grad=True) for _ in range(3))
    g = torch.randn(B, H, T, D, device=dev)

    def attn():
        q.grad = k.grad = v.grad = None
        F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(g)
    t = timed(attn, 3 if small else 20)
    result("sdpa", "torch", t, t * 1e3, "ms")
