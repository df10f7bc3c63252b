# Generates spec/ref/ops_reference.lua: PyTorch's results for the tensor ops and
# functional forms of the breadth issue, on fixed literal inputs, which
# spec/lua/ops_extra_spec.lua compares tide with (values, float64 gradcheck,
# compiled == eager, OpenCL == CPU). Not run by the tests; needs PyPI torch 2.x:
#   /work/venv-torch/bin/python spec/ref/ops_reference.py > spec/ref/ops_reference.lua
# Each case: name, the tide expression (Lua; inputs are the locals A, B, C, D;
# dims 1-based), the torch function (0-based), the inputs (shape and kind), flags:
#   grad      float64 gradcheck of the expression in its float inputs
#   nocompile data-dependent output shape: tide.compile must raise
import math, sys
import numpy as np
import torch
from refgen import emit
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

def inp(shape, kind="randn"):
    return (tuple(shape), kind)

CASES = [
    # -- shape
    ("tril", "A:tril()", lambda A: torch.tril(A), {"A": inp((4, 5))}, "grad"),
    ("tril_k", "tide.tril(A, -1)", lambda A: torch.tril(A, -1), {"A": inp((2, 4, 3))}, "grad"),
    ("triu_k", "A:triu(2)", lambda A: torch.triu(A, 2), {"A": inp((4, 5))}, "grad"),
    ("triu_int", "A:triu()", lambda A: torch.triu(A), {"A": inp((3, 3), "int")}, ""),
    ("diag_1d", "A:diag(1)", lambda A: torch.diag(A, 1), {"A": inp((3,))}, "grad"),
    ("diag_2d", "A:diag(-1)", lambda A: torch.diag(A, -1), {"A": inp((4, 3))}, "grad"),
    ("diagonal", "A:diagonal(1, 1, 3)", lambda A: torch.diagonal(A, 1, 0, 2), {"A": inp((3, 2, 4))}, "grad"),
    ("diag_embed", "A:diag_embed(-1)", lambda A: torch.diag_embed(A, -1), {"A": inp((2, 3))}, "grad"),
    ("trace", "A:trace()", lambda A: torch.trace(A), {"A": inp((3, 4))}, "grad"),
    ("flip", "A:flip({ 1, 3 })", lambda A: torch.flip(A, [0, 2]), {"A": inp((2, 3, 4))}, "grad"),
    ("roll", "A:roll(2, 2)", lambda A: torch.roll(A, 2, 1), {"A": inp((2, 5))}, "grad"),
    ("roll_multi", "A:roll({ -1, 3 }, { 1, 2 })", lambda A: torch.roll(A, (-1, 3), (0, 1)), {"A": inp((3, 4))}, "grad"),
    ("roll_flat", "A:roll(4)", lambda A: torch.roll(A, 4), {"A": inp((2, 3))}, "grad"),
    ("repeat", "A:repeat_tensor(2, 1, 3)", lambda A: A.repeat(2, 1, 3), {"A": inp((2, 3))}, "grad"),
    ("tile", "A:tile({ 2 })", lambda A: torch.tile(A, (2,)), {"A": inp((2, 3))}, "grad"),
    ("repeat_interleave", "A:repeat_interleave(2, 2)", lambda A: torch.repeat_interleave(A, 2, 1), {"A": inp((2, 3))}, "grad"),
    ("repeat_interleave_t", "A:repeat_interleave(tide.long { 1, 0, 3 }, 1)",
     lambda A: torch.repeat_interleave(A, torch.tensor([1, 0, 3]), 0), {"A": inp((3, 2))}, "grad nocompile"),
    ("movedim", "A:movedim(1, 3)", lambda A: torch.movedim(A, 0, 2), {"A": inp((2, 3, 4))}, "grad"),
    ("movedim_multi", "A:movedim({ 1, 2 }, { 3, 1 })", lambda A: torch.movedim(A, (0, 1), (2, 0)), {"A": inp((2, 3, 4))}, "grad"),
    ("meshgrid", "tide.meshgrid({ A, B }, { indexing = 'ij' })", lambda A, B: torch.meshgrid(A, B, indexing="ij"),
     {"A": inp((3,)), "B": inp((2,))}, "grad"),
    ("meshgrid_xy", "tide.meshgrid({ A, B }, { indexing = 'xy' })", lambda A, B: torch.meshgrid(A, B, indexing="xy"),
     {"A": inp((3,)), "B": inp((2,))}, "grad"),
    ("broadcast_to", "A:broadcast_to({ 2, 3, 4 })", lambda A: torch.broadcast_to(A, (2, 3, 4)), {"A": inp((3, 1))}, "grad"),
    # -- contractions
    ("einsum_mm", "tide.einsum('ij,jk->ik', A, B)", lambda A, B: torch.einsum("ij,jk->ik", A, B),
     {"A": inp((3, 4)), "B": inp((4, 2))}, "grad"),
    ("einsum_attn", "tide.einsum('bhqd,bhkd->bhqk', A, B)", lambda A, B: torch.einsum("bhqd,bhkd->bhqk", A, B),
     {"A": inp((2, 2, 3, 4)), "B": inp((2, 2, 5, 4))}, "grad"),
    ("einsum_implicit", "tide.einsum('ij,kj', A, B)", lambda A, B: torch.einsum("ij,kj", A, B),
     {"A": inp((3, 4)), "B": inp((2, 4))}, "grad"),
    ("einsum_trace", "tide.einsum('ii', A)", lambda A: torch.einsum("ii", A), {"A": inp((3, 3))}, "grad"),
    ("einsum_diag", "tide.einsum('ii->i', A)", lambda A: torch.einsum("ii->i", A), {"A": inp((3, 3))}, "grad"),
    ("einsum_sum", "tide.einsum('ijk->j', A)", lambda A: torch.einsum("ijk->j", A), {"A": inp((2, 3, 4))}, "grad"),
    ("einsum_outer", "tide.einsum('i,j->ij', A, B)", lambda A, B: torch.einsum("i,j->ij", A, B),
     {"A": inp((3,)), "B": inp((2,))}, "grad"),
    ("einsum_ellipsis", "tide.einsum('...ij,...jk->...ik', A, B)", lambda A, B: torch.einsum("...ij,...jk->...ik", A, B),
     {"A": inp((2, 3, 4)), "B": inp((4, 5))}, "grad"),
    ("einsum_three", "tide.einsum('ij,jk,kl->il', A, B, C)", lambda A, B, C: torch.einsum("ij,jk,kl->il", A, B, C),
     {"A": inp((2, 3)), "B": inp((3, 4)), "C": inp((4, 2))}, "grad"),
    ("einsum_bilinear", "tide.einsum('bn,anm,bm->ba', A, B, C)", lambda A, B, C: torch.einsum("bn,anm,bm->ba", A, B, C),
     {"A": inp((2, 3)), "B": inp((4, 3, 5)), "C": inp((2, 5))}, "grad"),
    ("tensordot_n", "tide.tensordot(A, B, 2)", lambda A, B: torch.tensordot(A, B, 2),
     {"A": inp((2, 3, 4)), "B": inp((3, 4, 5))}, "grad"),
    ("tensordot_lists", "tide.tensordot(A, B, { { 1, 3 }, { 2, 1 } })", lambda A, B: torch.tensordot(A, B, ([0, 2], [1, 0])),
     {"A": inp((2, 3, 4)), "B": inp((4, 2, 5))}, "grad"),
    ("kron", "tide.kron(A, B)", lambda A, B: torch.kron(A, B), {"A": inp((2, 3)), "B": inp((3, 2))}, "grad"),
    ("cross", "tide.cross(A, B, 2)", lambda A, B: torch.linalg.cross(A, B, dim=1), {"A": inp((4, 3)), "B": inp((4, 3))}, "grad"),
    ("cdist", "tide.cdist(A, B)", lambda A, B: torch.cdist(A, B), {"A": inp((4, 3)), "B": inp((5, 3))}, "grad"),
    ("cdist_p1", "tide.cdist(A, B, 1)", lambda A, B: torch.cdist(A, B, 1), {"A": inp((2, 4, 3)), "B": inp((2, 3, 3))}, "grad"),
    ("cdist_big", "tide.cdist(A, B)", lambda A, B: torch.cdist(A, B), {"A": inp((30, 3)), "B": inp((27, 3))}, ""),
    ("baddbmm", "tide.baddbmm(A, B, C, { beta = 0.5, alpha = 2 })", lambda A, B, C: torch.baddbmm(A, B, C, beta=0.5, alpha=2),
     {"A": inp((2, 3, 4)), "B": inp((2, 3, 5)), "C": inp((2, 5, 4))}, "grad"),
    ("addbmm", "tide.addbmm(A, B, C)", lambda A, B, C: torch.addbmm(A, B, C), {"A": inp((3, 4)), "B": inp((2, 3, 5)), "C": inp((2, 5, 4))}, "grad"),
    ("addmv", "tide.addmv(A, B, C, { alpha = 3 })", lambda A, B, C: torch.addmv(A, B, C, alpha=3), {"A": inp((3,)), "B": inp((3, 4)), "C": inp((4,))}, "grad"),
    # -- pointwise
    ("log2", "A:log2()", lambda A: torch.log2(A), {"A": inp((5,), "pos")}, "grad"),
    ("log10", "A:log10()", lambda A: torch.log10(A), {"A": inp((5,), "pos")}, "grad"),
    ("exp2", "A:exp2()", lambda A: torch.exp2(A), {"A": inp((5,))}, "grad"),
    ("reciprocal", "A:reciprocal()", lambda A: torch.reciprocal(A), {"A": inp((5,), "pos")}, "grad"),
    ("softplus", "F.softplus(A, { beta = 2, threshold = 3 })", lambda A: F.softplus(A, beta=2, threshold=3), {"A": inp((7,), "wide")}, "grad"),
    ("elu", "F.elu(A, { alpha = 0.7 })", lambda A: F.elu(A, alpha=0.7), {"A": inp((6,))}, "grad"),
    ("selu", "F.selu(A)", lambda A: F.selu(A), {"A": inp((6,))}, "grad"),
    ("celu", "F.celu(A, { alpha = 1.5 })", lambda A: F.celu(A, alpha=1.5), {"A": inp((6,))}, "grad"),
    ("hardtanh", "F.hardtanh(A, { min_val = -0.5, max_val = 1 })", lambda A: F.hardtanh(A, -0.5, 1.0), {"A": inp((6,))}, "grad"),
    ("hardsigmoid", "F.hardsigmoid(A)", lambda A: F.hardsigmoid(A), {"A": inp((6,), "wide")}, "grad"),
    ("hardswish", "F.hardswish(A)", lambda A: F.hardswish(A), {"A": inp((6,), "wide")}, "grad"),
    ("mish", "F.mish(A)", lambda A: F.mish(A), {"A": inp((6,), "wide")}, "grad"),
    ("logaddexp", "tide.logaddexp(A, B)", lambda A, B: torch.logaddexp(A, B), {"A": inp((5,)), "B": inp((5,))}, "grad"),
    ("lerp", "tide.lerp(A, B, 0.3)", lambda A, B: torch.lerp(A, B, 0.3), {"A": inp((5,)), "B": inp((5,))}, "grad"),
    ("lerp_t", "tide.lerp(A, B, C)", lambda A, B, C: torch.lerp(A, B, C), {"A": inp((5,)), "B": inp((5,)), "C": inp((5,), "unit")}, "grad"),
    ("addcmul", "tide.addcmul(A, B, C, { value = 0.5 })", lambda A, B, C: torch.addcmul(A, B, C, value=0.5),
     {"A": inp((4,)), "B": inp((4,)), "C": inp((4,))}, "grad"),
    ("addcdiv", "tide.addcdiv(A, B, C, { value = 2 })", lambda A, B, C: torch.addcdiv(A, B, C, value=2),
     {"A": inp((4,)), "B": inp((4,)), "C": inp((4,), "pos")}, "grad"),
    ("trunc", "A:trunc()", lambda A: torch.trunc(A), {"A": inp((6,), "wide")}, ""),
    ("frac", "A:frac()", lambda A: torch.frac(A), {"A": inp((6,), "wide")}, "grad"),
    ("clamp_t", "A:clamp(B, C)", lambda A, B, C: torch.clamp(A, B, C), {"A": inp((5,)), "B": inp((5,), "neg"), "C": inp((5,), "pos")}, "grad"),
    ("nan_to_num", "A:nan_to_num({ nan = 1, posinf = 2 })", lambda A: torch.nan_to_num(A, nan=1.0, posinf=2.0), {"A": inp((5,), "special")}, ""),
    ("isnan", "A:isnan()", lambda A: torch.isnan(A), {"A": inp((5,), "special")}, ""),
    ("isinf", "A:isinf()", lambda A: torch.isinf(A), {"A": inp((5,), "special")}, ""),
    ("isfinite", "A:isfinite()", lambda A: torch.isfinite(A), {"A": inp((5,), "special")}, ""),
    # -- reductions
    ("all", "A:all()", lambda A: torch.all(A), {"A": inp((2, 3), "bool")}, ""),
    ("all_dim", "A:all(2)", lambda A: torch.all(A, 1), {"A": inp((3, 2), "bool")}, ""),
    ("any", "A:any(1, true)", lambda A: torch.any(A, 0, keepdim=True), {"A": inp((3, 2), "bool")}, ""),
    ("any_float", "A:any()", lambda A: torch.any(A), {"A": inp((4,))}, ""),
    ("count_nonzero", "A:count_nonzero(2)", lambda A: torch.count_nonzero(A, 1), {"A": inp((3, 4), "sparse")}, ""),
    ("aminmax", "tide.aminmax(A, { dim = 2 })", lambda A: tuple(torch.aminmax(A, dim=1)), {"A": inp((3, 4))}, ""),
    ("nansum", "A:nansum(1)", lambda A: torch.nansum(A, 0), {"A": inp((3, 2), "special")}, ""),
    ("nanmean", "A:nanmean()", lambda A: torch.nanmean(A), {"A": inp((3, 2), "nan")}, "grad"),
    # -- functional
    ("pad_constant", "F.pad(A, { 1, 2, 0, 1 }, { value = 0.5 })", lambda A: F.pad(A, (1, 2, 0, 1), value=0.5), {"A": inp((2, 3, 4))}, "grad"),
    ("pad_reflect", "F.pad(A, { 2, 1 }, { mode = 'reflect' })", lambda A: F.pad(A, (2, 1), mode="reflect"), {"A": inp((1, 2, 5))}, "grad"),
    ("pad_reflect2", "F.pad(A, { 1, 1, 2, 0 }, { mode = 'reflect' })", lambda A: F.pad(A, (1, 1, 2, 0), mode="reflect"), {"A": inp((1, 1, 4, 3))}, "grad"),
    ("pad_replicate", "F.pad(A, { 2, 1, 1, 1 }, { mode = 'replicate' })", lambda A: F.pad(A, (2, 1, 1, 1), mode="replicate"), {"A": inp((1, 2, 3, 3))}, "grad"),
    ("pad_circular", "F.pad(A, { 1, 2 }, { mode = 'circular' })", lambda A: F.pad(A, (1, 2), mode="circular"), {"A": inp((1, 2, 4))}, "grad"),
    ("pad_negative", "F.pad(A, { -1, 1 })", lambda A: F.pad(A, (-1, 1)), {"A": inp((2, 4))}, "grad"),
    ("interp_nearest", "F.interpolate(A, { size = { 5, 3 } })", lambda A: F.interpolate(A, size=(5, 3)), {"A": inp((1, 2, 3, 4))}, "grad"),
    ("interp_nearest_scale", "F.interpolate(A, { scale_factor = 2 })", lambda A: F.interpolate(A, scale_factor=2), {"A": inp((1, 1, 2, 3))}, "grad"),
    ("interp_bilinear", "F.interpolate(A, { size = { 5, 7 }, mode = 'bilinear' })",
     lambda A: F.interpolate(A, size=(5, 7), mode="bilinear"), {"A": inp((2, 2, 3, 4))}, "grad"),
    ("interp_bilinear_ac", "F.interpolate(A, { scale_factor = 1.5, mode = 'bilinear', align_corners = true })",
     lambda A: F.interpolate(A, scale_factor=1.5, mode="bilinear", align_corners=True), {"A": inp((1, 1, 4, 4))}, "grad"),
    ("interp_bicubic", "F.interpolate(A, { size = { 6, 5 }, mode = 'bicubic' })",
     lambda A: F.interpolate(A, size=(6, 5), mode="bicubic"), {"A": inp((1, 2, 4, 3))}, "grad"),
    ("interp_bicubic_down", "F.interpolate(A, { size = { 2, 3 }, mode = 'bicubic', align_corners = true })",
     lambda A: F.interpolate(A, size=(2, 3), mode="bicubic", align_corners=True), {"A": inp((1, 1, 5, 6))}, "grad"),
    ("interp_linear", "F.interpolate(A, { size = 7, mode = 'linear' })", lambda A: F.interpolate(A, size=7, mode="linear"), {"A": inp((2, 3, 4))}, "grad"),
    ("pixel_shuffle", "F.pixel_shuffle(A, 2)", lambda A: F.pixel_shuffle(A, 2), {"A": inp((1, 8, 2, 3))}, "grad"),
    ("pixel_unshuffle", "F.pixel_unshuffle(A, 2)", lambda A: F.pixel_unshuffle(A, 2), {"A": inp((1, 2, 4, 6))}, "grad"),
    ("unfold", "F.unfold(A, { 2, 3 }, { stride = { 1, 2 }, padding = 1 })", lambda A: F.unfold(A, (2, 3), stride=(1, 2), padding=1),
     {"A": inp((1, 2, 4, 5))}, "grad"),
    ("fold", "F.fold(A, { 4, 5 }, { 2, 2 })", lambda A: F.fold(A, (4, 5), (2, 2)), {"A": inp((1, 8, 12))}, "grad"),
    ("normalize", "F.normalize(A, { dim = 2 })", lambda A: F.normalize(A, dim=1), {"A": inp((3, 4))}, "grad"),
    ("normalize_p1", "F.normalize(A, { p = 1, dim = 1 })", lambda A: F.normalize(A, p=1, dim=0), {"A": inp((3, 4))}, "grad"),
    ("cosine_similarity", "F.cosine_similarity(A, B)", lambda A, B: F.cosine_similarity(A, B), {"A": inp((3, 4)), "B": inp((3, 4))}, "grad"),
    ("pairwise_distance", "F.pairwise_distance(A, B)", lambda A, B: F.pairwise_distance(A, B), {"A": inp((3, 4)), "B": inp((3, 4))}, "grad"),
]

def values(shape, kind, rng):
    n = int(np.prod(shape)) if shape else 1
    if kind == "randn": v = rng.standard_normal(n)
    elif kind == "pos": v = rng.uniform(0.3, 3.0, n)
    elif kind == "neg": v = rng.uniform(-3.0, -0.3, n)
    elif kind == "unit": v = rng.uniform(0.0, 1.0, n)
    elif kind == "wide": v = rng.uniform(-6.0, 6.0, n)
    elif kind == "int": return np.round(rng.uniform(-9, 9, n)).astype(np.int64), "int64"
    elif kind == "bool": return rng.uniform(0, 1, n) < 0.7, "bool"
    elif kind == "sparse": v = np.where(rng.uniform(0, 1, n) < 0.5, 0.0, np.round(rng.standard_normal(n), 2))
    elif kind == "special":
        v = np.round(rng.standard_normal(n), 2)
        v[0] = np.nan; v[min(1, n - 1)] = np.inf; v[min(2, n - 1)] = -np.inf
    elif kind == "nan":
        v = np.round(rng.standard_normal(n), 2); v[::3] = np.nan
    else: raise ValueError(kind)
    return np.round(v, 3), "float64"

emit("spec/ref/ops_reference.py", CASES, values, 1000)
