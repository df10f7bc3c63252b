-- Scans, atan2/hypot/fmod/remainder and the indexing ops against PyTorch's
-- values (spec/ref/scans_reference.lua, written by spec/ref/scans_reference.py),
-- with float64 gradcheck, compiled == eager (or the data-dependent error) and
-- OpenCL == CPU per case (spec/ref_walk.lua); then what a literal file cannot
-- hold: long lines scanned in blocks, thread-count independence, errors.
local tide = require "tide"
local H = require "helper"
local function equal(a, b) return a.dtype == b.dtype and a:eq(b):all():item() end

require("ref_walk")(dofile("spec/ref/scans_reference.lua"), "scans, elementwise math and indexing against PyTorch")

describe("scans on long lines", function()
  it("blocks of a long line give the sequential float64 values, the same for any thread count", function()
    local n = 100003                                         -- > 3 blocks of 32768, a ragged tail
    tide.manual_seed(7)
    local x = tide.randn(n, { dtype = tide.float64 })
    local ref, acc, mx, mi = {}, 0, -math.huge, 0
    local xs = x:totable()
    for i = 1, n do acc = acc + xs[i]; ref[i] = acc end
    local got = x:cumsum(1):totable()
    for i = 1, n, 997 do assert(math.abs(got[i] - ref[i]) <= 1e-9 * math.max(1, math.abs(ref[i])), "element " .. i) end
    local v, idx = x:cummax(1)
    local vt, it = v:totable(), idx:totable()
    for i = 1, n do if xs[i] >= mx then mx, mi = xs[i], i end; if i % 991 == 0 then assert.equal(mx, vt[i]); assert.equal(mi, it[i]) end end
    -- from the end (the derivative's reverse scan) over blocks: the gradient of sum(cumsum) is n - i + 1
    local xg = x:clone():requires_grad_()
    xg:cumsum(1):sum():backward()
    local g = xg.grad:totable()
    for i = 1, n, 1009 do assert.equal(n - i + 1, g[i]) end
    local f32 = tide.rand(2, 70000)
    local before = tide.get_num_threads()
    local outs = {}
    for _, t in ipairs { 1, 2, 3 } do
      tide.set_num_threads(t)
      local a = f32:cumsum(2)
      local b = f32:logcumsumexp(2)
      outs[t] = { a, b, f32:cumprod(1) }
    end
    tide.set_num_threads(before)
    for t = 2, 3 do for k = 1, 3 do assert.is_true(equal(outs[t][k], outs[1][k]), "threads " .. t) end end
  end)


  it("float32 rows give each element's in-order double sum rounded once, on every instruction-set variant", function()
    -- 11 rows of 1003 (groups of 8 rows: 8x8 blocks transposed in registers on
    -- v3/v4, a ragged tail of 3 columns and a group of 3 rows), an infinity and
    -- a NaN; and one line of 70001 scanned in blocks of 8192
    local script = [[
      local tide = require "tide"
      local ffi = require "ffi"
      tide.manual_seed(11)
      local x = tide.randn(11, 1003) * 1e3
      x[{ 4, 500 }] = math.huge; x[{ 9, 7 }] = 0 / 0
      local l = tide.randn(70001)
      local f = ffi.new("float[1]")
      local function r32(v) f[0] = v; return f[0] end
      local bad = 0
      local function check(xs, ys)
        local acc = 0
        for i = 1, #xs do
          acc = acc + xs[i]
          local want = r32(acc)
          if not (ys[i] == want or (ys[i] ~= ys[i] and want ~= want)) then bad = bad + 1 end
        end
      end
      local xt, yt = x:totable(), x:cumsum(2):totable()
      for r = 1, 11 do check(xt[r], yt[r]) end
      check(l:totable(), l:cumsum(1):totable())
      io.write(("isa=%s bad=%d\n"):format(tide.config().eager_isa, bad))
    ]]
    for _, isa in ipairs { "base", "v3", "v4" } do
      local out, rc = H.child(script, { TIDE_ISA = isa })
      assert.equal(0, rc, out)
      if not out:find("is not one of", 1, true) and not out:find("not available", 1, true) then
        assert.truthy(out:find("bad=0", 1, true), isa .. ": " .. out)
      end
    end
  end)
  it("index_put with a bool index sets the masked elements (and rows)", function()
    local x = tide.arange(6, { dtype = tide.float64 }):view(2, 3)
    local m = x:gt(2.5)
    H.close(x:index_put({ m }, -1):reshape(-1), { 0, 1, 2, -1, -1, -1 }, 0)
    H.close(x:index_put({ m }, tide.tensor({ 7, 8, 9 }, { dtype = tide.float64 }), true):reshape(-1), { 0, 1, 2, 10, 12, 14 }, 0)
    H.close(x:clone():index_put_({ tide.tensor({ false, true }) }, 5):reshape(-1), { 0, 1, 2, 5, 5, 5 }, 0)
    local f = tide.compile(function(a, b) return a:index_put({ b }, 0) end)
    H.raises(function() return f(x, m) end, "index_put: a bool index stands for the positions of its true elements, which tide.compile cannot trace")
  end)

  it("name the op and the values on bad input", function()
    H.raises(function() return tide.ones(2, 3):cumsum(3) end, "cumsum: dim 3")
    H.raises(function() return tide.ones(2, 3):cumsum() end, "bad argument #2 to 'cumsum'")
    H.raises(function() return tide.ones(2):cummax(0) end, "dim 0 is invalid")
    H.raises(function() return tide.ones(2):fmod(tide.ones(2)):cumsum(1, { dtyp = 1 }) end, "cumsum")
    H.raises(function() return tide.long({ 5, 3 }):fmod(tide.long({ 2, 0 })) end, "fmod: integer division by zero (divisor element 2 is 0)")
    H.raises(function() return tide.long({ 5 }):remainder(0) end, "remainder: integer division by zero")
    H.raises(function() return tide.ones(2, 2):masked_select(tide.ones(2, 2)) end, "masked_select: mask must be a bool tensor")
    H.raises(function() return tide.ones(2, 3):take_along_dim(tide.long({ 1 }), 1) end, "same number of dims")
    H.raises(function() return tide.ones(2, 3):index_put({ tide.long({ 3 }) }, 1) end, "index_put: an index for dim 1 is out of range for size 2")
    H.raises(function() return tide.ones(2, 2):masked_scatter(tide.ones(2, 2):gt(0), tide.ones(3)) end,
      "masked_scatter: the mask selects 4 elements, the source has 3")
    local f = tide.compile(function(x) return x:nonzero() end)
    H.raises(function() return f(tide.ones(3)) end, "nonzero: the output's size depends on the input's values")
  end)
end)

describe("scans inside tide.compile and on OpenCL", function()
  it("a compiled step's backward through every scan and the new elementwise ops equals eager", function()
    tide.manual_seed(3)
    local w = tide.randn(3, 5, { dtype = tide.float64, requires_grad = true })
    local function step(x)
      local y = w * x
      local v = y:cumsum(2):sum() + y:cumprod(2):sum() + y:cummax(2):sum() + y:cummin(1):sum()
        + y:logcumsumexp(1):sum() + tide.atan2(w, x):sum() + tide.hypot(w, x):sum() + w:remainder(0.7):sum() + w:fmod(-0.6):sum()
      w.grad = nil
      v:backward()
      return v, w.grad
    end
    local x = tide.randn(3, 5, { dtype = tide.float64 })
    local v1, g1 = step(x)
    g1 = g1:clone()
    local f = tide.compile(step)
    for _ = 1, 2 do
      local v2, g2 = f(x)
      H.close(v2, v1:item(), 1e-12)
      H.close(g2, g1:totable(), 1e-12)
    end
  end)

  it("on OpenCL the scans run on the host and give device tensors (cummax's indices too)", function()
    if not H.has_opencl() then pending("no OpenCL device") return end
    local x = tide.randn(4, 6)
    local d = x:to("opencl")
    local v, i = d:cummax(2)
    assert.equal("opencl", v.device.type or tostring(v.device):match("opencl"))
    assert.equal("opencl", i.device.type or tostring(i.device):match("opencl"))
    local cv, ci = x:cummax(2)
    H.close(v:cpu(), cv:totable(), 0)
    assert.same(ci:totable(), i:cpu():totable())
    H.close(d:cumsum(1):cpu(), x:cumsum(1):totable(), 1e-6)
  end)
end)

describe("random sampling on the Philox stream", function()
  local function counts(t, k)
    local c = {}
    for i = 1, k do c[i] = 0 end
    for _, v in ipairs(t:reshape(-1):totable()) do c[v] = c[v] + 1 end
    return c
  end
  -- Pearson's chi-square of observed counts against probabilities p (k - 1 dof)
  local function chi2(c, p, n)
    local s = 0
    for i = 1, #p do if p[i] > 0 then s = s + (c[i] - n * p[i]) ^ 2 / (n * p[i]) else assert.equal(0, c[i]) end end
    return s
  end

  it("multinomial with replacement follows the weights (chi-square, fixed seed)", function()
    tide.manual_seed(11)
    local w = tide.tensor({ 1, 0, 3, 6 })
    local s = tide.multinomial(w, 20000, { replacement = true })
    assert.same({ 20000 }, s:size())
    assert.equal("int64", s.dtype.name)
    -- 3 dof (the zero category is exact): the 99.9% point is 16.27
    assert(chi2(counts(s, 4), { 0.1, 0, 0.3, 0.6 }, 20000) < 16.27)
    local b = tide.multinomial(tide.tensor({ { 1, 1 }, { 0, 1 } }), 50, { replacement = true })
    assert.same({ 2, 50 }, b:size())
    assert.equal(50, counts(b[2], 2)[2])
  end)

  it("multinomial without replacement: distinct draws, first draws follow the weights", function()
    tide.manual_seed(12)
    local p = tide.tensor({ 0.5, 0.3, 0.2, 0 }):unsqueeze(1):expand(4000, 4):contiguous()
    local s = tide.multinomial(p, 3)
    assert.same({ 4000, 3 }, s:size())
    local rows = s:totable()
    for _, r in ipairs(rows) do
      assert(r[1] ~= r[2] and r[2] ~= r[3] and r[1] ~= r[3], "distinct")
      assert(r[1] ~= 4 and r[2] ~= 4 and r[3] ~= 4, "zero weight never drawn")
    end
    assert(chi2(counts(s:narrow(2, 1, 1), 4), { 0.5, 0.3, 0.2, 0 }, 4000) < 13.82)   -- 2 dof, 99.9%
  end)

  it("same seed, same draws, whatever the thread count", function()
    local before = tide.get_num_threads()
    local function draw(t)
      tide.set_num_threads(t); tide.manual_seed(5)
      return { tide.multinomial(tide.rand(3, 50), 20, { replacement = true }), tide.multinomial(tide.rand(50), 10),
               tide.bernoulli(tide.rand(1000)), tide.normal(tide.zeros(100), tide.ones(100)), tide.randperm(100),
               tide.empty(300):exponential_(2) }
    end
    local a, b = draw(1), draw(2)
    tide.set_num_threads(before)
    for i = 1, #a do assert.is_true(equal(a[i], b[i]), "draw " .. i) end
  end)

  it("bernoulli, normal, randperm, uniform_, normal_, exponential_ have their laws' moments", function()
    tide.manual_seed(13)
    local n = 40000
    local b = tide.bernoulli(tide.full({ n }, 0.3))
    assert(math.abs(b:mean():item() - 0.3) < 0.015)
    assert(math.abs(tide.bernoulli(tide.zeros(n), 0.8):mean():item() - 0.8) < 0.015)
    local z = tide.normal(tide.full({ n }, 2), tide.full({ n }, 3))
    assert(math.abs(z:mean():item() - 2) < 0.06 and math.abs(z:std():item() - 3) < 0.06)
    local z2 = tide.normal(1, 0.5, { n })
    assert(math.abs(z2:mean():item() - 1) < 0.02)
    local u = tide.empty(n):uniform_(-2, 4)
    assert(u:min():item() >= -2 and u:max():item() < 4 and math.abs(u:mean():item() - 1) < 0.05)
    local g = tide.empty(n, { dtype = tide.float64 }):normal_(-1, 2)
    assert(math.abs(g:mean():item() + 1) < 0.05)
    local e = tide.empty(n):exponential_(4)
    assert(e:min():item() >= 0 and math.abs(e:mean():item() - 0.25) < 0.01)
    local p = tide.randperm(1000)
    assert.equal("int64", p.dtype.name)
    local seen = {}
    for _, v in ipairs(p:totable()) do assert(v >= 1 and v <= 1000 and not seen[v]); seen[v] = true end
  end)

  it("errors name the op and the values", function()
    H.raises(function() return tide.multinomial(tide.tensor({ 0.5, -0.1 }), 1) end, "multinomial: probabilities must be finite and non-negative")
    H.raises(function() return tide.multinomial(tide.zeros(2, 3), 1) end, "multinomial: a row of probs sums to zero")
    H.raises(function() return tide.multinomial(tide.ones(3), 4) end, "cannot draw 4 samples without replacement from 3 categories")
    H.raises(function() return tide.multinomial(tide.tensor({ 1, 0, 0 }), 2) end, "fewer than 2 categories with nonzero probability")
    H.raises(function() return tide.multinomial(tide.ones(2, 2, 2), 1) end, "probs must be 1-D or 2-D, got 3 dims")
    H.raises(function() return tide.bernoulli(tide.ones(2), 1.5) end, "bernoulli: probability 1.5 is outside [0, 1]")
    H.raises(function() return tide.normal(0, -1, { 2 }) end, "normal: std must be non-negative")
    H.raises(function() return tide.empty(2):exponential_(0) end, "exponential_: lambd must be a positive number")
  end)
end)
