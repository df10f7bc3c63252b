--[[
tide.nn.losses -- the loss functions of tide.nn.functional (cross_entropy,
nll_loss, mse_loss, binary_cross_entropy, kl_div, ...), composed from tide
ops so autograd differentiates them. Names, defaults and formulas follow
PyTorch; class labels (and ignore_index) are 1-based.
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local args = require "tide.args"
local is_tensor, raise = core.is_tensor, core.raise
local argerr, shape_str, where = tensor.argerr, tensor.shape_str, tensor.where

local M = {}

-- -- Argument checks ------------------------------------------------------------------------

local function fmt_shape(s) return "[" .. table.concat(s, ",") .. "]" end

local U = require "tide.nn.loss_util"
local quoted, reduction_of, reduce, float_tensor = U.quoted, U.reduction_of, U.reduce, U.float_tensor
local number_option = U.number_option

-- opts: nil or a table whose keys are all in `allowed` (a typo must not pass silently)
local function options(fname, opts, argn, allowed) return args.opts(fname, opts, allowed, argn) end

local function set(...)
  local s = {}
  for _, k in ipairs { ... } do s[k] = true end
  return s
end

local function same_shape(fname, input, target)
  if input.shape ~= target.shape then
    raise(("%s: target shape %s does not match input shape %s"):format(fname, shape_str(target), shape_str(input)))
  end
end

-- an optional tensor option (weight, pos_weight) that must broadcast to `shape`
-- without growing it
local function broadcast_option(fname, name, w, shape)
  if w == nil then return nil end
  if not is_tensor(w) then raise(("%s: option %s must be a Tensor, got %s"):format(fname, name, tensor.typename(w))) end
  local ws, ok = w:size(), #w:size() <= #shape
  for i = 1, #ws do
    local a, b = ws[#ws - i + 1], shape[#shape - i + 1]
    if ok and a ~= 1 and a ~= b then ok = false end
  end
  if not ok then
    raise(("%s: %s of shape %s cannot be broadcast to the input shape %s"):format(fname, name, shape_str(w),
      fmt_shape(shape)))
  end
  return w
end

-- -- Class-index losses ----------------------------------------------------------------------

-- weight: nil or a 1-D tensor of nc class weights
local function class_weight(fname, weight, nc)
  if weight == nil then return end
  if not is_tensor(weight) then
    raise(("%s: option weight must be a Tensor, got %s"):format(fname, tensor.typename(weight)))
  end
  if weight.ndim ~= 1 or weight:size(1) ~= nc then
    raise(("%s: weight must be a 1-D tensor with one entry per class (%d), got shape %s"):format(fname, nc,
      shape_str(weight)))
  end
end

-- Checks input (N, C, d1...) or (C) against integer target (N, d1...) or () and
-- the weight; returns the class dim, the class count, the mask of targets that
-- are not ignore_index and the int64 labels with the ignored ones set to 1.
local function check_classes(fname, input, target, weight, ignore)
  if input.ndim < 1 then raise(fname .. ": input must have a class dim, got a 0-dim tensor") end
  local cd = input.ndim == 1 and 1 or 2
  local nc = input:size(cd)
  local st = target.dtype
  if st.is_floating_point or st.name == "bool" then
    raise(("%s: target must be an integer tensor of class labels, got %s (make one with tide.long{...} or y:long())")
      :format(fname, st.name))
  end
  local want = input:size()
  table.remove(want, cd)
  local ts, same = target:size(), #target:size() == #want
  for i = 1, #want do if ts[i] ~= want[i] then same = false end end
  if not same then
    raise(("%s: expected target of shape %s for input of shape %s, got %s"):format(fname, fmt_shape(want),
      shape_str(input), shape_str(target)))
  end
  class_weight(fname, weight, nc)
  if st.name ~= "int64" then target = target:long() end
  local valid = target:ne(ignore)
  local safe = where(valid, target, 1)      -- ignored targets read class 1, then count for nothing
  if target:numel() > 0 and not core.tracing() then
    local lo, hi = safe:min():item(), safe:max():item()
    if lo < 1 or hi > nc then
      raise(("%s: target %d is out of range for %d classes (labels are 1-based)"):format(fname, lo < 1 and lo or hi, nc))
    end
  end
  return cd, nc, valid, safe
end

-- the weight as a view broadcasting along the class dim cd of an n-dim tensor
local function class_view(weight, n, cd)
  local s = {}
  for i = 1, n do s[i] = 1 end
  s[cd] = weight:size(1)
  return weight:view(s)
end

-- nll over log-probabilities logp (checked by check_classes), with PyTorch's
-- label smoothing: (1 - ls) * nll + ls / C * (-sum_c w_c logp_c), both divided
-- by the summed weight of the non-ignored targets for 'mean'.
local function class_loss(logp, cd, nc, valid, safe, weight, reduction, ls)
  local picked = logp:gather(cd, safe:unsqueeze(cd)):squeeze(cd)
  local w
  if weight ~= nil then
    w = weight:index_select(1, safe:reshape(-1)):reshape(safe:size())
    picked = picked * w
  end
  local loss = where(valid, -picked, 0)
  local smooth
  if ls > 0 then
    local s = weight ~= nil and (logp * class_view(weight, logp.ndim, cd)):sum(cd) or logp:sum(cd)
    smooth = where(valid, -s, 0)
  end
  if reduction == "none" then
    if smooth then return loss * (1 - ls) + smooth * (ls / nc) end
    return loss
  end
  loss = loss:sum()
  if smooth then smooth = smooth:sum() end
  if reduction == "mean" then
    local denom = weight ~= nil and where(valid, w, 0):sum() or valid:sum()
    loss = loss / denom
    if smooth then smooth = smooth / denom end
  end
  if smooth then return loss * (1 - ls) + smooth * (ls / nc) end
  return loss
end

local NLL_OPTS = set("weight", "ignore_index", "reduction")

-- nll_loss(input, target, {weight=, ignore_index=-100, reduction='mean'}):
-- input (N, C, d1...) or (C) log-probabilities, target (N, d1...) or () 1-based labels
--- F.nll_loss(logp, target[, {weight, ignore_index = -100, reduction = "mean"}]) -> Tensor
--- Negative log-likelihood of 1-based integer labels target (N, d...) under log-probabilities logp (N, C, d...).
function M.nll_loss(input, target, opts)
  float_tensor("nll_loss", input, 1, "input")
  if not is_tensor(target) then argerr(2, "nll_loss", "Tensor", target) end
  opts = options("nll_loss", opts, 3, NLL_OPTS)
  local reduction = reduction_of("nll_loss", opts)
  local ignore = number_option("nll_loss", "ignore_index", opts.ignore_index, -100,
    function(v) return v == math.floor(v) end, "an integer")
  local cd, nc, valid, safe = check_classes("nll_loss", input, target, opts.weight, ignore)
  return class_loss(input, cd, nc, valid, safe, opts.weight, reduction, 0)
end

local CE_OPTS = set("weight", "ignore_index", "reduction", "label_smoothing")
local REDUCE = { none = 0, mean = 1, sum = 2 }     -- TD_REDUCE_*

-- cross_entropy(input, target, {weight=, ignore_index=-100, reduction='mean', label_smoothing=0}):
-- input (N, C, d1...) or (C) logits; target 1-based class labels (N, d1...) or (),
-- or class probabilities shaped like input (a floating-point target)
--- F.cross_entropy(logits, target[, {weight, ignore_index = -100, reduction = "mean", label_smoothing = 0}]) -> Tensor
--- log_softmax + nll_loss over dim 2 (or dim 1 of a 1-D input); target 1-based labels or class probabilities.
function M.cross_entropy(input, target, opts)
  local fname = "cross_entropy"
  float_tensor(fname, input, 1, "input")
  if not is_tensor(target) then argerr(2, fname, "Tensor", target) end
  opts = options(fname, opts, 3, CE_OPTS)
  local reduction = reduction_of(fname, opts)
  local ignore = number_option(fname, "ignore_index", opts.ignore_index, -100,
    function(v) return v == math.floor(v) end, "an integer")
  local ls = number_option(fname, "label_smoothing", opts.label_smoothing, 0,
    function(v) return v >= 0 and v <= 1 end, "a number between 0 and 1")
  if input.ndim < 1 then raise(fname .. ": input must have a class dim, got a 0-dim tensor") end
  local weight = opts.weight
  if not target:is_floating_point() then
    local cd, nc, valid, safe = check_classes(fname, input, target, weight, ignore)
    -- logits (N, C): the fused eager kernel (jit/jit_fused.c), unless the weights need a gradient
    local F = package.loaded["tide.nn.functional"]
    if input.ndim == 2 and F and F._fused_ok(input, weight) and
       not (weight ~= nil and weight.requires_grad and core.C.td_grad_enabled() ~= 0) then
      local t = target.dtype.name == "int64" and target or target:long()
      return core.wrap(core.C.td_cross_entropy(input.p, (t - 1).p, weight and weight.p, ignore - 1,
        REDUCE[reduction], ls))
    end
    return class_loss(input:log_softmax(cd), cd, nc, valid, safe, weight, reduction, ls)
  end
  -- class probabilities: -sum_c w_c p_c logp_c, with p smoothed towards uniform
  if input.shape ~= target.shape and target.ndim == input.ndim - 1 then
    raise(("%s: a float target of shape %s for input %s holds class probabilities and needs the input's shape; "
      .. "class labels are an integer tensor (tide.long{...} or y:long())"):format(fname, shape_str(target),
      shape_str(input)))
  end
  same_shape(fname, input, target)
  local cd = input.ndim == 1 and 1 or 2
  local nc = input:size(cd)
  class_weight(fname, weight, nc)
  if ls > 0 then target = target * (1 - ls) + ls / nc end
  local prod = input:log_softmax(cd) * target
  if weight ~= nil then prod = prod * class_view(weight, input.ndim, cd) end
  if reduction == "none" then return -prod:sum(cd) end
  local total = -prod:sum()
  if reduction == "sum" then return total end
  return total / (input:numel() / nc)      -- the mean over the positions (N * d1 * ...)
end

-- -- Elementwise losses ----------------------------------------------------------------------

-- the common prologue: floating input, a tensor target of the same shape, options
local function pointwise(fname, input, target, opts, allowed, batchmean)
  float_tensor(fname, input, 1, "input")
  if not is_tensor(target) then argerr(2, fname, "Tensor", target) end
  same_shape(fname, input, target)
  opts = options(fname, opts, 3, allowed)
  return opts, reduction_of(fname, opts, batchmean)
end

local RED_OPTS = set("reduction")

-- mse_loss(input, target, {reduction='mean'}): (input - target)^2
--- F.mse_loss(input, target[, {reduction = "mean"}]) -> Tensor
--- (input - target)^2, averaged ("mean"), summed ("sum") or not ("none").
function M.mse_loss(input, target, opts)
  local _, reduction = pointwise("mse_loss", input, target, opts, RED_OPTS)
  local d = input - target
  return reduce(d * d, reduction)
end

-- l1_loss(input, target, {reduction='mean'}): |input - target|
--- F.l1_loss(input, target[, {reduction = "mean"}]) -> Tensor
--- |input - target|.
function M.l1_loss(input, target, opts)
  local _, reduction = pointwise("l1_loss", input, target, opts, RED_OPTS)
  return reduce((input - target):abs(), reduction)
end

-- smooth_l1_loss(input, target, {reduction='mean', beta=1}):
-- 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (beta = 0: l1_loss)
--- F.smooth_l1_loss(input, target[, {reduction = "mean", beta = 1}]) -> Tensor
--- 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta.
function M.smooth_l1_loss(input, target, opts)
  local o, reduction = pointwise("smooth_l1_loss", input, target, opts, set("reduction", "beta"))
  local beta = number_option("smooth_l1_loss", "beta", o.beta, 1, function(v) return v >= 0 end,
    "a non-negative number")
  local d = input - target
  local ad = d:abs()
  if beta == 0 then return reduce(ad, reduction) end
  return reduce(where(ad:lt(beta), d * d * 0.5 / beta, ad - 0.5 * beta), reduction)
end

-- huber_loss(input, target, {reduction='mean', delta=1}):
-- 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)
--- F.huber_loss(input, target[, {reduction = "mean", delta = 1}]) -> Tensor
--- 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta).
function M.huber_loss(input, target, opts)
  local o, reduction = pointwise("huber_loss", input, target, opts, set("reduction", "delta"))
  local delta = number_option("huber_loss", "delta", o.delta, 1, function(v) return v > 0 end,
    "a positive number")
  local d = input - target
  local ad = d:abs()
  return reduce(where(ad:lt(delta), d * d * 0.5, (ad - 0.5 * delta) * delta), reduction)
end

-- log(x) clamped below at -100 as PyTorch's binary_cross_entropy does; x = 0
-- gives -100 with a zero gradient (not the NaN of 0 * log'(0))
local function clamped_log(x)
  local pos = x:gt(0)
  return where(pos, where(pos, x, 1):log(), -100):clamp(-100)
end

-- binary_cross_entropy(input, target, {weight=, reduction='mean'}):
-- -w (t log(x) + (1 - t) log(1 - x)), input probabilities in [0, 1]
--- F.binary_cross_entropy(p, target[, {weight, reduction = "mean"}]) -> Tensor
--- -w (t log(p) + (1 - t) log(1 - p)) for probabilities p (log clamped at -100).
function M.binary_cross_entropy(input, target, opts)
  local fname = "binary_cross_entropy"
  local o, reduction = pointwise(fname, input, target, opts, set("weight", "reduction"))
  local weight = broadcast_option(fname, "weight", o.weight, input:size())
  if input:numel() > 0 and not core.tracing() then
    local x = input:detach()
    local lo, hi = x:min():item(), x:max():item()
    if lo < 0 or hi > 1 then
      raise(("%s: input values must be between 0 and 1, got %s"):format(fname, tostring(lo < 0 and lo or hi)))
    end
  end
  local loss = -(target * clamped_log(input) + (1 - target) * clamped_log(1 - input))
  if weight ~= nil then loss = loss * weight end
  return reduce(loss, reduction)
end

-- binary_cross_entropy_with_logits(input, target, {weight=, pos_weight=, reduction='mean'}):
-- (1 - t) x + lw softplus(-x) with lw = 1 + (pos_weight - 1) t; softplus(-x) is
-- computed as max(-x, 0) + log1p(exp(-|x|)) = (|x| - x) / 2 + log1p(exp(-|x|)),
-- stable for any x and with the exact gradient -sigmoid(-x) at x = 0 too
--- F.binary_cross_entropy_with_logits(x, target[, {weight, pos_weight, reduction = "mean"}]) -> Tensor
--- binary_cross_entropy(sigmoid(x), target), computed stably.
function M.binary_cross_entropy_with_logits(input, target, opts)
  local fname = "binary_cross_entropy_with_logits"
  local o, reduction = pointwise(fname, input, target, opts, set("weight", "pos_weight", "reduction"))
  local shape = input:size()
  local weight = broadcast_option(fname, "weight", o.weight, shape)
  local pos_weight = broadcast_option(fname, "pos_weight", o.pos_weight, shape)
  local ax = input:abs()
  local sp = (ax - input) * 0.5 + (-ax):exp():log1p()
  if pos_weight ~= nil then sp = sp * ((pos_weight - 1) * target + 1) end
  local loss = (1 - target) * input + sp
  if weight ~= nil then loss = loss * weight end
  return reduce(loss, reduction)
end

-- kl_div(input, target, {reduction='mean', log_target=false}): input is log q;
-- target p (or log p): p (log p - input), 0 where p = 0. 'mean' averages over
-- all elements, 'batchmean' divides the sum by the size of dim 1.
--- F.kl_div(logq, target[, {reduction = "mean", log_target = false}]) -> Tensor
--- p (log p - logq) for target p (or log p); reduction also "batchmean".
function M.kl_div(input, target, opts)
  local fname = "kl_div"
  local o, reduction = pointwise(fname, input, target, opts, set("reduction", "log_target"), true)
  local lt = o.log_target
  if lt ~= nil and type(lt) ~= "boolean" then
    raise(("%s: log_target must be a boolean, got %s"):format(fname, quoted(lt)))
  end
  local loss
  if lt then
    loss = target:exp() * (target - input)
  else
    -- xlogy(p, p) - p input: p log p is 0 at p = 0
    loss = target * where(target:eq(0), 1, target):log() - target * input
  end
  if reduction == "batchmean" then
    local s = loss:sum()
    if input.ndim == 0 then return s end
    return s / input:size(1)
  end
  return reduce(loss, reduction)
end

return M
