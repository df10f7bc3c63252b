"""bench/peers/lstm.py -- the PyTorch peer of bench/lstm.lua: nn.LSTM forward
(no grad) and forward+backward of sum(output), seq 64, batch 32, input and
hidden 256, float32, the same repetitions; prints the same lines. Twice: as
PyTorch runs it on the CPU by default (mode pytorch: oneDNN's RNN primitive
where torch has it, as PyPI's does), and with oneDNN off (mode
pytorch-native: ATen's own LSTM, a matmul and pointwise ops per step, the
way tide runs it)."""
import argparse, os, sys, time
ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--seq", type=int, default=64)
ap.add_argument("--batch", type=int, default=32)
ap.add_argument("--hidden", type=int, default=256)
ap.add_argument("--layers", type=int, default=1)
ap.add_argument("--reps", type=int, default=15)
a = ap.parse_args()
for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[v] = str(a.threads)
import warnings
warnings.filterwarnings("ignore")
import torch
torch.set_num_threads(a.threads)
torch.manual_seed(0)
m = torch.nn.LSTM(a.hidden, a.hidden, num_layers=a.layers)
x = torch.randn(a.seq, a.batch, a.hidden)

def fwd():
    with torch.no_grad():
        m(x)[0].sum().item()

def step():
    for p in m.parameters(): p.grad = None
    y, _ = m(x)
    l = y.sum()
    l.backward()
    l.item()

def timeit(name, f, mode="pytorch"):
    t0 = time.perf_counter(); f(); first = time.perf_counter() - t0
    for _ in range(2): f()
    t = []
    for _ in range(a.reps):
        s = time.perf_counter(); f(); t.append(time.perf_counter() - s)
    t.sort()
    print("lstm\t%s\t%s\t%.2f\t%.2f\t%.2f\t%d\tfirst %.0f ms\ttorch %s" % (
        name, mode, t[a.reps // 2] * 1e3, t[0] * 1e3, t[-1] * 1e3, a.reps, first * 1e3, torch.__version__), flush=True)

timeit("forward", fwd)
timeit("forward+backward", step)
with torch.backends.mkldnn.flags(enabled=False):
    timeit("forward", fwd, "pytorch-native")
    timeit("forward+backward", step, "pytorch-native")
