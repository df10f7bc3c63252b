"""PyTorch peer of the bandwidth benchmark: torch.add(a, b) (a fresh output
every call, as eager code allocates it) and a.sum() on --n float32 values
(default 2^24), each call timed alone by common.bench after 10 warm-up calls.
Bytes moved: add reads a, b and writes c = 12 B/elem; sum reads a = 4 B/elem.
Run by bench/run.sh (environment as for op_overhead.py):
  /usr/bin/python3 bench/peers/add_sum.py --threads 2
"""
from common import parse_args, bench, setup_torch, torch_cap, label
from tsv import emit


def extra(ap):
    ap.add_argument("--n", type=int, default=1 << 24)
    ap.add_argument("--reps", type=int, default=50)


args = parse_args(extra)
T = args.threads
torch = setup_torch(T)
cap = torch_cap()
N = args.n
a = torch.rand(N)
b = torch.ones(N)
assert abs(torch.add(a, b)[-1].item() - (a[-1].item() + 1)) < 1e-6
assert abs(a.sum().item() - N / 2) < 0.01 * N

for case, fn, nbytes in (("add", lambda: torch.add(a, b), 12 * N),
                         ("sum", lambda: a.sum(), 4 * N)):
    st = bench(fn, warmup=10, min_reps=args.reps, max_reps=args.reps, target_s=0)
    op = "torch.add(a, b)" if case == "add" else "a.sum()"
    peer = label(f"torch eager ({op}) [{cap}]")
    emit(case, peer, T, st, nbytes)
    print(f"{case:10s} {peer:34s} t={T} median {st['median_ms']:8.3f} ms  min {st['min_ms']:8.3f}  "
          f"max {st['max_ms']:8.3f}  {nbytes / (st['median_ms'] * 1e-3) / 1e9:6.2f} GB/s", flush=True)
