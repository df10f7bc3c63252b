"""PyTorch's side of bench/sort.lua: sort and topk (k = 10, 1000) along the
last dim of 2^24 float32 values as one row and as 4096 rows of 4096; median
ms over `reps` calls, one tab-separated line per workload.
Run: /work/venv-torch/bin/python bench/peers_extra/sort.py [--threads 2] [--reps 5]"""
import argparse, os, time
ap = argparse.ArgumentParser()
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--reps", type=int, default=5)
a = ap.parse_args()
os.environ["OMP_NUM_THREADS"] = str(a.threads)
import torch
torch.set_num_threads(a.threads)
torch.manual_seed(1)
for shape in [(1, 1 << 24), (4096, 4096)]:
    x = torch.randn(*shape)
    for name, f in [("sort", lambda: torch.sort(x, dim=-1)), ("topk10", lambda: torch.topk(x, 10, dim=-1)),
                    ("topk1000", lambda: torch.topk(x, 1000, dim=-1))]:
        f()
        t = []
        for _ in range(a.reps):
            t0 = time.perf_counter(); r = f(); t.append(time.perf_counter() - t0); del r
        t.sort()
        print("%s %dx%d\t%.1f" % (name, shape[0], shape[1], t[(a.reps - 1) // 2] * 1e3))
