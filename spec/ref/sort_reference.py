# Generates spec/ref/sort_reference.lua: PyTorch's results for the sorting,
# selection, counting and search ops of the breadth issue, on fixed literal
# inputs, which spec/lua/sort_spec.lua compares tide with (values, float64
# gradcheck, compiled == eager, OpenCL == CPU). Not run by the tests; needs
# PyPI torch 2.x:
#   /work/venv-torch/bin/python spec/ref/sort_reference.py > spec/ref/sort_reference.lua
# Each case: name, the tide expression (Lua; inputs are the locals A, B, C, D;
# dims and returned indices 1-based), the torch function (0-based: ix() and
# the +1 below make its indices 1-based), the inputs (shape and kind), flags:
#   grad      float64 gradcheck of the expression in its float inputs
#   nocompile data-dependent output shape: tide.compile must raise
# Ties only where PyTorch's index order is fixed (sort is stable; mode).
import math, sys
import numpy as np
import torch
from refgen import emit

torch.set_default_dtype(torch.float64)

def inp(shape, kind="randn"):
    return (tuple(shape), kind)

def vi(r):          # (values, 0-based indices) -> (values, 1-based indices)
    return (r[0], r[1] + 1)

CASES = [
    # -- sort, argsort
    ("sort", "A:sort()", lambda A: vi(torch.sort(A)), {"A": inp((3, 5))}, "grad"),
    ("sort_dim1_desc", "A:sort(1, true)", lambda A: vi(torch.sort(A, 0, descending=True)), {"A": inp((4, 3))}, "grad"),
    ("sort_3d", "A:sort(2)", lambda A: vi(torch.sort(A, 1)), {"A": inp((2, 5, 3))}, "grad"),
    ("sort_stable", "A:sort({ dim = 1, stable = true })", lambda A: vi(torch.sort(A, dim=0, stable=True)), {"A": inp((9, 2), "int")}, ""),
    ("sort_stable_desc", "A:sort(-1, { descending = true, stable = true })",
     lambda A: vi(torch.sort(A, dim=-1, descending=True, stable=True)), {"A": inp((2, 50), "few")}, ""),
    ("sort_nan", "A:sort()", lambda A: vi(torch.sort(A, stable=True)), {"A": inp((9,), "special")}, ""),
    ("sort_nan_desc", "A:sort(1, true)", lambda A: vi(torch.sort(A, dim=0, descending=True, stable=True)), {"A": inp((9,), "special")}, ""),
    ("sort_long_row", "A:sort()", lambda A: vi(torch.sort(A, stable=True)), {"A": inp((2, 300))}, ""),
    ("sort_int_long", "A:sort(2, true)", lambda A: vi(torch.sort(A, dim=1, descending=True, stable=True)), {"A": inp((2, 200), "int")}, ""),
    ("sort_bool", "A:sort(1)", lambda A: vi(torch.sort(A, dim=0, stable=True)), {"A": inp((40,), "bool")}, ""),
    ("argsort", "A:argsort(1)", lambda A: torch.argsort(A, 0) + 1, {"A": inp((5, 3))}, ""),
    ("argsort_desc", "A:argsort({ descending = true, stable = true })", lambda A: torch.argsort(A, descending=True, stable=True) + 1,
     {"A": inp((3, 8), "int")}, ""),
    ("msort", "A:msort()", lambda A: torch.msort(A), {"A": inp((4, 3))}, "grad"),
    # -- topk, kthvalue, median, mode
    ("topk", "A:topk(2)", lambda A: vi(torch.topk(A, 2)), {"A": inp((3, 6))}, "grad"),
    ("topk_smallest", "A:topk(3, 1, false)", lambda A: vi(torch.topk(A, 3, 0, largest=False)), {"A": inp((5, 2))}, "grad"),
    ("topk_opts", "A:topk(2, { dim = 1, largest = false })", lambda A: vi(torch.topk(A, 2, 0, largest=False)), {"A": inp((4, 3))}, "grad"),
    ("topk_long", "A:topk(5)", lambda A: vi(torch.topk(A, 5)), {"A": inp((2, 400))}, ""),
    ("topk_nan", "A:topk(3)", lambda A: vi(torch.topk(A, 3)), {"A": inp((9,), "special1")}, ""),
    ("topk_all", "A:topk(4)", lambda A: vi(torch.topk(A, 4)), {"A": inp((2, 4))}, "grad"),
    ("topk_zero", "A:topk(0)", lambda A: vi(torch.topk(A, 0)), {"A": inp((2, 4))}, ""),
    ("kthvalue", "A:kthvalue(2)", lambda A: vi(torch.kthvalue(A, 2)), {"A": inp((3, 5))}, "grad"),
    ("kthvalue_dim", "A:kthvalue(3, 1, true)", lambda A: vi(torch.kthvalue(A, 3, 0, keepdim=True)), {"A": inp((4, 3))}, "grad"),
    ("median_all_odd", "A:median()", lambda A: torch.median(A), {"A": inp((3, 3))}, "grad"),
    ("median_all_even", "A:median()", lambda A: torch.median(A), {"A": inp((2, 3))}, "grad"),
    ("median_dim", "A:median(2)", lambda A: vi(torch.median(A, 1)), {"A": inp((3, 4))}, "grad"),
    ("median_keepdim", "A:median(1, true)", lambda A: vi(torch.median(A, 0, keepdim=True)), {"A": inp((5, 2))}, "grad"),
    ("median_nan", "A:median(1)", lambda A: vi(torch.median(A, 0)), {"A": inp((7,), "special1")}, ""),
    ("nanmedian", "A:nanmedian(2)", lambda A: vi(torch.nanmedian(A, 1)), {"A": inp((3, 4), "nan")}, ""),
    ("nanmedian_all", "A:nanmedian()", lambda A: torch.nanmedian(A), {"A": inp((3, 4), "nan")}, ""),
    ("median_int", "A:median()", lambda A: torch.median(A), {"A": inp((7,), "distinct_int")}, ""),
    ("mode", "A:mode()", lambda A: vi(torch.mode(A)), {"A": inp((3, 9), "few")}, ""),
    ("mode_dim_int", "A:mode(1, true)", lambda A: vi(torch.mode(A, 0, keepdim=True)), {"A": inp((12, 3), "small_int")}, ""),
    # -- quantile
    ("quantile", "A:quantile(0.3)", lambda A: torch.quantile(A, 0.3), {"A": inp((3, 4))}, "grad"),
    ("quantile_dim", "A:quantile(0.75, 2)", lambda A: torch.quantile(A, 0.75, 1), {"A": inp((3, 5))}, "grad"),
    ("quantile_q", "A:quantile(tide.tensor({ 0.1, 0.5, 0.95 }, { dtype = tide.float64 }), 1, true)",
     lambda A: torch.quantile(A, torch.tensor([0.1, 0.5, 0.95]), 0, keepdim=True), {"A": inp((5, 2))}, "grad"),
    ("quantile_lower", "A:quantile(0.4, 2, false, { interpolation = 'lower' })", lambda A: torch.quantile(A, 0.4, 1, interpolation="lower"),
     {"A": inp((2, 6))}, "grad"),
    ("quantile_higher", "A:quantile(0.4, { dim = 2, interpolation = 'higher' })", lambda A: torch.quantile(A, 0.4, 1, interpolation="higher"),
     {"A": inp((2, 6))}, "grad"),
    ("quantile_midpoint", "A:quantile(0.4, 2, { interpolation = 'midpoint' })", lambda A: torch.quantile(A, 0.4, 1, interpolation="midpoint"),
     {"A": inp((2, 6))}, "grad"),
    ("quantile_nearest", "A:quantile(tide.tensor({ 0.3, 0.5, 0.7 }, { dtype = tide.float64 }), 1, false, { interpolation = 'nearest' })",
     lambda A: torch.quantile(A, torch.tensor([0.3, 0.5, 0.7]), 0, interpolation="nearest"), {"A": inp((6, 2))}, "grad"),
    ("quantile_keepdim_all", "A:quantile(0.5, nil, true)", lambda A: torch.quantile(A, 0.5, keepdim=True), {"A": inp((2, 3))}, "grad"),
    ("quantile_nan", "A:quantile(0.5, 2)", lambda A: torch.quantile(A, 0.5, 1), {"A": inp((3, 4), "nan")}, ""),
    ("nanquantile", "A:nanquantile(0.5, 2)", lambda A: torch.nanquantile(A, 0.5, 1), {"A": inp((3, 4), "nan")}, ""),
    ("nanquantile_q", "A:nanquantile(tide.tensor({ 0.2, 0.8 }, { dtype = tide.float64 }))",
     lambda A: torch.nanquantile(A, torch.tensor([0.2, 0.8])), {"A": inp((3, 5), "nan")}, ""),
    # -- unique
    ("unique", "A:unique()", lambda A: torch.unique(A), {"A": inp((4, 5), "few")}, "nocompile"),
    ("unique_all", "A:unique({ return_inverse = true, return_counts = true })",
     lambda A: (lambda r: (r[0], r[1] + 1, r[2]))(torch.unique(A, return_inverse=True, return_counts=True)), {"A": inp((3, 6), "small_int")}, "nocompile"),
    ("unique_counts", "A:unique({ sorted = true, return_counts = true })", lambda A: torch.unique(A, sorted=True, return_counts=True),
     {"A": inp((12,), "few")}, "nocompile"),
    ("unique_consecutive", "A:unique_consecutive({ return_inverse = true, return_counts = true })",
     lambda A: (lambda r: (r[0], r[1] + 1, r[2]))(torch.unique_consecutive(A, return_inverse=True, return_counts=True)),
     {"A": inp((15,), "runs")}, "nocompile"),
    # -- searchsorted, bucketize
    ("searchsorted", "tide.searchsorted(A, B)", lambda A, B: torch.searchsorted(A, B) + 1, {"A": inp((6,), "sorted"), "B": inp((2, 4))}, ""),
    ("searchsorted_right", "tide.searchsorted(A, B, { right = true })", lambda A, B: torch.searchsorted(A, B, right=True) + 1,
     {"A": inp((8,), "sorted_int"), "B": inp((7,), "small_int")}, ""),
    ("searchsorted_side", "tide.searchsorted(A, B, { side = 'left' })", lambda A, B: torch.searchsorted(A, B, side="left") + 1,
     {"A": inp((8,), "sorted_int"), "B": inp((7,), "small_int")}, ""),
    ("searchsorted_rows", "tide.searchsorted(A, B, { side = 'right' })", lambda A, B: torch.searchsorted(A, B, side="right") + 1,
     {"A": inp((2, 5), "sorted"), "B": inp((2, 3))}, ""),
    ("bucketize", "A:bucketize(B)", lambda A, B: torch.bucketize(A, B) + 1, {"A": inp((3, 4)), "B": inp((5,), "sorted")}, ""),
    ("bucketize_right", "A:bucketize(B, { right = true })", lambda A, B: torch.bucketize(A, B, right=True) + 1,
     {"A": inp((9,), "small_int"), "B": inp((6,), "sorted_int")}, ""),
    # -- bincount, histc
    ("bincount", "A:bincount()", lambda A: torch.bincount(A), {"A": inp((20,), "count")}, "nocompile"),
    ("bincount_weights", "A:bincount(B, 9)", lambda A, B: torch.bincount(A, B, 9), {"A": inp((10,), "count"), "B": inp((10,))}, "nocompile"),
    ("bincount_opts", "A:bincount({ minlength = 3 })", lambda A: torch.bincount(A, minlength=3), {"A": inp((0,), "count")}, "nocompile"),
    ("histc", "A:histc(5)", lambda A: torch.histc(A, 5), {"A": inp((4, 6))}, ""),
    ("histc_range", "A:histc(4, -1, 1)", lambda A: torch.histc(A, 4, -1, 1), {"A": inp((30,))}, ""),
    ("histc_opts", "A:histc({ bins = 3, min = 0, max = 3 })", lambda A: torch.histc(A, 3, 0, 3), {"A": inp((10,), "special")}, ""),
]

def values(shape, kind, rng):
    n = int(np.prod(shape)) if shape else 1
    if kind == "randn": v = rng.standard_normal(n)
    elif kind == "int": return np.round(rng.uniform(-9, 9, n)).astype(np.int64), "int64"
    elif kind == "small_int": return np.round(rng.uniform(-0.5, 3.5, n)).astype(np.int64), "int64"
    elif kind == "count": return np.floor(rng.uniform(0, 7, n)).astype(np.int64), "int64"
    elif kind == "distinct_int": return rng.permutation(n).astype(np.int64) * 3 - 5, "int64"
    elif kind == "sorted_int": return np.sort(np.round(rng.uniform(-0.5, 3.5, n))).astype(np.int64), "int64"
    elif kind == "bool": return rng.uniform(0, 1, n) < 0.5, "bool"
    elif kind == "few": v = np.round(rng.uniform(-2, 2, n))
    elif kind == "runs": v = np.repeat(np.round(rng.uniform(-2, 2, n)), 2)[:n]
    elif kind == "sorted": v = np.sort(rng.standard_normal(n).reshape(-1, shape[-1]), axis=-1).reshape(-1)
    elif kind == "special":
        v = np.round(rng.standard_normal(n), 2)
        v[0] = np.nan; v[min(1, n - 1)] = np.inf; v[min(2, n - 1)] = -np.inf; v[min(5, n - 1)] = np.nan
    elif kind == "special1":
        v = np.round(rng.standard_normal(n), 2); v[2] = np.nan
    elif kind == "nan":
        v = np.round(rng.standard_normal(n), 2); v[::3] = np.nan
    else: raise ValueError(kind)
    return np.round(v, 3), "float64"

emit("spec/ref/sort_reference.py", CASES, values, 2000)
