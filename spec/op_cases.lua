-- The op-table cases shared by the conformance specs: for every differentiable
-- op, cases { label, fn, make_inputs[, gradcheck opts] } on fresh random float64
-- leaves (odd sizes 1, 7, 1023, non-contiguous views, broadcasting, Lua
-- numbers), and the non-differentiable ops with one call each. Used by
-- spec/jit/gradcheck_spec.lua (central differences) and spec/opencl/ops_spec.lua
-- (the OpenCL device against the CPU).
local tide = require "tide"
local H = require "helper"
local tensor = require "tide.tensor"
local sdpa = tide.nn.functional.scaled_dot_product_attention

-- -- Inputs -----------------------------------------------------------------------------------
-- Every generator returns a fresh contiguous float64 leaf that requires grad
-- (gradcheck perturbs it in place; views are taken inside the function).
-- Index tensors are inputs too, so that a device run can move them.

local function leaf(t) return t:detach():contiguous():requires_grad_() end
local function unif(lo, hi) return function(shape) return H.rand64(shape, lo, hi) end end
local any = unif(-2, 2)
local pos = unif(0.3, 2)

-- magnitudes in (lo, hi) with random signs: away from 0 (abs, relu, sign, division)
local function away(lo, hi)
  return function(shape)
    local m = tide.rand(shape, { dtype = "float64" }) * (hi - lo) + lo
    return leaf(m * tide.rand(shape, { dtype = "float64" }):gt(0.5):where(1, -1))
  end
end
local nonzero = away(0.2, 2)
-- away from the clamp bounds -0.5 and 0.5: magnitudes in (0.05, 0.4) or (0.6, 2)
local function banded(shape)
  local m = tide.rand(shape, { dtype = "float64" })
  m = m:lt(0.3):where(m + 0.05, m * 2)                        -- (0.05, 0.35) or (0.6, 2)
  return leaf(m * tide.rand(shape, { dtype = "float64" }):gt(0.5):where(1, -1))
end
-- away from integers and half integers (floor, ceil, round): k + (0.1, 0.4) or k + (0.6, 0.9)
local function offgrid(shape)
  local k = tide.randint(-3, 3, shape, { dtype = "float64" })
  local f = tide.rand(shape, { dtype = "float64" }) * 0.3 + 0.1
  return leaf(k + tide.rand(shape, { dtype = "float64" }):gt(0.5):where(f, f + 0.5))
end

-- 1-based int64 index tensors
local function idx(list) return tide.tensor(list, { dtype = "int64" }) end
local function randidx(shape, n) return tide.randint(1, n + 1, shape, { dtype = "int64" }) end

-- -- Case builders ----------------------------------------------------------------------------
-- A case is { label, fn, make_inputs[, gradcheck opts] }.

local function unary(f, gen)
  gen = gen or any
  return {
    { "7", f, function() return { gen { 7 } } end },
    { "1", f, function() return { gen { 1 } } end },
    { "0-dim", f, function() return { gen {} } end },
    { "1023", f, function() return { gen { 1023 } } end },
    { "transposed", function(x) return f(x:t()) end, function() return { gen { 5, 3 } } end },
    { "strided slice", function(x) return f(x[{ {}, { 1, 7, 2 } }]) end, function() return { gen { 3, 7 } } end },
    { "expanded", function(x) return f(x:expand(3, 7)) end, function() return { gen { 1, 7 } } end },
  }
end

local function binary(f, ga, gb)
  ga, gb = ga or any, gb or ga or any
  return {
    { "7 with 7", f, function() return { ga { 7 }, gb { 7 } } end },
    { "1 with 1", f, function() return { ga { 1 }, gb { 1 } } end },
    { "broadcast (3,1) with (4)", f, function() return { ga { 3, 1 }, gb { 4 } } end },
    { "broadcast (4) with (2,3,1)", f, function() return { ga { 4 }, gb { 2, 3, 1 } } end },
    { "broadcast with 0-dim", f, function() return { ga { 2, 3 }, gb {} } end },
    { "transposed with strided", function(a, b) return f(a:t(), b[{ {}, { 1, 5, 2 } }]) end,
      function() return { ga { 3, 7 }, gb { 7, 5 } } end },
    { "expanded with 7", function(a, b) return f(a:expand(2, 7), b) end, function() return { ga { 7 }, gb { 7 } } end },
    { "number on the right", function(a) return f(a, 0.75) end, function() return { ga { 7 } } end },
    { "number on the left", function(b) return f(1.25, b) end, function() return { gb { 7 } } end },
  }
end

local function reduction(f, gen)
  gen = gen or any
  return {
    { "all dims", function(x) return f(x) end, function() return { gen { 3, 5 } } end },
    { "dim 1", function(x) return f(x, 1) end, function() return { gen { 3, 5 } } end },
    { "dim -1 keepdim", function(x) return f(x, -1, true) end, function() return { gen { 3, 5 } } end },
    { "dims {1,3}", function(x) return f(x, { 1, 3 }) end, function() return { gen { 3, 2, 5 } } end },
    { "size 1", function(x) return f(x, 1) end, function() return { gen { 1 } } end },
    { "size 7", function(x) return f(x) end, function() return { gen { 7 } } end },
    { "transposed, dim 2", function(x) return f(x:t(), 2) end, function() return { gen { 5, 3 } } end },
    { "expanded, dim 1", function(x) return f(x:expand(4, 3), 1) end, function() return { gen { 1, 3 } } end },
  }
end

local function scan(f, gen)
  gen = gen or any
  return {
    { "dim 2 of (3,5)", function(x) return f(x, 2) end, function() return { gen { 3, 5 } } end },
    { "dim 1 of (4,3)", function(x) return f(x, 1) end, function() return { gen { 4, 3 } } end },
    { "dim 2 of (2,3,4)", function(x) return f(x, 2) end, function() return { gen { 2, 3, 4 } } end },
    { "1023", function(x) return f(x, 1) end, function() return { gen { 1023 } } end },
    { "0-dim", function(x) return f(x, 1) end, function() return { gen {} } end },
    { "transposed, dim -1", function(x) return f(x:t(), -1) end, function() return { gen { 5, 3 } } end },
  }
end

local function cat(a, b) for _, v in ipairs(b) do a[#a + 1] = v end return a end

-- slice_scatter has no Lua method: call it through the op table
local function slice_scatter(base, src, dim, start, stop, step)
  local at = tensor.attrs()
  at.i[0], at.i[1], at.i[2], at.i[3] = dim - 1, start - 1, stop, step or 1
  return tensor.opn(require("tide.core").OP.slice_scatter, { base, src }, at)
end

-- -- Non-differentiable ops -------------------------------------------------------------------
-- Each returns a result that must not require grad although its input does.

local NODIFF = {
  eq = function(x) return x:eq(0.5) end, ne = function(x) return x:ne(0.5) end,
  lt = function(x) return x:lt(0.5) end, le = function(x) return x:le(0.5) end,
  gt = function(x) return x:gt(0.5) end, ge = function(x) return x:ge(0.5) end,
  logical_and = function(x) return tide.logical_and(x, x:gt(0)) end,
  logical_or = function(x) return tide.logical_or(x, x:gt(0)) end,
  logical_not = function(x) return tide.logical_not(x) end,
  argmax = function(x) return x:argmax(2) end,
  argmin = function(x) return x:argmin() end,
  -- sorting and searching give indices (values are gathered at them: gather's cases)
  sort = function(x) return x:argsort(2, true) end,
  topk = function(x) local _, i = x:topk(2, 1, false); return i end,
  mode = function(x) local _, i = x:round():mode(2); return i end,
  searchsorted = function(x) return tide.searchsorted((x:sort(2)), x) end,
  -- the index records of cummax/cummin inside a trace, called through the op table here
  cumargmax = function(x) local at = tensor.attrs(); at.i[0] = 1; return tensor.op1(require("tide.core").OP.cumargmax, x, at) end,
  cumargmin = function(x) local at = tensor.attrs(); at.i[0] = 0; return tensor.op1(require("tide.core").OP.cumargmin, x, at) end,
  -- the fused backward runs when no graph of the gradient is recorded: dq, dk, dv of
  -- attention over x's rows (on a device: the composite formula's gradients)
  sdpa_backward = function(x)
    local q, k, v = x:view(1, 3, 5), (x * 0.5):view(1, 3, 5), (x + 1):view(1, 3, 5)
    q, k, v = q:detach():requires_grad_(), k:detach():requires_grad_(), v:detach():requires_grad_()
    local g = tide.autograd.grad({ sdpa(q, k, v, { is_causal = true }):sum() }, { q, k, v })
    return tide.cat({ g[1]:view(-1), g[2]:view(-1), g[3]:view(-1) }, 1)
  end,
}

-- -- Differentiable ops -------------------------------------------------------------------------

local function m(name) return function(x, ...) return x[name](x, ...) end end
local gelu_tanh = function(x) return x:gelu { approximate = "tanh" } end

local CASES = {
  neg = unary(m "neg"), abs = unary(m "abs", nonzero), sign = unary(m "sign", nonzero),
  exp = unary(m "exp"), log = unary(m "log", pos), log1p = unary(m "log1p", unif(-0.5, 2)),
  expm1 = unary(m "expm1"), sqrt = unary(m "sqrt", pos), rsqrt = unary(m "rsqrt", pos),
  sin = unary(m "sin"), cos = unary(m "cos"), tan = unary(m "tan", unif(-1.2, 1.2)),
  tanh = unary(m "tanh"), sigmoid = unary(m "sigmoid"), relu = unary(m "relu", nonzero),
  gelu = cat(unary(m "gelu", unif(-3, 3)), {
    { "tanh form 7", gelu_tanh, function() return { unif(-3, 3) { 7 } } end },
    { "tanh form transposed", function(x) return gelu_tanh(x:t()) end, function() return { unif(-3, 3) { 5, 3 } } end },
  }),
  silu = unary(m "silu", unif(-4, 4)), erf = unary(m "erf"),
  floor = unary(m "floor", offgrid), ceil = unary(m "ceil", offgrid), round = unary(m "round", offgrid),
  clamp = cat(unary(function(x) return x:clamp(-0.5, 0.5) end, banded), {
    { "min only", function(x) return x:clamp(-0.5) end, function() return { banded { 7 } } end },
    { "max only", function(x) return x:clamp(nil, 0.5) end, function() return { banded { 7 } } end },
  }),
  -- float64 -> float32 -> float64: central differences see float32 rounding, hence the large eps
  cast = {
    { "to float32", function(x) return x:float() end, function() return { any { 7 } } end, { eps = 1e-2, atol = 1e-4 } },
    { "to float32, transposed", function(x) return x:t():float() end, function() return { any { 5, 3 } } end,
      { eps = 1e-2, atol = 1e-4 } },
  },
  add = binary(tide.add), sub = binary(tide.sub), mul = binary(tide.mul),
  div = binary(tide.div, any, nonzero),
  pow = cat(binary(tide.pow, pos, unif(-1.5, 1.5)), {
    { "integer exponent 3, negative base", function(x) return x ^ 3 end, function() return { nonzero { 7 } } end },
  }),
  minimum = binary(tide.minimum), maximum = binary(tide.maximum),
  atan2 = binary(tide.atan2, any, nonzero), hypot = binary(tide.hypot, nonzero),
  -- |a / b| in (0.05, 0.84): away from the jumps of fmod and remainder at integer quotients
  fmod = binary(tide.fmod, away(0.1, 0.5), away(0.6, 2)), remainder = binary(tide.remainder, away(0.1, 0.5), away(0.6, 2)),
  where = {
    { "(7)", function(c, a, b) return tide.where(c, a, b) end,
      function() return { tide.rand(7):gt(0.5), any { 7 }, any { 7 } } end },
    { "broadcast cond (3,1), a (4), b 0-dim", function(c, a, b) return tide.where(c, a, b) end,
      function() return { tide.tensor { { true }, { false }, { true } }, any { 4 }, any {} } end },
    { "transposed a, number b", function(c, a) return tide.where(c, a:t(), 0.5) end,
      function() return { tide.rand(3, 5):gt(0.5), any { 5, 3 } } end },
  },

  sum = reduction(m "sum"), mean = reduction(m "mean"),
  prod = cat(reduction(m "prod", away(0.5, 1.5)), {
    -- exact zeros: one in row 1, two in row 2, none in row 3
    { "with zeros, dim 2", function(x) return x:prod(2) end, function()
      local x = any { 3, 5 }:detach()
      x[{ 1, 2 }] = 0; x[{ 2, 1 }] = 0; x[{ 2, 4 }] = 0
      return { leaf(x) } end },
    { "with a zero, all dims", function(x) return x:prod() end, function()
      local x = any { 7 }:detach()
      x[4] = 0
      return { leaf(x) } end },
  }),
  max = cat(reduction(function(x, d, k) return (x:max(d, k)) end), {
    { "all dims of (3,5)", function(x) return x:max() end, function() return { any { 3, 5 } } end },
  }),
  min = reduction(function(x, d, k) return (x:min(d, k)) end),
  var = cat(reduction(function(x, d, k) return x:var(d, { keepdim = k }) end), {
    { "dim 2, correction 0", function(x) return x:var(2, { correction = 0 }) end, function() return { any { 3, 5 } } end },
  }),
  std = reduction(function(x, d, k) return x:std(d, { keepdim = k }) end),
  logsumexp = reduction(function(x, d, k) if d == nil then return x:logsumexp() end return x:logsumexp(d, k) end),
  norm = cat(reduction(function(x, d, k) return x:norm(2, d, k) end, nonzero), {
    { "p=1, dim 2", function(x) return x:norm(1, 2) end, function() return { nonzero { 3, 5 } } end },
    { "p=3, all", function(x) return x:norm(3) end, function() return { nonzero { 3, 5 } } end },
    { "p=inf, dim 1", function(x) return x:norm("inf", 1) end, function() return { nonzero { 4, 3 } } end },
  }),

  cumsum = scan(m "cumsum"), cummax = scan(function(x, d) return (x:cummax(d)) end),
  cummin = scan(function(x, d) return (x:cummin(d)) end), logcumsumexp = scan(m "logcumsumexp"),
  cumprod = cat(scan(m "cumprod"), {
    -- exact zeros: one in row 1 (position 2), two in row 2, none in row 3
    { "with zeros, dim 2", function(x) return x:cumprod(2) end, function()
      local x = any { 3, 5 }:detach()
      x[{ 1, 2 }] = 0; x[{ 2, 1 }] = 0; x[{ 2, 4 }] = 0
      return { leaf(x) } end },
  }),

  softmax = {
    { "dim -1 of (3,7)", function(x) return x:softmax(-1) end, function() return { any { 3, 7 } } end },
    { "dim 1 of (3,7)", function(x) return x:softmax(1) end, function() return { any { 3, 7 } } end },
    { "dim 2 of (2,3,4)", function(x) return x:softmax(2) end, function() return { any { 2, 3, 4 } } end },
    { "size 1", function(x) return x:softmax(1) end, function() return { any { 1 } } end },
    { "transposed", function(x) return x:t():softmax(-1) end, function() return { any { 5, 3 } } end },
  },
  log_softmax = {
    { "dim -1 of (3,7)", function(x) return x:log_softmax(-1) end, function() return { any { 3, 7 } } end },
    { "dim 1 of (3,7)", function(x) return x:log_softmax(1) end, function() return { any { 3, 7 } } end },
    { "dim 3 of (2,3,4)", function(x) return x:log_softmax(3) end, function() return { any { 2, 3, 4 } } end },
    { "transposed", function(x) return x:t():log_softmax(-1) end, function() return { any { 5, 3 } } end },
  },

  matmul = {
    { "(3,4) @ (4,5)", tide.matmul, function() return { any { 3, 4 }, any { 4, 5 } } end },
    { "transposed operands", function(a, b) return a:t():matmul(b:t()) end,
      function() return { any { 4, 3 }, any { 5, 4 } } end },
    { "(7) . (7)", tide.matmul, function() return { any { 7 }, any { 7 } } end },
    { "(4) @ (4,5)", tide.matmul, function() return { any { 4 }, any { 4, 5 } } end },
    { "(3,4) @ (4)", tide.matmul, function() return { any { 3, 4 }, any { 4 } } end },
    { "(1,1) @ (1,1)", tide.matmul, function() return { any { 1, 1 }, any { 1, 1 } } end },
    { "batched broadcast (2,1,3,4) @ (5,4,2)", tide.matmul, function() return { any { 2, 1, 3, 4 }, any { 5, 4, 2 } } end },
    { "(2,3,4) @ (4)", tide.matmul, function() return { any { 2, 3, 4 }, any { 4 } } end },
    { "(4) @ (2,4,3)", tide.matmul, function() return { any { 4 }, any { 2, 4, 3 } } end },
  },

  view = {
    { "(3,4) -> (2,6)", function(x) return x:view(2, 6) end, function() return { any { 3, 4 } } end },
    { "unsqueeze / squeeze / flatten", function(x) return x:unsqueeze(2):flatten():view(7, 1):squeeze() end,
      function() return { any { 7 } } end },
    { "reshape of a transposed view", function(x) return x:t():reshape(15) end, function() return { any { 3, 5 } } end },
    { "0-dim -> (1)", function(x) return x:view(1) end, function() return { any {} } end },
  },
  permute = {
    { "(2,3,4) -> (4,2,3)", function(x) return x:permute(3, 1, 2) end, function() return { any { 2, 3, 4 } } end },
    { "t", function(x) return x:t() * 1 end, function() return { any { 3, 7 } } end },
  },
  expand = {
    { "(3,1) -> (4,3,5)", function(x) return x:expand(4, 3, 5) end, function() return { any { 3, 1 } } end },
    { "(1) -> (7)", function(x) return x:expand(7) end, function() return { any { 1 } } end },
  },
  slice = {
    { "narrow dim 2", function(x) return x:narrow(2, 2, 3) end, function() return { any { 3, 7 } } end },
    { "step 2", function(x) return x[{ {}, { 1, 7, 2 } }] end, function() return { any { 3, 7 } } end },
    { "of a transposed view", function(x) return x:t()[{ { 2, 4 } }] end, function() return { any { 3, 5 } } end },
  },
  select = {
    { "row 2", function(x) return x[2] end, function() return { any { 3, 7 } } end },
    { "dim 2, last", function(x) return x:select(2, -1) end, function() return { any { 3, 7 } } end },
    { "of (1)", function(x) return x[1] end, function() return { any { 1 } } end },
  },
  copy = {
    { "clone", function(x) return x:clone() end, function() return { any { 7 } } end },
    { "contiguous of a transposed view", function(x) return x:t():contiguous() end, function() return { any { 3, 5 } } end },
  },

  index_select = {
    { "dim 1, repeated indices", function(x, i) return x:index_select(1, i) end,
      function() return { any { 3, 4 }, idx { 3, 1, 3, 2 } } end },
    { "dim 2, random indices", function(x, i) return x:index_select(2, i) end,
      function() return { any { 3, 7 }, randidx({ 9 }, 7) } end },
    { "of a transposed view", function(x, i) return x:t():index_select(1, i) end,
      function() return { any { 3, 5 }, idx { 2, 2 } } end },
  },
  index_add = {
    { "dim 1, both inputs", function(x, s, i) return x:index_add(1, i, s) end,
      function() return { any { 3, 4 }, any { 3, 4 }, idx { 2, 1, 2 } } end },
    { "dim 2, transposed source", function(x, s, i) return x:index_add(2, i, s:t()) end,
      function() return { any { 3, 5 }, any { 2, 3 }, idx { 5, 1 } } end },
  },
  gather = {
    { "dim 2", function(x, i) return x:gather(2, i) end, function() return { any { 3, 5 }, randidx({ 3, 4 }, 5) } end },
    { "dim 1, transposed input", function(x, i) return x:t():gather(1, i) end,
      function() return { any { 4, 3 }, randidx({ 5, 4 }, 3) } end },
  },
  scatter_add = {
    { "dim 2, both inputs", function(x, s, i) return x:scatter_add(2, i, s) end,
      function() return { any { 3, 5 }, any { 3, 4 }, randidx({ 3, 4 }, 5) } end },
    { "dim 1, source larger than index", function(x, s, i) return x:scatter_add(1, i, s) end,
      function() return { any { 3, 4 }, any { 4, 5 }, randidx({ 2, 4 }, 3) } end },
  },
  slice_scatter = {
    { "dim 2, 2:4", function(b, s) return slice_scatter(b, s, 2, 2, 4) end,
      function() return { any { 3, 5 }, any { 3, 3 } } end },
    { "dim 1, step 2", function(b, s) return slice_scatter(b, s, 1, 1, 7, 2) end,
      function() return { any { 7, 2 }, any { 4, 2 } } end },
  },
  unfold = {
    { "3x2 kernel, stride, padding, dilation", function(x) return tide.im2col(x, { 3, 2 }, { stride = { 2, 1 }, padding = 1, dilation = { 1, 2 } }) end,
      function() return { any { 2, 3, 5, 4 } } end },
    { "1x1 kernel on a permuted view", function(x) return tide.im2col(x:permute(1, 2, 4, 3), 1) end,
      function() return { any { 1, 2, 3, 2 } } end },
  },
  fold = {
    { "overlapping 2x2 windows", function(c) return tide.col2im(c, { 4, 3 }, 2) end,
      function() return { any { 2, 8, 6 } } end },
    { "stride 2, padding 1", function(c) return tide.col2im(c, { 5, 5 }, 3, { stride = 2, padding = 1 }) end,
      function() return { any { 1, 9, 9 } } end },
  },
  cat = {
    { "dim 1", function(a, b, c) return tide.cat({ a, b, c }, 1) end,
      function() return { any { 2, 3 }, any { 1, 3 }, any { 4, 3 } } end },
    { "dim 2, transposed piece", function(a, b) return tide.cat({ a, b:t() }, 2) end,
      function() return { any { 3, 2 }, any { 5, 3 } } end },
    { "stack", function(a, b) return tide.stack({ a, b }, 2) end, function() return { any { 7 }, any { 7 } } end },
  },
  sdpa = {
    { "causal, batch (2,3), 7 queries and keys", function(q, k, v) return sdpa(q, k, v, { is_causal = true }) end,
      function() return { any { 2, 3, 7, 5 }, any { 2, 3, 7, 5 }, any { 2, 3, 7, 4 } } end },
    { "3 queries against 17 keys, scale 0.3", function(q, k, v) return sdpa(q, k, v, { scale = 0.3 }) end,
      function() return { any { 3, 5 }, any { 17, 5 }, any { 17, 2 } } end },
    { "causal, more keys than queries, transposed key", function(q, k, v)
        return sdpa(q, k:transpose(2, 3), v, { is_causal = true })
      end, function() return { any { 1, 4, 6 }, any { 1, 6, 9 }, any { 1, 9, 3 } } end },
  },
}

return { CASES = CASES, NODIFF = NODIFF, offgrid = offgrid }
