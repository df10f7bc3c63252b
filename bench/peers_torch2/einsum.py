# PyTorch's peer of bench/einsum.lua: torch.einsum on the same attention-shaped
# contractions (B 8, H 8, T 256, D 64, float32); prints "workload<TAB>pytorch<TAB>median ms".
#   python bench/peers_torch2/einsum.py --threads 2
import argparse, statistics, time
import torch

ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--reps", type=int, default=15)
a = ap.parse_args()
torch.set_num_threads(a.threads)
B, H, T, D = 8, 8, 256, 64
torch.manual_seed(1)
q = torch.randn(B, H, T, D, requires_grad=True)
k = torch.randn(B, H, T, D, requires_grad=True)
p = torch.randn(B, H, T, T)

def fwdbwd():
    s = torch.einsum("bhqd,bhkd->bhqk", q, k)
    s.sum().backward()
    q.grad = k.grad = None

work = [("scores fwd", lambda: torch.einsum("bhqd,bhkd->bhqk", q, k)),
        ("scores fwd+bwd", fwdbwd),
        ("weighted sum fwd", lambda: torch.einsum("bhqk,bhkd->bhqd", p, k))]
for name, f in work:
    t = []
    for i in range(a.reps + 2):
        t0 = time.perf_counter()
        f()
        dt = time.perf_counter() - t0
        if i >= 2:
            t.append(dt)
    print(f"{name}\tpytorch\t{statistics.median(t) * 1e3:.3f}")
