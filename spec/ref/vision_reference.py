# Generates spec/ref/vision_reference.lua: PyTorch's results for the vision
# layers' functional forms of the breadth issue (transposed and 3-D convolution,
# group/instance/local-response normalization, PReLU and the activation layers,
# upsampling), on fixed literal inputs, which spec/lua/vision_spec.lua walks
# with spec/ref_walk.lua (values, float64 gradcheck, compiled == eager, OpenCL ==
# CPU). Not run by the tests; needs PyPI torch 2.x:
#   /work/venv-torch/bin/python spec/ref/vision_reference.py > spec/ref/vision_reference.lua
# Each case: name, the tide expression (Lua; inputs are the locals A, B, C, D;
# dims 1-based), the torch function (0-based), the inputs (shape and kind), flags:
#   grad      float64 gradcheck of the expression in its float inputs
import math, sys
import numpy as np
import torch
from refgen import emit
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

def inp(shape, kind="randn"):
    return (tuple(shape), kind)

def lrn(A, size, **kw):
    return F.local_response_norm(A, size, **kw)

def inorm_stats(A, B, C):
    rm, rv = B.clone(), C.clone()
    y = F.instance_norm(A, rm, rv, use_input_stats=True, momentum=0.3)
    return y, rm, rv

CASES = [
    # -- transposed convolution
    ("convt2d", "F.conv_transpose2d(A, B, C)", lambda A, B, C: F.conv_transpose2d(A, B, C),
     {"A": inp((2, 3, 4, 5)), "B": inp((3, 2, 3, 3)), "C": inp((2,))}, "grad"),
    ("convt2d_stride", "F.conv_transpose2d(A, B, nil, { stride = 2, padding = 1 })",
     lambda A, B: F.conv_transpose2d(A, B, None, stride=2, padding=1),
     {"A": inp((1, 2, 3, 4)), "B": inp((2, 3, 4, 4))}, "grad"),
    ("convt2d_outpad", "F.conv_transpose2d(A, B, C, { stride = { 2, 3 }, padding = { 1, 0 }, output_padding = { 1, 2 } })",
     lambda A, B, C: F.conv_transpose2d(A, B, C, stride=(2, 3), padding=(1, 0), output_padding=(1, 2)),
     {"A": inp((2, 2, 3, 3)), "B": inp((2, 2, 3, 2)), "C": inp((2,))}, "grad"),
    ("convt2d_groups_dil", "F.conv_transpose2d(A, B, C, { groups = 2, dilation = 2, stride = 2 })",
     lambda A, B, C: F.conv_transpose2d(A, B, C, groups=2, dilation=2, stride=2),
     {"A": inp((2, 4, 3, 3)), "B": inp((4, 3, 2, 3)), "C": inp((6,))}, "grad"),
    ("convt2d_unbatched", "F.conv_transpose2d(A, B)", lambda A, B: F.conv_transpose2d(A, B),
     {"A": inp((2, 3, 3)), "B": inp((2, 1, 2, 2))}, "grad"),
    ("convt1d", "F.conv_transpose1d(A, B, C, { stride = 3, padding = 1, output_padding = 2, groups = 2, dilation = 2 })",
     lambda A, B, C: F.conv_transpose1d(A, B, C, stride=3, padding=1, output_padding=2, groups=2, dilation=2),
     {"A": inp((2, 4, 5)), "B": inp((4, 1, 3)), "C": inp((2,))}, "grad"),
    ("convt1d_plain", "F.conv_transpose1d(A, B)", lambda A, B: F.conv_transpose1d(A, B),
     {"A": inp((1, 2, 4)), "B": inp((2, 3, 2))}, "grad"),
    # -- 3-D convolution
    ("conv3d", "F.conv3d(A, B, C)", lambda A, B, C: F.conv3d(A, B, C),
     {"A": inp((2, 2, 4, 4, 3)), "B": inp((3, 2, 2, 3, 2)), "C": inp((3,))}, "grad"),
    ("conv3d_strided", "F.conv3d(A, B, nil, { stride = { 2, 1, 2 }, padding = { 1, 1, 0 }, dilation = { 2, 1, 1 }, groups = 2 })",
     lambda A, B: F.conv3d(A, B, None, stride=(2, 1, 2), padding=(1, 1, 0), dilation=(2, 1, 1), groups=2),
     {"A": inp((1, 4, 5, 3, 4)), "B": inp((2, 2, 2, 2, 2))}, "grad"),
    # -- normalization
    ("group_norm", "F.group_norm(A, 2, B, C)", lambda A, B, C: F.group_norm(A, 2, B, C),
     {"A": inp((2, 4, 3, 2)), "B": inp((4,)), "C": inp((4,))}, "grad"),
    ("group_norm_plain", "F.group_norm(A, 3, nil, nil, 1e-3)", lambda A: F.group_norm(A, 3, eps=1e-3),
     {"A": inp((2, 6, 5))}, "grad"),
    ("instance_norm", "F.instance_norm(A, nil, nil, B, C)", lambda A, B, C: F.instance_norm(A, weight=B, bias=C),
     {"A": inp((2, 3, 4, 3)), "B": inp((3,)), "C": inp((3,))}, "grad"),
    ("instance_norm_1d", "F.instance_norm(A)", lambda A: F.instance_norm(A), {"A": inp((2, 3, 5))}, "grad"),
    ("instance_norm_eval", "F.instance_norm(A, B, C, nil, nil, { use_input_stats = false })",
     lambda A, B, C: F.instance_norm(A, B, C, use_input_stats=False),
     {"A": inp((2, 3, 4)), "B": inp((3,)), "C": inp((3,), "pos")}, ""),
    ("instance_norm_stats", "(function() local rm, rv = B:clone(), C:clone(); local y = F.instance_norm(A, rm, rv, nil, nil, { momentum = 0.3 }); return { y, rm, rv } end)()",
     inorm_stats, {"A": inp((2, 3, 4)), "B": inp((3,)), "C": inp((3,), "pos")}, ""),
    ("lrn", "F.local_response_norm(A, 3)", lambda A: lrn(A, 3), {"A": inp((2, 5, 3, 2))}, "grad"),
    ("lrn_opts", "F.local_response_norm(A, 4, { alpha = 0.5, beta = 0.6, k = 2 })",
     lambda A: lrn(A, 4, alpha=0.5, beta=0.6, k=2), {"A": inp((2, 6, 4))}, "grad"),
    ("lrn_wide", "F.local_response_norm(A, 9, { alpha = 0.5 })", lambda A: lrn(A, 9, alpha=0.5), {"A": inp((2, 3, 2))}, "grad"),
    # -- activations and resampling
    ("prelu", "F.prelu(A, B)", lambda A, B: F.prelu(A, B), {"A": inp((2, 3, 4)), "B": inp((3,))}, "grad"),
    ("prelu_one", "F.prelu(A, B)", lambda A, B: F.prelu(A, B), {"A": inp((5,)), "B": inp((1,))}, "grad"),
    ("upsample_bilinear", "nn.Upsample({ scale_factor = 2, mode = 'bilinear', align_corners = true })(A)",
     lambda A: torch.nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)(A), {"A": inp((1, 2, 3, 3))}, "grad"),
    ("upsample_bicubic", "nn.Upsample({ size = { 5, 4 }, mode = 'bicubic' })(A)",
     lambda A: torch.nn.Upsample(size=(5, 4), mode="bicubic")(A), {"A": inp((1, 2, 3, 3))}, "grad"),
    ("upsample_nearest", "nn.Upsample({ scale_factor = 2 })(A)",
     lambda A: torch.nn.Upsample(scale_factor=2)(A), {"A": inp((1, 1, 2, 3))}, "grad"),
    ("pixel_shuffle_mod", "nn.PixelShuffle(2)(A)", lambda A: torch.nn.PixelShuffle(2)(A), {"A": inp((1, 8, 2, 3))}, "grad"),
    ("pixel_unshuffle_mod", "nn.PixelUnshuffle(2)(A)", lambda A: torch.nn.PixelUnshuffle(2)(A), {"A": inp((1, 2, 4, 2))}, "grad"),
    ("elu_mod", "nn.ELU({ alpha = 0.5 })(A)", lambda A: torch.nn.ELU(alpha=0.5)(A), {"A": inp((7,), "wide")}, "grad"),
    ("selu_mod", "nn.SELU()(A)", lambda A: torch.nn.SELU()(A), {"A": inp((7,), "wide")}, "grad"),
    ("softplus_mod", "nn.Softplus({ beta = 2, threshold = 5 })(A)", lambda A: torch.nn.Softplus(beta=2, threshold=5)(A),
     {"A": inp((7,), "wide")}, "grad"),
    ("mish_mod", "nn.Mish()(A)", lambda A: torch.nn.Mish()(A), {"A": inp((7,), "wide")}, "grad"),
    ("hardswish_mod", "nn.Hardswish()(A)", lambda A: torch.nn.Hardswish()(A), {"A": inp((7,), "wide")}, "grad"),
    ("hardtanh_mod", "nn.Hardtanh({ min_val = -2, max_val = 3 })(A)", lambda A: torch.nn.Hardtanh(-2, 3)(A),
     {"A": inp((7,), "wide")}, "grad"),
    ("softmin_mod", "nn.Softmin(2)(A)", lambda A: torch.nn.Softmin(1)(A), {"A": inp((2, 4))}, "grad"),
    ("logsigmoid_mod", "nn.LogSigmoid()(A)", lambda A: torch.nn.LogSigmoid()(A), {"A": inp((7,), "wide")}, "grad"),
    # -- pooling and bags
    ("max_pool1d", "F.max_pool1d(A, 3, { stride = 2, padding = 1, dilation = 1 })",
     lambda A: F.max_pool1d(A, 3, stride=2, padding=1), {"A": inp((2, 3, 8))}, "grad"),
    ("max_pool1d_idx", "F.max_pool1d(A, 2, { stride = 3, padding = 1, dilation = 2, return_indices = true })",
     lambda A: (lambda r: (r[0], r[1] + 1))(F.max_pool1d(A, 2, stride=3, padding=1, dilation=2, return_indices=True)),
     {"A": inp((2, 9))}, "grad"),
    ("max_pool2d_idx", "F.max_pool2d(A, { 3, 2 }, { stride = { 2, 1 }, padding = { 1, 1 }, dilation = { 1, 2 }, return_indices = true })",
     lambda A: (lambda r: (r[0], r[1] + 1))(F.max_pool2d(A, (3, 2), stride=(2, 1), padding=(1, 1), dilation=(1, 2), return_indices=True)),
     {"A": inp((2, 2, 6, 5))}, "grad"),
    ("max_pool2d_idx_plain", "F.max_pool2d(A, 2, { return_indices = true })",
     lambda A: (lambda r: (r[0], r[1] + 1))(F.max_pool2d(A, 2, return_indices=True)), {"A": inp((1, 3, 4, 6))}, "grad"),
    ("avg_pool1d", "F.avg_pool1d(A, 3, { stride = 2, padding = 1 })", lambda A: F.avg_pool1d(A, 3, stride=2, padding=1),
     {"A": inp((2, 3, 7))}, "grad"),
    ("adaptive_max_pool2d", "F.adaptive_max_pool2d(A, { 3, 2 })", lambda A: F.adaptive_max_pool2d(A, (3, 2)),
     {"A": inp((2, 2, 5, 7))}, "grad"),
    ("adaptive_max_pool2d_div", "F.adaptive_max_pool2d(A, 2)", lambda A: F.adaptive_max_pool2d(A, 2),
     {"A": inp((1, 2, 4, 6))}, "grad"),
    ("adaptive_max_pool2d_idx", "F.adaptive_max_pool2d(A, { 2, 3 }, true)",
     lambda A: (lambda r: (r[0], r[1] + 1))(F.adaptive_max_pool2d(A, (2, 3), return_indices=True)),
     {"A": inp((2, 3, 5, 4))}, "grad"),
    ("embedding_bag_2d_mean", "F.embedding_bag(tide.long { { 1, 3, 3 }, { 5, 2, 1 } }:to(A.device), A)",
     lambda A: F.embedding_bag(torch.tensor([[0, 2, 2], [4, 1, 0]]), A), {"A": inp((5, 3))}, "grad"),
    ("embedding_bag_2d_max", "F.embedding_bag(tide.long { { 1, 3, 4 }, { 5, 2, 1 } }:to(A.device), A, nil, { mode = 'max' })",
     lambda A: F.embedding_bag(torch.tensor([[0, 2, 3], [4, 1, 0]]), A, mode="max"), {"A": inp((5, 3))}, "grad"),
    ("embedding_bag_offsets_sum", "F.embedding_bag(tide.long { 1, 3, 3, 5, 2, 4 }:to(A.device), A, tide.long { 1, 3, 3 }:to(A.device), { mode = 'sum', per_sample_weights = B })",
     lambda A, B: F.embedding_bag(torch.tensor([0, 2, 2, 4, 1, 3]), A, torch.tensor([0, 2, 2]), mode="sum", per_sample_weights=B),
     {"A": inp((5, 3)), "B": inp((6,))}, "grad"),
    ("embedding_bag_offsets_mean", "F.embedding_bag(tide.long { 1, 3, 3, 5, 2, 4 }:to(A.device), A, tide.long { 1, 2, 5, 7 }:to(A.device), { include_last_offset = true })",
     lambda A: F.embedding_bag(torch.tensor([0, 2, 2, 4, 1, 3]), A, torch.tensor([0, 1, 4, 6]), include_last_offset=True),
     {"A": inp((5, 3))}, "grad"),
    ("embedding_bag_offsets_max", "F.embedding_bag(tide.long { 1, 3, 3, 5, 2, 4 }:to(A.device), A, tide.long { 1, 4 }:to(A.device), { mode = 'max', padding_idx = 3 })",
     lambda A: F.embedding_bag(torch.tensor([0, 2, 2, 4, 1, 3]), A, torch.tensor([0, 3]), mode="max", padding_idx=2),
     {"A": inp((5, 3))}, "grad"),
]

def values(shape, kind, rng):
    n = int(np.prod(shape)) if shape else 1
    if kind == "randn": v = rng.standard_normal(n)
    elif kind == "pos": v = rng.uniform(0.3, 3.0, n)
    elif kind == "wide": v = rng.uniform(-6.0, 6.0, n)
    else: raise ValueError(kind)
    return np.round(v, 3), "float64"

emit("spec/ref/vision_reference.py", CASES, values, 2000)
