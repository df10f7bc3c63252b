-- Eager fast paths of elementwise ops (issue 16): pow by a number exponent
-- (rt_ew.c: x*x, sqrt, 1/x, ... and powf(|x|, y) with the sign restored) against
-- C's pow over edge values, and the one-pass derivatives (rt_ewgrad.c) against
-- the rules' composite formulas (bit for bit) and the scalar derivatives.
local tide = require "tide"
local ffi = require "ffi"

ffi.cdef [[ double pow(double, double); double erf(double); ]]
local INF, NAN = math.huge, 0 / 0

-- edge values of a dtype: signed zeros, infinities, NaN, denormals, huge, plain
local function edges(dt)
  local f32 = dt == tide.float32
  local tiny, huge = f32 and 1e-40 or 5e-310, f32 and 1e30 or 1e300
  local v = { 0, -0.0, INF, -INF, NAN, tiny, -tiny, huge, -huge, 1, -1, 0.5, -0.5, 2, -2, 3.75, -3.75,
    1e-3, -1e-3, 7, -7, 33.5, -33.5 }
  tide.manual_seed(3)
  for _, r in ipairs((tide.randn(40, { dtype = tide.float64 }) * 3):totable()) do v[#v + 1] = r end
  return v
end

-- the value as the dtype holds it (float32: rounded)
local f32box = ffi.new("float[1]")
local function as(dt, x)
  if dt == tide.float32 then f32box[0] = x; return f32box[0] end
  return x
end

-- ordered integer of a float's bits: ulp distance = difference
local u32 = ffi.new("union { float f; int32_t i; }")
local u64 = ffi.new("union { double f; int64_t i; }")
local function ord(dt, x)
  if dt == tide.float32 then
    u32.f = x; local i = u32.i
    return i < 0 and -2147483648 - i or i
  end
  u64.f = x; local i = u64.i
  return i < 0 and -9223372036854775807LL - i or i
end
local function ulps(dt, a, b)
  local d = ord(dt, a) - ord(dt, b)
  return tonumber(d < 0 and -d or d)
end

local function same_bits(a, b)
  if a ~= a then return b ~= b end
  return a == b and 1 / a == 1 / b
end

-- got matches pow(x, y) (rounded to dt): NaN, infinities and zeros (with their
-- sign) exactly, other values within `bound` ulp
local function check_pow(dt, x, y, got, bound)
  local want = as(dt, ffi.C.pow(x, y))
  local ok
  if want ~= want then ok = got ~= got
  elseif want == 0 or want == INF or want == -INF then ok = same_bits(got, want)
  else ok = got == got and ulps(dt, got, want) <= bound end
  if not ok then
    error(("%s: pow(%.17g, %.17g) = %.17g, expected %.17g"):format(dt.name, x, y, got, want), 2)
  end
end

describe("pow by a number exponent", function()
  -- exponent -> ulp bound (documented in the README)
  local bounds = { [2] = 0, [-1] = 0, [1] = 0, [0] = 0, [0.5] = 1, [-0.5] = 1, [3] = 2, [-2] = 2 }
  local general = { 2.5, -2.5, 4, -3, 5, 1 / 3, 1e10, -1e10, INF, -INF, NAN, 0.1 }
  for _, dt in ipairs { tide.float32, tide.float64 } do
    it(dt.name .. ": the exponents PyTorch rewrites, over edge values", function()
      local xs = edges(dt)
      local x = tide.tensor(xs, { dtype = dt })
      for y, bound in pairs(bounds) do
        local r = (x ^ y):totable()
        for i, xv in ipairs(x:totable()) do check_pow(dt, xv, as(dt, y), r[i], bound) end
      end
    end)

    it(dt.name .. ": other exponents through powf(|x|, y), the sign restored", function()
      local x = tide.tensor(edges(dt), { dtype = dt })
      -- libmvec's pow: 1 ulp for float64 (documented 1 ulp), 1 ulp for float32
      for _, y in ipairs(general) do
        local r = (x ^ y):totable()
        for i, xv in ipairs(x:totable()) do check_pow(dt, xv, as(dt, y), r[i], 2) end
      end
    end)

    it(dt.name .. ": a 0-dim exponent tensor and a strided base take the same path", function()
      local x = tide.randn(7, 9, { dtype = dt }):abs()
      local e = tide.tensor(2.5, { dtype = dt })
      assert.same((x:t():contiguous() ^ 2.5):totable(), tide.pow(x:t(), e):totable())
      assert.same((x:t():contiguous() ^ 2):totable(), (x:t() ^ 2):totable())
    end)
  end

  it("a tensor exponent keeps the elementwise path", function()
    local x = tide.tensor({ -2, -2, 0, 4 })
    local y = tide.tensor({ 2, 3, -1, 0.5 })
    assert.same({ 4, -8, INF, 2 }, (x ^ y):totable())
  end)
end)

-- d/dx in float64 of each op with a one-pass derivative
local function phi(x) return math.exp(-x * x / 2) / math.sqrt(2 * math.pi) end
local function Phi(x) return 0.5 * (1 + ffi.C.erf(x / math.sqrt(2))) end
local function sig(x) return 1 / (1 + math.exp(-x)) end
local OPS = {
  { "sin", function(x) return x:sin() end, math.cos },
  { "cos", function(x) return x:cos() end, function(x) return -math.sin(x) end },
  { "tanh", function(x) return x:tanh() end, function(x) local t = math.tanh(x); return 1 - t * t end },
  { "sigmoid", function(x) return x:sigmoid() end, function(x) return sig(x) * (1 - sig(x)) end },
  { "silu", function(x) return x:silu() end, function(x) return sig(x) * (1 + x * (1 - sig(x))) end },
  { "relu", function(x) return x:relu() end, function(x) return x > 0 and 1 or 0 end },
  { "erf", function(x) return x:erf() end, function(x) return 2 / math.sqrt(math.pi) * math.exp(-x * x) end },
  { "sqrt", function(x) return x:sqrt() end, function(x) return 0.5 / math.sqrt(x) end },
  { "rsqrt", function(x) return x:rsqrt() end, function(x) return -0.5 * x ^ -1.5 end },
  { "tan", function(x) return x:tan() end, function(x) return 1 + math.tan(x) ^ 2 end },
  { "log1p", function(x) return x:log1p() end, function(x) return 1 / (1 + x) end },
  { "expm1", function(x) return x:expm1() end, math.exp },
  { "gelu", function(x) return x:gelu() end, function(x) return Phi(x) + x * phi(x) end },
  { "gelu tanh", function(x) return x:gelu("tanh") end, function(x)
    local s = math.sqrt(2 / math.pi)
    local t = math.tanh(s * (x + 0.044715 * x ^ 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * s * (1 + 3 * 0.044715 * x * x)
  end },
  { "pow 2", function(x) return x ^ 2 end, function(x) return 2 * x end },
  { "pow 3", function(x) return x ^ 3 end, function(x) return 3 * x * x end },
  { "pow 0.5", function(x) return x ^ 0.5 end, function(x) return 0.5 / math.sqrt(x) end },
  { "pow -1.5", function(x) return x ^ -1.5 end, function(x) return -1.5 * x ^ -2.5 end },
}

-- the backward's op events inside its nodes (a one-pass derivative runs none)
local function ops_in_backward(fn)
  local rep = tide.profiler.profile(fn)
  local n = 0
  for _, e in ipairs(rep.events) do
    if e.kind == "op" and e.depth > 0 and e.name ~= "view" and e.name ~= "expand" then n = n + 1 end
  end
  return n
end

describe("one-pass derivatives of elementwise ops", function()
  for _, dt in ipairs { tide.float32, tide.float64 } do
    for _, case in ipairs(OPS) do
      local name, f, df = case[1], case[2], case[3]
      it(("%s %s: the composite's bits, one pass, the derivative's values"):format(dt.name, name), function()
        local xs = edges(dt)
        tide.manual_seed(5)
        local g = tide.randn(#xs, { dtype = dt })
        local x = tide.tensor(xs, { dtype = dt }):requires_grad_()
        -- fused: plain backward
        local nops = ops_in_backward(function() f(x):backward(g) end)
        assert.equal(0, nops, name .. ": the backward ran ops")
        local fused = x.grad:totable()
        -- composite: the same rule with a graph of the gradient recorded
        local comp = tide.autograd.grad({ f(x) }, { x }, { grad_outputs = { g }, create_graph = true })[1]:totable()
        local gv, xv = g:totable(), x:detach():totable()
        for i = 1, #xs do
          assert(same_bits(fused[i], comp[i]) or (fused[i] ~= fused[i] and comp[i] ~= comp[i]),
            ("%s at x = %.17g: fused %.17g, composite %.17g"):format(name, xv[i], fused[i], comp[i]))
          local xi = xv[i]
          if xi == xi and math.abs(xi) < 20 and math.abs(xi) > 1e-3 then
            local want = gv[i] * df(xi)
            if want == want and math.abs(want) < 1e6 then
              local tol = (dt == tide.float32 and 2e-5 or 1e-11) * math.max(1, math.abs(want))
              assert(math.abs(fused[i] - want) <= tol,
                ("%s'(%.17g) * g = %.17g, expected %.17g"):format(name, xi, fused[i], want))
            end
          end
        end
      end)
    end

    it(dt.name .. ": a gradient broadcast from a sum takes the one-pass path", function()
      local x = tide.randn(1000, { dtype = dt }):requires_grad_()
      local n = ops_in_backward(function() x:sin():sum():backward() end)
      assert.equal(0, n)
      assert.same(x:detach():cos():totable(), x.grad:totable())
    end)
  end

  it("a graph of the gradient still differentiates (second order through the composite)", function()
    local x = tide.tensor({ 0.3, -1.2, 2.0 }, { dtype = tide.float64 }):requires_grad_()
    local g1 = tide.autograd.grad({ x:sin():sum() }, { x }, { create_graph = true })[1]
    local g2 = tide.autograd.grad({ g1:sum() }, { x })[1]
    local want = x:detach():sin():neg():totable()
    for i = 1, 3 do assert(math.abs(g2:totable()[i] - want[i]) < 1e-15) end
  end)
end)
