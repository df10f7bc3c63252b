# PyTorch's side of bench/convt.lua: ConvTranspose2d 64 -> 32, 4x4, stride 2,
# padding 1 on (8, 64, 28, 28) float32, forward and forward + backward; median.
#   /work/venv-torch/bin/python bench/peers_torch2/convt.py [threads] [reps]
import sys, time, statistics
import torch
import torch.nn.functional as F
th = int(sys.argv[1]) if len(sys.argv) > 1 else 1
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
torch.set_num_threads(th)
torch.manual_seed(0)
x = torch.randn(8, 64, 28, 28, requires_grad=True)
w = (torch.randn(64, 32, 4, 4) * 0.05).requires_grad_()
b = torch.randn(32, requires_grad=True)

def bench(name, f):
    for _ in range(2): f()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter(); f(); t.append(time.perf_counter() - t0)
    print("%-16s torch %s t=%d median %8.3f ms  min %8.3f" % (name, torch.__version__.split("+")[0], th,
          statistics.median(t) * 1e3, min(t) * 1e3))

def fwd():
    with torch.no_grad(): F.conv_transpose2d(x, w, b, stride=2, padding=1)
def fwdbwd():
    x.grad = w.grad = b.grad = None
    F.conv_transpose2d(x, w, b, stride=2, padding=1).sum().backward()
bench("convt2d_fwd", fwd)
bench("convt2d_fwdbwd", fwdbwd)

x3 = torch.randn(2, 16, 16, 32, 32, requires_grad=True)
w3 = (torch.randn(32, 16, 3, 3, 3) * 0.05).requires_grad_()
b3 = torch.randn(32, requires_grad=True)
def fwd3():
    with torch.no_grad(): F.conv3d(x3, w3, b3, padding=1)
def fwdbwd3():
    x3.grad = w3.grad = b3.grad = None
    F.conv3d(x3, w3, b3, padding=1).sum().backward()
bench("conv3d_fwd", fwd3)
bench("conv3d_fwdbwd", fwdbwd3)
