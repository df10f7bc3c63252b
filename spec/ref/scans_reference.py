# Generates spec/ref/scans_reference.lua: PyTorch's results for the scans
# (cumsum cumprod cummax cummin logcumsumexp), the elementwise atan2 hypot fmod
# remainder and the indexing ops (nonzero masked_select take_along_dim
# index_put index_copy index_fill masked_scatter) on fixed literal inputs, which
# spec/lua/scans_spec.lua walks with spec/ref_walk.lua (values, float64
# gradcheck, compiled == eager, OpenCL == CPU). Not run by the tests; needs PyPI torch 2.x:
#   /work/venv-torch/bin/python spec/ref/scans_reference.py > spec/ref/scans_reference.lua
# Each case: name, the tide expression (Lua; inputs A, B, C, D; dims and indices
# 1-based), the torch function (0-based), the inputs (shape and kind), flags:
#   grad      float64 gradcheck of the expression in its float inputs
#   nocompile data-dependent output shape: tide.compile must raise
import math, sys
import numpy as np
import torch
from refgen import emit

torch.set_default_dtype(torch.float64)

def inp(shape, kind="randn"):
    return (tuple(shape), kind)

L = lambda *v: torch.tensor(v)

CASES = [
    # -- scans
    ("cumsum_last", "A:cumsum(2)", lambda A: torch.cumsum(A, 1), {"A": inp((3, 5))}, "grad"),
    ("cumsum_first", "A:cumsum(1)", lambda A: torch.cumsum(A, 0), {"A": inp((4, 3))}, "grad"),
    ("cumsum_mid", "tide.cumsum(A, 2)", lambda A: torch.cumsum(A, 1), {"A": inp((2, 4, 3))}, "grad"),
    ("cumsum_neg", "A:cumsum(-1)", lambda A: torch.cumsum(A, -1), {"A": inp((2, 3, 4))}, "grad"),
    ("cumsum_0d", "A:cumsum(1)", lambda A: torch.cumsum(A, 0), {"A": inp(())}, "grad"),
    ("cumsum_int", "A:cumsum(1)", lambda A: torch.cumsum(A, 0), {"A": inp((7,), "int")}, ""),
    ("cumsum_bool", "A:cumsum(2)", lambda A: torch.cumsum(A, 1), {"A": inp((2, 5), "bool")}, ""),
    ("cumsum_dtype", "A:cumsum(1, { dtype = tide.float64 })", lambda A: torch.cumsum(A, 0, dtype=torch.float64),
     {"A": inp((6,), "int")}, ""),
    ("cumprod", "A:cumprod(2)", lambda A: torch.cumprod(A, 1), {"A": inp((3, 5))}, "grad"),
    ("cumprod_zeros", "A:cumprod(2)", lambda A: torch.cumprod(A, 1), {"A": inp((4, 6), "zeros")}, "grad"),
    ("cumprod_int", "A:cumprod(1)", lambda A: torch.cumprod(A, 0), {"A": inp((5,), "int")}, ""),
    ("cummax", "A:cummax(2)", lambda A: torch.cummax(A, 1), {"A": inp((3, 6))}, "grad"),
    ("cummax_ties", "A:cummax(1)", lambda A: torch.cummax(A, 0), {"A": inp((8, 2), "small")}, ""),
    ("cummax_nan", "A:cummax(1)", lambda A: torch.cummax(A, 0), {"A": inp((6,), "nan")}, ""),
    ("cummin", "A:cummin(1)", lambda A: torch.cummin(A, 0), {"A": inp((5, 3))}, "grad"),
    ("cummin_ties", "A:cummin(2)", lambda A: torch.cummin(A, 1), {"A": inp((2, 8), "small")}, ""),
    ("cummax_int", "A:cummax(1)", lambda A: torch.cummax(A, 0), {"A": inp((7,), "int")}, ""),
    ("logcumsumexp", "A:logcumsumexp(2)", lambda A: torch.logcumsumexp(A, 1), {"A": inp((3, 5), "wide")}, "grad"),
    ("logcumsumexp_big", "A:logcumsumexp(1)", lambda A: torch.logcumsumexp(A, 0), {"A": inp((4, 2), "huge")}, "grad"),
    ("logcumsumexp_inf", "A:logcumsumexp(1)", lambda A: torch.logcumsumexp(A, 0), {"A": inp((5,), "special")}, ""),
    # -- elementwise
    ("atan2", "tide.atan2(A, B)", lambda A, B: torch.atan2(A, B), {"A": inp((3, 4)), "B": inp((3, 4))}, "grad"),
    ("atan2_bcast", "A:atan2(B)", lambda A, B: torch.atan2(A, B), {"A": inp((3, 1)), "B": inp((4,))}, "grad"),
    ("hypot", "tide.hypot(A, B)", lambda A, B: torch.hypot(A, B), {"A": inp((5,)), "B": inp((5,))}, "grad"),
    ("fmod", "tide.fmod(A, B)", lambda A, B: torch.fmod(A, B), {"A": inp((6,), "wide"), "B": inp((6,), "div")}, "grad"),
    ("fmod_num", "A:fmod(1.5)", lambda A: torch.fmod(A, 1.5), {"A": inp((6,), "wide")}, "grad"),
    ("remainder", "tide.remainder(A, B)", lambda A, B: torch.remainder(A, B), {"A": inp((6,), "wide"), "B": inp((6,), "div")}, "grad"),
    ("remainder_num", "A:remainder(-1.5)", lambda A: torch.remainder(A, -1.5), {"A": inp((6,), "wide")}, "grad"),
    ("remainder_rnum", "tide.remainder(5, A)", lambda A: torch.remainder(5, A), {"A": inp((6,), "div")}, "grad"),
    ("fmod_int", "A:fmod(B)", lambda A, B: torch.fmod(A, B), {"A": inp((8,), "int"), "B": inp((8,), "nzint")}, ""),
    ("remainder_int", "A:remainder(B)", lambda A, B: torch.remainder(A, B), {"A": inp((8,), "int"), "B": inp((8,), "nzint")}, ""),
    ("remainder_int_num", "A:remainder(-4)", lambda A: torch.remainder(A, -4), {"A": inp((8,), "int")}, ""),
    # -- indexing
    ("nonzero", "A:nonzero()", lambda A: torch.nonzero(A) + 1, {"A": inp((3, 4), "sparse")}, "nocompile"),
    ("nonzero_1d", "tide.nonzero(A)", lambda A: torch.nonzero(A) + 1, {"A": inp((7,), "sparse")}, "nocompile"),
    ("nonzero_tuple", "A:nonzero({ as_tuple = true })", lambda A: tuple(t + 1 for t in torch.nonzero(A, as_tuple=True)),
     {"A": inp((2, 3, 2), "sparse")}, "nocompile"),
    ("masked_select", "A:masked_select(B)", lambda A, B: torch.masked_select(A, B), {"A": inp((3, 4)), "B": inp((3, 4), "bool")}, "grad nocompile"),
    ("masked_select_bcast", "A:masked_select(B)", lambda A, B: torch.masked_select(A, B), {"A": inp((3, 4)), "B": inp((4,), "bool")}, "grad nocompile"),
    ("take_along_dim", "tide.take_along_dim(A, tide.long { { 2, 1 }, { 3, 3 }, { 1, 2 } }, 2)",
     lambda A: torch.take_along_dim(A, torch.tensor([[1, 0], [2, 2], [0, 1]]), 1), {"A": inp((3, 3))}, "grad"),
    ("take_along_dim_bcast", "A:take_along_dim(tide.long { { 2, 1, 1 } }, 1)",
     lambda A: torch.take_along_dim(A, torch.tensor([[1, 0, 0]]), 0), {"A": inp((2, 3))}, "grad"),
    ("take_along_dim_flat", "A:take_along_dim(tide.long { 6, 1, 3 })",
     lambda A: torch.take_along_dim(A, torch.tensor([5, 0, 2])), {"A": inp((2, 3))}, "grad"),
    ("index_put", "A:index_put({ tide.long { 1, 3 }, tide.long { 2, 1 } }, B)",
     lambda A, B: A.index_put((torch.tensor([0, 2]), torch.tensor([1, 0])), B), {"A": inp((3, 4)), "B": inp((2,))}, "grad"),
    ("index_put_acc", "A:index_put({ tide.long { 1, 3, 1 } }, B, true)",
     lambda A, B: A.index_put((torch.tensor([0, 2, 0]),), B, accumulate=True), {"A": inp((3, 2)), "B": inp((3, 2))}, "grad"),
    ("index_put_", "A:clone():index_put_({ tide.long { 2 }, tide.long { 1, 3 } }, 7)",
     lambda A: A.clone().index_put_((torch.tensor([1]), torch.tensor([0, 2])), torch.tensor(7.0)), {"A": inp((2, 3))}, "grad"),
    ("index_copy", "A:index_copy(2, tide.long { 3, 1 }, B)", lambda A, B: A.index_copy(1, torch.tensor([2, 0]), B),
     {"A": inp((2, 4)), "B": inp((2, 2))}, "grad"),
    ("index_copy_", "A:clone():index_copy_(1, tide.long { 2 }, B)", lambda A, B: A.clone().index_copy_(0, torch.tensor([1]), B),
     {"A": inp((3, 2)), "B": inp((1, 2))}, "grad"),
    ("index_fill", "A:index_fill(2, tide.long { 1, 3 }, -2)", lambda A: A.index_fill(1, torch.tensor([0, 2]), -2),
     {"A": inp((2, 3))}, "grad"),
    ("index_fill_", "A:clone():index_fill_(1, tide.long { 2 }, 0.5)", lambda A: A.clone().index_fill_(0, torch.tensor([1]), 0.5),
     {"A": inp((3, 2))}, "grad"),
    ("masked_scatter", "A:masked_scatter(B, C)", lambda A, B, C: A.masked_scatter(B, C),
     {"A": inp((3, 4)), "B": inp((3, 4), "bool"), "C": inp((12,))}, "grad"),
]

def values(shape, kind, rng):
    n = int(np.prod(shape)) if shape else 1
    if kind == "randn": v = rng.standard_normal(n)
    elif kind == "wide": v = rng.uniform(-6.0, 6.0, n)
    elif kind == "huge": v = rng.uniform(-6.0, 6.0, n) + 800
    elif kind == "div": v = rng.uniform(0.4, 2.5, n) * np.where(rng.uniform(0, 1, n) < 0.5, -1, 1)
    elif kind == "small": v = np.round(rng.uniform(-2, 2, n))
    elif kind == "zeros":
        v = rng.uniform(0.5, 1.5, n) * np.where(rng.uniform(0, 1, n) < 0.5, -1, 1); v[::5] = 0; v[1] = 0
    elif kind == "int": return np.round(rng.uniform(-9, 9, n)).astype(np.int64), "int64"
    elif kind == "nzint":
        return (np.round(rng.uniform(1, 5, n)) * np.where(rng.uniform(0, 1, n) < 0.5, -1, 1)).astype(np.int64), "int64"
    elif kind == "bool": return rng.uniform(0, 1, n) < 0.6, "bool"
    elif kind == "sparse": v = np.where(rng.uniform(0, 1, n) < 0.5, 0.0, np.round(rng.standard_normal(n), 2))
    elif kind == "special":
        v = np.round(rng.standard_normal(n), 2)
        v[0] = -np.inf; v[min(1, n - 1)] = -np.inf; v[min(3, n - 1)] = np.inf
    elif kind == "nan":
        v = np.round(rng.standard_normal(n), 2); v[2] = np.nan
    else: raise ValueError(kind)
    return np.round(v, 3), "float64"

# cummax/cummin: 1-based indices
post = lambda name, r: (r[0], r[1] + 1) if name.startswith(("cummax", "cummin")) else r
emit("spec/ref/scans_reference.py", CASES, values, 2000, post)
