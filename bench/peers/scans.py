# bench/peers/scans.py -- PyTorch's cumsum on 2^24 float32 values (one row of
# 2^24, 4096 rows of 4096), the peer of bench/scans.lua; same output format.
#   python bench/peers/scans.py [--threads N] [--reps 15]
import sys, time, statistics
import torch

args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
torch.set_num_threads(int(args.get("--threads", "2")))
reps = int(args.get("--reps", "15"))
N = 2 ** 24
for name, shape in (("cumsum 1x2^24", (1, N)), ("cumsum 4096x4096", (4096, 4096))):
    x = torch.rand(shape)
    ts = []
    for i in range(reps + 2):
        t0 = time.perf_counter()
        y = torch.cumsum(x, 1)
        dt = time.perf_counter() - t0
        del y
        if i >= 2: ts.append(dt)
    m = statistics.median(ts)
    print("%s\tpytorch\t%.3f\t%.1f" % (name, m * 1e3, 2 * 4 * N / m / 1e9))
print("torch\t%s" % torch.__version__, file=sys.stderr)
