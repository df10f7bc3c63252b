"""Per-op cost of one small eager op in PyTorch: c = a + b on 1-element
float32 tensors, a Python loop of --ops ops (default 1e6) timed as a whole,
--reps times after one warm-up loop (common.bench); reported in ns/op.
This is the peer of `c = a + b` in bench/eager_ops.lua (case op_add_1).
Run by bench/run.sh with Debian's /usr/bin/python3 (torch 1.13) as
  ATEN_CPU_CAPABILITY=avx512|avx2 OMP_WAIT_POLICY=PASSIVE \
  MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 \
  /usr/bin/python3 bench/peers/op_overhead.py --threads 2
"""
from common import parse_args, bench, setup_torch, torch_cap, label
from tsv import emit


def extra(ap):
    ap.add_argument("--ops", type=int, default=1000000)
    ap.add_argument("--reps", type=int, default=7)


args = parse_args(extra)
T = args.threads
torch = setup_torch(T)
cap = torch_cap()
a = torch.randn(1)
b = torch.randn(1)
assert abs((a + b).item() - (a.item() + b.item())) < 1e-6
N = args.ops


def loop():
    for _ in range(N):
        c = a + b


st = bench(loop, warmup=1, min_reps=args.reps, max_reps=args.reps, target_s=0)
peer = label(f"torch eager (Python, c = a + b) [{cap}]")
emit("op_add_1", peer, T, st, N)
print(f"op_add_1   {peer:34s} t={T} median {st['median_ms'] * 1e6 / N:8.1f} ns/op  "
      f"min {st['min_ms'] * 1e6 / N:8.1f}  max {st['max_ms'] * 1e6 / N:8.1f}", flush=True)


def empty():
    for _ in range(N):
        pass


st = bench(empty, warmup=1, min_reps=args.reps, max_reps=args.reps, target_s=0)
emit("op_empty", "Python: empty loop", T, st, N)
print(f"op_empty   {'Python: empty loop':34s} t={T} median {st['median_ms'] * 1e6 / N:8.1f} ns/op", flush=True)
