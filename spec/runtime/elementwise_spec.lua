-- Elementwise ops: forward values against literal expected numbers (computed
-- offline with PyTorch 1.13 in float64), PyTorch type promotion, broadcasting,
-- strided inputs and outputs, in-place forms and their version counters,
-- error messages, and results that do not depend on the thread count.
local tide = require "tide"
local H = require "helper"
local ffi = require "ffi"

local NAN = 0 / 0

-- -- Helpers ---------------------------------------------------------------------------------

local function flat(v, out)
  out = out or {}
  if type(v) == "table" then for i = 1, #v do flat(v[i], out) end else out[#out + 1] = v end
  return out
end

local function values(x)
  if tide.is_tensor(x) then
    if x.dtype.name == "bool" then x = x:double() end
    return flat(x:totable())
  end
  return flat(x)
end

-- elementwise |got - want| <= rtol * max(1, |want|); NaN matches only NaN
local function rclose(got, want, rtol, msg)
  local g, w = values(got), values(want)
  assert(#g == #w, ("%s: %d values, expected %d"):format(msg or "rclose", #g, #w))
  for i = 1, #w do
    local a, b = g[i], w[i]
    local ok
    if b ~= b then ok = a ~= a
    elseif b == math.huge or b == -math.huge then ok = a == b
    else ok = math.abs(a - b) <= rtol * math.max(1, math.abs(b)) end
    if not ok then
      error(("%s: element %d is %.17g, expected %.17g"):format(msg or "rclose", i, a, b), 2)
    end
  end
end

local function same_shape(x, shape, msg)
  assert.same(shape, x:size(), msg)
end

-- exact equality of values (and of the dtype name)
local function exact(got, dtype, want)
  assert.equal(dtype, got.dtype.name)
  assert.same(want, got:totable())
end

local RTOL = { float32 = 2e-6, float64 = 1e-13 }

-- a fresh float64 tensor of the given shape with values uniform in (lo, hi)
local function urand(shape, lo, hi, dtype)
  return tide.rand(shape, { dtype = dtype or "float64" }) * (hi - lo) + lo
end

-- -- Expected values (PyTorch 1.13, float64) -------------------------------------------------

local UNARY = {
  neg = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { 2.5, 1.0, 0.3, -0.0, -0.4, -1.0, -2.7 } },
  abs = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { 2.5, 1.0, 0.3, 0.0, 0.4, 1.0, 2.7 } },
  sign = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { -1.0, -1.0, -1.0, 0.0, 1.0, 1.0, 1.0 } },
  exp = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { 0.0820849986238988, 0.36787944117144233, 0.7408182206817179, 1.0, 1.4918246976412703, 2.718281828459045, 14.879731724872837 } },
  log = { x = { 0.05, 0.3, 1.0, 1.7, 2.5, 4.0, 9.0 },
    want = { -2.995732273553991, -1.2039728043259361, 0.0, 0.5306282510621704, 0.9162907318741551, 1.3862943611198906, 2.1972245773362196 } },
  log1p = { x = { -0.9, -0.3, 0.0, 0.4, 1.0, 2.7, 10.0 },
    want = { -2.302585092994046, -0.35667494393873234, 0.0, 0.33647223662121295, 0.6931471805599453, 1.308332819650179, 2.3978952727983707 } },
  expm1 = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { -0.9179150013761012, -0.6321205588285577, -0.2591817793182821, 0.0, 0.49182469764127035, 1.7182818284590453, 13.879731724872837 } },
  sqrt = { x = { 0.05, 0.3, 1.0, 1.7, 2.5, 4.0, 9.0 },
    want = { 0.22360679774997896, 0.5477225575051661, 1.0, 1.3038404810405297, 1.5811388300841898, 2.0, 3.0 } },
  rsqrt = { x = { 0.05, 0.3, 1.0, 1.7, 2.5, 4.0, 9.0 },
    want = { 4.47213595499958, 1.8257418583505538, 1.0, 0.7669649888473704, 0.6324555320336759, 0.5, 0.3333333333333333 } },
  sin = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { -0.5984721441039564, -0.8414709848078965, -0.29552020666133955, 0.0, 0.3894183423086505, 0.8414709848078965, 0.4273798802338298 } },
  cos = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { -0.8011436155469337, 0.5403023058681398, 0.955336489125606, 1.0, 0.9210609940028851, 0.5403023058681398, -0.9040721420170612 } },
  tan = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { 0.7470222972386603, -1.5574077246549023, -0.30933624960962325, 0.0, 0.4227932187381618, 1.5574077246549023, -0.4727276291030373 } },
  tanh = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { -0.9866142981514303, -0.7615941559557649, -0.2913126124515909, 0.0, 0.3799489622552249, 0.7615941559557649, 0.9910074536781176 } },
  sigmoid = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { 0.07585818002124355, 0.2689414213699951, 0.425557483188341, 0.5, 0.598687660112452, 0.7310585786300049, 0.9370266439430035 } },
  relu = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { 0.0, 0.0, 0.0, 0.0, 0.4, 1.0, 2.7 } },
  gelu = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { -0.015524163314440398, -0.15865525393145702, -0.1146265733433142, 0.0, 0.2621686966441297, 0.841344746068543, 2.6906391707317905 } },
  gelu_tanh = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { -0.015084266089998577, -0.15880800939172324, -0.11462907645724074, 0.0, 0.2621611694273562, 0.8411919906082768, 2.6911124053605326 } },
  silu = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { -0.18964545005310887, -0.2689414213699951, -0.1276672449565023, 0.0, 0.2394750640449808, 0.7310585786300049, 2.52997193864611 } },
  erf = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { -0.999593047982555, -0.8427007929497149, -0.3286267594591274, 0.0, 0.42839235504666845, 0.8427007929497149, 0.9998656672600594 } },
  floor = { x = { -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6, -2.6, 3.49 },
    want = { -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 2.0, -3.0, 3.0 } },
  ceil = { x = { -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6, -2.6, 3.49 },
    want = { -2.0, -1.0, -0.0, 1.0, 2.0, 3.0, 3.0, -2.0, 4.0 } },
  round = { x = { -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6, -2.6, 3.49 },
    want = { -2.0, -2.0, -0.0, 0.0, 2.0, 2.0, 3.0, -3.0, 3.0 } },
  clamp_min = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { -0.5, -0.5, -0.3, 0.0, 0.4, 1.0, 2.7 } },
  clamp_max = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { -2.5, -1.0, -0.3, 0.0, 0.4, 0.7, 0.7 } },
  clamp_both = { x = { -2.5, -1.0, -0.3, 0.0, 0.4, 1.0, 2.7 },
    want = { -0.5, -0.5, -0.3, 0.0, 0.4, 0.7, 0.7 } },
}
local BINARY = {
  add = { a = { { 0.5, -1.25, 2.0 }, { 3.5, 0.75, -2.0 } }, b = { 1.5, -0.5, 0.25 },
    want = { { 2.0, -1.75, 2.25 }, { 5.0, 0.25, -1.75 } } },
  sub = { a = { { 0.5, -1.25, 2.0 }, { 3.5, 0.75, -2.0 } }, b = { 1.5, -0.5, 0.25 },
    want = { { -1.0, -0.75, 1.75 }, { 2.0, 1.25, -2.25 } } },
  mul = { a = { { 0.5, -1.25, 2.0 }, { 3.5, 0.75, -2.0 } }, b = { 1.5, -0.5, 0.25 },
    want = { { 0.75, 0.625, 0.5 }, { 5.25, -0.375, -0.5 } } },
  div = { a = { { 0.5, -1.25, 2.0 }, { 3.5, 0.75, -2.0 } }, b = { 1.5, -0.5, 0.25 },
    want = { { 0.3333333333333333, 2.5, 8.0 }, { 2.3333333333333335, -1.5, -8.0 } } },
  pow = { a = { { 0.5, 1.25, 2.0 }, { 3.5, 0.75, 1.1 } }, b = { 1.5, -0.5, 0.25 },
    want = { { 0.3535533905932738, 0.8944271909999159, 1.189207115002721 }, { 6.547900426854397, 1.1547005383792515, 1.0241136890844451 } } },
  minimum = { a = { { 0.5, -1.25, 2.0 }, { 3.5, 0.75, -2.0 } }, b = { 1.5, -0.5, 0.25 },
    want = { { 0.5, -1.25, 0.25 }, { 1.5, -0.5, -2.0 } } },
  maximum = { a = { { 0.5, -1.25, 2.0 }, { 3.5, 0.75, -2.0 } }, b = { 1.5, -0.5, 0.25 },
    want = { { 1.5, -0.5, 2.0 }, { 3.5, 0.75, 0.25 } } },
}

local function apply(name, x)
  if name == "gelu_tanh" then return x:gelu { approximate = "tanh" } end
  if name == "clamp_min" then return x:clamp(-0.5) end
  if name == "clamp_max" then return x:clamp(nil, 0.7) end
  if name == "clamp_both" then return x:clamp(-0.5, 0.7) end
  return x[name](x)
end

local function apply_(name, x)
  if name == "clamp_min" then return x:clamp_(-0.5) end
  if name == "clamp_max" then return x:clamp_ { max = 0.7 } end
  if name == "clamp_both" then return x:clamp_(-0.5, 0.7) end
  return x[name .. "_"](x)
end

local function sorted_keys(t)
  local k = {}
  for n in pairs(t) do k[#k + 1] = n end
  table.sort(k)
  return k
end

-- Lua references for checking fresh random inputs: name -> { f, lo, hi }
local function rint(x)   -- round half to even
  local f = math.floor(x)
  local d = x - f
  if d > 0.5 or (d == 0.5 and f % 2 == 1) then return f + 1 end
  return f
end
local REF = {
  neg = { function(x) return -x end, -3, 3 },
  abs = { math.abs, -3, 3 },
  sign = { function(x) return x > 0 and 1 or x < 0 and -1 or 0 end, -3, 3 },
  exp = { math.exp, -4, 4 },
  log = { math.log, 0.01, 5 },
  log1p = { function(x) return math.log(1 + x) end, 0.1, 5 },
  expm1 = { function(x) return math.exp(x) - 1 end, 0.1, 3 },
  sqrt = { math.sqrt, 0.01, 5 },
  rsqrt = { function(x) return 1 / math.sqrt(x) end, 0.01, 5 },
  sin = { math.sin, -6, 6 },
  cos = { math.cos, -6, 6 },
  tan = { math.tan, -1.4, 1.4 },
  tanh = { math.tanh, -3, 3 },
  sigmoid = { function(x) return 1 / (1 + math.exp(-x)) end, -6, 6 },
  relu = { function(x) return x > 0 and x or 0 end, -3, 3 },
  silu = { function(x) return x / (1 + math.exp(-x)) end, -6, 6 },
  floor = { math.floor, -9, 9 },
  ceil = { math.ceil, -9, 9 },
  round = { rint, -9, 9 },
  clamp_both = { function(x) return math.min(math.max(x, -0.5), 0.7) end, -2, 2 },
}

-- fresh random views of odd sizes: contiguous, transposed, strided, expanded, 0-dim, permuted
local function views(lo, hi)
  local base = urand({ 9, 7 }, lo, hi)
  local wide = urand({ 5, 14 }, lo, hi)
  return {
    { "1", urand({ 1 }, lo, hi) },
    { "7", urand({ 7 }, lo, hi) },
    { "1023", urand({ 1023 }, lo, hi) },
    { "transposed", base:t() },
    { "sliced", wide[{ {}, { 1, 13, 2 } }] },
    { "expanded", urand({ 1, 7 }, lo, hi):expand(5, 7) },
    { "0-dim", urand({}, lo, hi) },
    { "permuted", urand({ 3, 4, 5 }, lo, hi):permute(3, 1, 2) },
  }
end

local function rev_dims(n)
  local p = {}
  for i = n, 1, -1 do p[#p + 1] = i end
  return p
end

local function ref_of(v, f)
  local r = {}
  for i, x in ipairs(values(v)) do r[i] = f(x) end
  return r
end

-- -- Unary ops --------------------------------------------------------------------------------

describe("unary elementwise ops", function()
  for _, name in ipairs(sorted_keys(UNARY)) do
    local case = UNARY[name]
    it(name .. " matches PyTorch in float32 and float64", function()
      for _, dt in ipairs { "float32", "float64" } do
        local x = tide.tensor(case.x, { dtype = dt })
        local y = apply(name, x)
        assert.equal(dt, y.dtype.name)
        same_shape(y, { #case.x })
        rclose(y, case.want, RTOL[dt], name .. " " .. dt)
        if tide[name] and not name:find("clamp") then rclose(tide[name](x), case.want, RTOL[dt], "tide." .. name) end
        -- the in-place form writes the same values into x and bumps its version
        if name ~= "gelu" and name ~= "gelu_tanh" then
          local v0 = x._version
          local r = apply_(name, x)
          assert.is_true(rawequal(r, x) or r.p == x.p)
          assert.equal(v0 + 1, x._version)
          rclose(x, case.want, RTOL[dt], name .. "_ " .. dt)
        end
      end
    end)
  end

  for _, name in ipairs(sorted_keys(REF)) do
    local f, lo, hi = REF[name][1], REF[name][2], REF[name][3]
    it(name .. " on fresh random strided, expanded and 0-dim inputs", function()
      for _, v in ipairs(views(lo, hi)) do
        local y = apply(name, v[2])
        same_shape(y, v[2]:size(), name .. " " .. v[1])
        rclose(y, ref_of(v[2], f), 1e-13, name .. " " .. v[1])
        local y32 = apply(name, v[2]:float())
        rclose(y32, ref_of(v[2]:float(), f), 2e-6, name .. " float32 " .. v[1])
      end
    end)
  end

  it("gelu, gelu(tanh) and erf on random strided inputs satisfy their symmetries", function()
    for _, v in ipairs(views(-4, 4)) do
      local x = v[2]
      -- gelu(x) - gelu(-x) = x in both forms; erf is odd
      rclose(x:gelu() - (-x):gelu(), x, 1e-14, "gelu " .. v[1])
      rclose(x:gelu { approximate = "tanh" } - (-x):gelu { approximate = "tanh" }, x, 1e-14, "gelu tanh " .. v[1])
      rclose(x:erf() + (-x):erf(), ref_of(x, function() return 0 end), 1e-15, "erf " .. v[1])
      -- gelu = x * Phi(x), with Phi from erf
      rclose(x:gelu(), x * ((x / math.sqrt(2)):erf() + 1) * 0.5, 1e-14, "gelu/erf " .. v[1])
    end
  end)

  it("round is half to even; floor, ceil and round keep integer tensors unchanged", function()
    exact(tide.tensor { 0.5, 1.5, 2.5, 3.5, -0.5, -1.5, -2.5, 2.4999 }:round(), "float32",
      { 0, 2, 2, 4, -0, -2, -2, 2 })
    local i = tide.long { -3, 0, 7 }
    exact(i:floor(), "int64", { -3, 0, 7 })
    exact(i:ceil(), "int64", { -3, 0, 7 })
    exact(tide.tensor({ -3, 0, 7 }, { dtype = "int32" }):round(), "int32", { -3, 0, 7 })
  end)

  it("integer and bool inputs: float ops compute in float32, others keep the dtype", function()
    rclose(tide.long { 0, 1, 2 }:exp(), { 1, 2.718281828459045, 7.38905609893065 }, 2e-6)
    assert.equal("float32", tide.long { 0, 1, 2 }:exp().dtype.name)
    assert.equal("float32", tide.tensor({ 4, 9 }, { dtype = "uint8" }):sqrt().dtype.name)
    exact(tide.tensor({ 4, 9 }, { dtype = "uint8" }):sqrt(), "float32", { 2, 3 })
    exact(tide.tensor({ 1, -2 }, { dtype = "int32" }):neg(), "int32", { -1, 2 })
    exact(-tide.tensor({ 1, -2 }, { dtype = "int32" }), "int32", { -1, 2 })
    exact(tide.tensor({ 1, 200 }, { dtype = "uint8" }):abs(), "uint8", { 1, 200 })
    exact(tide.long { -3, 0, 4 }:sign(), "int64", { -1, 0, 1 })
    exact(tide.long { -3, 0, 4 }:relu(), "int64", { 0, 0, 4 })
    exact(tide.long { -3, 0, 4 }:abs(), "int64", { 3, 0, 4 })
    exact(tide.tensor { true, false }:sigmoid():gt(0.6), "bool", { true, false })
  end)

  it("clamp: min only, max only, both, integer tensors, NaN, and min > max", function()
    local x = tide.tensor({ -2, -0.25, 0.5, 3, NAN }, { dtype = "float64" })
    rclose(x:clamp(0), { 0, 0, 0.5, 3, NAN }, 0)
    rclose(x:clamp { min = 0 }, { 0, 0, 0.5, 3, NAN }, 0)
    rclose(x:clamp(nil, 0.25), { -2, -0.25, 0.25, 0.25, NAN }, 0)
    rclose(x:clamp { max = 0.25 }, { -2, -0.25, 0.25, 0.25, NAN }, 0)
    rclose(x:clamp(-1, 1), { -1, -0.25, 0.5, 1, NAN }, 0)
    rclose(x:clamp(2, 1), { 1, 1, 1, 1, NAN }, 0)          -- min(max(x, lo), hi), as PyTorch
    exact(tide.long { -3, 0, 4 }:clamp(-1, 2), "int64", { -1, 0, 2 })
    -- a fractional bound promotes an integer tensor, like a Lua number operand
    exact(tide.long { -3, 0, 4 }:clamp(-1.5, 2.5), "float32", { -1.5, 0, 2.5 })
    H.raises(function() return x:clamp() end, "clamp: at least one of min and max must be given")
  end)

  it("unary ops write through non-contiguous outputs in place", function()
    local base = urand({ 9, 7 }, -3, 3)
    local w = base:clone()
    w:t():sin_()
    rclose(w, ref_of(base, math.sin), 1e-13, "sin_ on a transposed view")
    local w2 = base:clone()
    w2[{ {}, { 2, 6, 2 } }]:exp_()                  -- columns 2, 4, 6 only
    local b, got = base:totable(), w2:totable()
    for i = 1, 9 do for j = 1, 7 do
      local want = (j % 2 == 0 and j <= 6) and math.exp(b[i][j]) or b[i][j]
      assert(math.abs(got[i][j] - want) <= 1e-13 * math.max(1, math.abs(want)), ("element %d,%d"):format(i, j))
    end end
  end)
end)

-- -- Binary ops -------------------------------------------------------------------------------

local BREF = {
  add = { function(x, y) return x + y end },
  sub = { function(x, y) return x - y end },
  mul = { function(x, y) return x * y end },
  div = { function(x, y) return x / y end, 0.5, 3 },
  pow = { function(x, y) return x ^ y end, 0.1, 3 },
  minimum = { math.min },
  maximum = { math.max },
}

describe("binary elementwise ops", function()
  for _, name in ipairs(sorted_keys(BINARY)) do
    local case = BINARY[name]
    it(name .. " matches PyTorch with broadcasting, as method, function and in place", function()
      for _, dt in ipairs { "float32", "float64" } do
        local a, b = tide.tensor(case.a, { dtype = dt }), tide.tensor(case.b, { dtype = dt })
        local y = a[name](a, b)
        assert.equal(dt, y.dtype.name)
        same_shape(y, { 2, 3 })
        rclose(y, case.want, RTOL[dt], name .. " " .. dt)
        rclose(tide[name](a, b), case.want, RTOL[dt], "tide." .. name)
        -- b broadcast against a transposed copy of a: same values, transposed
        local at = a:t():contiguous():t()
        assert.is_false(at:is_contiguous())
        rclose(at[name](at, b), case.want, RTOL[dt], name .. " strided " .. dt)
        local v0 = a._version
        a[name .. "_"](a, b)
        assert.equal(v0 + 1, a._version)
        rclose(a, case.want, RTOL[dt], name .. "_ " .. dt)
      end
    end)
  end

  for _, name in ipairs(sorted_keys(BREF)) do
    local f, lo, hi = BREF[name][1], BREF[name][2] or -3, BREF[name][3] or 3
    it(name .. " on fresh random inputs: odd sizes, strided, broadcast, numbers on either side", function()
      for _, v in ipairs(views(lo, hi)) do
        local x = v[2]
        -- the other operand: fresh values, its dims reversed in memory
        local s = x:size()
        local rev = {}
        for i = #s, 1, -1 do rev[#rev + 1] = s[i] end
        local y = urand(rev, lo, hi)
        if #s >= 2 then y = y:permute(unpack(rev_dims(#s))) end
        local got = x[name](x, y)
        same_shape(got, x:size(), name .. " " .. v[1])
        local xv, yv, want = values(x), values(y), {}
        for i = 1, #xv do want[i] = f(xv[i], yv[i]) end
        rclose(got, want, 1e-13, name .. " " .. v[1])
        -- a Lua number on the right and on the left
        local s = lo + (hi - lo) * 0.37
        for i = 1, #xv do want[i] = f(xv[i], s) end
        rclose(x[name](x, s), want, 1e-13, name .. " number right " .. v[1])
        for i = 1, #xv do want[i] = f(s, xv[i]) end
        rclose(tide[name](tide.tensor(s, { dtype = "float64" }), x), want, 1e-13, name .. " 0-dim left " .. v[1])
      end
      -- broadcasting a column against a row: (7,1) op (1,9) -> (7,9)
      local c, r = urand({ 7, 1 }, lo, hi), urand({ 1, 9 }, lo, hi)
      local got = c[name](c, r)
      same_shape(got, { 7, 9 })
      local cv, rv, g = values(c), values(r), got:totable()
      for i = 1, 7 do for j = 1, 9 do
        local want = f(cv[i], rv[j])
        assert(math.abs(g[i][j] - want) <= 1e-13 * math.max(1, math.abs(want)), ("%s (%d,%d)"):format(name, i, j))
      end end
    end)
  end

  it("minimum and maximum propagate NaN from either side", function()
    for _, dt in ipairs { "float32", "float64" } do
      local a = tide.tensor({ NAN, 1, 2, NAN }, { dtype = dt })
      local b = tide.tensor({ 1, NAN, 1, NAN }, { dtype = dt })
      rclose(tide.minimum(a, b), { NAN, NAN, 1, NAN }, 0, "minimum " .. dt)
      rclose(tide.maximum(a, b), { NAN, NAN, 2, NAN }, 0, "maximum " .. dt)
      rclose(tide.maximum(b, a), { NAN, NAN, 2, NAN }, 0, "maximum swapped " .. dt)
    end
    exact(tide.minimum(tide.long { 3, -1 }, tide.long { 2, 5 }), "int64", { 2, -1 })
    exact(tide.maximum(tide.tensor({ 1, 5 }, { dtype = "int32" }), tide.tensor { 2.5, 0.5 }), "float32", { 2.5, 5 })
  end)

  it("integer pow and division", function()
    exact(tide.long { 3, -5 } ^ 2, "int64", { 9, 25 })
    exact(tide.long { 2, 3 } ^ tide.long { 10, 3 }, "int64", { 1024, 27 })
    exact(2 ^ tide.long { 3, 5 }, "int64", { 8, 32 })
    exact(tide.long { 4, 9 } ^ 0.5, "float32", { 2, 3 })
    exact(2.5 ^ tide.long { 1, 2 }, "float32", { 2.5, 6.25 })
    -- negative exponents are an error for tensors as for numbers (PyTorch's tensor
    -- case silently gives 0, or +-1 for a base of +-1)
    H.raises(function() return tide.long { 1, 2, -1, 3 } ^ tide.long { -1, -1, -1, -2 } end,
      "pow: integers to negative integer powers are not allowed (exponent -1")
    H.raises(function() return tide.long { 1, 2 } ^ -1 end, "pow: integers to negative integer powers are not allowed")
    exact(tide.long { 1, 2 }:double() ^ -1, "float64", { 1, 0.5 })
    exact(tide.long { 7, -7 } / tide.long { 2, 2 }, "float32", { 3.5, -3.5 })
    rclose(tide.long { 1, 0, -1 } / 0, { math.huge, NAN, -math.huge }, 0)
  end)
end)

-- -- Comparisons, logical ops, where ------------------------------------------------------------

describe("comparisons and logical ops", function()
  local x = tide.tensor { 1, 2.5, 3, NAN }
  local want = {
    eq = { false, true, false, false }, ne = { true, false, true, true },
    lt = { true, false, false, false }, le = { true, true, false, false },
    gt = { false, false, true, false }, ge = { false, true, true, false },
  }
  for _, name in ipairs { "eq", "ne", "lt", "le", "gt", "ge" } do
    it(name .. " gives bool against numbers, tensors, with broadcasting and strides", function()
      exact(x[name](x, 2.5), "bool", want[name])
      exact(tide[name](x, tide.tensor(2.5, { dtype = "float64" })), "bool", want[name])
      exact(x:double()[name](x:double(), tide.tensor { 2.5 }), "bool", want[name])
      -- (2,1) against (4) -> (2,4); the first row compares with 2.5, the second with 3
      local col = tide.tensor { { 2.5 }, { 3 } }
      local r = x[name](x, col)
      same_shape(r, { 2, 4 })
      assert.same(want[name], r:totable()[1])
      -- strided: a transposed (4,2) whose column 1 is x
      local xt = tide.stack({ x, x }, 1):t()
      assert.is_false(xt:is_contiguous())
      exact(xt[name](xt, 2.5):t()[1], "bool", want[name])
      -- integers against floats compare in float; bool against int
      exact(tide.long { 1, 2, 3 }[name](tide.long { 1, 2, 3 }, 2.5), "bool", { want[name][1], want[name][1], want[name][3] })
    end)
  end

  it("eq between bool and int, and float and int", function()
    exact(tide.eq(tide.tensor { true, false }, tide.long { 1, 0 }), "bool", { true, true })
    exact(tide.eq(tide.tensor { 1, 2.5 }, tide.long { 1, 2 }), "bool", { true, false })
    exact(tide.ne(tide.tensor({ 250, 3 }, { dtype = "uint8" }), 250), "bool", { false, true })
  end)

  it("logical_and, logical_or, logical_not on any dtype, with broadcasting", function()
    exact(tide.logical_and(tide.long { 0, 2, 3 }, tide.tensor { 1, 0, 0.5 }), "bool", { false, false, true })
    exact(tide.logical_or(tide.long { 0, 0, 3 }, tide.long { 0, 1, 0 }), "bool", { false, true, true })
    exact(tide.logical_not(tide.tensor { 0, 2.5, NAN }), "bool", { true, false, false })
    exact(tide.logical_not(tide.tensor { true, false }), "bool", { false, true })
    local m = tide.logical_and(tide.tensor { { true }, { false } }, tide.tensor { true, false, true })
    exact(m, "bool", { { true, false, true }, { false, false, false } })
    exact(tide.logical_or(tide.long { { 1 }, { 0 } }:t(), tide.long { { 0 }, { 0 }, { 1 } }), "bool",
      { { true, false }, { true, false }, { true, true } })
  end)

  it("where broadcasts, promotes, takes numbers, and reads strided inputs", function()
    local c = tide.tensor { { true }, { false }, { true } }
    local a = tide.long { { 1, 2, 3, 4 } }
    exact(tide.where(c, a, 0), "int64", { { 1, 2, 3, 4 }, { 0, 0, 0, 0 }, { 1, 2, 3, 4 } })
    exact(tide.where(c, a, 0.5), "float32", { { 1, 2, 3, 4 }, { 0.5, 0.5, 0.5, 0.5 }, { 1, 2, 3, 4 } })
    exact(tide.where(tide.tensor { true, false }, tide.long { 1, 2 }, tide.tensor { 0.5, 0.25 }), "float32", { 1, 0.25 })
    local x = urand({ 7, 5 }, -1, 1):t()
    local y = tide.where(x:gt(0), x, x * 10)
    local xv, yv = values(x), values(y)
    for i = 1, #xv do assert.equal(xv[i] > 0 and xv[i] or xv[i] * 10, yv[i]) end
    exact(x:gt(0):where(1, -1):abs(), "int64", (function() local r = {} for i = 1, 5 do r[i] = { 1, 1, 1, 1, 1, 1, 1 } end return r end)())
    H.raises(function() return tide.where(tide.long { 1, 0 }, a, 0) end, "where: condition must be a bool tensor, got int64")
  end)
end)

-- -- Lua operators ----------------------------------------------------------------------------

describe("Lua operators", function()
  it("+ - * / ^ and unary minus with tensors and numbers on either side", function()
    local a = tide.tensor { { 1.5, -2 }, { 3, 0.5 } }
    local t = 1e-6
    rclose(a + 2, { { 3.5, 0 }, { 5, 2.5 } }, t)
    rclose(2 + a, { { 3.5, 0 }, { 5, 2.5 } }, t)
    rclose(a - 2, { { -0.5, -4 }, { 1, -1.5 } }, t)
    rclose(2 - a, { { 0.5, 4 }, { -1, 1.5 } }, t)
    rclose(a * 3, { { 4.5, -6 }, { 9, 1.5 } }, t)
    rclose(3 * a, { { 4.5, -6 }, { 9, 1.5 } }, t)
    rclose(a / 4, { { 0.375, -0.5 }, { 0.75, 0.125 } }, t)
    rclose(4 / a, { { 2.6666666666666665, -2 }, { 1.3333333333333333, 8 } }, t)
    rclose(a ^ 2, { { 2.25, 4 }, { 9, 0.25 } }, t)
    rclose(2 ^ a, { { 2.8284271247461903, 0.25 }, { 8, 1.4142135623730951 } }, t)
    rclose(-a, { { -1.5, 2 }, { -3, -0.5 } }, t)
    rclose(a - a:t(), { { 0, -5 }, { 5, 0 } }, t)
    rclose(a * a + a / (a - 10), { { 2.25 - 1.5 / 8.5, 4 + 2 / 12 }, { 9 - 3 / 7, 0.25 - 0.5 / 9.5 } }, t)
    for _, r in ipairs { a + 2, 2 - a, a * a, 4 / a, -a, 2 ^ a } do assert.equal("float32", r.dtype.name) end
    exact(tide.long { 1, 2 } + 2, "int64", { 3, 4 })
    exact(tide.long { 1, 2 } * 2.5, "float32", { 2.5, 5 })
    exact(1 - tide.long { 1, 2 }, "int64", { 0, -1 })
  end)
end)

-- -- Type promotion ---------------------------------------------------------------------------

describe("type promotion (PyTorch rules)", function()
  -- the tensors of PyTorch's examples: integer literals are int64 (tide.long), others as given
  local function t(v, o)
    if o ~= nil then return tide.tensor(v, o) end
    for _, x in ipairs(type(v) == "table" and v or { v }) do
      if type(x) ~= "number" or x ~= math.floor(x) then return tide.tensor(v) end
    end
    return tide.long(v)
  end
  local function D(d) return { dtype = d } end
  local cases = {
    { "int64 + 1.5", function() return t { 1, 2 } + 1.5 end, "float32", { 2.5, 3.5 } },
    { "int64 + 2", function() return t { 1, 2 } + 2 end, "int64", { 3, 4 } },
    { "int32 + int64", function() return t({ 1, 2 }, D "int32") + t { 1, 2 } end, "int64", { 2, 4 } },
    { "float32 + float64 0-dim", function() return t({ 1, 2 }, D "float32") + t(2.5, D "float64") end, "float32", { 3.5, 4.5 } },
    { "int64 + float64 0-dim", function() return t { 1, 2 } + t(2.5, D "float64") end, "float64", { 3.5, 4.5 } },
    { "int32 + int64 0-dim", function() return t({ 1, 2 }, D "int32") + t(7) end, "int32", { 8, 9 } },
    { "float64 0-dim + float32 0-dim", function() return t(1, D "float64") + t(2, D "float32") end, "float64", 3 },
    { "float32 + float64", function() return t({ 1, 2 }, D "float32") + t({ 0.25, 0.5 }, D "float64") end, "float64", { 1.25, 2.5 } },
    { "bool + bool", function() return t { true, false, false } + t { true, true, false } end, "bool", { true, true, false } },
    { "bool * bool", function() return t { true, false, false } * t { true, true, false } end, "bool", { true, false, false } },
    { "bool + 1", function() return t { true, false } + 1 end, "int64", { 2, 1 } },
    { "bool + 1.5", function() return t { true, false } + 1.5 end, "float32", { 2.5, 1.5 } },
    { "bool + uint8", function() return t { true, false } + t({ 3, 4 }, D "uint8") end, "uint8", { 4, 4 } },
    { "int / int", function() return t { 1, 2, 7 } / t { 2, 4, 2 } end, "float32", { 0.5, 0.5, 3.5 } },
    { "int < int", function() return t { 1, 2, 7 }:lt(t { 2, 2, 2 }) end, "bool", { true, false, false } },
    { "exp(int)", function() return t { 0, 2 }:exp():gt(7.3) end, "bool", { false, true } },
    { "uint8 + uint8 wraps", function() return t({ 250, 3 }, D "uint8") + t({ 10, 4 }, D "uint8") end, "uint8", { 4, 7 } },
    { "uint8 - uint8 wraps", function() return t({ 3, 250 }, D "uint8") - t({ 5, 4 }, D "uint8") end, "uint8", { 254, 246 } },
    -- signed integers wrap around too, as in PyTorch (defined behaviour: make test-asan's UBSan checks it)
    { "int32 + int32 wraps", function() return t({ 2147483647, -2147483648 }, D "int32") + t({ 1, -1 }, D "int32") end,
      "int32", { -2147483648, 2147483647 } },
    { "int32 * int32 wraps", function() return t({ 65536, 3 }, D "int32") * t({ 65536, -5 }, D "int32") end, "int32", { 0, -15 } },
    { "int64 * int64 wraps", function() return t({ 2 ^ 62, 5 }, D "int64") * t({ 2, 3 }, D "int64") end, "int64", { -2 ^ 63, 15 } },
    { "int64 sum wraps", function() return t({ 2 ^ 62, 2 ^ 62 }, D "int64"):sum() end, "int64", -2 ^ 63 },
    { "uint8 + int32", function() return t({ 250, 3 }, D "uint8") + t({ 10, 4 }, D "int32") end, "int32", { 260, 7 } },
    { "uint8 + 5", function() return t({ 250, 3 }, D "uint8") + 5 end, "uint8", { 255, 8 } },
    { "uint8 + int64 0-dim", function() return t({ 250, 3 }, D "uint8") + t(300) end, "uint8", { 38, 47 } },
    { "uint8 * int32 0-dim", function() return t({ 3, 250 }, D "uint8") * t(2, D "int32") end, "uint8", { 6, 244 } },
    { "uint8 + 1.5", function() return t({ 250, 3 }, D "uint8") + 1.5 end, "float32", { 251.5, 4.5 } },
    { "int32 * 2.5", function() return t({ 3, 5 }, D "int32") * 2.5 end, "float32", { 7.5, 12.5 } },
    { "float64 * 2.5", function() return t({ 3, 5 }, D "float64") * 2.5 end, "float64", { 7.5, 12.5 } },
    { "minimum(int32, float32)", function() return tide.minimum(t({ 1, 5 }, D "int32"), t { 2.5, 0.5 }) end, "float32", { 1, 0.5 } },
    { "where(int64, float32)", function() return tide.where(t { true, false }, t { 1, 2 }, t { 0.5, 0.25 }) end, "float32", { 1, 0.25 } },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " -> " .. c[3], function() exact(c[2](), c[3], c[4]) end)
  end

  it("td_result_type agrees", function()
    local C = tide.C
    assert.equal(tide.int64.id, C.td_result_type(t({ 1 }, D "int32").p, t({ 1 }, D "int64").p))
    assert.equal(tide.float32.id, C.td_result_type(t({ 1 }, D "float32").p, t(1, D "float64").p))
    assert.equal(tide.uint8.id, C.td_result_type(t({ 1 }, D "bool").p, t({ 1 }, D "uint8").p))
  end)
end)

-- -- Broadcasting -----------------------------------------------------------------------------

describe("broadcasting", function()
  it("0-dim with n-dim, size-1 dims, leading dims, and empty tensors", function()
    local s = tide.long(10)
    assert.same({}, s:size())
    exact(tide.long { { 1, 2, 3 }, { 4, 5, 6 } } + s, "int64", { { 11, 12, 13 }, { 14, 15, 16 } })
    exact(s - tide.long { { 1, 2, 3 } }, "int64", { { 9, 8, 7 } })
    exact(s * s, "int64", 100)
    local r = tide.long { { 1 }, { 2 }, { 3 } } * tide.long { { 10, 20, 30, 40 } }
    exact(r, "int64", { { 10, 20, 30, 40 }, { 20, 40, 60, 80 }, { 30, 60, 90, 120 } })
    local x = tide.arange(6):view(2, 1, 3)
    local y = tide.long { { 100 }, { 200 } }
    local z = x + y                                           -- (2,1,3) + (2,1) -> (2,2,3)
    same_shape(z, { 2, 2, 3 })
    exact(z, "int64", { { { 100, 101, 102 }, { 200, 201, 202 } }, { { 103, 104, 105 }, { 203, 204, 205 } } })
    local e = tide.zeros(0, 3) + tide.ones(3)
    same_shape(e, { 0, 3 })
    same_shape(tide.zeros(4, 0) * tide.ones(1, 1), { 4, 0 })
  end)

  it("8-dim broadcasting of interleaved size-1 dims", function()
    local a = tide.arange(16):view(2, 1, 2, 1, 2, 1, 2, 1)
    local b = tide.arange(16):view(1, 2, 1, 2, 1, 2, 1, 2) * 100
    local r = a + b
    same_shape(r, { 2, 2, 2, 2, 2, 2, 2, 2 })
    local v, k = values(r), 0
    for i1 = 0, 1 do for i2 = 0, 1 do for i3 = 0, 1 do for i4 = 0, 1 do
    for i5 = 0, 1 do for i6 = 0, 1 do for i7 = 0, 1 do for i8 = 0, 1 do
      k = k + 1
      local want = (i1 * 8 + i3 * 4 + i5 * 2 + i7) + 100 * (i2 * 8 + i4 * 4 + i6 * 2 + i8)
      if v[k] ~= want then error(("element %d is %g, expected %g"):format(k, v[k], want)) end
    end end end end end end end end
  end)

  it("reports shapes that cannot broadcast", function()
    H.raises(function() return tide.randn(3, 4) + tide.randn(5) end, "add: shapes [3,4] and [5] cannot be broadcast")
    H.raises(function() return tide.randn(2, 3) * tide.randn(3, 2) end, "mul: shapes [2,3] and [3,2] cannot be broadcast")
    H.raises(function() return tide.randn(2, 3):lt(tide.randn(4, 1, 2)) end, "lt: shapes [2,3] and [4,1,2] cannot be broadcast")
    H.raises(function() return tide.where(tide.ones(3):gt(0), tide.randn(4), 0) end, "where: shapes [3] and [4] cannot be broadcast")
  end)
end)

-- -- In place ---------------------------------------------------------------------------------

describe("in-place ops", function()
  it("add_ sub_ mul_ div_ with broadcasting, numbers, and version bumps", function()
    local x = tide.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "float64" })
    local v = x._version
    assert.equal(x, x:add_(tide.long { 10, 20, 30 }))
    assert.equal(v + 1, x._version)
    x:sub_(1); x:mul_(tide.long { { 2 }, { -1 } }); x:div_(4)
    assert.equal(v + 4, x._version)
    exact(x, "float64", { { 5, 10.5, 16 }, { -3.25, -6, -8.75 } })
    -- integer destination: int results are fine, float results are refused
    local i = tide.long { 1, 2, 3 }
    i:add_(2); i:mul_(tide.tensor({ 2 }, { dtype = "int32" }))
    exact(i, "int64", { 6, 8, 10 })
    H.raises(function() i:div_(2) end, "div_: result type float32 can't be cast to the destination type int64")
    H.raises(function() i:add_(1.5) end, "add_: result type float32 can't be cast to the destination type int64")
    H.raises(function() i:sqrt_() end, "sqrt_: result type float32 can't be cast to the destination type int64")
    exact(i, "int64", { 6, 8, 10 })
    -- a float32 destination takes a float64 operand (the result is cast)
    local f = tide.tensor { 1.5, 2 }
    f:add_(tide.tensor({ 0.5, 0.25 }, { dtype = "float64" }))
    exact(f, "float32", { 2, 2.25 })
  end)

  it("copy_ broadcasts and converts dtypes; fill_ and zero_", function()
    local x = tide.zeros(2, 3)
    local v = x._version
    x:copy_(tide.long { 1, 2, 3 })
    exact(x, "float32", { { 1, 2, 3 }, { 1, 2, 3 } })
    x:copy_(tide.tensor({ { 0.5 }, { -0.25 } }, { dtype = "float64" }))
    exact(x, "float32", { { 0.5, 0.5, 0.5 }, { -0.25, -0.25, -0.25 } })
    local i = tide.zeros(4, { dtype = "int64" })
    i:copy_(tide.tensor { 2.7, -2.7, 0.2, 9 })                  -- truncation toward zero
    exact(i, "int64", { 2, -2, 0, 9 })
    local b = tide.zeros(3, { dtype = "bool" })
    b:copy_(tide.tensor { 0, 0.5, -3 })
    exact(b, "bool", { false, true, true })
    x:fill_(2.5)
    exact(x, "float32", { { 2.5, 2.5, 2.5 }, { 2.5, 2.5, 2.5 } })
    i:fill_(7)
    exact(i, "int64", { 7, 7, 7, 7 })
    x:zero_()
    exact(x, "float32", { { 0, 0, 0 }, { 0, 0, 0 } })
    assert.equal(v + 4, x._version)
    H.raises(function() x:copy_(tide.ones(3, 2)) end, "cannot be written into a tensor of shape [2,3]")
  end)

  it("clamp_ and masked_fill_", function()
    local x = tide.tensor { -2, -0.5, 0.5, 2 }
    local v = x._version
    x:clamp_(-1)
    exact(x, "float32", { -1, -0.5, 0.5, 2 })
    x:clamp_(nil, 1)
    exact(x, "float32", { -1, -0.5, 0.5, 1 })
    x:clamp_(-0.25, 0.25)
    exact(x, "float32", { -0.25, -0.25, 0.25, 0.25 })
    local m = tide.long { { 1, 2, 3 }, { 4, 5, 6 } }
    m:masked_fill_(tide.tensor { true, false, true }, -1)           -- the mask broadcasts
    exact(m, "int64", { { -1, 2, -1 }, { -1, 5, -1 } })
    m:masked_fill_(m:gt(4), 0)
    exact(m, "int64", { { -1, 2, -1 }, { -1, 0, -1 } })
    assert.equal(v + 3, x._version)
    H.raises(function() tide.long { 1, 2 }:clamp_(0.5, 1.5) end, "can't be cast to the destination type int64")
  end)

  it("writes through non-contiguous destinations; views share the version counter", function()
    local base = tide.arange(12, { dtype = "float64" }):view(3, 4)
    local v = base._version
    base:t():add_(tide.long { 100, 200, 300 })                    -- (4,3) view; rows of base get 100, 200, 300
    exact(base, "float64", { { 100, 101, 102, 103 }, { 204, 205, 206, 207 }, { 308, 309, 310, 311 } })
    base[{ {}, { 2, 4, 2 } }]:mul_(-1)                               -- columns 2 and 4
    exact(base, "float64", { { 100, -101, 102, -103 }, { 204, -205, 206, -207 }, { 308, -309, 310, -311 } })
    base[2]:fill_(0)
    exact(base, "float64", { { 100, -101, 102, -103 }, { 0, 0, 0, 0 }, { 308, -309, 310, -311 } })
    assert.equal(v + 3, base._version)
    local row = base[1]
    row:zero_()
    assert.equal(v + 4, base._version)
    assert.equal(base._version, row._version)
  end)

  it("an operand that overlaps the destination is read before it is written", function()
    local x = tide.arange(9, { dtype = "float64" }):view(3, 3)
    x:copy_(x:t())
    exact(x, "float64", { { 0, 3, 6 }, { 1, 4, 7 }, { 2, 5, 8 } })
    x:add_(x:t())
    exact(x, "float64", { { 0, 4, 8 }, { 4, 8, 12 }, { 8, 12, 16 } })
    local y = tide.arange(6, { dtype = "float64" })
    y[{ { 2, 6 } }]:copy_(y[{ { 1, 5 } }])                         -- shift right by one
    exact(y, "float64", { 0, 0, 1, 2, 3, 4 })
  end)

  it("errors: shape that cannot be written, expanded destination, bool neg", function()
    H.raises(function() tide.randn(4):add_(tide.randn(3, 4)) end,
      "add_: result of shape [3,4] cannot be written into a tensor of shape [4]")
    H.raises(function() tide.randn(4):mul_(tide.randn(5)) end, "mul: shapes [4] and [5] cannot be broadcast")
    H.raises(function() tide.zeros(3):expand(2, 3):add_(1) end, "add_", "refers to the same memory")
    H.raises(function() return -tide.tensor { true } end, "neg: bool tensors are not supported")
    H.raises(function() return tide.tensor { true }:sub(tide.tensor { false }) end, "sub: bool tensors are not supported")
  end)
end)

-- -- Argument errors --------------------------------------------------------------------------

describe("argument errors", function()
  it("name the op, the argument and the type, at the caller's line", function()
    local a = tide.randn(3)
    local err = H.raises(function() local r = a:add("x"); return r end, "bad argument #2 to 'add' (Tensor or number expected, got string)")
    assert.truthy(err:find("elementwise_spec.lua:%d+:"), err)
    H.raises(function() return a + {} end, "bad argument #2 to 'add' (Tensor or number expected, got table)")
    H.raises(function() return a * nil end, "bad argument #2 to 'mul' (Tensor or number expected, got nil)")
    H.raises(function() return tide.exp("x") end, "bad argument #1 to 'exp' (Tensor expected, got string)")
    H.raises(function() return a:add_("x") end, "bad argument #2 to 'add_' (Tensor or number expected, got string)")
    H.raises(function() return a:gelu { approximate = "fast" } end, "gelu: approximate must be 'none' or 'tanh'")
  end)
end)

-- -- Threads ----------------------------------------------------------------------------------

describe("threads", function()
  it("elementwise results do not depend on the thread count", function()
    local n0 = tide.get_num_threads()
    local x = tide.randn(1023, 1023) * 4
    local y = tide.randn(1023, 1) + 1
    local function f(v) return v:sin() * v:exp():tanh() + (v ^ 1.5):sigmoid() * y - v:t():cos() end
    local function raw(t) return ffi.cast("float *", t.ptr), t:numel() end
    local results = {}
    local counts = { 1, 2, 3, 4 }
    for k, n in ipairs(counts) do
      tide.set_num_threads(n)
      results[k] = f(x):contiguous()
    end
    tide.set_num_threads(n0)
    local p1, n = raw(results[1])
    for k = 2, #results do
      local pk = raw(results[k])
      local diff = 0
      for i = 0, n - 1 do if p1[i] ~= pk[i] and p1[i] == p1[i] then diff = diff + 1 end end
      assert.equal(0, diff, ("%d elements differ between 1 and %d threads"):format(diff, counts[k]))
    end
  end)
end)
