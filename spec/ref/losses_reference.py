# Generates spec/ref/losses_reference.lua: PyTorch's values and input gradients
# for the losses of tide.nn.losses_extra on fixed inputs, which
# spec/lua/losses_extra_spec.lua compares tide with (values, gradients, float64
# gradcheck, compiled == eager, OpenCL == CPU). Not run by the tests; needs PyPI torch 2.x:
#   /work/venv-torch/bin/python spec/ref/losses_reference.py > spec/ref/losses_reference.lua
# Each case: name, the tide expression (Lua; inputs are the locals A, B, C, D; labels
# and CTC's blank 1-based), the torch function (labels 0-based), the inputs, flags:
#   grad      float64 gradcheck in all float inputs (grad:AB: in A and B only), and the
#             gradient of the summed result against torch's
#   nocompile tide.compile must raise (data it cannot trace)
#   f32       a float32 result: equal within float32 rounding (tide's CTC kernel sums
#             in double, torch's in float)
# Input kinds: randn pos unit sign (+-1) bin (0/1) cnt (0..5) lab<k> (1..k) or
# ("lit", values, dtype) literal values.
import math, sys
import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

def inp(shape, kind="randn"): return (tuple(shape), kind)
def lit(shape, vals, dtype="int64"): return (tuple(shape), ("lit", vals, dtype))
L = lambda *a: torch.tensor(a)

CASES = [
    # -- margin_ranking_loss
    ("mrl", "F.margin_ranking_loss(A, B, C)", lambda A, B, C: F.margin_ranking_loss(A, B, C),
     {"A": inp((5,)), "B": inp((5,)), "C": inp((5,), "sign")}, "grad"),
    ("mrl_margin_sum", "F.margin_ranking_loss(A, B, C, { margin = 0.5, reduction = 'sum' })",
     lambda A, B, C: F.margin_ranking_loss(A, B, C, margin=0.5, reduction="sum"),
     {"A": inp((2, 3)), "B": inp((2, 3)), "C": inp((2, 3), "sign")}, "grad"),
    ("mrl_none", "F.margin_ranking_loss(A, B, C, { margin = -0.2, reduction = 'none' })",
     lambda A, B, C: F.margin_ranking_loss(A, B, C, margin=-0.2, reduction="none"),
     {"A": inp((6,)), "B": inp((6,)), "C": inp((6,), "sign")}, "grad"),
    # -- cosine_embedding_loss
    ("cel", "F.cosine_embedding_loss(A, B, C)", lambda A, B, C: F.cosine_embedding_loss(A, B, C),
     {"A": inp((4, 3)), "B": inp((4, 3)), "C": inp((4,), "sign")}, "grad:AB"),
    ("cel_margin_none", "F.cosine_embedding_loss(A, B, C, { margin = -0.3, reduction = 'none' })",
     lambda A, B, C: F.cosine_embedding_loss(A, B, C, margin=-0.3, reduction="none"),
     {"A": inp((5, 4)), "B": inp((5, 4)), "C": inp((5,), "sign")}, "grad:AB"),
    ("cel_1d", "F.cosine_embedding_loss(A, B, C, { reduction = 'sum' })",
     lambda A, B, C: F.cosine_embedding_loss(A, B, C, reduction="sum"),
     {"A": inp((4,)), "B": inp((4,)), "C": lit((), [-1.0], "float64")}, "grad:AB"),
    # -- triplet_margin_loss
    ("triplet", "F.triplet_margin_loss(A, B, C)", lambda A, B, C: F.triplet_margin_loss(A, B, C),
     {"A": inp((4, 5)), "B": inp((4, 5)), "C": inp((4, 5))}, "grad"),
    ("triplet_p1_swap", "F.triplet_margin_loss(A, B, C, { p = 1, swap = true, margin = 2, reduction = 'none' })",
     lambda A, B, C: F.triplet_margin_loss(A, B, C, p=1, swap=True, margin=2.0, reduction="none"),
     {"A": inp((4, 3)), "B": inp((4, 3)), "C": inp((4, 3))}, "grad"),
    ("triplet_p3_eps", "F.triplet_margin_loss(A, B, C, { p = 3, eps = 0.01, swap = true, reduction = 'sum' })",
     lambda A, B, C: F.triplet_margin_loss(A, B, C, p=3, eps=0.01, swap=True, reduction="sum"),
     {"A": inp((3, 4)), "B": inp((3, 4)), "C": inp((3, 4))}, "grad"),
    ("triplet_1d", "F.triplet_margin_loss(A, B, C, { margin = 5 })", lambda A, B, C: F.triplet_margin_loss(A, B, C, margin=5.0),
     {"A": inp((6,)), "B": inp((6,)), "C": inp((6,))}, "grad"),
    # -- poisson_nll_loss
    ("poisson", "F.poisson_nll_loss(A, B)", lambda A, B: F.poisson_nll_loss(A, B),
     {"A": inp((3, 4)), "B": inp((3, 4), "cnt")}, "grad"),
    ("poisson_rate", "F.poisson_nll_loss(A, B, { log_input = false, eps = 1e-3, reduction = 'none' })",
     lambda A, B: F.poisson_nll_loss(A, B, log_input=False, eps=1e-3, reduction="none"),
     {"A": inp((2, 5), "pos"), "B": inp((2, 5), "cnt")}, "grad"),
    ("poisson_full", "F.poisson_nll_loss(A, B, { full = true, reduction = 'sum' })",
     lambda A, B: F.poisson_nll_loss(A, B, full=True, reduction="sum"),
     {"A": inp((12,)), "B": inp((12,), "cnt")}, "grad:A"),
    ("poisson_full_none", "F.poisson_nll_loss(A, B, { full = true, log_input = false, reduction = 'none' })",
     lambda A, B: F.poisson_nll_loss(A, B, full=True, log_input=False, reduction="none"),
     {"A": inp((8,), "pos"), "B": lit((8,), [0.25, 0.9, 1.5, 2.0, 3.0, 7.5, 0.5, 4.0], "float64")}, "grad"),
    # -- gaussian_nll_loss
    ("gauss", "F.gaussian_nll_loss(A, B, C)", lambda A, B, C: F.gaussian_nll_loss(A, B, C),
     {"A": inp((3, 4)), "B": inp((3, 4)), "C": inp((3, 4), "pos")}, "grad"),
    ("gauss_homo", "F.gaussian_nll_loss(A, B, C, { full = true, reduction = 'none' })",
     lambda A, B, C: F.gaussian_nll_loss(A, B, C, full=True, reduction="none"),
     {"A": inp((3, 4)), "B": inp((3, 4)), "C": inp((3,), "pos")}, "grad"),
    ("gauss_one", "F.gaussian_nll_loss(A, B, C, { reduction = 'sum' })",
     lambda A, B, C: F.gaussian_nll_loss(A, B, C, reduction="sum"),
     {"A": inp((2, 3, 2)), "B": inp((2, 3, 2)), "C": inp((2, 1, 2), "pos")}, "grad"),
    ("gauss_eps", "F.gaussian_nll_loss(A, B, C, { eps = 0.05, reduction = 'none' })",
     lambda A, B, C: F.gaussian_nll_loss(A, B, C, eps=0.05, reduction="none"),
     {"A": inp((5,)), "B": inp((5,)), "C": lit((5,), [0.0, 0.01, 0.5, 0.04, 2.0], "float64")}, "grad:AB"),
    ("gauss_number", "F.gaussian_nll_loss(A, B, 0.7, { full = true })",
     lambda A, B: F.gaussian_nll_loss(A, B, 0.7, full=True),
     {"A": inp((2, 3)), "B": inp((2, 3))}, "grad"),
    # -- multilabel_soft_margin_loss
    ("mlsm", "F.multilabel_soft_margin_loss(A, B)", lambda A, B: F.multilabel_soft_margin_loss(A, B),
     {"A": inp((3, 5)), "B": inp((3, 5), "bin")}, "grad"),
    ("mlsm_weight", "F.multilabel_soft_margin_loss(A, B, { weight = C, reduction = 'none' })",
     lambda A, B, C: F.multilabel_soft_margin_loss(A, B, weight=C, reduction="none"),
     {"A": inp((3, 4)), "B": inp((3, 4), "bin"), "C": inp((4,), "pos")}, "grad"),
    ("mlsm_wide", "F.multilabel_soft_margin_loss(A * 30, B, { reduction = 'sum' })",
     lambda A, B: F.multilabel_soft_margin_loss(A * 30, B, reduction="sum"),
     {"A": inp((2, 4)), "B": inp((2, 4), "bin")}, "grad"),
    # -- multi_margin_loss
    ("mm", "F.multi_margin_loss(A, B)", lambda A, B: F.multi_margin_loss(A, B - 1),
     {"A": inp((4, 5)), "B": inp((4,), "lab5")}, "grad"),
    ("mm_p2", "F.multi_margin_loss(A, B, { p = 2, margin = 0.7, reduction = 'none' })",
     lambda A, B: F.multi_margin_loss(A, B - 1, p=2, margin=0.7, reduction="none"),
     {"A": inp((5, 3)), "B": inp((5,), "lab3")}, "grad"),
    ("mm_weight", "F.multi_margin_loss(A, B, { weight = C, reduction = 'sum' })",
     lambda A, B, C: F.multi_margin_loss(A, B - 1, weight=C, reduction="sum"),
     {"A": inp((4, 4)), "B": inp((4,), "lab4"), "C": inp((4,), "pos")}, "grad:A"),
    ("mm_1d", "F.multi_margin_loss(A, B, { p = 2, weight = C })",
     lambda A, B, C: F.multi_margin_loss(A, B - 1, p=2, weight=C),
     {"A": inp((4,)), "B": lit((), [3]), "C": inp((4,), "pos")}, "grad:A"),
    # -- ctc_loss (log_probs from log_softmax, so the gradients are torch's)
    ("ctc", "F.ctc_loss(A:log_softmax(3), B, { 6, 5, 4 }, { 3, 2, 0 })",
     lambda A, B: F.ctc_loss(A.log_softmax(2), B - 1, [6, 5, 4], [3, 2, 0]),
     {"A": inp((6, 3, 4)), "B": lit((3, 3), [2, 2, 3, 4, 2, 1, 3, 3, 3])}, "grad"),
    ("ctc_sum", "F.ctc_loss(A:log_softmax(3), B, tide.long { 7, 7 }, tide.long { 4, 3 }, { reduction = 'sum' })",
     lambda A, B: F.ctc_loss(A.log_softmax(2), B - 1, torch.tensor([7, 7]), torch.tensor([4, 3]), reduction="sum"),
     {"A": inp((7, 2, 5)), "B": lit((2, 4), [3, 3, 3, 2, 5, 4, 5, 2])}, "grad"),
    ("ctc_none_blank", "F.ctc_loss(A:log_softmax(3), B, { 5, 3 }, { 2, 2 }, { blank = 3, reduction = 'none' })",
     lambda A, B: F.ctc_loss(A.log_softmax(2), B - 1, [5, 3], [2, 2], blank=2, reduction="none"),
     {"A": inp((5, 2, 3)), "B": lit((2, 2), [1, 2, 2, 1])}, "grad"),
    ("ctc_concat", "F.ctc_loss(A:log_softmax(3), B, { 6, 6 }, { 2, 3 }, { reduction = 'none' })",
     lambda A, B: F.ctc_loss(A.log_softmax(2), B - 1, [6, 6], [2, 3], reduction="none"),
     {"A": inp((6, 2, 4)), "B": lit((5,), [2, 3, 4, 4, 2])}, "grad"),
    ("ctc_concat_tensor", "F.ctc_loss(A:log_softmax(3), B, tide.long { 6, 5 }, C)",
     lambda A, B, C: F.ctc_loss(A.log_softmax(2), B - 1, torch.tensor([6, 5]), C),
     {"A": inp((6, 2, 4)), "B": lit((5,), [2, 3, 4, 4, 2]), "C": lit((2,), [2, 3])}, "grad nocompile"),
    ("ctc_inf", "F.ctc_loss(A:log_softmax(3), B, { 3, 4 }, { 3, 2 }, { reduction = 'none' })",
     lambda A, B: F.ctc_loss(A.log_softmax(2), B - 1, [3, 4], [3, 2], reduction="none"),
     {"A": inp((4, 2, 3)), "B": lit((2, 3), [2, 2, 3, 3, 2, 2])}, ""),
    ("ctc_zero_inf", "F.ctc_loss(A:log_softmax(3), B, { 3, 4 }, { 3, 2 }, { zero_infinity = true })",
     lambda A, B: F.ctc_loss(A.log_softmax(2), B - 1, [3, 4], [3, 2], zero_infinity=True),
     {"A": inp((4, 2, 3)), "B": lit((2, 3), [2, 2, 3, 3, 2, 2])}, "grad"),
    ("ctc_unbatched", "F.ctc_loss(A:log_softmax(2), B, 5, 3)",
     lambda A, B: F.ctc_loss(A.log_softmax(1), B - 1, torch.tensor(5), torch.tensor(3)),
     {"A": inp((5, 4)), "B": lit((3,), [4, 2, 4])}, "grad"),
    ("ctc_float32", "F.ctc_loss(A:float():log_softmax(3), B, { 8, 6 }, { 3, 4 }, { reduction = 'none' }):double()",
     lambda A, B: F.ctc_loss(A.float().log_softmax(2), B - 1, [8, 6], [3, 4], reduction="none").double(),
     {"A": inp((8, 2, 6)), "B": lit((2, 4), [2, 3, 4, 1, 6, 5, 5, 2])}, "f32"),
]

def values(shape, kind, rng):
    n = int(np.prod(shape)) if shape else 1
    if isinstance(kind, tuple):
        _, vals, dt = kind
        return np.array(vals, dtype=np.int64 if dt == "int64" else np.float64), dt
    if kind == "randn": v = rng.standard_normal(n)
    elif kind == "pos": v = rng.uniform(0.3, 3.0, n)
    elif kind == "unit": v = rng.uniform(0.0, 1.0, n)
    elif kind == "sign": v = np.where(rng.uniform(0, 1, n) < 0.5, -1.0, 1.0)
    elif kind == "bin": v = np.where(rng.uniform(0, 1, n) < 0.5, 0.0, 1.0)
    elif kind == "cnt": v = np.floor(rng.uniform(0, 6, n))
    elif kind.startswith("lab"): return np.floor(rng.uniform(1, int(kind[3:]) + 1, n)).astype(np.int64), "int64"
    else: raise ValueError(kind)
    return np.round(v, 3), "float64"

def lua_num(x):
    x = float(x)
    if math.isnan(x): return "0/0"
    if math.isinf(x): return "math.huge" if x > 0 else "-math.huge"
    if x == int(x) and abs(x) < 2 ** 53: return str(int(x))
    return repr(x)

def lua_tensor(t):
    t = t.detach()
    dt = {torch.float64: "float64", torch.float32: "float32", torch.int64: "int64", torch.bool: "bool"}[t.dtype]
    data = ", ".join(lua_num(x) for x in t.reshape(-1).tolist())
    return '{ shape = { %s }, dtype = "%s", data = { %s } }' % (", ".join(str(s) for s in t.shape), dt, data)

def grad_keys(flags, inputs):
    for f in flags.split():
        if f == "grad": return [k for k in sorted(inputs) if values_dtype(inputs[k]) == "float64"]
        if f.startswith("grad:"): return list(f[5:])
    return []

def values_dtype(spec):
    kind = spec[1]
    if isinstance(kind, tuple): return kind[2]
    return "int64" if kind.startswith("lab") else "float64"

q = lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
out = ["-- generated by spec/ref/losses_reference.py with torch %s; do not edit" % torch.__version__.split("+")[0],
       "return {"]
for i, (name, lua, fn, inputs, flags) in enumerate(CASES):
    rng = np.random.default_rng(2000 + i)
    ts, parts = {}, []
    for key in sorted(inputs):
        shape, kind = inputs[key]
        v, dt = values(shape, kind, rng)
        t = torch.tensor(v.reshape(shape)) if dt == "int64" else torch.tensor(v.reshape(shape), dtype=torch.float64)
        ts[key] = t
        parts.append("%s = %s" % (key, lua_tensor(t)))
    gk = grad_keys(flags, inputs)
    for k in gk: ts[k].requires_grad_(True)
    r = fn(*[ts[k] for k in sorted(inputs)])
    grads = []
    if gk:
        g = torch.autograd.grad(r.sum(), [ts[k] for k in gk])
        grads = ["%s = %s" % (k, lua_tensor(gi)) for k, gi in zip(gk, g)]
    out.append("  { name = %s, lua = %s, flags = %s,\n    inputs = { %s },\n    outs = { %s },\n    grads = { %s } }," % (
        q(name), q(lua), q(flags), ", ".join(parts), lua_tensor(r), ", ".join(grads)))
out.append("}")
sys.stdout.write("\n".join(out) + "\n")
