--[[
tide.nn.losses_extra -- the margin, ranking, count and sequence losses of
tide.nn.functional: ctc_loss, triplet_margin_loss, cosine_embedding_loss,
margin_ranking_loss, poisson_nll_loss, gaussian_nll_loss,
multilabel_soft_margin_loss and multi_margin_loss. Composed from tide ops, so
autograd differentiates them, eagerly and under tide.compile. Names, defaults
and formulas follow PyTorch; class labels (and CTC's blank) are 1-based.

CTC: the forward (alpha) recursion of Graves et al. in log space over the
extended label sequence l' = (blank, l1, blank, l2, ..., blank), one step per
time frame as table ops on (N, 2S+1) rows:
  alpha_t(j) = logsumexp(alpha_{t-1}(j), alpha_{t-1}(j-1), [alpha_{t-1}(j-2)]) + log y_t(l'_j)
(the j-2 term where l'_j is not blank and differs from l'_{j-2}); the loss is
-logsumexp(alpha_T(2S+1), alpha_T(2S)) at each sequence's own T and S. Reverse
mode through this recursion is the alpha-beta (forward-backward) gradient:
the adjoint of alpha_t(j) is exp(beta_t(j) - loss) summed the same way.
Impossible alignments are carried with a large finite -1e30 instead of -inf
(so logsumexp's softmax never sees 0/0 and gradients stay finite) and become
+inf (or 0 with zero_infinity) at the end. Eagerly on the CPU the same
recursions run in C instead (jit/jit_ctc.c, runtime/rt_ctc.c: ctc_kernel below).
--]]
local tide = require "tide"
local core = require "tide.core"
local tensor = require "tide.tensor"
local args = require "tide.args"
local is_tensor, raise = core.is_tensor, core.raise
local argerr, shape_str, where = tensor.argerr, tensor.shape_str, tensor.where

local M = {}

local U = require "tide.nn.loss_util"
local quoted, reduction_of, reduce, float_tensor = U.quoted, U.reduction_of, U.reduce, U.float_tensor
local number_option = U.number_option

local function any_tensor(fname, x, argn)
  if not is_tensor(x) then argerr(argn, fname, "Tensor", x) end
  return x
end

local function bool_option(fname, name, v)
  if v == nil then return false end
  if type(v) ~= "boolean" then raise(("%s: %s must be a boolean, got %s"):format(fname, name, quoted(v))) end
  return v
end

local function any_number(v) return true end
local function positive(v) return v > 0 end
local function non_negative(v) return v >= 0 end

local function same_shape(fname, a, an, b, bn)
  if a.shape ~= b.shape then
    raise(("%s: %s shape %s does not match %s shape %s"):format(fname, bn, shape_str(b), an, shape_str(a)))
  end
end

-- integer class labels checked against nc classes (1-based), as int64
local function labels(fname, target, nc, what)
  if target.dtype.is_floating_point or target.dtype.name == "bool" then
    raise(("%s: %s must be an integer tensor of 1-based labels, got %s"):format(fname, what, target.dtype.name))
  end
  if target.dtype.name ~= "int64" then target = target:long() end
  if target:numel() > 0 and not core.tracing() then
    local lo, hi = target:min():item(), target:max():item()
    if lo < 1 or hi > nc then
      raise(("%s: %s label %d is out of range for %d classes (labels are 1-based)"):format(fname, what,
        lo < 1 and lo or hi, nc))
    end
  end
  return target
end

-- -- Margin and ranking losses -----------------------------------------------------------------

--- F.margin_ranking_loss(x1, x2, target[, {margin = 0, reduction = "mean"}]) -> Tensor
--- max(0, -target (x1 - x2) + margin) for targets +1 (x1 should rank higher) or -1.
function M.margin_ranking_loss(x1, x2, target, opts)
  local fname = "margin_ranking_loss"
  float_tensor(fname, x1, 1, "input1"); float_tensor(fname, x2, 2, "input2"); any_tensor(fname, target, 3)
  opts = args.opts(fname, opts, "margin reduction", 4)
  local reduction = reduction_of(fname, opts)
  local margin = number_option(fname, "margin", opts.margin, 0, any_number, "a number")
  if x1.ndim ~= x2.ndim or x1.ndim ~= target.ndim then
    raise(("%s: input1 %s, input2 %s and target %s must have the same number of dims"):format(fname,
      shape_str(x1), shape_str(x2), shape_str(target)))
  end
  return reduce((-target * (x1 - x2) + margin):clamp(0), reduction)
end

--- F.cosine_embedding_loss(x1, x2, target[, {margin = 0, reduction = "mean"}]) -> Tensor
--- 1 - cos(x1, x2) where target is 1, max(0, cos(x1, x2) - margin) where it is -1; x (N, D) or (D), target (N) or ().
function M.cosine_embedding_loss(x1, x2, target, opts)
  local fname = "cosine_embedding_loss"
  float_tensor(fname, x1, 1, "input1"); float_tensor(fname, x2, 2, "input2"); any_tensor(fname, target, 3)
  opts = args.opts(fname, opts, "margin reduction", 4)
  local reduction = reduction_of(fname, opts)
  local margin = number_option(fname, "margin", opts.margin, 0, any_number, "a number")
  if x1.ndim ~= 1 and x1.ndim ~= 2 or x1.shape ~= x2.shape or target.ndim ~= x1.ndim - 1 then
    raise(("%s: expected input1 and input2 of one shape (N, D) or (D) and target (N) or (), got %s, %s and %s")
      :format(fname, shape_str(x1), shape_str(x2), shape_str(target)))
  end
  if target.ndim == 1 and target:size(1) ~= x1:size(1) then
    raise(("%s: target %s does not match input batch size %d"):format(fname, shape_str(target), x1:size(1)))
  end
  -- PyTorch's form: eps 1e-12 added to each squared magnitude
  local d = x1.ndim
  local cos = (x1 * x2):sum(d) / ((x1 * x1):sum(d) + 1e-12):mul((x2 * x2):sum(d) + 1e-12):sqrt()
  local loss = where(target:eq(1), 1 - cos, 0) + where(target:eq(-1), (cos - margin):clamp(0), 0)
  return reduce(loss, reduction)
end

--- F.triplet_margin_loss(anchor, positive, negative[, {margin = 1, p = 2, eps = 1e-6, swap = false, reduction = "mean"}]) -> Tensor
--- max(0, margin + d(a, p) - d(a, n)), d the pairwise p-norm distance over the last dim; swap uses min(d(a, n), d(p, n)).
function M.triplet_margin_loss(a, pos, neg, opts)
  local fname = "triplet_margin_loss"
  float_tensor(fname, a, 1, "anchor"); float_tensor(fname, pos, 2, "positive"); float_tensor(fname, neg, 3, "negative")
  opts = args.opts(fname, opts, "margin p eps swap reduction", 4)
  local reduction = reduction_of(fname, opts)
  local margin = number_option(fname, "margin", opts.margin, 1, positive, "a positive number")
  local p = number_option(fname, "p", opts.p, 2, positive, "a positive number")
  local eps = number_option(fname, "eps", opts.eps, 1e-6, any_number, "a number")
  local swap = bool_option(fname, "swap", opts.swap)
  if a.ndim ~= pos.ndim or a.ndim ~= neg.ndim or a.ndim < 1 then
    raise(("%s: anchor %s, positive %s and negative %s must have the same number of dims (1 or more)"):format(fname,
      shape_str(a), shape_str(pos), shape_str(neg)))
  end
  local function dist(x, y) return (x - y + eps):norm(p, -1) end
  local dpos, dneg = dist(a, pos), dist(a, neg)
  if swap then
    local ds = dist(pos, neg)
    dneg = where(ds:lt(dneg), ds, dneg)
  end
  return reduce((dpos - dneg + margin):clamp(0), reduction)
end

--- F.multi_margin_loss(input, target[, {p = 1, margin = 1, weight, reduction = "mean"}]) -> Tensor
--- sum over i ~= y of max(0, margin - x_y + x_i)^p (times weight[y]) / C, for 1-based labels y; input (N, C) or (C).
function M.multi_margin_loss(input, target, opts)
  local fname = "multi_margin_loss"
  float_tensor(fname, input, 1, "input"); any_tensor(fname, target, 2)
  opts = args.opts(fname, opts, "p margin weight reduction", 3)
  local reduction = reduction_of(fname, opts)
  local p = number_option(fname, "p", opts.p, 1, function(v) return v == 1 or v == 2 end, "1 or 2")
  local margin = number_option(fname, "margin", opts.margin, 1, any_number, "a number")
  if input.ndim ~= 1 and input.ndim ~= 2 or target.ndim ~= input.ndim - 1 or
     (input.ndim == 2 and target:size(1) ~= input:size(1)) then
    raise(("%s: expected input (N, C) or (C) and target (N) or (), got %s and %s"):format(fname, shape_str(input),
      shape_str(target)))
  end
  local x = input.ndim == 1 and input:unsqueeze(1) or input
  local n, nc = x:size(1), x:size(2)
  local w = opts.weight
  if w ~= nil and not (is_tensor(w) and w.ndim == 1 and w:size(1) == nc) then
    raise(("%s: weight must be a 1-D tensor with one entry per class (%d), got %s"):format(fname, nc,
      is_tensor(w) and shape_str(w) or quoted(w)))
  end
  local y = labels(fname, target, nc, "target"):reshape(n, 1)
  local z = (x - x:gather(2, y) + margin):clamp(0)
  if p == 2 then z = z * z end
  if w ~= nil then z = z * w:index_select(1, y:reshape(n)):reshape(n, 1) end
  local self_class = tide.arange(1, nc + 1, 1, { dtype = tide.int64, device = x.device }):reshape(1, nc):eq(y)
  local loss = where(self_class, 0, z):sum(2) / nc
  if input.ndim == 1 then loss = loss:reshape({}) end
  return reduce(loss, reduction)
end

--- F.multilabel_soft_margin_loss(input, target[, {weight, reduction = "mean"}]) -> Tensor
--- -(t logsigmoid(x) + (1 - t) logsigmoid(-x)) (times weight), averaged over the classes (the last dim).
function M.multilabel_soft_margin_loss(input, target, opts)
  local fname = "multilabel_soft_margin_loss"
  float_tensor(fname, input, 1, "input"); any_tensor(fname, target, 2)
  opts = args.opts(fname, opts, "weight reduction", 3)
  local reduction = reduction_of(fname, opts)
  same_shape(fname, input, "input", target, "target")
  if input.ndim < 1 then raise(fname .. ": input must have a class dim, got a 0-dim tensor") end
  local w = opts.weight
  if w ~= nil and not is_tensor(w) then
    raise(("%s: option weight must be a Tensor, got %s"):format(fname, tensor.typename(w)))
  end
  -- logsigmoid(x) = min(x, 0) - log1p(exp(-|x|)), stable for any x
  local ls = input:clamp(nil, 0) - (-input:abs()):exp():log1p()
  local loss = -(target * ls + (1 - target) * (ls - input))     -- logsigmoid(-x) = logsigmoid(x) - x
  if w ~= nil then loss = loss * w end
  local d = input.ndim
  return reduce(loss:sum(d) / input:size(d), reduction)
end

-- -- Likelihood losses -------------------------------------------------------------------------

--- F.poisson_nll_loss(input, target[, {log_input = true, full = false, eps = 1e-8, reduction = "mean"}]) -> Tensor
--- exp(input) - target input (log_input), else input - target log(input + eps); full adds Stirling's term for target > 1.
function M.poisson_nll_loss(input, target, opts)
  local fname = "poisson_nll_loss"
  float_tensor(fname, input, 1, "input"); any_tensor(fname, target, 2)
  opts = args.opts(fname, opts, "log_input full eps reduction", 3)
  local reduction = reduction_of(fname, opts)
  local log_input = opts.log_input == nil or bool_option(fname, "log_input", opts.log_input)
  local full = bool_option(fname, "full", opts.full)
  local eps = number_option(fname, "eps", opts.eps, 1e-8, non_negative, "a non-negative number")
  same_shape(fname, input, "input", target, "target")
  local loss
  if log_input then loss = input:exp() - target * input
  else loss = input - target * (input + eps):log() end
  if full then
    -- target log(target) - target + log(2 pi target) / 2, where target > 1 (0 elsewhere)
    local big = target:gt(1)
    local ts = where(big, target, 2)
    loss = loss + where(big, ts * ts:log() - ts + (ts * (2 * math.pi)):log() * 0.5, 0)
  end
  return reduce(loss, reduction)
end

--- F.gaussian_nll_loss(input, target, var[, {full = false, eps = 1e-6, reduction = "mean"}]) -> Tensor
--- (log(max(var, eps)) + (input - target)^2 / max(var, eps)) / 2; var shaped like input, or with one dim of size 1, or without the last dim, or a number.
function M.gaussian_nll_loss(input, target, var, opts)
  local fname = "gaussian_nll_loss"
  float_tensor(fname, input, 1, "input"); any_tensor(fname, target, 2)
  opts = args.opts(fname, opts, "full eps reduction", 4)
  local full = bool_option(fname, "full", opts.full)
  local eps = number_option(fname, "eps", opts.eps, 1e-6, positive, "a positive number")
  if type(var) == "number" then
    if var < 0 then raise(("%s: var must be non-negative, got %s"):format(fname, tostring(var))) end
    var = tide.full_like(input, var)
  elseif not is_tensor(var) then
    argerr(3, fname, "Tensor or number", var)
  else
    float_tensor(fname, var, 3, "var")
  end
  if var.shape ~= input.shape then
    local is, vs = input:size(), var:size()
    local ok = false
    if #vs == #is - 1 then               -- homoscedastic: var lacks the last dim
      ok = true
      for i = 1, #vs do if vs[i] ~= is[i] then ok = false end end
      if ok then var = var:unsqueeze(-1) end
    elseif #vs == #is then               -- exactly one dim of size 1 where the input's differs
      local diff, ones = 0, true
      for i = 1, #is do
        if vs[i] ~= is[i] then diff = diff + 1; if vs[i] ~= 1 then ones = false end end
      end
      ok = diff == 1 and ones
    end
    if not ok then
      raise(("%s: var of shape %s does not fit input %s (same shape, one dim of size 1, or the last dim left out)")
        :format(fname, shape_str(var), shape_str(input)))
    end
  end
  local reduction = reduction_of(fname, opts)
  if var:numel() > 0 and not core.tracing() then
    local lo = var:detach():min():item()
    if lo < 0 then raise(("%s: var has a negative entry (%s)"):format(fname, tostring(lo))) end
  end
  -- clamped at eps without a gradient of the clamp: the gradient passes to var as is
  var = var + (var:detach():clamp(eps) - var:detach())
  local d = input - target
  local loss = (var:log() + d * d / var) * 0.5
  if full then loss = loss + 0.5 * math.log(2 * math.pi) end
  return reduce(loss, reduction)
end

-- -- CTC ---------------------------------------------------------------------------------------

local NEG = -1e30      -- log(0) of impossible paths: finite, see the header

-- lengths (a table of integers, or an integer tensor) of n sequences -> an int64 tensor
-- and, outside tide.compile, the Lua numbers (nil while tracing a tensor)
local function lengths(fname, v, n, what, argn, device)
  local t, nums
  if type(v) == "number" then v = { v } end
  if type(v) == "table" and not is_tensor(v) then
    for i = 1, #v do
      if not args.is_int(v[i]) then argerr(argn, fname, "table of integer " .. what, v) end
    end
    nums, t = v, tide.tensor(#v > 0 and v or { 0 }, { dtype = tide.int64, device = device }):narrow(1, 1, #v)
  elseif is_tensor(v) then
    if v.dtype.is_floating_point or v.dtype.name == "bool" then
      raise(("%s: %s must be integers, got a %s tensor"):format(fname, what, v.dtype.name))
    end
    t = v:long():reshape(-1)
    if device and t.device ~= device then t = t:to(device) end     -- lengths may live on the CPU
    if not core.tracing() then nums = t:totable() end
  else
    argerr(argn, fname, "Tensor or table of " .. what, v)
  end
  if t:numel() ~= n then
    raise(("%s: %d %s for a batch of %d"):format(fname, t:numel(), what, n))
  end
  return t, nums
end

-- The eager fast path (jit/jit_ctc.c): CPU tensors outside tide.compile, the
-- labels checked and read in C (padded or concatenated as given), alpha and
-- beta per sequence in double; F.fused = false keeps the composite below.
local reduction_code = { none = 0, mean = 1, sum = 2 }
local function ctc_fused(lp)
  local F = package.loaded["tide.nn.functional"]
  return F and F.fused and lp.device_type == 0 and not core.tracing()
end
local function ctc_kernel(lp, tg, ilen, tlen, blank, reduction, zero_inf, batched)
  local y = core.C.td_ctc_loss(lp.p, (tg - 1).p, ilen.p, tlen.p, blank - 1, reduction_code[reduction],
    zero_inf and 1 or 0)
  if y == nil then     -- C counts labels from 0; the message names the user's 1-based label
    raise((core.last_error():gsub("target label (%-?%d+) is out of range for (%d+) classes %(0%-based%)",
      function(l, c) return ("target label %d is out of range for %s classes (labels are 1-based)"):format(l + 1, c) end)))
  end
  y = core.wrap(y)
  return (batched or reduction ~= "none") and y or y:reshape({})
end

--- F.ctc_loss(log_probs, targets, input_lengths, target_lengths[, {blank = 1, reduction = "mean", zero_infinity = false}]) -> Tensor
--- Connectionist temporal classification loss of log_probs (T, N, C) (or (T, C)) against 1-based labels, padded (N, S) or concatenated; "mean" divides each loss by its target length. CPU tensors run a C kernel eagerly; tide.compile and OpenCL the composite of ops.
function M.ctc_loss(log_probs, targets, input_lengths, target_lengths, opts)
  local fname = "ctc_loss"
  float_tensor(fname, log_probs, 1, "log_probs")
  if not is_tensor(targets) then argerr(2, fname, "Tensor", targets) end
  opts = args.opts(fname, opts, "blank reduction zero_infinity", 5)
  local reduction = reduction_of(fname, opts)
  local zero_inf = bool_option(fname, "zero_infinity", opts.zero_infinity)
  local blank = number_option(fname, "blank", opts.blank, 1, args.is_int, "an integer")
  local batched = log_probs.ndim == 3
  if log_probs.ndim ~= 2 and not batched then
    raise(("%s: log_probs must be (T, N, C) or (T, C), got %s"):format(fname, shape_str(log_probs)))
  end
  local lp = batched and log_probs or log_probs:unsqueeze(2)
  local T, N, C = lp:size(1), lp:size(2), lp:size(3)
  if blank < 1 or blank > C then
    raise(("%s: blank %d is out of range for %d classes (1-based)"):format(fname, blank, C))
  end
  if targets.dtype.is_floating_point or targets.dtype.name == "bool" then
    raise(("%s: targets must be an integer tensor of 1-based labels, got %s"):format(fname, targets.dtype.name))
  end
  local ilen, inums = lengths(fname, input_lengths, N, "input_lengths", 3, lp.device)
  local tlen, tnums = lengths(fname, target_lengths, N, "target_lengths", 4, lp.device)
  local tg = targets:long()
  if not batched then
    if tg.ndim ~= 1 then raise(("%s: unbatched targets must be 1-D, got %s"):format(fname, shape_str(tg))) end
    tg = tg:unsqueeze(1)
  end
  if ctc_fused(lp) then return ctc_kernel(lp, tg, ilen, tlen, blank, reduction, zero_inf, batched) end
  if tg.ndim == 1 then
    -- concatenated: cut into rows padded with the blank (needs the lengths as numbers)
    if not tnums then
      raise(fname .. ": concatenated targets need target_lengths as data, which tide.compile does not trace; "
        .. "pass padded (N, S) targets or the lengths as a table")
    end
    local total, smax = 0, 0
    for i = 1, N do total = total + tnums[i]; smax = math.max(smax, tnums[i]) end
    if total ~= tg:size(1) then
      raise(("%s: concatenated targets hold %d labels, target_lengths sum to %d"):format(fname, tg:size(1), total))
    end
    local rows, off = {}, 1
    for i = 1, N do
      local len = tnums[i]
      local r = len > 0 and tg:narrow(1, off, len) or nil
      if len < smax then
        local pad = tide.tensor({ blank }, { dtype = tide.int64, device = tg.device }):expand(smax - len)
        r = r and tensor.cat({ r, pad }, 1) or pad
      end
      rows[i] = (r or tg:narrow(1, 1, 0)):reshape(1, smax)
      off = off + len
    end
    tg = smax == 0 and tg:reshape(N, 0) or tensor.cat(rows, 1)
  elseif tg.ndim ~= 2 or tg:size(1) ~= N then
    raise(("%s: targets must be (N, S) padded or 1-D concatenated for log_probs %s, got %s"):format(fname,
      shape_str(log_probs), shape_str(targets)))
  end
  local S = tg:size(2)
  if inums then
    for i = 1, N do
      if inums[i] < 0 or inums[i] > T then
        raise(("%s: input_lengths[%d] = %d is outside 0..%d (T)"):format(fname, i, inums[i], T))
      end
    end
  end
  if tnums then
    for i = 1, N do
      if tnums[i] < 0 or tnums[i] > S then
        raise(("%s: target_lengths[%d] = %d is outside 0..%d (the targets' length)"):format(fname, i, tnums[i], S))
      end
    end
  end
  -- labels past each target's length are padding: read as blank
  local inside = tide.arange(1, S + 1, 1, { dtype = tide.int64, device = lp.device }):reshape(1, S):le(tlen:reshape(N, 1))
  tg = where(inside, tg, blank)
  if S > 0 and not core.tracing() then
    local lo, hi = tg:min():item(), tg:max():item()
    if lo < 1 or hi > C then
      raise(("%s: target label %d is out of range for %d classes (labels are 1-based)"):format(fname,
        lo < 1 and lo or hi, C))
    end
  end
  -- extended labels (N, L): blank, l1, blank, l2, ..., blank
  local L = 2 * S + 1
  local ext = tensor.stack({ where(tg:eq(tg), blank, blank), tg }, 3):reshape(N, 2 * S)
  ext = tensor.cat({ ext, tide.tensor({ blank }, { dtype = tide.int64, device = ext.device }):expand(N, 1) }, 2)
  local lpx = lp:gather(3, ext:reshape(1, N, L):expand(T, N, L))          -- (T, N, L)
  local skip                                                                 -- j - 2 -> j allowed
  if L >= 3 then
    local e2 = tensor.cat({ ext:narrow(2, 1, 2) * 0 - 1, ext:narrow(2, 1, L - 2) }, 2)
    skip = ext:ne(blank):logical_and(ext:ne(e2))
  end
  local F = package.loaded["tide.nn.functional"] or require "tide.nn.functional"
  local j = tide.arange(1, L + 1, 1, { dtype = tide.int64, device = lp.device }):reshape(1, L)
  local alpha = where(j:le(2), lpx[1], NEG)
  for t = 2, T do
    local prev = alpha
    local terms = { prev }
    if L >= 2 then terms[2] = F.pad(prev:narrow(2, 1, L - 1), { 1, 0 }, { value = NEG }) end
    if L >= 3 then terms[3] = where(skip, F.pad(prev:narrow(2, 1, L - 2), { 2, 0 }, { value = NEG }), NEG) end
    local nxt = (#terms == 1 and prev or tensor.stack(terms, 3):logsumexp(3)) + lpx[t]
    alpha = where(ilen:reshape(N, 1):ge(t), nxt, prev)     -- a sequence's alpha stops at its length
  end
  -- log-likelihood: the paths ending on the last label or the final blank
  local last = (tlen * 2 + 1):reshape(N, 1)
  local a1 = alpha:gather(2, last):reshape(N)
  local a0 = where(tlen:gt(0), alpha:gather(2, (last - 1):clamp(1)):reshape(N), NEG)
  local ll = tensor.stack({ a1, a0 }, 2):logsumexp(2)
  ll = where(ilen:eq(0), where(tlen:eq(0), ll * 0, NEG), ll)
  local nll = -ll
  local impossible = nll:ge(-NEG / 10)
  nll = where(impossible, zero_inf and 0 or math.huge, nll)
  if reduction == "mean" then
    return (nll / tlen:clamp(1):to(nll.dtype)):mean()
  elseif reduction == "sum" then
    return nll:sum()
  end
  return batched and nll or nll:reshape({})
end

return M
