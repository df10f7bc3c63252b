# Generates spec/ref/unique_reference.lua: PyTorch's torch.unique(dim=) and
# torch.unique_consecutive(dim=) on fixed inputs, which spec/lua/unique_dim_spec.lua
# walks (spec/ref_walk.lua: values, tide.compile's data-dependent error, OpenCL ==
# CPU). Not run by the tests; needs PyPI torch 2.x:
#   /work/venv-torch/bin/python spec/ref/unique_reference.py > spec/ref/unique_reference.lua
# Cases as in spec/ref/sort_reference.py (dims and the inverse 1-based in tide).
# Input kinds: rows (rows drawn from 3 distinct ones, so slices repeat), cols (the
# same along the last dim), mid (along the middle dim of 3), runs, int, bool. No NaN:
# torch sorts slices holding one with an inconsistent order (equal rows can end up
# apart); tide's order puts NaN last, checked in the spec.
import numpy as np
import torch
from refgen import emit

torch.set_default_dtype(torch.float64)

def inp(shape, kind):
    return (tuple(shape), kind)

def inv1(r):        # (values, inverse, counts...) with the inverse 1-based
    return (r[0], r[1] + 1) + tuple(r[2:])

CASES = [
    ("unique_dim1", "A:unique({ dim = 1, return_inverse = true, return_counts = true })",
     lambda A: inv1(torch.unique(A, dim=0, return_inverse=True, return_counts=True)), {"A": inp((7, 3), "rows")}, "nocompile"),
    ("unique_dim2_float", "A:unique({ dim = 2, return_inverse = true })",
     lambda A: inv1(torch.unique(A, dim=1, return_inverse=True)), {"A": inp((3, 8), "cols")}, "nocompile"),
    ("unique_dim_neg", "A:unique({ dim = -1, return_counts = true })",
     lambda A: torch.unique(A, dim=-1, return_counts=True), {"A": inp((2, 6), "cols")}, "nocompile"),
    ("unique_dim_mid", "A:unique({ dim = 2, return_inverse = true, return_counts = true })",
     lambda A: inv1(torch.unique(A, dim=1, return_inverse=True, return_counts=True)), {"A": inp((2, 6, 2), "mid")}, "nocompile"),
    ("unique_dim_1d", "A:unique({ dim = 1, return_inverse = true })",
     lambda A: inv1(torch.unique(A, dim=0, return_inverse=True)), {"A": inp((9,), "int")}, "nocompile"),
    ("unique_dim_bool", "A:unique({ dim = 1, return_inverse = true, return_counts = true })",
     lambda A: inv1(torch.unique(A, dim=0, return_inverse=True, return_counts=True)), {"A": inp((6, 2), "bool")}, "nocompile"),
    ("unique_dim_empty", "A:unique({ dim = 1, return_inverse = true, return_counts = true })",
     lambda A: inv1(torch.unique(A, dim=0, return_inverse=True, return_counts=True)), {"A": inp((0, 3), "rows")}, "nocompile"),
    ("unique_consecutive_dim", "A:unique_consecutive({ dim = 1, return_inverse = true, return_counts = true })",
     lambda A: inv1(torch.unique_consecutive(A, dim=0, return_inverse=True, return_counts=True)), {"A": inp((8, 2), "runs")}, "nocompile"),
]

def values(shape, kind, rng):
    n = int(np.prod(shape))
    if kind in ("rows", "cols", "mid", "runs"):
        dims = list(shape)
        ax = {"rows": 0, "runs": 0, "cols": len(dims) - 1, "mid": 1}[kind]
        moved = [dims[ax]] + [d for i, d in enumerate(dims) if i != ax]
        rest = int(np.prod(moved[1:]))
        base = np.round(rng.uniform(-1.5, 1.5, (3, rest)))
        pick = rng.integers(0, 3, moved[0])
        if kind == "runs": pick = np.sort(pick)[::-1] if moved[0] else pick
        v = base[pick].reshape(moved)
        v = np.moveaxis(v, 0, ax).reshape(-1)
        return (v.astype(np.int64), "int64") if kind in ("rows", "runs") else (v, "float64")
    if kind == "int": return np.round(rng.uniform(-0.5, 3.5, n)).astype(np.int64), "int64"
    if kind == "bool": return rng.uniform(0, 1, n) < 0.5, "bool"
    raise ValueError(kind)

emit("spec/ref/unique_reference.py", CASES, values, 3000)
