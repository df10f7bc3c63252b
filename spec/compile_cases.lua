-- The cases of the compile-equivalence specs (spec/jit/compile_ops_spec.lua on the
-- CPU, spec/opencl/compile_spec.lua on the OpenCL device): for every op of the
-- table, cases { label, fn, make_inputs[, opts] } on fresh random inputs (sizes 1, 7,
-- 1023, broadcasting, 0-dim tensors, non-contiguous operands, integer and bool
-- dtypes), the comparison against eager, and check_case, which compiles
--   out = op(...); loss = (out * w):sum(); loss:backward(); return out
-- and compares it with eager (on a device: with the CPU's eager results).
local tide = require "tide"
local tensor = require "tide.tensor"
local nn, F = tide.nn, tide.nn.functional
local M = {}

-- -- Comparison ---------------------------------------------------------------------------------

local RTOL, ATOL = 1e-5, 1e-5

local function flat(t)
  local v = t:detach():double():contiguous():view(-1):totable()
  return v
end

local function shape_str(t) return "[" .. table.concat(t:size(), ",") .. "]" end

-- got must equal want: same dtype and shape; integer/bool values exactly, floats
-- within |got - want| <= rtol*|want| + atol*max(1, max|want|) (NaN matches NaN)
local function compare(got, want, what, tol)
  tol = tol or {}
  if not tide.is_tensor(got) then error(("%s: expected a tensor, got %s"):format(what, type(got)), 2) end
  if got.dtype ~= want.dtype then
    error(("%s: dtype %s, eager gives %s"):format(what, tostring(got.dtype), tostring(want.dtype)), 2)
  end
  if shape_str(got) ~= shape_str(want) then
    error(("%s: shape %s, eager gives %s"):format(what, shape_str(got), shape_str(want)), 2)
  end
  local g, w = flat(got), flat(want)
  if not want.dtype.is_floating_point then
    for i = 1, #w do
      if g[i] ~= w[i] then
        error(("%s: element %d is %s, eager gives %s (exact comparison)"):format(what, i, tostring(g[i]), tostring(w[i])), 2)
      end
    end
    return
  end
  local rtol, atol = tol.rtol or RTOL, tol.atol or ATOL
  local scale = 1
  for i = 1, #w do if w[i] == w[i] and math.abs(w[i]) ~= math.huge then scale = math.max(scale, math.abs(w[i])) end end
  local worst, wi = -1, nil
  for i = 1, #w do
    local a, b = g[i], w[i]
    local bad
    if b ~= b then bad = a == a
    elseif math.abs(b) == math.huge then bad = a ~= b
    else
      local d = math.abs(a - b)
      local lim = rtol * math.abs(b) + atol * scale
      bad = not (d <= lim)
      if d / lim > worst then worst, wi = d / lim, i end
    end
    if bad then
      error(("%s: element %d is %.9g, eager gives %.9g (|diff| %.3g; rtol %g, atol %g x %.3g)")
        :format(what, i, a, b, math.abs(a - b), rtol, atol, scale), 2)
    end
  end
end

-- -- Inputs ---------------------------------------------------------------------------------------
-- Generators return fresh contiguous float32 leaves that require grad, or
-- integer/bool tensors that do not.

local function leaf(t) return t:detach():contiguous():requires_grad_() end
local function unif(lo, hi) return function(shape) return leaf(tide.rand(shape) * (hi - lo) + lo) end end
local any = unif(-2, 2)
local pos = unif(0.3, 2)
local function away(lo, hi)
  return function(shape)
    local m = tide.rand(shape) * (hi - lo) + lo
    return leaf(m * tide.rand(shape):gt(0.5):where(1, -1))
  end
end
local nonzero = away(0.2, 2)
-- away from the clamp bounds -0.5 and 0.5
local function banded(shape)
  local m = tide.rand(shape)
  m = m:lt(0.3):where(m + 0.05, m * 2)
  return leaf(m * tide.rand(shape):gt(0.5):where(1, -1))
end
-- away from integers and half integers (floor, ceil, round)
local function offgrid(shape)
  local k = tide.randint(-3, 3, shape, { dtype = "float32" })
  local f = tide.rand(shape) * 0.3 + 0.1
  return leaf(k + tide.rand(shape):gt(0.5):where(f, f + 0.5))
end
-- small integers as float32 leaves: comparisons see ties
local function ties(shape) return leaf(tide.randint(-2, 3, shape, { dtype = "float32" })) end
local function ints(shape, dtype) return tide.randint(-5, 6, shape, { dtype = dtype or "int64" }) end
local function smallpos(shape) return tide.randint(0, 4, shape, { dtype = "int64" }) end
-- nonzero integer divisors, either sign
local function nzints(shape)
  local v = tide.randint(1, 6, shape, { dtype = "int64" })
  return tide.where(tide.rand(shape):gt(0.5), v, -v)
end
local function bools(shape) return tide.rand(shape):gt(0.5) end
-- an index tensor made inside a function: on the device of the tensor it indexes
local function idx(list, like) return tide.tensor(list, { dtype = "int64", device = like and like.device }) end
local function randidx(shape, n) return tide.randint(1, n + 1, shape, { dtype = "int64" }) end

-- -- Running a case ---------------------------------------------------------------------------------
-- A case is { label, fn, make_inputs[, opts] }; opts.args maps the inputs to the
-- call's arguments (e.g. a transposed view of a leaf), opts.rtol/atol loosen
-- the comparison.

local function clone_all(xs)
  local r = {}
  for i = 1, #xs do
    local x = xs[i]
    if tide.is_tensor(x) then
      local c = x:detach():clone()
      if x.requires_grad then c:requires_grad_() end
      r[i] = c
    else r[i] = x end
  end
  return r
end

local function identity(...) return ... end

-- inputs copied to device, leaves again
local function to_device(xs, device)
  local r = {}
  for i = 1, #xs do
    local x = xs[i]
    if tide.is_tensor(x) then
      local c = x:detach():to(device)
      if x.requires_grad then c:requires_grad_() end
      r[i] = c
    else r[i] = x end
  end
  return r
end

-- the .grad of every input leaf of `got_in` against the eager CPU run's
local function compare_grads(inputs, e_in, got_in, what, opts)
  for k = 1, #inputs do
    if tide.is_tensor(inputs[k]) and inputs[k].requires_grad then
      local ge, gc = e_in[k].grad, got_in[k].grad
      if ge == nil then
        assert(gc == nil, what .. (": input %d has a .grad here but not eagerly on the CPU"):format(k))
      else
        assert(gc ~= nil, what .. (": input %d has no .grad"):format(k))
        compare(gc:cpu(), ge, what .. (", grad of input %d"):format(k), opts)
      end
    end
  end
end

-- On a device (check_case's third argument): the case eagerly on the device
-- and compiled there, each against the CPU's eager results.
local function check_case_device(label, case, device)
  local fn, make, opts = case[2], case[3], case[4] or {}
  local args_of = opts.args or identity
  local inputs = make()
  local n = #inputs
  local probe = fn(args_of(unpack(clone_all(inputs), 1, n)))
  local w = probe.requires_grad and tide.randn(probe:size()) or nil
  local wd = w and w:to(device)
  local function body(ww) return function(...)
    local out = fn(...)
    if ww then (out * ww):sum():backward() end
    return out
  end end
  local cpu, dev = body(w), body(wd)
  local compiled = tide.compile(dev, { name = label })
  for round = 1, 2 do
    if round == 2 then inputs = make() end
    local e_in = clone_all(inputs)
    local want = cpu(args_of(unpack(e_in, 1, n))):detach()
    for _, mode in ipairs { "eager", "compiled" } do
      local d_in = to_device(inputs, device)
      local got = (mode == "eager" and dev or compiled)(args_of(unpack(d_in, 1, n)))
      local what = ("%s (%s on %s, call %d)"):format(label, mode, device, round)
      assert(tide.is_tensor(got) and got.device:match("^" .. device), what .. ": the result is not on " .. device)
      compare(got:cpu(), want, what .. ", forward", opts)
      compare_grads(inputs, e_in, d_in, what, opts)
    end
  end
  assert(compiled:variants() == 1, ("%s: %d compiled variants after two calls with the same shapes (want 1)")
    :format(label, compiled:variants()))
end

local function check_case(label, case, device)
  if device then return check_case_device(label, case, device) end
  local fn, make, opts = case[2], case[3], case[4] or {}
  local args_of = opts.args or identity
  local inputs = make()
  local n = #inputs
  -- probe: the result's shape, dtype and whether it has a gradient
  local probe = fn(args_of(unpack(clone_all(inputs), 1, n)))
  assert(tide.is_tensor(probe), label .. ": the case must return a tensor")
  local w = nil
  if probe.requires_grad then w = tide.randn(probe:size()) end
  local function body(...)
    local out = fn(...)
    if w then
      local loss = (out * w):sum()
      loss:backward()
    end
    return out
  end
  local compiled = tide.compile(body, { name = label })
  for round = 1, 2 do
    if round == 2 then inputs = make() end
    local e_in, c_in = clone_all(inputs), clone_all(inputs)
    local want = body(args_of(unpack(e_in, 1, n)))
    local got = compiled(args_of(unpack(c_in, 1, n)))
    local what = ("%s (call %d)"):format(label, round)
    compare(got, want:detach(), what .. ", forward", opts)
    for k = 1, n do
      if tide.is_tensor(inputs[k]) and inputs[k].requires_grad then
        local ge, gc = e_in[k].grad, c_in[k].grad
        if ge == nil then
          assert(gc == nil, what .. (": input %d has a .grad after the compiled call but not eagerly"):format(k))
        else
          assert(gc ~= nil, what .. (": input %d has no .grad after the compiled call"):format(k))
          compare(gc, ge, what .. (", grad of input %d"):format(k), opts)
        end
      end
    end
  end
  assert(compiled:variants() == 1, ("%s: %d compiled variants after two calls with the same shapes (want 1)")
    :format(label, compiled:variants()))
end

-- -- Case builders ------------------------------------------------------------------------------------

local function cat(a, ...)
  for _, b in ipairs { ... } do for _, v in ipairs(b) do a[#a + 1] = v end end
  return a
end
local function m(name) return function(x, ...) return x[name](x, ...) end end
local T = function(x) return x:t() end

local function unary(f, gen, extra)
  gen = gen or any
  local cases = {
    { "7", f, function() return { gen { 7 } } end },
    { "1", f, function() return { gen { 1 } } end },
    { "1023", f, function() return { gen { 1023 } } end },
    { "transposed argument", f, function() return { gen { 5, 3 } } end, { args = T } },
    { "strided slice of an expanded view, in a chain", function(x)
        return f(x:expand(3, 7)[{ {}, { 1, 7, 2 } }]) * x[{ { 2, 5 } }] + 1
      end, function() return { gen { 7 } } end },
  }
  return cat(cases, extra or {})
end

-- integer inputs: exact forward only
local function int_unary(f, label)
  return {
    { label or "int64 (3,5)", f, function() return { ints { 3, 5 } } end },
    { "int32, transposed argument", f, function() return { ints({ 5, 3 }, "int32") } end, { args = T } },
  }
end
-- integer input, float result (ops that compute in float)
local function int_to_float(f, gen)
  return { { "int64 input", f, function() return { gen and gen { 3, 5 } or smallpos { 3, 5 } } end } }
end

local function binary(f, ga, gb, extra)
  ga, gb = ga or any, gb or ga or any
  return cat({
    { "7 with 7", f, function() return { ga { 7 }, gb { 7 } } end },
    { "1023 with 1023", f, function() return { ga { 1023 }, gb { 1023 } } end },
    { "broadcast (3,1) with (4)", f, function() return { ga { 3, 1 }, gb { 4 } } end },
    { "broadcast (4) with (2,3,1)", f, function() return { ga { 4 }, gb { 2, 3, 1 } } end },
    { "broadcast with 0-dim", f, function() return { ga { 2, 3 }, gb {} } end },
    { "transposed with strided", function(a, b) return f(a:t(), b[{ {}, { 1, 5, 2 } }]) end,
      function() return { ga { 3, 7 }, gb { 7, 5 } } end },
    { "expanded argument with transposed argument", f, function() return { ga { 1, 3 }, gb { 3, 4 } } end,
      { args = function(a, b) return a:expand(4, 3), b:t() end } },
    { "number on the right", function(a) return f(a, 0.75) end, function() return { ga { 7 } } end },
    { "number on the left", function(b) return f(1.25, b) end, function() return { gb { 7 } } end },
  }, extra or {})
end

local function int_binary(f, gb)
  gb = gb or ints
  return {
    { "int32 (3,1) with int64 (4)", f, function() return { ints({ 3, 1 }, "int32"), gb { 4 } } end },
    { "int64 with float32", f, function() return { ints { 7 }, any { 7 } } end },
    { "int64 with a number", function(a) return f(a, 3) end, function() return { ints { 7 } } end },
  }
end

local function scan(f, gen)
  gen = gen or any
  return {
    { "dim 2 of (3,5)", function(x) return f(x, 2) end, function() return { gen { 3, 5 } } end },
    { "dim 1 of (4,3)", function(x) return f(x, 1) end, function() return { gen { 4, 3 } } end },
    { "dim 2 of (2,3,4), 1023", function(x) return f(x, 2) end, function() return { gen { 2, 1023, 2 } } end },
    { "transposed argument, dim -1", function(x) return f(x:t(), -1) end, function() return { gen { 5, 3 } } end },
  }
end

local function compare_op(f)
  return {
    { "7 with 7 (ties)", f, function() return { ties { 7 }, ties { 7 } } end },
    { "with a number", function(a) return f(a, 1) end, function() return { ties { 7 } } end },
    { "transposed argument with strided", function(a, b) return f(a, b[{ {}, { 1, 13, 2 } }]) end,
      function() return { ties { 7, 3 }, ties { 3, 13 } } end, { args = function(a, b) return a:t(), b end } },
    { "int64 with float32", f, function() return { ints { 7 }, ties { 7 } } end },
  }
end

local function reduction(f, gen, extra)
  gen = gen or any
  return cat({
    { "all dims", function(x) return f(x) end, function() return { gen { 3, 5 } } end },
    { "dim -1 keepdim", function(x) return f(x, -1, true) end, function() return { gen { 3, 5 } } end },
    { "dims {1,3}", function(x) return f(x, { 1, 3 }) end, function() return { gen { 3, 2, 5 } } end },
    { "size 1", function(x) return f(x, 1) end, function() return { gen { 1 } } end },
    { "1023, all dims", function(x) return f(x) end, function() return { gen { 1023 } } end },
    { "(3,1023), dim 2", function(x) return f(x, 2) end, function() return { gen { 3, 1023 } } end },
    { "transposed argument, dim 2", function(x) return f(x, 2) end, function() return { gen { 5, 3 } } end,
      { args = T } },
    { "expanded, dim 1, in a chain", function(x) return f(x:expand(4, 3) * 2 + x, 1) end,
      function() return { gen { 1, 3 } } end },
  }, extra or {})
end

local function slice_scatter(base, src, dim, start, stop, step)
  local at = tensor.attrs()
  at.i[0], at.i[1], at.i[2], at.i[3] = dim - 1, start - 1, stop, step or 1
  return tensor.opn(require("tide.core").OP.slice_scatter, { base, src }, at)
end

local gelu_tanh = function(x) return x:gelu { approximate = "tanh" } end
local function values(f) return function(x, d, k) return (f(x, d, k)) end end
local function indices(name, d) return function(x) local _, i = x[name](x, d); return i end end

-- -- The cases -------------------------------------------------------------------------------------------

local CASES = {
  neg = cat(unary(m "neg"), int_unary(m "neg")),
  abs = cat(unary(m "abs", nonzero), int_unary(m "abs"), { { "0-dim", m "abs", function() return { nonzero {} } end } }),
  sign = cat(unary(m "sign", nonzero), int_unary(m "sign")),
  exp = cat(unary(m "exp"), int_to_float(m "exp"), { { "0-dim", m "exp", function() return { any {} } end } }),
  log = unary(m "log", pos),
  log1p = unary(m "log1p", unif(-0.5, 2)),
  expm1 = unary(m "expm1"),
  sqrt = cat(unary(m "sqrt", pos), int_to_float(m "sqrt")),
  rsqrt = unary(m "rsqrt", pos),
  sin = unary(m "sin"),
  cos = unary(m "cos"),
  tan = unary(m "tan", unif(-1.2, 1.2)),
  tanh = unary(m "tanh"),
  sigmoid = cat(unary(m "sigmoid", unif(-6, 6)), int_to_float(m "sigmoid", ints)),
  relu = cat(unary(m "relu", nonzero), int_unary(m "relu")),
  gelu = cat(unary(m "gelu", unif(-3, 3)), {
    { "tanh form 7", gelu_tanh, function() return { unif(-3, 3) { 7 } } end },
    { "tanh form 1023, transposed argument", gelu_tanh, function() return { unif(-3, 3) { 31, 33 } } end, { args = T } },
  }),
  silu = unary(m "silu", unif(-4, 4)),
  erf = unary(m "erf"),
  floor = cat(unary(m "floor", offgrid), int_unary(m "floor")),
  ceil = cat(unary(m "ceil", offgrid), int_unary(m "ceil")),
  round = cat(unary(m "round", offgrid), {
    { "halves round to even", function(x) return (x + 0.5):round() end,
      function() return { leaf(tide.randint(-4, 4, { 9 }, { dtype = "float32" })) } end },
  }),
  clamp = cat(unary(function(x) return x:clamp(-0.5, 0.5) end, banded), {
    { "min only", function(x) return x:clamp(-0.5) end, function() return { banded { 7 } } end },
    { "max only", function(x) return x:clamp(nil, 0.5) end, function() return { banded { 7 } } end },
    { "int64", function(x) return x:clamp(-2, 3) end, function() return { ints { 3, 5 } } end },
    { "0-dim", function(x) return x:clamp(-0.5, 0.5) end, function() return { banded {} } end },
  }),
  cast = {
    { "float32 to float64", function(x) return x:double() end, function() return { any { 7 } } end },
    { "float32 to float64, transposed argument, in a chain", function(x) return x:double():exp() * 2 end,
      function() return { any { 5, 3 } } end, { args = T } },
    { "float32 to int64 (truncation)", function(x) return x:long() end, function() return { any { 3, 5 } } end },
    { "int64 to float32, in a chain", function(x, y) return x:float() * y end,
      function() return { ints { 7 }, any { 7 } } end },
    { "bool to float32", function(b) return b:float() + 1 end, function() return { bools { 3, 4 } } end },
    { "int64 to int32, transposed argument", function(x) return x:int() end, function() return { ints { 4, 3 } } end,
      { args = T } },
  },
  logical_not = {
    { "bool (7)", function(b) return tide.logical_not(b) end, function() return { bools { 7 } } end },
    { "float32 transposed argument", function(x) return tide.logical_not(x) end, function() return { ties { 5, 3 } } end,
      { args = T } },
    { "of a comparison, 1023", function(x) return tide.logical_not(x:gt(0)) end, function() return { any { 1023 } } end },
  },

  add = cat(binary(tide.add), int_binary(tide.add)),
  sub = cat(binary(tide.sub), int_binary(tide.sub)),
  mul = cat(binary(tide.mul), int_binary(tide.mul)),
  div = cat(binary(tide.div, any, nonzero), int_binary(tide.div, function(s) return randidx(s, 5) end)),
  pow = cat(binary(tide.pow, pos, unif(-1.5, 1.5)), {
    { "integer exponent 3, negative base", function(x) return x ^ 3 end, function() return { nonzero { 7 } } end },
    { "exponent 2 of a 1023 vector", function(x) return x ^ 2 end, function() return { any { 1023 } } end },
    { "exponent 0.5", function(x) return x ^ 0.5 end, function() return { pos { 7 } } end },
    { "int64 with int64", tide.pow, function() return { ints { 3, 4 }, smallpos { 3, 4 } } end },
    { "int64 with a number", function(a) return a ^ 2 end, function() return { ints { 7 } } end },
  }),
  atan2 = binary(tide.atan2, any, nonzero),
  hypot = binary(tide.hypot, nonzero),
  fmod = cat(binary(tide.fmod, away(0.1, 0.5), away(0.6, 2)), int_binary(tide.fmod, nzints)),
  remainder = cat(binary(tide.remainder, away(0.1, 0.5), away(0.6, 2)), int_binary(tide.remainder, nzints)),
  minimum = cat(binary(tide.minimum), int_binary(tide.minimum)),
  maximum = cat(binary(tide.maximum), int_binary(tide.maximum)),
  eq = compare_op(function(a, b) return tide.eq(a, b) end),
  ne = compare_op(function(a, b) return tide.ne(a, b) end),
  lt = compare_op(function(a, b) return tide.lt(a, b) end),
  le = compare_op(function(a, b) return tide.le(a, b) end),
  gt = compare_op(function(a, b) return tide.gt(a, b) end),
  ge = compare_op(function(a, b) return tide.ge(a, b) end),
  logical_and = {
    { "bool with bool", tide.logical_and, function() return { bools { 7 }, bools { 7 } } end },
    { "broadcast (3,1) with (4)", tide.logical_and, function() return { bools { 3, 1 }, bools { 4 } } end },
    { "float32 with bool, transposed argument", tide.logical_and, function() return { ties { 4, 3 }, bools { 3, 4 } } end,
      { args = function(a, b) return a:t(), b end } },
    { "int64 with int64", tide.logical_and, function() return { ints { 7 }, ints { 7 } } end },
  },
  logical_or = {
    { "bool with bool", tide.logical_or, function() return { bools { 7 }, bools { 7 } } end },
    { "broadcast (3,1) with (4)", tide.logical_or, function() return { bools { 3, 1 }, bools { 4 } } end },
    { "float32 with bool, transposed argument", tide.logical_or, function() return { ties { 4, 3 }, bools { 3, 4 } } end,
      { args = function(a, b) return a:t(), b end } },
    { "int64 with int64", tide.logical_or, function() return { ints { 7 }, ints { 7 } } end },
  },
  where = {
    { "(7)", tide.where, function() return { bools { 7 }, any { 7 }, any { 7 } } end },
    { "1023", tide.where, function() return { bools { 1023 }, any { 1023 }, any { 1023 } } end },
    { "broadcast cond (3,1), a (4), b 0-dim", tide.where,
      function() return { bools { 3, 1 }, any { 4 }, any {} } end },
    { "transposed a, number b", function(c, a) return tide.where(c, a:t(), 0.5) end,
      function() return { bools { 3, 5 }, any { 5, 3 } } end },
    { "condition from a comparison, in a chain", function(a, b) return tide.where(a:gt(b), a * b, a - b) end,
      function() return { any { 3, 5 }, any { 5 } } end },
    { "int64 branches", tide.where, function() return { bools { 3, 4 }, ints { 3, 4 }, ints { 4 } } end },
  },

  sum = reduction(m "sum", nil, {
    { "int64, all dims", function(x) return x:sum() end, function() return { ints { 3, 5 } } end },
    { "int32, dim 2 (promotes to int64)", function(x) return x:sum(2) end, function() return { ints({ 3, 5 }, "int32") } end },
    { "bool, dim 1", function(x) return x:sum(1) end, function() return { bools { 7, 3 } } end },
  }),
  mean = reduction(m "mean"),
  prod = reduction(m "prod", away(0.5, 1.5), {
    { "with zeros, dim 2", function(x) return x:prod(2) end, function()
      local x = any { 3, 5 }:detach()
      x[{ 1, 2 }] = 0; x[{ 2, 1 }] = 0; x[{ 2, 4 }] = 0
      return { leaf(x) } end },
    { "int64, dim 1", function(x) return x:prod(1) end, function() return { ints { 3, 5 } } end },
  }),
  max = reduction(values(function(x, d, k) return x:max(d, k) end), nil, {
    { "indices along dim 2", indices("max", 2), function() return { any { 3, 5 } } end },
    { "int64 with ties, dim 2", values(function(x, d) return x:max(d) end), function() return { ints { 3, 9 } } end },
    { "int64 indices with ties", function(x) local _, i = x:max(2); return i end, function() return { ties { 4, 9 } } end },
  }),
  min = reduction(values(function(x, d, k) return x:min(d, k) end), nil, {
    { "indices along dim 1", indices("min", 1), function() return { any { 3, 5 } } end },
    { "int64, all dims", function(x) return x:min() end, function() return { ints { 3, 5 } } end },
  }),
  argmax = {
    { "dim 2", function(x) return x:argmax(2) end, function() return { any { 3, 5 } } end },
    { "all dims, 1023", function(x) return x:argmax() end, function() return { any { 1023 } } end },
    { "ties, transposed argument, dim 1", function(x) return x:argmax(1) end, function() return { ties { 7, 4 } } end,
      { args = T } },
    { "int64, dim 2 keepdim", function(x) return x:argmax(2, true) end, function() return { ints { 3, 5 } } end },
  },
  cumsum = cat(scan(function(x, d) return x:cumsum(d) end), {
    { "int32 into int64", function(x) return x:cumsum(1) end, function() return { ints({ 7 }, "int32") } end },
    { "bool, dtype float32", function(x) return x:cumsum(2, { dtype = tide.float32 }) end, function() return { bools { 3, 4 } } end },
  }),
  cumprod = scan(function(x, d) return x:cumprod(d) end, away(0.5, 1.5)),
  cummax = cat(scan(function(x, d) return (x:cummax(d)) end), {
    { "indices with ties", function(x) local _, i = x:cummax(2); return i end, function() return { ties { 3, 9 } } end },
  }),
  cummin = scan(function(x, d) return (x:cummin(d)) end),
  cumargmax = { { "cummax's indices, dim 1", function(x) local _, i = x:cummax(1); return i end, function() return { any { 6, 2 } } end } },
  cumargmin = { { "cummin's indices, int64", function(x) local _, i = x:cummin(1); return i end, function() return { ints { 9 } } end } },
  logcumsumexp = scan(function(x, d) return x:logcumsumexp(d) end),
  argmin = {
    { "dim 1", function(x) return x:argmin(1) end, function() return { any { 3, 5 } } end },
    { "all dims", function(x) return x:argmin() end, function() return { any { 3, 5 } } end },
    { "ties, dim 2", function(x) return x:argmin(2) end, function() return { ties { 4, 7 } } end },
  },
  -- sorting and searching: eager steps of the plan (rt_sort.c), values gathered at the indices
  sort = {
    { "values and indices, dim 2 descending", function(x) local v, i = x:sort(2, true); return v * 2 + i end,
      function() return { any { 3, 5 } } end },
    { "ties stay in index order, dim 1 of a transposed view", function(x) local _, i = x:t():sort(1); return i end,
      function() return { ties { 6, 9 } } end },
    { "int64, argsort", function(x) return x:argsort() end, function() return { ints { 4, 40 } } end },
  },
  topk = {
    { "k 3 along dim 2 then a sum", function(x) local v, i = x:topk(3); return v:sum(2) + i:sum(2) end, function() return { any { 4, 9 } } end },
    { "smallest, kthvalue, median", function(x) return x:topk(2, 1, false) + x:kthvalue(3, 1) + x:median(1) end,
      function() return { any { 5, 3 } } end },
    { "quantile", function(x) return x:quantile(0.3, 2) end, function() return { any { 3, 8 } } end },
  },
  mode = {
    { "int64 with ties, dim 2", function(x) local v, i = x:mode(2); return v * 10 + i end, function() return { ints { 3, 20 } } end },
  },
  searchsorted = {
    { "rows, right", function(s, v) return tide.searchsorted((s:sort(2)), v, { right = true }) end,
      function() return { any { 3, 6 }, any { 3, 4 } } end },
    { "bucketize, histc", function(x, b) return x:bucketize((b:sort())):double() + x:histc(4, -1, 1):sum() end,
      function() return { any { 3, 5 }, any { 6 } } end },
  },
  var = reduction(function(x, d, k) return x:var(d, { keepdim = k }) end, nil, {
    { "dim 2, correction 0", function(x) return x:var(2, { correction = 0 }) end, function() return { any { 3, 5 } } end },
  }),
  std = reduction(function(x, d, k) return x:std(d, { keepdim = k }) end),
  logsumexp = reduction(function(x, d, k) if d == nil then return x:logsumexp() end return x:logsumexp(d, k) end, nil, {
    { "large values (stability)", function(x) return (x * 40):logsumexp(2) end, function() return { any { 3, 7 } } end },
  }),
  norm = reduction(function(x, d, k) return x:norm(2, d, k) end, nonzero, {
    { "p=1, dim 2", function(x) return x:norm(1, 2) end, function() return { nonzero { 3, 5 } } end },
    { "p=3, all", function(x) return x:norm(3) end, function() return { nonzero { 3, 5 } } end },
    { "p=inf, dim 1", function(x) return x:norm("inf", 1) end, function() return { nonzero { 4, 3 } } end },
  }),

  softmax = {
    { "dim -1 of (3,7)", function(x) return x:softmax(-1) end, function() return { any { 3, 7 } } end },
    { "dim 1 of (3,7)", function(x) return x:softmax(1) end, function() return { any { 3, 7 } } end },
    { "dim 2 of (2,3,4)", function(x) return x:softmax(2) end, function() return { any { 2, 3, 4 } } end },
    { "size 1", function(x) return x:softmax(1) end, function() return { any { 1 } } end },
    { "rows of 1023", function(x) return x:softmax(-1) end, function() return { any { 3, 1023 } } end },
    -- saturated rows: the gradient is cancellation noise of order 10 * ulp(w), hence atol
    { "transposed argument, scaled (large logits)", function(x) return (x * 10):softmax(-1) end,
      function() return { any { 5, 3 } } end, { args = T, atol = 1e-4 } },
  },
  log_softmax = {
    { "dim -1 of (3,7)", function(x) return x:log_softmax(-1) end, function() return { any { 3, 7 } } end },
    { "dim 1 of (3,7)", function(x) return x:log_softmax(1) end, function() return { any { 3, 7 } } end },
    { "dim 3 of (2,3,4)", function(x) return x:log_softmax(3) end, function() return { any { 2, 3, 4 } } end },
    { "rows of 1023", function(x) return x:log_softmax(-1) end, function() return { any { 2, 1023 } } end },
    { "transposed argument, scaled (large logits)", function(x) return (x * 10):log_softmax(-1) end,
      function() return { any { 5, 3 } } end, { args = T, atol = 1e-4 } },
  },

  matmul = {
    { "(3,4) @ (4,5)", tide.matmul, function() return { any { 3, 4 }, any { 4, 5 } } end },
    { "transposed arguments", tide.matmul, function() return { any { 4, 3 }, any { 5, 4 } } end,
      { args = function(a, b) return a:t(), b:t() end } },
    { "(7) . (7)", tide.matmul, function() return { any { 7 }, any { 7 } } end },
    { "(4) @ (4,5)", tide.matmul, function() return { any { 4 }, any { 4, 5 } } end },
    { "(3,4) @ (4)", tide.matmul, function() return { any { 3, 4 }, any { 4 } } end },
    { "(1,1) @ (1,1)", tide.matmul, function() return { any { 1, 1 }, any { 1, 1 } } end },
    { "(7,1023) @ (1023,3)", tide.matmul, function() return { any { 7, 1023 }, any { 1023, 3 } } end },
    { "batched broadcast (2,1,3,4) @ (5,4,2)", tide.matmul, function() return { any { 2, 1, 3, 4 }, any { 5, 4, 2 } } end },
    { "(2,3,4) @ (4)", tide.matmul, function() return { any { 2, 3, 4 }, any { 4 } } end },
    { "sliced operand, with an epilogue", function(a, b) return (a[{ {}, { 2, 5 } }]:matmul(b) + 1):tanh() end,
      function() return { any { 3, 6 }, any { 4, 5 } } end },
    { "int64", tide.matmul, function() return { ints { 3, 4 }, ints { 4, 2 } } end },
  },

  view = {
    { "(3,4) -> (2,6), then exp", function(x) return x:view(2, 6):exp() end, function() return { any { 3, 4 } } end },
    { "returned directly", function(x) return x:view(12) end, function() return { any { 3, 4 } } end },
    { "unsqueeze / squeeze / flatten chain", function(x) return x:unsqueeze(2):flatten():view(7, 1):squeeze() * 3 end,
      function() return { any { 7 } } end },
    { "reshape of a transposed argument", function(x) return x:reshape(15):sin() end,
      function() return { any { 3, 5 } } end, { args = T } },
    { "0-dim -> (1)", function(x) return x:view(1) + 1 end, function() return { any {} } end },
  },
  permute = {
    { "(2,3,4) -> (4,2,3), then * 2", function(x) return x:permute(3, 1, 2) * 2 end, function() return { any { 2, 3, 4 } } end },
    { "t, then add its own transpose", function(x) return x:t() + x:t():t():t() end, function() return { any { 4, 4 } } end },
    { "returned directly", function(x) return x:transpose(1, 2) end, function() return { any { 3, 7 } } end },
  },
  expand = {
    { "(3,1) -> (4,3,5), plus y", function(x, y) return x:expand(4, 3, 5) + y end,
      function() return { any { 3, 1 }, any { 5 } } end },
    { "(1) -> (7), returned directly", function(x) return x:expand(7) end, function() return { any { 1 } } end },
    { "expand_as of a 0-dim", function(x, y) return x:expand_as(y) * y end, function() return { any {}, any { 2, 3 } } end },
  },
  slice = {
    { "narrow dim 2, then sin", function(x) return x:narrow(2, 2, 3):sin() end, function() return { any { 3, 7 } } end },
    { "step 2, returned directly", function(x) return x[{ {}, { 1, 7, 2 } }] end, function() return { any { 3, 7 } } end },
    { "of a transposed argument", function(x) return x[{ { 2, 4 } }] * 2 end, function() return { any { 3, 5 } } end,
      { args = T } },
    { "two overlapping slices", function(x) return x:narrow(1, 1, 6) * x:narrow(1, 2, 6) end, function() return { any { 7 } } end },
  },
  select = {
    { "row 2 times column 1", function(x) return x[2] * x:select(2, 1)[{ { 1, 4 } }]:sum() end,
      function() return { any { 5, 4 } } end },
    { "dim 2, last, returned directly", function(x) return x:select(2, -1) end, function() return { any { 3, 7 } } end },
    { "of (1), then exp", function(x) return x[1]:exp() end, function() return { any { 1 } } end },
  },
  copy = {
    { "clone", function(x) return x:clone() end, function() return { any { 7 } } end },
    { "contiguous of a transposed argument", function(x) return x:contiguous() end, function() return { any { 3, 5 } } end,
      { args = T } },
    { "int64 clone of an expanded view", function(x) return x:expand(3, 4):clone() end, function() return { ints { 4 } } end },
  },

  index_select = {
    { "dim 1, repeated indices", function(x) return x:index_select(1, idx({ 3, 1, 3, 2 }, x)) end,
      function() return { any { 3, 4 } } end },
    { "dim 2, random index argument", function(x, i) return x:index_select(2, i) end,
      function() return { any { 3, 7 }, randidx({ 9 }, 7) } end },
    { "of a transposed argument", function(x) return x:index_select(1, idx({ 2, 2 }, x)) end,
      function() return { any { 3, 5 } } end, { args = T } },
    { "int64 rows, then a chain", function(x, i) return x:index_select(1, i) * 2 + 1 end,
      function() return { ints { 5, 3 }, randidx({ 7 }, 5) } end },
  },
  index_add = {
    { "dim 1, both inputs", function(x, s) return x:index_add(1, idx({ 2, 1, 2 }, x), s) end,
      function() return { any { 3, 4 }, any { 3, 4 } } end },
    { "dim 2, transposed source argument", function(x, s, i) return x:index_add(2, i, s) end,
      function() return { any { 3, 5 }, any { 2, 3 }, randidx({ 2 }, 5) } end,
      { args = function(x, s, i) return x, s:t(), i end } },
  },
  gather = {
    { "dim 2", function(x, i) return x:gather(2, i) end, function() return { any { 3, 5 }, randidx({ 3, 4 }, 5) } end },
    { "dim 1, transposed input", function(x, i) return x:t():gather(1, i) end,
      function() return { any { 4, 3 }, randidx({ 5, 4 }, 3) } end },
    { "int64", function(x, i) return x:gather(1, i) end, function() return { ints { 3, 4 }, randidx({ 2, 4 }, 3) } end },
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
  cat = {
    { "dim 1", function(a, b, c) return tide.cat({ a, b, c }, 1) end,
      function() return { any { 2, 3 }, any { 1, 3 }, any { 4, 3 } } end },
    { "dim 2, transposed piece", function(a, b) return tide.cat({ a, b:t() }, 2) end,
      function() return { any { 3, 2 }, any { 5, 3 } } end },
    { "stack", function(a, b) return tide.stack({ a, b }, 2) end, function() return { any { 7 }, any { 7 } } end },
    { "int64 with an expanded piece", function(a, b) return tide.cat({ a, b:expand(2, 3) }, 1) end,
      function() return { ints { 3, 3 }, ints { 3 } } end },
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
  -- the compiled backward of sdpa records sdpa_backward (one fused kernel)
  sdpa = {
    { "causal (2,4,33,16), the GPT's layout", function(q, k, v) return F.scaled_dot_product_attention(q, k, v, { is_causal = true }) end,
      function() return { any { 2, 4, 33, 16 }, any { 2, 4, 33, 16 }, any { 2, 4, 33, 16 } } end },
    { "heads taken by transposes, then a chain", function(q, k, v)
        local function h(t) return t:view(2, 7, 3, 4):transpose(2, 3) end
        return F.scaled_dot_product_attention(h(q), h(k), h(v), { is_causal = true }):transpose(2, 3):reshape(2, 7, 12) * 2
      end, function() return { any { 2, 7, 12 }, any { 2, 7, 12 }, any { 2, 7, 12 } } end },
    { "5 queries against 1023 keys", function(q, k, v) return F.scaled_dot_product_attention(q, k, v) end,
      function() return { any { 5, 8 }, any { 1023, 8 }, any { 1023, 3 } } end },
  },
  sdpa_backward = {
    { "the gradients of a causal attention", function(q, k, v)
        local y = F.scaled_dot_product_attention(q, k, v, { is_causal = true })
        local g = tide.autograd.grad({ (y * y):sum() }, { q, k, v })
        return tide.cat({ g[1]:view(-1), g[2]:view(-1), g[3]:view(-1) }, 1)
      end, function() return { any { 3, 9, 4 }, any { 3, 9, 4 }, any { 3, 9, 5 } } end },
  },
}


M.to_device = to_device
M.flat = flat
M.shape_str = shape_str
M.compare = compare
M.leaf = leaf
M.unif = unif
M.any = any
M.pos = pos
M.away = away
M.nonzero = nonzero
M.banded = banded
M.offgrid = offgrid
M.ties = ties
M.ints = ints
M.smallpos = smallpos
M.bools = bools
M.idx = idx
M.randidx = randidx
M.clone_all = clone_all
M.identity = identity
M.check_case = check_case
M.cat = cat
M.m = m
M.T = T
M.unary = unary
M.int_unary = int_unary
M.int_to_float = int_to_float
M.binary = binary
M.int_binary = int_binary
M.compare_op = compare_op
M.reduction = reduction
M.slice_scatter = slice_scatter
M.gelu_tanh = gelu_tanh
M.values = values
M.indices = indices
M.CASES = CASES
M.RTOL = RTOL
M.ATOL = ATOL
return M
