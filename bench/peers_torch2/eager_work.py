"""PyTorch 2.x peer of bench/eager_work.lua: the eager workloads of issue 16,
eager ("torch2 eager") and through torch.compile ("torch2 compile"; the first
call's latency is printed, not recorded), same shapes and calls, .grad set to
None inside each timed call. Records (bench/run.sh TSV) go to $BENCH_OUT.
Run with the interpreter bench/setup-torch.sh made, in the tuned environment
bench/run.sh sets (TORCH_ENV):
  $TORCH_VENV/bin/python bench/peers_torch2/eager_work.py --threads 2 [--only w1,sm,ln,ce,conv] [--compile 1]
  $TORCH_VENV/bin/python bench/peers_torch2/eager_work.py --threads 2 --only cnn [--limit 0]
"""
import argparse
import os
import statistics
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--only", default="w1,sm,ln,ce,conv")
ap.add_argument("--reps", type=int, default=10)
ap.add_argument("--warmup", type=int, default=2)
ap.add_argument("--compile", type=int, default=1)
ap.add_argument("--limit", type=int, default=0)
ap.add_argument("--dir", default="/usr/share/datasets/fashion-mnist")
a = ap.parse_args()
for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[v] = str(a.threads)
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

torch.set_num_threads(a.threads)
torch.manual_seed(0)
want = set(a.only.split(","))
VER = torch.__version__.split("+")[0]


def record(case, peer, ts, work=0):
    med, lo, hi = statistics.median(ts), min(ts), max(ts)
    path = os.environ.get("BENCH_OUT")
    if path:
        with open(path, "a") as f:
            f.write("%s\t%s\t%d\t%.9f\t%.9f\t%.9f\t%d\t%.0f\n" % (case, peer, a.threads, med, lo, hi, len(ts), work))
    print("%-12s %-20s t=%d median %9.3f ms  min %9.3f  max %9.3f" % (case, peer, a.threads, med * 1e3, lo * 1e3,
                                                                     hi * 1e3), flush=True)


def time_calls(fn):
    for _ in range(a.warmup):
        fn()
    ts = []
    for _ in range(a.reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return ts


def both(case, make, work=0):
    """make(f) -> a timed call using f (the eager function or its compiled form)"""
    eager = make(None)
    record(case, "torch%s eager" % VER, time_calls(eager), work)
    if a.compile:
        comp = make(torch.compile)
        t = time.perf_counter()
        comp()
        print("%-12s torch%s compile: first call %.1f s" % (case, VER, time.perf_counter() - t), flush=True)
        record(case, "torch%s compile" % VER, time_calls(comp), work)


if "w1" in want:
    x = torch.randn(1 << 24)
    f = lambda v: torch.sin(v) ** 2 + torch.cos(v) ** 2  # noqa: E731

    def fwd(wrap):
        g = wrap(f) if wrap else f
        return lambda: g(x)
    both("w1_fwd", fwd, 8 << 24)
    xg = x.clone().requires_grad_(True)

    def fwdbwd(wrap):
        g = wrap(f) if wrap else f

        def call():
            xg.grad = None
            y = g(xg)
            y.sum().backward()
            return y
        return call
    both("w1_fwdbwd", fwdbwd, 12 << 24)

if "sm" in want:
    x, g = torch.randn(4096, 4096), torch.randn(4096, 4096)
    sm = lambda v: torch.softmax(v, dim=-1)  # noqa: E731
    both("sm_fwd", lambda wrap: (lambda h=(wrap(sm) if wrap else sm): h(x)), 8 * 4096 * 4096)
    xg = x.clone().requires_grad_(True)

    def sm_fb(wrap):
        h = wrap(sm) if wrap else sm

        def call():
            xg.grad = None
            y = h(xg)
            (y * g).sum().backward()
            return y
        return call
    both("sm_fwdbwd", sm_fb, 16 * 4096 * 4096)

if "ln" in want:
    x, g, w, b = torch.randn(8192, 1024), torch.randn(8192, 1024), torch.randn(1024), torch.randn(1024)
    ln = lambda v, ww, bb: F.layer_norm(v, (1024,), ww, bb, 1e-5)  # noqa: E731
    both("ln_fwd", lambda wrap: (lambda h=(wrap(ln) if wrap else ln): h(x, w, b)), 8 * 8192 * 1024)
    xg, wg, bg = (t.clone().requires_grad_(True) for t in (x, w, b))

    def ln_fb(wrap):
        h = wrap(ln) if wrap else ln

        def call():
            xg.grad = wg.grad = bg.grad = None
            y = h(xg, wg, bg)
            (y * g).sum().backward()
            return y
        return call
    both("ln_fwdbwd", ln_fb, 16 * 8192 * 1024)

if "ce" in want:
    x = torch.randn(4096, 32000).requires_grad_(True)
    y = torch.randint(0, 32000, (4096,))

    def ce_fb(wrap):
        h = wrap(F.cross_entropy) if wrap else F.cross_entropy

        def call():
            x.grad = None
            loss = h(x, y)
            loss.backward()
            return loss
        return call
    both("ce_fwdbwd", ce_fb, 12 * 4096 * 32000)

if "conv" in want:
    x = torch.randn(8, 64, 56, 56).requires_grad_(True)
    w = (torch.randn(64, 64, 3, 3) * 0.05).requires_grad_(True)
    b = torch.randn(64).requires_grad_(True)
    conv = lambda v, ww, bb: F.conv2d(v, ww, bb, padding=1)  # noqa: E731
    with torch.no_grad():
        both("conv_fwd", lambda wrap: (lambda h=(wrap(conv) if wrap else conv): h(x, w, b)))

    def conv_fb(wrap):
        h = wrap(conv) if wrap else conv

        def call():
            x.grad = w.grad = b.grad = None
            yy = h(x, w, b)
            yy.sum().backward()
            return yy
        return call
    both("conv_fwdbwd", conv_fb)

if "cnn" in want:
    # examples/fashion_mnist.lua --model cnn: the same model, Adam 1e-3, batch 128, one epoch
    import gzip
    import numpy as np

    def idx(path):
        with gzip.open(path, "rb") as fh:
            data = fh.read()
        nd = data[3]
        dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
        return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)

    def load(split):
        xs = torch.from_numpy(idx("%s/%s-images-idx3-ubyte.gz" % (a.dir, split)).copy()).float()
        ys = torch.from_numpy(idx("%s/%s-labels-idx1-ubyte.gz" % (a.dir, split)).copy()).long()
        return ((xs / 255 - 0.2860) / 0.3530).view(-1, 1, 28, 28), ys
    Xtr, Ytr = load("train")
    Xte, Yte = load("t10k")
    if a.limit > 0:
        Xtr, Ytr = Xtr[:a.limit], Ytr[:a.limit]
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    t0 = time.perf_counter()
    perm = torch.randperm(Xtr.shape[0])
    for i in range(0, Xtr.shape[0], 128):
        j = perm[i:i + 128]
        loss = F.cross_entropy(model(Xtr[j]), Ytr[j])
        opt.zero_grad()
        loss.backward()
        opt.step()
    dt = time.perf_counter() - t0
    model.eval()
    with torch.no_grad():
        acc = (model(Xte).argmax(1) == Yte).float().mean().item()
    print("cnn: test accuracy %.2f%%" % (100 * acc))
    record("cnn_epoch", "torch%s eager" % VER, [dt])
