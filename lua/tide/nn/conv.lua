--[[
tide.nn.conv -- convolution, pooling and batch normalization as functions
(merged into tide.nn.functional): conv1d, conv2d, max_pool2d, avg_pool2d,
adaptive_avg_pool2d, batch_norm. Convolutions are im2col (the unfold op in
the op table) + one batched matmul per call; pooling reduces the windows.
Shapes as PyTorch: input (N, C, H, W), weight (O, C/groups, kh, kw).
--]]
local tide = require "tide"
local core = require "tide.core"
local raise, is_tensor = core.raise, core.is_tensor
local args = require "tide.args"

local F = {}
local ffi, C = core.ffi, core.C

local function pair(v) if type(v) == "number" then return { v, v } end return v end

-- the fused eager kernels (jit/jit_conv.c) where tide.nn.functional allows them
local function fused_ok(...)
  local Fn = package.loaded["tide.nn.functional"]
  return Fn and Fn._fused_ok(...)
end
local params = ffi.new("int64_t[8]")
local function set_params(...)
  local v = { ... }
  for i = 1, #v do
    if type(v[i]) ~= "number" or v[i] ~= math.floor(v[i]) then return false end
    params[i - 1] = v[i]
  end
  return true
end
local idxp = ffi.new("td_tensor *[1]")
local statp = ffi.new("td_tensor *[2]")

-- output plane size of a window (k, stride st, padding pd, dilation dl) over H x W
local function out_size(H, W, k, st, pd, dl)
  return math.floor((H + 2 * pd[1] - dl[1] * (k[1] - 1) - 1) / st[1]) + 1,
         math.floor((W + 2 * pd[2] - dl[2] * (k[2] - 1) - 1) / st[2]) + 1
end
local shape = require("tide.tensor").shape_str   -- "[2,3]"

-- a list's entries as strings (for messages: entries can be anything)
local function show_list(t)
  local s = {}
  for i = 1, #t do s[i] = type(t[i]) == "number" and tostring(t[i]) or args.typename(t[i]) end
  return s
end

-- an optional tensor argument: nil or a live Tensor
local function opt_tensor(v, n, fname)
  if v ~= nil and (not is_tensor(v) or v.p == nil) then args.argerr(n, fname, "Tensor or nil", v) end
  return v
end

-- an int or a pair of ints (kernel_size, padding, ...) -> {a, b}
local function pair_arg(v, what, fname, argn)
  if args.is_int(v) then return { v, v } end
  if type(v) == "table" and not is_tensor(v) and #v == 2 and args.is_int(v[1]) and args.is_int(v[2]) then
    return { v[1], v[2] }
  end
  args.argerr(argn, fname, "integer or pair of integers " .. what, v)
end

local function check4(fname, x)
  if not is_tensor(x) then raise(("bad argument #1 to '%s' (Tensor expected, got %s)"):format(fname, type(x))) end
  if x:dim() ~= 4 then raise(("%s: expected a 4-D input (N, C, H, W), got %s"):format(fname, shape(x))) end
end

-- conv2d(input, weight, bias, {stride=1, padding=0, dilation=1, groups=1})
--- F.conv2d(x, weight[, bias][, {stride = 1, padding = 0, dilation = 1, groups = 1}]) -> Tensor
--- 2-D convolution of x (N, C, H, W) with weight (O, C/groups, kh, kw).
function F.conv2d(x, w, b, opts)
  opts = args.opts("conv2d", opts, "stride padding dilation groups", 4)
  check4("conv2d", x)
  opt_tensor(b, 3, "conv2d")
  if not is_tensor(w) or w:dim() ~= 4 then
    raise(("conv2d: weight must be a 4-D tensor (O, C/groups, kh, kw), got %s"):format(is_tensor(w) and shape(w) or type(w)))
  end
  local g = opts.groups or 1
  if not args.is_int(g) or g < 1 then args.argerr(4, "conv2d", "positive integer groups", g) end
  local N, Cin, H, W = unpack(x:size())
  local O, Cg, kh, kw = unpack(w:size())
  if Cin % g ~= 0 or O % g ~= 0 or Cg * g ~= Cin then
    raise(("conv2d: input %s with %d groups needs weight (O, %d, kh, kw) and O divisible by %d, got weight %s")
      :format(shape(x), g, Cin % g == 0 and Cin / g or -1, g, shape(w)))
  end
  local st, pd, dl = pair(opts.stride or 1), pair(opts.padding or 0), pair(opts.dilation or 1)
  if fused_ok(x, w, b) and type(st) == "table" and type(pd) == "table" and type(dl) == "table" and
     set_params(st[1], st[2], pd[1], pd[2], dl[1], dl[2]) then
    return core.wrap(C.td_conv2d(x.p, w.p, b and b.p, params, g))
  end
  local cols = tide.im2col(x, { kh, kw }, { stride = opts.stride, padding = opts.padding, dilation = opts.dilation })
  local L = cols:size(3)
  local K = Cg * kh * kw
  local out = w:reshape(g, O / g, K):matmul(cols:view(N, g, K, L))   -- (N, g, O/g, L)
  local OH, OW = out_size(H, W, { kh, kw }, pair(opts.stride or 1), pair(opts.padding or 0), pair(opts.dilation or 1))
  out = out:reshape(N, O, OH, OW)
  if b ~= nil then out = out + b:view(1, O, 1, 1) end
  return out
end

-- conv1d(input (N, C, L), weight (O, C/groups, k), bias, opts): conv2d over a 1-row plane
--- F.conv1d(x, weight[, bias][, opts]) -> Tensor
--- 1-D convolution of x (N, C, L) with weight (O, C/groups, k); opts as conv2d.
function F.conv1d(x, w, b, opts)
  opts = args.opts("conv1d", opts, "stride padding dilation groups", 4)
  if not is_tensor(x) or x:dim() ~= 3 then
    raise(("conv1d: expected a 3-D input (N, C, L), got %s"):format(is_tensor(x) and shape(x) or type(x)))
  end
  if not is_tensor(w) or w:dim() ~= 3 then
    raise(("conv1d: weight must be a 3-D tensor (O, C/groups, k), got %s"):format(is_tensor(w) and shape(w) or type(w)))
  end
  local o2 = { groups = opts.groups, stride = { 1, opts.stride or 1 }, padding = { 0, opts.padding or 0 },
    dilation = { 1, opts.dilation or 1 } }
  local y = F.conv2d(x:unsqueeze(3), w:unsqueeze(3), b, o2)
  return y:squeeze(3)
end

-- windows of each channel plane: (N*C, kh*kw, L) and the output plane size
local function windows(fname, x, kernel, opts)
  check4(fname, x)
  local k = pair_arg(kernel, "kernel_size", fname, 2)
  local o = { stride = opts.stride or k, padding = opts.padding or 0, dilation = opts.dilation or 1 }
  local pd = pair_arg(o.padding, "padding", fname, 3)
  if pd[1] * 2 > k[1] or pd[2] * 2 > k[2] then
    raise(("%s: padding {%d, %d} must be at most half the kernel {%d, %d}"):format(fname, pd[1], pd[2], k[1], k[2]))
  end
  local N, C, H, W = unpack(x:size())
  local cols = tide.im2col(x:reshape(N * C, 1, H, W), k, o)
  local OH, OW = out_size(H, W, k, pair(o.stride), pd, pair(o.dilation))
  return cols, N, C, OH, OW
end

-- the fused kernel's result (and window positions, 0-based), or nil for the composite
local function pool_fused(fname, x, kernel, opts, max)
  if not is_tensor(x) or x:dim() ~= 4 or not fused_ok(x) then return nil end
  local k = pair(kernel)
  local st, pd, dl = pair(opts.stride or k), pair(opts.padding or 0), pair(opts.dilation or 1)
  if type(k) ~= "table" or type(st) ~= "table" or type(pd) ~= "table" or type(dl) ~= "table" or
     not set_params(k[1], k[2], st[1], st[2], pd[1], pd[2], dl[1], dl[2]) then
    return nil
  end
  local y = core.wrap(C.td_pool2d(x.p, max and 1 or 0, params, max and idxp or nil))
  if max then return y, core.wrap(idxp[0]) end
  return y
end

-- PyTorch's max_pool2d indices: the 1-based position h*W + w + 1 of each maximum
-- in its input plane, from t, the 1-based tap of its window (row-major in the
-- kernel): h = oh*sh - ph + ((t-1) // kw)*dh, w = ow*sw - pw + ((t-1) % kw)*dw.
local function plane_indices(t, W, kernel, opts)
  local k = pair(kernel)
  local st, pd, dl = pair(opts.stride or k), pair(opts.padding or 0), pair(opts.dilation or 1)
  local OH, OW, dev = t:size(3), t:size(4), t.device
  local taps = {}
  for a = 0, k[1] - 1 do for b = 0, k[2] - 1 do taps[#taps + 1] = a * dl[1] * W + b * dl[2] end end
  local off = tide.tensor(taps, { dtype = tide.int64, device = dev })
  local rows = (tide.arange(OH, { device = dev }) * st[1] - pd[1]) * W
  local base = rows:view(OH, 1) + (tide.arange(OW, { device = dev }) * st[2] - pd[2]):view(1, OW)
  return off:index_select(1, t:reshape(-1)):view(t:size()) + base + 1   -- index_select is 1-based
end

-- max_pool2d(x, kernel_size, {stride=kernel_size, padding=0, dilation=1, return_indices=false})
-- The padding must never win: the windows are taken of x shifted to be > 0, so
-- im2col's zero padding is below every real value.
--- F.max_pool2d(x, kernel_size[, {stride = kernel_size, padding = 0, dilation = 1, return_indices}]) -> Tensor[, indices]
--- The maximum of each window of x (N, C, H, W); indices (return_indices) are PyTorch's, 1-based: h*W + w + 1 in the input plane.
function F.max_pool2d(x, kernel, opts)
  opts = args.opts("max_pool2d", opts, "stride padding dilation return_indices ceil_mode", 3)
  if opts.ceil_mode then raise("max_pool2d: ceil_mode=true is not supported") end
  check4("max_pool2d", x)
  if x.dtype == tide.bool then raise("max_pool2d: bool input is not supported (convert it, e.g. x:to(tide.uint8))") end
  local y, ix = pool_fused("max_pool2d", x, kernel, opts, true)
  if y then
    if opts.return_indices then return y, plane_indices(ix + 1, x:size(4), kernel, opts) end
    return y
  end
  local shift = 0
  if (opts.padding or 0) ~= 0 then
    -- the shift is a tensor while traced (tide.compile), a number otherwise
    shift = tide.no_grad(function() return core.tracing() and x:min() - 1 or x:min():item() - 1 end)
  end
  local cols, N, C, OH, OW = windows("max_pool2d", shift ~= 0 and x - shift or x, kernel, opts)
  local v, i = cols:max(2)
  v = v:view(N, C, OH, OW)
  if shift ~= 0 then v = v + shift end
  if opts.return_indices then return v, plane_indices(i:view(N, C, OH, OW), x:size(4), kernel, opts) end
  return v
end

-- avg_pool2d(x, kernel_size, {stride=kernel_size, padding=0}): count_include_pad, as PyTorch's default
--- F.avg_pool2d(x, kernel_size[, {stride = kernel_size, padding = 0}]) -> Tensor
--- The mean of each window (padding counted, as PyTorch's default).
function F.avg_pool2d(x, kernel, opts)
  opts = args.opts("avg_pool2d", opts, "stride padding ceil_mode count_include_pad", 3)
  if opts.ceil_mode then raise("avg_pool2d: ceil_mode=true is not supported") end
  if opts.count_include_pad == false then raise("avg_pool2d: count_include_pad=false is not supported") end
  local y = pool_fused("avg_pool2d", x, kernel, opts, false)
  if y then return y end
  local cols, N, C, OH, OW = windows("avg_pool2d", x, kernel, opts)
  return cols:mean(2):view(N, C, OH, OW)
end

-- The (O, I) matrix averaging input positions floor(i I / O) .. ceil((i+1) I / O) - 1
-- (0-based) into output position i, as PyTorch's adaptive pooling windows; built
-- from index tensors in float64 (i I / O is exact for any size that fits memory).
local function adaptive_matrix(O, I, like)
  local o = tide.arange(O, { dtype = tide.float64 }):view(O, 1)
  local i = tide.arange(I, { dtype = tide.float64 }):view(1, I)
  local lo, hi = (o * I / O):floor(), ((o + 1) * I / O):ceil()
  local inside = i:ge(lo):logical_and(i:lt(hi)):to(tide.float64)
  return (inside / (hi - lo)):to(like.dtype):to(like.device)
end

-- adaptive_avg_pool2d(x, output_size): cell (i, j) averages rows
-- floor(i H / OH) .. ceil((i+1) H / OH) - 1 (0-based), as PyTorch. Sizes that
-- divide the input are an average pool; others are y = A_h x A_w^T with the
-- averaging matrices above (two matmuls, any output size, differentiable).
--- F.adaptive_avg_pool2d(x, output_size) -> Tensor
--- Average pooling of x (N, C, H, W) to output_size (a number or {OH, OW}).
function F.adaptive_avg_pool2d(x, output_size)
  check4("adaptive_avg_pool2d", x)
  local o = type(output_size) == "number" and { output_size, output_size } or output_size
  if type(o) ~= "table" or #o ~= 2 or not args.is_int(o[1]) or not args.is_int(o[2]) or o[1] < 1 or o[2] < 1 then
    raise(("adaptive_avg_pool2d: output_size must be a positive integer or a pair of them, got %s")
      :format(args.typename(output_size) == "table" and "{" .. table.concat(show_list(output_size), ", ") .. "}"
        or tostring(output_size)))
  end
  local N, C, H, W = unpack(x:size())
  if H % o[1] == 0 and W % o[2] == 0 then
    return F.avg_pool2d(x, { H / o[1], W / o[2] })
  end
  if o[1] * math.max(H, 1) >= 2 ^ 53 or o[2] * math.max(W, 1) >= 2 ^ 53 or N * C * o[1] * o[2] >= 2 ^ 53 then
    raise(("adaptive_avg_pool2d: size overflows int64 (output {%d, %d} of input %s)"):format(o[1], o[2], shape(x)))
  end
  return adaptive_matrix(o[1], H, x):matmul(x):matmul(adaptive_matrix(o[2], W, x):t())
end

-- batch_norm(x, running_mean, running_var, weight, bias, {training=false, momentum=0.1, eps=1e-5})
-- x (N, C) or (N, C, ...): statistics over every dim but 2. In training the batch
-- statistics normalize (biased variance) and the running ones are updated in
-- place with the unbiased variance, as PyTorch.
--- F.batch_norm(x, running_mean, running_var[, weight[, bias]][, {training = false, momentum = 0.1, eps = 1e-5}]) -> Tensor
--- Normalizes x (N, C, ...) per channel, by batch statistics in training (updating the running ones), else by the running ones.
function F.batch_norm(x, rm, rv, w, b, opts)
  opts = args.opts("batch_norm", opts, "training momentum eps", 6)
  if not is_tensor(x) or x:dim() < 2 then
    raise(("batch_norm: expected an input (N, C, ...), got %s"):format(is_tensor(x) and shape(x) or type(x)))
  end
  local given = { rm, rv, w, b }
  for i = 1, 4 do opt_tensor(given[i], i + 1, "batch_norm") end
  if (rm == nil) ~= (rv == nil) then raise("batch_norm: running_mean and running_var must be given together (or neither)") end
  local C, eps, momentum = x:size(2), opts.eps or 1e-5, opts.momentum or 0.1
  if type(eps) ~= "number" then raise(("batch_norm: eps must be a number, got %s"):format(args.typename(eps))) end
  if type(momentum) ~= "number" then raise(("batch_norm: momentum must be a number, got %s"):format(args.typename(momentum))) end
  local dims, count = { 1 }, x:size(1)
  for d = 3, x:dim() do dims[#dims + 1] = d; count = count * x:size(d) end
  local bshape = { 1, C }
  for _ = 3, x:dim() do bshape[#bshape + 1] = 1 end
  local mean, var
  if opts.training and count >= 2 and fused_ok(x, w, b) then
    -- the fused kernel (jit/jit_fused.c); it returns the batch statistics for the running ones
    local y = core.wrap(core.C.td_batch_norm(x.p, w and w.p, b and b.p, eps, statp, statp + 1))
    local bm, bv = core.wrap(statp[0]), core.wrap(statp[1])
    if rm ~= nil then
      tide.no_grad(function()
        rm:mul_(1 - momentum):add_(bm * momentum)
        rv:mul_(1 - momentum):add_(bv * (momentum * count / (count - 1)))
      end)
    end
    return y
  end
  if opts.training then
    if count < 2 then raise(("batch_norm: expected more than 1 value per channel when training, got input %s"):format(shape(x))) end
    mean = x:mean(dims, true)
    var = x:var(dims, { correction = 0, keepdim = true })
    if rm ~= nil then
      tide.no_grad(function()
        rm:mul_(1 - momentum):add_(mean:detach():view(C) * momentum)
        rv:mul_(1 - momentum):add_(var:detach():view(C) * (momentum * count / (count - 1)))
      end)
    end
  else
    if rm == nil or rv == nil then raise("batch_norm: running_mean and running_var are required when not training") end
    mean, var = rm:view(bshape), rv:view(bshape)
  end
  local y = (x - mean) * (var + eps):rsqrt()
  if w ~= nil then y = y * w:view(bshape) end
  if b ~= nil then y = y + b:view(bshape) end
  return y
end

return F
