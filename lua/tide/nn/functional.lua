--[[
tide.nn.functional -- the layers of tide.nn as plain functions on tensors
(PyTorch's torch.nn.functional names and defaults; dims and indices 1-based).
The losses (cross_entropy, mse_loss, ...) live in tide.nn.losses and are
merged in at the end of this file when that module exists.
--]]
local tide = require "tide"
local core = require "tide.core"
local tensor = require "tide.tensor"
local raise, is_tensor = core.raise, tide.is_tensor
local argerr, shape_str = tensor.argerr, tensor.shape_str
local args = require "tide.args"

local F = {}

local targ = args.tensor
local function optarg(x, n, fname)
  if x ~= nil and (not is_tensor(x) or x.p == nil) then argerr(n, fname, "Tensor or nil", x) end
  return x
end

-- -- Linear layers -----------------------------------------------------------------------------

-- linear(x (*, in), weight (out, in), bias (out) | nil) -> (*, out) = x W^T + b
--- F.linear(x, weight[, bias]) -> Tensor
--- x (*, in) W^T + b with weight (out, in): (*, out).
function F.linear(x, weight, bias)
  targ(x, 1, "linear"); targ(weight, 2, "linear"); optarg(bias, 3, "linear")
  if weight.ndim ~= 2 then raise(("linear: weight must be 2-D (out, in), got %s"):format(shape_str(weight))) end
  if x.ndim < 1 or x:size(-1) ~= weight:size(2) then
    raise(("linear: input %s does not match weight %s (last dim %d vs in_features %d)"):format(
      shape_str(x), shape_str(weight), x.ndim > 0 and x:size(-1) or 0, weight:size(2)))
  end
  if bias ~= nil and x.ndim >= 2 then
    -- one GEMM with the bias as its C operand (addmm), on (N, in) rows
    if x.ndim == 2 then return tide.addmm(bias, x, weight:t()) end
    local s = x:size()
    s[#s] = weight:size(1)
    return tide.addmm(bias, x:reshape(-1, weight:size(2)), weight:t()):view(s)
  end
  local y = x:matmul(weight:t())
  if bias ~= nil then y = y + bias end
  return y
end

-- bilinear(x1 (*, in1), x2 (*, in2), weight (out, in1, in2), bias (out) | nil) -> (*, out)
-- y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o]
--- F.bilinear(x1, x2, weight[, bias]) -> Tensor
--- y[..., o] = sum_ij x1[..., i] W[o, i, j] x2[..., j] + b[o].
function F.bilinear(x1, x2, weight, bias)
  targ(x1, 1, "bilinear"); targ(x2, 2, "bilinear"); targ(weight, 3, "bilinear"); optarg(bias, 4, "bilinear")
  if weight.ndim ~= 3 then raise(("bilinear: weight must be 3-D (out, in1, in2), got %s"):format(shape_str(weight))) end
  local out, in1, in2 = weight:size(1), weight:size(2), weight:size(3)
  if x1.ndim < 1 or x1:size(-1) ~= in1 or x2.ndim < 1 or x2:size(-1) ~= in2 then
    raise(("bilinear: inputs %s and %s do not match weight %s (in1_features %d, in2_features %d)"):format(
      shape_str(x1), shape_str(x2), shape_str(weight), in1, in2))
  end
  local batch = x1:size(); batch[#batch] = nil
  local a, b = x1:reshape(-1, in1), x2:reshape(-1, in2)
  if a:size(1) ~= b:size(1) then
    raise(("bilinear: inputs %s and %s have different batch shapes"):format(shape_str(x1), shape_str(x2)))
  end
  local t = a:matmul(weight:permute(2, 1, 3):reshape(in1, out * in2)):view(-1, out, in2)   -- (N, out, in2)
  local y = (t * b:unsqueeze(2)):sum(3)                                                   -- (N, out)
  if bias ~= nil then y = y + bias end
  batch[#batch + 1] = out
  return y:view(batch)
end

-- -- Embedding ---------------------------------------------------------------------------------

-- embedding(idx, weight (num, dim), {padding_idx=}) -> idx.shape .. {dim}; indices are 1-based.
-- Rows looked up at padding_idx pass no gradient to the weight, as in PyTorch.
--- F.embedding(idx, weight[, {padding_idx}]) -> Tensor
--- Rows of weight (num, dim) at 1-based int64 indices; the padding row gets no gradient.
function F.embedding(idx, weight, opts)
  if not is_tensor(idx) then argerr(1, "embedding", "Tensor of indices", idx) end
  targ(weight, 2, "embedding")
  local ok, out = pcall(tide.embedding, idx, weight)
  if not ok then raise((tostring(out):gsub("^index_select: index (%-?%d+) is out of range for dim 1 with size (%d+)",
    "embedding: index %1 is out of range for %2 embeddings (indices are 1-based)"):gsub("^index_select:", "embedding:"))) end
  local pad = args.opts("embedding", opts, "padding_idx", 3).padding_idx
  if pad ~= nil then
    args.int(pad, 3, "embedding", "integer padding_idx")
    local n = weight:size(1)
    if pad < 0 then pad = n + pad + 1 end
    if pad < 1 or pad > n then
      raise(("embedding: padding_idx %d is out of range for %d embeddings"):format(opts.padding_idx, n))
    end
    out = tide.where(idx:eq(pad):unsqueeze(-1), out:detach(), out)
  end
  return out
end

-- -- Normalization ------------------------------------------------------------------------------

-- normalized_shape as a list: 4 -> {4}; {2, 3} stays
local function norm_shape(fname, s)
  if type(s) == "number" then return { s } end
  if type(s) == "table" and #s > 0 then
    for i = 1, #s do if type(s[i]) ~= "number" then argerr(2, fname, "normalized shape", s) end end
    return s
  end
  argerr(2, fname, "normalized shape (number or table of sizes)", s)
end
F._norm_shape = norm_shape

-- the trailing dims {-k..-1} that normalized_shape covers, checked against x
local function norm_dims(fname, x, s)
  local k, ok = #s, x.ndim >= #s
  for i = 1, k do if ok and x:size(x.ndim - k + i) ~= s[i] then ok = false end end
  if not ok then
    raise(("%s: normalized_shape [%s] expects input with shape [*, %s], got %s"):format(
      fname, table.concat(s, ","), table.concat(s, ","), shape_str(x)))
  end
  local dims = {}
  for i = 1, k do dims[i] = -k + i - 1 end
  return dims
end

-- The fused eager kernels (jit/jit_fused.c) take CPU tensors of one float dtype
-- outside tide.compile's traces; F.fused = false takes the composite forms
-- everywhere (the specs compare the two).
F.fused = true
local C = core.C
local function fused_ok(x, a, b)
  if not F.fused or x.device_type ~= 0 or not x:is_floating_point() or core.tracing() then return false end
  for _, t in ipairs { a or false, b or false } do
    if t and (t.device_type ~= 0 or t.scalar_type ~= x.scalar_type) then return false end
  end
  return true
end
F._fused_ok = fused_ok

-- layer_norm(x, normalized_shape, weight, bias, eps=1e-5): normalize over the trailing
-- dims with the biased variance; y = (x - mean) / sqrt(var + eps) * weight + bias
--- F.layer_norm(x, normalized_shape[, weight[, bias[, eps = 1e-5]]]) -> Tensor
--- (x - mean) / sqrt(var + eps) * weight + bias over the trailing dims.
function F.layer_norm(x, normalized_shape, weight, bias, eps)
  targ(x, 1, "layer_norm"); optarg(weight, 3, "layer_norm"); optarg(bias, 4, "layer_norm")
  if eps ~= nil and type(eps) ~= "number" then argerr(5, "layer_norm", "number eps", eps) end
  local dims = norm_dims("layer_norm", x, norm_shape("layer_norm", normalized_shape))
  if fused_ok(x, weight, bias) then
    return core.wrap(C.td_layer_norm(x.p, #dims, weight and weight.p, bias and bias.p, eps or 1e-5))
  end
  local mean = x:mean(dims, true)
  local var = x:var(dims, { correction = 0, keepdim = true })
  local y = (x - mean) * (var + (eps or 1e-5)):rsqrt()
  if weight ~= nil then y = y * weight end
  if bias ~= nil then y = y + bias end
  return y
end

-- rms_norm(x, normalized_shape, weight, eps): y = x / sqrt(mean(x^2) + eps) * weight;
-- eps nil means the dtype's machine epsilon, as in PyTorch
local finfo_eps = { [4] = 1.1920928955078125e-07, [5] = 2.220446049250313e-16 }
--- F.rms_norm(x, normalized_shape[, weight[, eps]]) -> Tensor
--- x / sqrt(mean(x^2) + eps) * weight over the trailing dims (eps nil: the dtype's epsilon).
function F.rms_norm(x, normalized_shape, weight, eps)
  targ(x, 1, "rms_norm"); optarg(weight, 3, "rms_norm")
  if eps ~= nil and type(eps) ~= "number" then argerr(4, "rms_norm", "number eps", eps) end
  local dims = norm_dims("rms_norm", x, norm_shape("rms_norm", normalized_shape))
  eps = eps or finfo_eps[x.scalar_type] or finfo_eps[4]
  if fused_ok(x, weight) then return core.wrap(C.td_rms_norm(x.p, #dims, weight and weight.p, eps)) end
  local y = x * ((x * x):mean(dims, true) + eps):rsqrt()
  if weight ~= nil then y = y * weight end
  return y
end

-- -- Dropout ------------------------------------------------------------------------------------

-- dropout(x, p=0.5, training=true): zero each element with probability p, scale the
-- rest by 1/(1-p); the identity when not training or p == 0
--- F.dropout(x[, p = 0.5[, training = true]]) -> Tensor
--- Zeroes elements with probability p and scales the rest by 1/(1-p) (the identity when not training).
function F.dropout(x, p, training)
  targ(x, 1, "dropout")
  p = p == nil and 0.5 or p
  if type(p) ~= "number" or p < 0 or p > 1 then
    raise(("dropout: probability has to be between 0 and 1, but got %s"):format(tostring(p)))
  end
  if training == false or p == 0 then return x end
  if p == 1 then return x * 0 end
  local keep = tide.rand_like(x):lt(1 - p)
  return x * keep * (1 / (1 - p))
end

-- -- Activations --------------------------------------------------------------------------------

--- F.relu(x) -> Tensor
--- max(x, 0).
--- F.tanh(x) -> Tensor
--- tanh(x).
--- F.sigmoid(x) -> Tensor
--- 1 / (1 + e^-x).
--- F.silu(x) -> Tensor
--- x * sigmoid(x).
--- F.gelu(x[, {approximate = "none"|"tanh"}]) -> Tensor
--- x * Phi(x) (or the tanh approximation).
function F.relu(x) return targ(x, 1, "relu"):relu() end
function F.tanh(x) return targ(x, 1, "tanh"):tanh() end
function F.sigmoid(x) return targ(x, 1, "sigmoid"):sigmoid() end
function F.silu(x) return targ(x, 1, "silu"):silu() end
-- gelu(x, {approximate='none'|'tanh'}) (or the string itself)
function F.gelu(x, opts) return targ(x, 1, "gelu"):gelu(opts) end
-- leaky_relu(x, negative_slope=0.01): x if x > 0 else negative_slope * x
--- F.leaky_relu(x[, negative_slope = 0.01]) -> Tensor
--- x where x > 0, else negative_slope * x.
function F.leaky_relu(x, slope)
  targ(x, 1, "leaky_relu")
  slope = slope or 0.01
  if type(slope) ~= "number" then argerr(2, "leaky_relu", "number", slope) end
  return tide.where(x:gt(0), x, x * slope)
end
--- F.softmax(x, dim) -> Tensor
--- x:softmax(dim).
--- F.log_softmax(x, dim) -> Tensor
--- x:log_softmax(dim).
function F.softmax(x, dim) return targ(x, 1, "softmax"):softmax(dim) end
function F.log_softmax(x, dim) return targ(x, 1, "log_softmax"):log_softmax(dim) end

-- -- Attention ----------------------------------------------------------------------------------

-- scaled_dot_product_attention(q (..., L, E), k (..., S, E), v (..., S, Ev), opts) -> (..., L, Ev)
-- = softmax(q k^T * scale + mask) v, PyTorch 2's function: opts.is_causal masks the
-- keys after each query (query i sees keys 1..i), opts.attn_mask is a bool mask
-- (true = takes part) or a float mask added to the scores, opts.scale defaults to
-- 1/sqrt(E), opts.dropout_p drops probabilities (training only: pass 0 in eval).
-- Without dropout and with equal batch dims, it is one fused op: on the CPU
-- rt_attn.c (no (L, S) scores are stored, the causal half is skipped, one kernel
-- for the backward; without attn_mask), on OpenCL opencl/cl_attn.c (flash
-- attention: key tiles in local memory, online softmax, the mask read in place;
-- backward in two kernels); otherwise the same formula from matmul and softmax.
--- F.scaled_dot_product_attention(q, k, v[, {attn_mask, is_causal, scale, dropout_p}]) -> Tensor
--- softmax(q k^T * scale + mask) v for q (..., L, E), k (..., S, E), v (..., S, Ev); fused on the CPU and OpenCL.
function F.scaled_dot_product_attention(q, k, v, opts)
  local fname = "scaled_dot_product_attention"
  targ(q, 1, fname); targ(k, 2, fname); targ(v, 3, fname)
  opts = args.opts(fname, opts, "attn_mask is_causal scale dropout_p", 4)
  local mask, causal, p = opts.attn_mask, opts.is_causal and true or false, opts.dropout_p or 0
  optarg(mask, 4, fname)
  if causal and mask ~= nil then raise(fname .. ": is_causal and attn_mask cannot both be given") end
  if q.ndim < 2 or k.ndim < 2 or v.ndim < 2 then
    raise(("%s: query, key and value need at least 2 dims (..., L, E), got %s, %s and %s"):format(
      fname, shape_str(q), shape_str(k), shape_str(v)))
  end
  local scale = opts.scale or 1 / math.sqrt(q:size(-1))
  if type(scale) ~= "number" then argerr(4, fname, "number for scale", scale) end
  if type(p) ~= "number" or p < 0 or p > 1 then argerr(4, fname, "dropout_p between 0 and 1", p) end
  local same_batch = q.ndim == k.ndim and q.ndim == v.ndim
  for d = 1, q.ndim - 2 do
    same_batch = same_batch and k:size(d) == q:size(d) and v:size(d) == q:size(d)
  end
  -- fused: on the CPU (rt_attn.c), and on OpenCL (opencl/cl_attn.c: flash attention, heads up to 256)
  local dev = q.device_type
  local fused = k.device_type == dev and v.device_type == dev
    and (dev == 0 or (q:size(-1) <= 256 and v:size(-1) <= 256))
  -- a mask joins the fused op on OpenCL (bool or float, not itself trained); the
  -- CPU's fused kernels have none, so there it composes below
  local fmask = mask ~= nil and dev ~= 0 and mask.device_type == dev and not mask.requires_grad
    and mask.ndim <= q.ndim and (mask.dtype == tide.bool or mask.dtype == q.dtype)
  if same_batch and (mask == nil or fmask) and p == 0 and fused then
    local at = tensor.attrs()
    at.i[0] = causal and 1 or 0
    at.s[0] = scale
    return tensor.opn(core.OP.sdpa, mask ~= nil and { q, k, v, mask } or { q, k, v }, at)
  end
  local s = q:matmul(k:transpose(-2, -1)) * scale
  if causal then
    local L, S = q:size(-2), k:size(-2)
    local on = { device = q.device }
    s = s:masked_fill(tide.arange(L, on):view(L, 1):lt(tide.arange(S, on):view(1, S)), -math.huge)
  elseif mask ~= nil then
    s = mask.dtype == tide.bool and s:masked_fill(mask:logical_not(), -math.huge) or s + mask
  end
  local a = s:softmax(-1)
  if p > 0 then a = F.dropout(a, p) end
  return a:matmul(v)
end

-- -- Losses, convolution -------------------------------------------------------------------------------------

-- losses (tide.nn.losses) and convolution/pooling/batch_norm (tide.nn.conv)
for _, name in ipairs { "tide.nn.losses", "tide.nn.losses_extra", "tide.nn.conv", "tide.nn.functional_extra" } do
  for k, v in pairs(require(name)) do if F[k] == nil then F[k] = v end end
end

return F
