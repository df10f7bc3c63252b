"""W8 backward peer (PyTorch eager) for bench/compile.lua: forward + backward
of (y * g).sum() with a fixed random g, for
  softmax    y = torch.softmax(x, -1), x (4096, 4096) requiring grad;
  layer_norm y = F.layer_norm(x, (1024,), w, b, 1e-5), x (8192, 1024), w and b
             (1024,) all requiring grad.
.grad is set to None inside every timed call (as bench/compile.lua does), so
every call does the same work. Bytes an ideal fused kernel moves: read x and
g, write y and dx = 16 B/elem (layer_norm: + w, b read and dw, db written).
Records (bench/run.sh TSV, cases sm_fwdbwd and ln_fwdbwd) via ../peers/tsv.py.
  cd bench/peers_extra && /usr/bin/python3 w8_backward.py --threads 2
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers"))
from common import parse_args, bench, setup_torch, torch_cap, label, record  # noqa: E402
from tsv import emit  # noqa: E402

args = parse_args()
T = args.threads
torch = setup_torch(T)
import torch.nn.functional as F  # noqa: E402

peer = label("torch eager", torch_cap())
kw = dict(warmup=3, min_reps=args.min_reps, target_s=args.target_s)
R, C = 4096, 4096
LR, LC = 8192, 1024
x = torch.randn(R, C).requires_grad_(True)
g = torch.randn(R, C)
xl = torch.randn(LR, LC).requires_grad_(True)
gl = torch.randn(LR, LC)
w = torch.randn(LC).requires_grad_(True)
b = torch.randn(LC).requires_grad_(True)


def sm():
    x.grad = None
    y = torch.softmax(x, dim=-1)
    (y * g).sum().backward()
    return y


def ln():
    xl.grad = w.grad = b.grad = None
    y = F.layer_norm(xl, (LC,), w, b, 1e-5)
    (y * gl).sum().backward()
    return y


# check against float64
sm()
xd = x.detach().double().requires_grad_(True)
yd = torch.softmax(xd, dim=-1)
(yd * g.double()).sum().backward()
assert torch.allclose(x.grad.double(), xd.grad, atol=1e-5)

for case, fn, nbytes in (("sm_fwdbwd", sm, 4 * R * C * 4), ("ln_fwdbwd", ln, 4 * LR * LC * 4 + 4 * LC * 4)):
    st = bench(fn, **kw)
    record("W8", case, peer, T, st, bytes_moved=nbytes)
    emit(case, peer, T, st, nbytes)
