# PyTorch 2.x side of bench/losses.lua (same shapes, forward + backward, eager).
#   /work/venv-torch/bin/python bench/peers_torch2/losses.py [reps]
import sys, time, statistics
import torch
import torch.nn.functional as F
torch.set_num_threads(2)
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 20
torch.manual_seed(0)

def run(name, fn):
    for _ in range(3): fn()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); t.append(time.perf_counter() - t0)
    print("%-9s torch %s t=2 median %9.3f ms  min %9.3f" % (name, torch.__version__.split("+")[0],
          statistics.median(t) * 1e3, min(t) * 1e3))

def ctc_case(name, T, N, C, S):
    x = torch.randn(T, N, C, requires_grad=True)
    tg = torch.randint(1, C, (N, S))
    il, tl = torch.full((N,), T), torch.full((N,), S)
    def f():
        x.grad = None
        F.ctc_loss(x.log_softmax(2), tg, il, tl).backward()
    run(name, f)
ctc_case("ctc", 50, 16, 20, 10)
ctc_case("ctc_long", 200, 32, 40, 40)
a, p, n = torch.randn(256, 128, requires_grad=True), torch.randn(256, 128), torch.randn(256, 128)
def trip():
    a.grad = None
    F.triplet_margin_loss(a, p, n, swap=True).backward()
run("triplet", trip)
lg, y = torch.randn(256, 100, requires_grad=True), torch.randint(0, 100, (256,))
def mm():
    lg.grad = None
    F.multi_margin_loss(lg, y, p=2).backward()
run("mmargin", mm)
