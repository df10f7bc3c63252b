-- Tensor creation from Lua: tide.tensor from nested tables, the fill and range
-- constructors, the random ones and their *_like forms, shape argument forms,
-- options, bad sizes, and the RNG's reproducibility across thread counts.
local tide = require "tide"
local H = require "helper"

local function shape(x) return x:size() end

-- sum and extreme values of a tensor, in Lua (not through the reductions)
local function stats(x)
  local v = x:double():reshape(-1):totable()
  local s, s2, lo, hi = 0, 0, math.huge, -math.huge
  for i = 1, #v do
    s, s2 = s + v[i], s2 + v[i] * v[i]
    if v[i] < lo then lo = v[i] end
    if v[i] > hi then hi = v[i] end
  end
  local mean = s / #v
  return mean, math.sqrt(s2 / #v - mean * mean), lo, hi
end

describe("tide.tensor", function()
  it("builds nested tables with the shape of the nesting", function()
    local x = tide.tensor { { 1, 2, 3 }, { 4, 5, 6 } }
    assert.same({ 2, 3 }, shape(x))
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, x:totable())
    local y = tide.tensor { { { 1.5 }, { -2 } } }
    assert.same({ 1, 2, 1 }, shape(y))
    assert.same({ { { 1.5 }, { -2 } } }, y:totable())
  end)

  it("makes the default float dtype from any numbers, bool from booleans; dtypes are constructors", function()
    assert.equal(tide.float32, tide.tensor({ 1, 2, -3 }).dtype)        -- Lua has one number type
    assert.equal(tide.int64, tide.long({ 1, 2, -3 }).dtype)
    assert.equal(tide.int64, tide.int64 { 1, 2, -3 }.dtype)
    assert.equal(tide.int32, tide.int32({ { 1 }, { 2 } }).dtype)
    assert.same({ { 1 }, { 2 } }, tide.int32({ { 1 }, { 2 } }):totable())
    assert.equal(tide.float64, tide.double({ 1, 2 }, { requires_grad = true }).dtype)
    assert.equal(tide.uint8, tide.byte { 255 }.dtype)
    H.raises(function() return tide.long({ 1 }, { dtype = tide.float32 }) end, "int64: the dtype is given by the constructor")
    H.raises(function() return tide.long({ 1.5, 2 ^ 63 }) end, "out of range for int64")
    tide.set_default_dtype(tide.float64)
    assert.equal(tide.float64, tide.tensor({ 1, 2 }).dtype)
    tide.set_default_dtype(tide.float32)
    assert.equal(tide.float32, tide.tensor({ 1, 2.5, 3 }).dtype)
    assert.equal(tide.float32, tide.tensor({ { 1, 2 }, { 3, 0.25 } }).dtype)
    assert.equal(tide.bool, tide.tensor({ true, false }).dtype)
    assert.equal(tide.float32, tide.tensor({ 1, 0 / 0 }).dtype)
    assert.equal(tide.float32, tide.tensor({ 1, math.huge }).dtype)
    assert.equal(tide.float32, tide.tensor({}).dtype)                 -- as torch.tensor([])
    assert.equal(tide.float32, tide.tensor(7).dtype)
    assert.equal(tide.float32, tide.tensor(0.5).dtype)
    assert.same({ true, false, true }, tide.tensor({ true, false, true }):totable())
    assert.same({ 1.5, 3 }, tide.tensor({ 1.5, 3 }):totable())
  end)

  it("makes 0-dim and empty tensors", function()
    local s = tide.tensor(3.25)
    assert.equal(0, s:dim())
    assert.same({}, shape(s))
    assert.equal(3.25, s:item())
    assert.equal(true, tide.tensor(true):item())
    local e = tide.tensor {}
    assert.same({ 0 }, shape(e))
    assert.same({ 2, 0 }, shape(tide.tensor { {}, {} }))
  end)

  it("takes a dtype and requires_grad", function()
    local x = tide.tensor({ 1, 2, 3 }, { dtype = tide.float64 })
    assert.equal(tide.float64, x.dtype)
    assert.same({ 1, 2, 3 }, x:totable())
    assert.equal(tide.int32, tide.tensor({ 1.9, -1.9 }, { dtype = "int32" }).dtype)
    assert.same({ 1, -1 }, tide.tensor({ 1.9, -1.9 }, { dtype = "int32" }):totable())
    assert.same({ 1, 0, 1 }, tide.tensor({ true, false, true }, { dtype = tide.uint8 }):totable())
    local g = tide.tensor({ 1, 2 }, { dtype = tide.float32, requires_grad = true })
    assert.is_true(g.requires_grad)
    assert.is_true(g.is_leaf)
    assert.is_false(tide.tensor({ 1.5 }).requires_grad)
  end)

  it("copies a tensor given as data (detached)", function()
    local a = tide.tensor({ 1.5, 2 }, { requires_grad = true })
    local b = tide.tensor(a)
    b[1] = 9
    assert.same({ 1.5, 2 }, a:totable())
    assert.is_false(b.requires_grad)
    assert.equal(tide.float64, tide.tensor(a, { dtype = tide.float64 }).dtype)
  end)

  it("rejects ragged tables and bad elements, naming the problem", function()
    H.raises(function() tide.tensor { { 1, 2 }, { 3 } } end, "tensor:", "ragged", "dim 2 has sizes 2 and 1")
    H.raises(function() tide.tensor { 1, { 2 } } end, "tensor:", "ragged")
    H.raises(function() tide.tensor { { 1 }, 2 } end, "tensor:", "ragged")
    H.raises(function() tide.tensor { {}, 2 } end, "tensor:", "ragged")
    H.raises(function() tide.tensor { 1, "x" } end, "tensor:", "string")
    H.raises(function() tide.tensor("abc") end, "bad argument #1 to 'tensor'", "got string")
    H.raises(function() tide.tensor({ 1 }, { dtype = "float16x" }) end, "unknown dtype 'float16x'")
    H.raises(function() tide.long({ 1, 2 }, { requires_grad = true }) end, "floating point", "int64")
    local deep = 1
    for _ = 1, 9 do deep = { deep } end
    H.raises(function() tide.tensor(deep) end, "tensor:", "at most 8 dims")
  end)
end)

describe("constant constructors", function()
  it("zeros, ones, full, empty with every shape form", function()
    for _, z in ipairs { tide.zeros(3, 4), tide.zeros { 3, 4 }, tide.zeros(3, 4, { dtype = tide.float32 }),
      tide.zeros({ 3, 4 }, { dtype = tide.float32 }) } do
      assert.same({ 3, 4 }, shape(z))
      assert.equal(tide.float32, z.dtype)
      assert.same({ 0, 0, 0, 0 }, z[2]:totable())
    end
    local o = tide.ones(2, { dtype = tide.int64 })
    assert.equal(tide.int64, o.dtype)
    assert.same({ 1, 1 }, o:totable())
    assert.same({ { 7, 7 } }, tide.full({ 1, 2 }, 7):totable())
    assert.equal(tide.float32, tide.full({ 2 }, 7).dtype)
    assert.same({ 2.5, 2.5, 2.5 }, tide.full({ 3 }, 2.5, { dtype = tide.float64 }):totable())
    assert.same({ true, true }, tide.full({ 2 }, true, { dtype = tide.bool }):totable())
    assert.same({ 5, 1, 7 }, shape(tide.empty(5, 1, 7)))
    assert.same({ 1023 }, shape(tide.empty { 1023 }))
    assert.equal(tide.int32, tide.empty(2, { dtype = "int32" }).dtype)
  end)

  it("0-dim and empty shapes", function()
    assert.equal(0, tide.zeros().ndim)
    assert.equal(0, tide.ones({}):dim())
    assert.equal(1, tide.ones({}):item())
    assert.same({ 2 }, tide.zeros(2, {}):size())           -- empty options
    assert.same({ 2 }, tide.zeros({ 2 }, {}):size())
    assert.same({ 0, 3 }, shape(tide.zeros(0, 3)))
    assert.equal(0, tide.zeros(0, 3):numel())
  end)

  it("eye", function()
    assert.same({ { 1, 0, 0 }, { 0, 1, 0 }, { 0, 0, 1 } }, tide.eye(3):totable())
    assert.same({ { 1, 0, 0 }, { 0, 1, 0 } }, tide.eye(2, 3):totable())
    assert.same({ { 1, 0 }, { 0, 1 }, { 0, 0 } }, tide.eye(3, 2):totable())
    assert.equal(tide.float64, tide.eye(2, { dtype = tide.float64 }).dtype)
    assert.same({ 0, 0 }, shape(tide.eye(0)))
  end)

  it("requires_grad option", function()
    for _, t in ipairs { tide.zeros(2, { requires_grad = true }), tide.ones({ 2 }, { requires_grad = true }),
      tide.full({ 2 }, 3, { requires_grad = true }), tide.rand(2, { requires_grad = true }),
      tide.randn(2, { requires_grad = true }), tide.empty(2, { requires_grad = true }),
      tide.arange(0, 1, 0.5, { requires_grad = true }), tide.linspace(0, 1, 3, { requires_grad = true }),
      tide.eye(2, { requires_grad = true }) } do
      assert.is_true(t.requires_grad)
      assert.is_true(t.is_leaf)
    end
    assert.is_false(tide.zeros(2).requires_grad)
  end)

  it("rejects negative, fractional and huge sizes with the op's name", function()
    H.raises(function() tide.zeros(-1, 2) end, "zeros:", "negative size -1", "[-1,2]")
    H.raises(function() tide.ones({ 3, -2 }) end, "ones:", "negative size -2")
    H.raises(function() tide.rand(3, -2) end, "rand:", "-2")
    H.raises(function() tide.empty(-5) end, "empty:", "-5")
    H.raises(function() tide.full({ -1 }, 2) end, "full:", "-1")
    H.raises(function() tide.zeros(2.5) end, "bad argument #1 to 'zeros'", "integer size expected, got 2.5")
    H.raises(function() tide.ones(2, "x") end, "bad argument #2 to 'ones'", "got string")
    H.raises(function() tide.zeros(1, 1, 1, 1, 1, 1, 1, 1, 1) end, "zeros:", "at most 8 dims")
    H.raises(function() tide.full({ 2 }, "a") end, "bad argument #2 to 'full'", "number expected")
    -- an allocation that cannot succeed is an error, not a crash
    H.raises(function() tide.empty(1e15) end, "empty:", "out of memory", "1000000000000000")
    H.raises(function() tide.zeros(1e15) end, "zeros:", "out of memory")
    H.raises(function() tide.empty(1e6, 1e6, 1e6) end, "empty:", "too large")
    H.raises(function() tide.randn(2 ^ 62, 4) end, "randn:", "too large")
    -- and the process goes on allocating
    assert.same({ 1, 1 }, tide.ones(2):totable())
  end)
end)

describe("ranges", function()
  it("arange excludes stop; integers give int64", function()
    assert.same({ 0, 1, 2, 3, 4 }, tide.arange(5):totable())
    assert.equal(tide.int64, tide.arange(5).dtype)
    assert.same({ 2, 3, 4 }, tide.arange(2, 5):totable())
    assert.same({ 10, 7, 4, 1 }, tide.arange(10, 0, -3):totable())
    assert.same({}, tide.arange(5, 2):totable())
    assert.same({ 1 }, shape(tide.arange(1)))
    assert.same({ 0, 1, 2 }, tide.arange(3, { dtype = tide.float64 }):totable())
    assert.equal(tide.float64, tide.arange(3, { dtype = tide.float64 }).dtype)
  end)

  it("arange with a float step", function()
    local a = tide.arange(1, 2.5, 0.5)
    assert.equal(tide.float32, a.dtype)
    assert.same({ 1, 1.5, 2 }, a:totable())
    local b = tide.arange(0, 1, 0.1, { dtype = tide.float64 })
    assert.same({ 10 }, shape(b))          -- as torch.arange(0, 1, 0.1): 1.0 excluded
    H.close(b, { 0, .1, .2, .3, .4, .5, .6, .7, .8, .9 }, 1e-15)
    assert.same({ 4 }, shape(tide.arange(0, 1, 0.25)))
    assert.same({ 0, -0.5, -1, -1.5 }, tide.arange(0, -2, -0.5):totable())
    H.raises(function() tide.arange(0, 1, 0) end, "arange:", "step=0")
    H.raises(function() tide.arange(0, 1 / 0) end, "arange:", "inf")
    H.raises(function() tide.arange("a") end, "bad argument #1 to 'arange'")
  end)

  it("linspace hits both endpoints exactly", function()
    local l = tide.linspace(0.1, 0.7, 7, { dtype = tide.float64 }):totable()
    assert.equal(0.1, l[1])
    assert.equal(0.7, l[7])
    H.close(tide.linspace(0.1, 0.7, 7, { dtype = tide.float64 }), { .1, .2, .3, .4, .5, .6, .7 }, 1e-15)
    local f = tide.linspace(-1, 1, 1023)
    assert.equal(tide.float32, f.dtype)
    assert.equal(-1, f[1]:item())
    assert.equal(1, f[-1]:item())
    assert.equal(1023, f:numel())
    assert.same({ 0, 0.25, 0.5, 0.75, 1 }, tide.linspace(0, 1, 5):totable())
    assert.same({ 2 }, tide.linspace(2, 5, 1):totable())      -- one step is the start, as in torch
    assert.same({}, tide.linspace(2, 5, 0):totable())
    assert.same({ 5, 4, 3 }, tide.linspace(5, 3, 3):totable())
    H.raises(function() tide.linspace(0, 1, -1) end, "linspace:", "-1")
    H.raises(function() tide.linspace(0, 1, 2.5) end, "bad argument #3 to 'linspace'", "2.5")
  end)
end)

describe("random constructors", function()
  it("rand is uniform in [0, 1)", function()
    for _, dt in ipairs { tide.float32, tide.float64 } do
      local x = tide.rand(100003, { dtype = dt })
      assert.equal(dt, x.dtype)
      local mean, std, lo, hi = stats(x)
      assert.is_true(lo >= 0 and hi < 1, ("range [%g, %g]"):format(lo, hi))
      assert.is_true(math.abs(mean - 0.5) < 0.01, "mean " .. mean)
      assert.is_true(math.abs(std - math.sqrt(1 / 12)) < 0.01, "std " .. std)
    end
  end)

  it("randn has mean 0 and std 1", function()
    for _, dt in ipairs { tide.float32, tide.float64 } do
      local mean, std = stats(tide.randn(100000, { dtype = dt }))
      assert.is_true(math.abs(mean) < 0.02, "mean " .. mean)
      assert.is_true(math.abs(std - 1) < 0.02, "std " .. std)
    end
    -- the tails exist (|z| > 3 has probability 0.27%)
    local _, _, lo, hi = stats(tide.randn(100000))
    assert.is_true(lo < -3 and hi > 3)
  end)

  it("randint stays in [low, high) and reaches both ends", function()
    local x = tide.randint(-3, 4, { 7, 1023 })
    assert.equal(tide.int64, x.dtype)
    assert.same({ 7, 1023 }, shape(x))
    local _, _, lo, hi = stats(x)
    assert.equal(-3, lo)
    assert.equal(3, hi)
    local y = tide.randint(5, { 1000 })
    local _, _, lo2, hi2 = stats(y)
    assert.equal(0, lo2)
    assert.equal(4, hi2)
    assert.equal(tide.int32, tide.randint(0, 2, { 3 }, { dtype = tide.int32 }).dtype)
    H.raises(function() tide.randint(5, 5, { 3 }) end, "randint:", "[5, 5)")
    H.raises(function() tide.randint(0, 2.5, { 3 }) end, "bad argument #2 to 'randint'", "2.5")
    H.raises(function() tide.rand(2, { dtype = tide.int64 }) end, "rand:", "int64", "floating point")
  end)

  it("is reproducible from manual_seed and differs between seeds", function()
    tide.manual_seed(1234)
    local a, b, c = tide.rand(7):totable(), tide.randn(1023):totable(), tide.randint(0, 100, { 9 }):totable()
    tide.manual_seed(1234)
    assert.same(a, tide.rand(7):totable())
    assert.same(b, tide.randn(1023):totable())
    assert.same(c, tide.randint(0, 100, { 9 }):totable())
    tide.manual_seed(1235)
    assert.are_not.same(a, tide.rand(7):totable())
    -- consecutive calls give fresh numbers
    tide.manual_seed(1234)
    local first, second = tide.rand(7):totable(), tide.rand(7):totable()
    assert.are_not.same(first, second)
  end)

  it("does not depend on the thread count in this process", function()
    local saved = tide.get_num_threads()
    local runs = {}
    for _, n in ipairs { 1, 3 } do
      tide.set_num_threads(n)
      tide.manual_seed(99)
      runs[n] = { tide.randn(100003):totable(), tide.rand(70001, { dtype = tide.float64 }):totable() }
    end
    tide.set_num_threads(saved)
    assert.same(runs[1][1], runs[3][1])
    assert.same(runs[1][2], runs[3][2])
  end)

  it("does not depend on TIDE_NUM_THREADS in a fresh process", function()
    local code = ([[
      package.path = %q
      local tide = require "tide"
      tide.manual_seed(42)
      local x = tide.randn(100003):double():totable()
      local u = tide.rand(100003, { dtype = tide.float64 }):totable()
      local s = 0
      for i = 1, #x do s = s + x[i] + u[i] end
      io.write(("%%d %%.17g %%.17g %%.17g %%.17g\n"):format(tide.get_num_threads(), s, x[1], x[50001], u[100003]))
    ]]):format(package.path)
    local path = os.tmpname()
    local src = assert(io.open(path, "w"))
    src:write(code)
    src:close()
    local function run(n)
      local f = assert(io.popen(("TIDE_NUM_THREADS=%d luajit %s 2>&1"):format(n, path)))
      local out = f:read("*a")
      f:close()
      local threads, rest = out:match("^(%d+) (.*)$")
      assert(threads, "child failed: " .. out)
      assert.equal(n, tonumber(threads))
      return rest
    end
    local one, two, four = run(1), run(2), run(4)
    os.remove(path)
    assert.equal(one, two)
    assert.equal(one, four)
  end)
end)

describe("*_like constructors", function()
  local base = tide.zeros(3, 5, { dtype = tide.float64 })
  it("keep the shape and dtype", function()
    for _, name in ipairs { "zeros_like", "ones_like", "empty_like", "rand_like", "randn_like" } do
      local y = tide[name](base)
      assert.same({ 3, 5 }, shape(y), name)
      assert.equal(tide.float64, y.dtype, name)
      assert.is_false(y.requires_grad, name)
    end
    assert.same({ { 1, 1 } }, tide.ones_like(tide.zeros(1, 2)):totable())
    assert.same({ 2.5, 2.5 }, tide.full_like(tide.zeros(2), 2.5):totable())
    assert.equal(tide.int32, tide.full_like(tide.zeros(2, { dtype = tide.int32 }), 3).dtype)
    local r = tide.randint_like(tide.zeros(1000, { dtype = tide.int32 }), 3)
    assert.equal(tide.int32, r.dtype)
    local _, _, lo, hi = stats(r)
    assert.equal(0, lo); assert.equal(2, hi)
    local r2 = tide.randint_like(tide.zeros(1000), 3, 5)
    local _, _, lo2, hi2 = stats(r2)
    assert.equal(3, lo2); assert.equal(4, hi2)
  end)
  it("take dtype and requires_grad options", function()
    local y = tide.zeros_like(base, { dtype = tide.float32, requires_grad = true })
    assert.equal(tide.float32, y.dtype)
    assert.is_true(y.requires_grad)
    assert.is_true(tide.rand_like(base, { requires_grad = true }).requires_grad)
    assert.equal(tide.int64, tide.ones_like(base, { dtype = "int64" }).dtype)
    assert.is_true(tide.full_like(base, 1, { requires_grad = true }).requires_grad)
  end)
  it("work on non-contiguous and 0-dim inputs", function()
    local t = tide.zeros(7, 2):t()
    assert.same({ 2, 7 }, shape(tide.ones_like(t)))
    assert.same({}, shape(tide.zeros_like(tide.tensor(1.5))))
  end)
  it("reject non-tensors and bad dtypes", function()
    H.raises(function() tide.zeros_like({ 1, 2 }) end, "bad argument #1 to 'zeros_like'", "Tensor expected")
    H.raises(function() tide.rand_like(tide.zeros(2, { dtype = tide.int64 })) end, "rand_like:", "int64")
  end)
end)
