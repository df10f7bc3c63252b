-- Sorting, selection, counting and search against PyTorch's values
-- (spec/ref/sort_reference.lua, written by spec/ref/sort_reference.py with
-- torch 2.x; walked by spec/ref_walk.lua: values, float64 gradcheck, compiled
-- == eager or the data-dependent error, OpenCL == CPU), then the kernel's
-- paths (radix digits of every dtype, insertion rows, chunked topk of long
-- rows, thread-count independence), gradients and the errors.
local tide = require "tide"
local H = require "helper"

require("ref_walk")(dofile("spec/ref/sort_reference.lua"), "sorting and search against PyTorch")

-- is v sorted along the last dim of a 1-D table, ties by index (stable)?
local function check_sorted(x, v, ix, desc)
  local xs, vs, is = x:totable(), v:totable(), ix:totable()
  local function key(a) if a ~= a then return math.huge * (desc and -1 or 1), 1 end return a, 0 end
  for i = 1, #vs do
    assert(xs[is[i]] == vs[i] or (vs[i] ~= vs[i] and xs[is[i]] ~= xs[is[i]]), "value at index " .. i)
    if i > 1 then
      local a, b = vs[i - 1], vs[i]
      local na, nb = a ~= a, b ~= b
      local before
      if na or nb then before = desc and na or nb
      else before = desc and a > b or (not desc and a < b) end
      local tie = (a == b) or (na and nb)
      assert(before or (tie and is[i - 1] < is[i]), ("order at %d: %s (%d) then %s (%d)"):format(i, a, is[i - 1], b, is[i]))
    end
  end
end

describe("sort kernel", function()
  it("sorts every dtype stably through its radix digits (long rows) and insertion (short rows)", function()
    tide.manual_seed(7)
    for _, n in ipairs { 5, 31, 33, 1000 } do
      for _, dt in ipairs { tide.float32, tide.float64, tide.int32, tide.int64, tide.uint8 } do
        local x = (tide.randn(n) * 40):to(dt)
        if dt == tide.float32 or dt == tide.float64 then
          x[1] = 0 / 0; x[math.min(3, n)] = -0.0; x[math.min(4, n)] = 0; x[math.min(5, n)] = -math.huge
        end
        for _, desc in ipairs { false, true } do
          local v, ix = x:sort(1, desc)
          check_sorted(x, v, ix, desc)
        end
      end
    end
    local b = tide.tensor({ true, false, true, false }, { dtype = tide.bool })
    local v, ix = b:sort()
    assert.same({ false, false, true, true }, v:totable())
    assert.same({ 2, 4, 1, 3 }, ix:totable())
  end)

  it("int64 keys use all eight digits (values beyond 2^32, negative)", function()
    local x = tide.long({ 2 ^ 40, -2 ^ 40, 3, -(2 ^ 33) - 1, 2 ^ 33, -1, 0 })
    local v = x:sort()
    assert.same({ -2 ^ 40, -(2 ^ 33) - 1, -1, 0, 3, 2 ^ 33, 2 ^ 40 }, v:totable())
  end)

  it("gives the same result for any thread count (rows in parallel, chunked topk)", function()
    tide.manual_seed(3)
    local x = (tide.randn(64, 3000) * 4):round()          -- many ties
    local long = (tide.randn(300000) * 100):round()
    local nt = tide.get_num_threads()
    local function run()
      local a, ai = x:sort(2, true)
      local b, bi = x:topk(20, 2)
      local c, ci = long:topk(50)                         -- one long row: chunks merged
      local d, di = long:topk(7, 1, false)
      return { ai, bi, ci, di, x:median(2), x:mode(2) }
    end
    tide.set_num_threads(1)
    local one = run()
    tide.set_num_threads(math.max(2, nt))
    local many = run()
    tide.set_num_threads(nt)
    for i = 1, #one do H.close(many[i], one[i], 0, "result " .. i) end
    -- the chunked topk equals the first k of the stable sort
    local sv, si = long:sort(1, true)
    local c, ci = long:topk(50)
    H.close(c, sv:narrow(1, 1, 50), 0); H.close(ci, si:narrow(1, 1, 50), 0)
  end)

  it("sorts rows of 2^16 float32 like a Lua table.sort", function()
    tide.manual_seed(5)
    local x = tide.randn(3, 65536)
    local v = x:sort(2)
    for r = 1, 3 do
      local t = x[r]:totable()
      table.sort(t)
      H.close(v[r], t, 0, "row " .. r)
    end
  end)
end)

describe("sort derivatives", function()
  it("scatter the gradient to the indices (mode, topk, sort in a loss)", function()
    local x = tide.tensor({ 3, 1, 3, 2, 1, 3, 1 }, { dtype = tide.float64 }):requires_grad_()
    local v, i = x:mode()
    v:backward()
    assert.same({ 0, 0, 0, 0, 0, 0, 1 }, x.grad:totable())
    assert.equal(7, i:item())
    local y = tide.tensor({ 0.5, -1, 2, 0 }, { dtype = tide.float64 }):requires_grad_()
    local tv = y:topk(2);
    (tv * tide.tensor({ 10, 1 }, { dtype = tide.float64 })):sum():backward()
    assert.same({ 1, 0, 10, 0 }, y.grad:totable())
  end)

  it("compile a sort + topk training step as eager steps inside the plan", function()
    local w = tide.tensor({ { 0.3, -0.2, 0.9, 0.1 } }, { dtype = tide.float64 }):requires_grad_()
    local function step(x)
      local s = (x * w):sort(2, true)
      local t = x:topk(2, 2)
      return (s:narrow(2, 1, 2) * t):sum()
    end
    local x = tide.tensor({ { 1, 2, 3, 4 }, { -1, 5, 0, 2 } }, { dtype = tide.float64 })
    local f = tide.compile(function(x) local l = step(x); l:backward(); return l end)
    local lc = f(x)
    local gc = w.grad:clone(); w.grad = nil
    local le = step(x); le:backward()
    H.close(lc, le, 1e-12); H.close(gc, w.grad, 1e-12)
  end)
end)

describe("sort errors", function()
  it("name the op and the values", function()
    H.raises(function() return tide.ones(2, 3):topk(4) end, "topk: k (4) is out of range for dim 2 of size 3")
    H.raises(function() return tide.ones(3):topk(-1) end, "topk: k (-1) is out of range")
    H.raises(function() return tide.ones(2, 3):kthvalue(0, 1) end, "kthvalue: k (0) is out of range for dim 1 of size 2")
    H.raises(function() return tide.ones(2, 3):sort(3) end, "sort: dim 3 is out of range for a tensor with 2 dims")
    H.raises(function() return tide.ones(2, 3):sort(1, "yes") end, "bad argument #3 to 'sort'")
    H.raises(function() return tide.ones(2, 3):sort({ dims = 1 }) end, "sort: unknown option 'dims'")
    H.raises(function() return tide.ones(2, 0):median(2) end, "median: dim 2 is empty")
    H.raises(function() return tide.ones(0):median() end, "median: the tensor is empty")
    H.raises(function() return tide.ones(4):quantile(1.5) end, "quantile: q must be in [0, 1], got 1.5")
    H.raises(function() return tide.ones(4):quantile(0.5, { interpolation = "cubic" }) end, "quantile: interpolation must be")
    H.raises(function() return tide.long({ 1, 2 }):quantile(0.5) end, "quantile: expected a float tensor, got int64")
    H.raises(function() return tide.long({ 1, -3 }):bincount() end, "bincount: the input holds a negative value (-3)")
    H.raises(function() return tide.ones(3):bincount() end, "bincount: expected an integer tensor, got float32")
    H.raises(function() return tide.long({ 1, 2 }):bincount(tide.ones(3)) end, "bincount: weights of shape")
    H.raises(function() return tide.ones(3):histc(0) end, "bad argument #2 to 'histc'")
    H.raises(function() return tide.ones(3):histc(3, 2, 1) end, "histc: max (1) must be larger than min (2)")
    H.raises(function() return tide.searchsorted(tide.ones(2, 3), tide.ones(3, 2)) end,
      "searchsorted: the leading dims of the sorted sequence [2,3] and the values [3,2] must be equal")
    H.raises(function() return tide.searchsorted(tide.ones(3), tide.ones(2), { side = "middle" }) end, "searchsorted: side must be")
    H.raises(function() return tide.searchsorted(tide.ones(3), tide.ones(2), { side = "left", right = true }) end,
      "searchsorted: side and right disagree")
    H.raises(function() return tide.ones(3):bucketize(tide.ones(2, 2)) end, "bucketize: boundaries must be 1-D")
  end)

  it("unique and bincount raise under tide.compile; sort, topk, searchsorted compile", function()
    H.raises(function() return tide.compile(function(x) return x:unique() end)(tide.ones(3)) end, "unique: the output's size depends")
    H.raises(function() return tide.compile(function(x) return x:bincount() end)(tide.long({ 1 })) end, "bincount: the output's size depends")
    local f = tide.compile(function(x, s) return tide.searchsorted(s, x) + x:argsort() end)
    local x, s = tide.tensor({ 0.5, -1, 2 }), tide.tensor({ -2, 0, 1, 3 })
    H.close(f(x, s), tide.searchsorted(s, x) + x:argsort(), 0)
  end)

  it("keep PyTorch's meaning at the edges", function()
    local v, i = tide.tensor(5):sort()
    assert.equal(5, v:item()); assert.equal(1, i:item())
    assert.same({ 2, 0 }, ({ tide.ones(2, 3):topk(0) })[1]:size())
    assert.same({ 0 }, tide.long({}):bincount():size())
    assert.same({ 0 }, tide.ones(0):unique():size())
    H.close(tide.searchsorted(tide.tensor({ 1, 2, 3 }), 2.5), 3, 0)
    H.close(tide.ones(5):histc(3), { 0, 5, 0 }, 0)       -- min == max: the range widens by 1
  end)
end)

describe("sort on OpenCL #opencl", function()
  it("copies to the host and back: equal to the CPU", function()
    if not H.has_opencl() then pending("no OpenCL device") return end
    tide.manual_seed(11)
    local x = tide.randn(5, 70)
    local d = x:to("opencl")
    local v, i = d:sort(2, true)
    local cv, ci = x:sort(2, true)
    assert.equal("cpu", x.device)
    assert.is_truthy(tostring(v.device):find("opencl"))
    H.close(v:cpu(), cv, 0); H.close(i:cpu(), ci, 0)
    local tv, ti = d:topk(3, 1, false)
    local ctv, cti = x:topk(3, 1, false)
    H.close(tv:cpu(), ctv, 0); H.close(ti:cpu(), cti, 0)
    H.close(d:unique():cpu(), x:unique(), 0)
    H.close(d:quantile(0.3, 2):cpu(), x:quantile(0.3, 2), 1e-6)
  end)
end)
