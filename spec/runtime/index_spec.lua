-- Indexing and concatenation: index_select, gather, scatter_add, index_add,
-- masked_fill, cat, stack, split, chunk, embedding, one_hot and the
-- slice_scatter op behind slice gradients. Literal values (Lua indices are
-- 1-based), naive references over :totable() on random inputs, non-contiguous
-- inputs, out-of-range errors and gradients (to x / src, never to indices).
local tide = require "tide"
local H = require "helper"
local tensor = require "tide.tensor"
local OP = require("tide.core").OP

local i64 = function(t) return tide.tensor(t, { dtype = "int64" }) end
local i32 = function(t) return tide.tensor(t, { dtype = "int32" }) end
local f64 = function(t) return tide.tensor(t, { dtype = "float64" }) end

-- -- References on nested tables (dims and indices 1-based) ---------------------------------------

local function get(T, m) for k = 1, #m do T = T[m[k]] end return T end
local function copy_m(m, d, v) local r = { unpack(m) }; r[d] = v; return r end

local function ref_index_select(x, d, idx)
  local I = idx:totable()
  local function rec(t, depth)
    local r = {}
    if depth == d then for j, i in ipairs(I) do r[j] = t[i] end return r end
    for i = 1, #t do r[i] = rec(t[i], depth + 1) end
    return r
  end
  return rec(x:double():totable(), 1)
end

local function ref_gather(x, d, idx)
  local X, m = x:double():totable(), {}
  local function rec(It, depth)
    if type(It) == "number" then return get(X, copy_m(m, d, It)) end
    local r = {}
    for i = 1, #It do m[depth] = i; r[i] = rec(It[i], depth + 1) end
    m[depth] = nil
    return r
  end
  return rec(idx:totable(), 1)
end

local function ref_scatter_add(base, d, idx, src)
  local O, S, m = base:double():totable(), src:double():totable(), {}
  local function rec(It, depth)
    if type(It) == "number" then
      local t = copy_m(m, d, It)
      local last = table.remove(t)
      local p = get(O, t)
      p[last] = p[last] + get(S, m)
      return
    end
    for i = 1, #It do m[depth] = i; rec(It[i], depth + 1) end
    m[depth] = nil
  end
  rec(idx:totable(), 1)
  return O
end

local function ref_index_add(base, d, idx, src)
  local I = idx:totable()
  local function addt(o, s)
    if type(o) == "number" then return o + s end
    for i = 1, #o do o[i] = addt(o[i], s[i]) end
    return o
  end
  local function rec(o, s, depth)
    if depth == d then for j, i in ipairs(I) do o[i] = addt(o[i], s[j]) end return end
    for i = 1, #o do rec(o[i], s[i], depth + 1) end
  end
  local O = base:double():totable()
  rec(O, src:double():totable(), 1)
  return O
end

-- -- index_select --------------------------------------------------------------------------------------

describe("index_select", function()
  local x = tide.tensor { { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } }

  it("selects along dim 1 and 2 with duplicates (literal values)", function()
    assert.are.same({ { 7, 8, 9 }, { 1, 2, 3 }, { 7, 8, 9 } }, x:index_select(1, i64 { 3, 1, 3 }):totable())
    assert.are.same({ { 3, 1, 3 }, { 6, 4, 6 }, { 9, 7, 9 } }, x:index_select(2, i64 { 3, 1, 3 }):totable())
    assert.are.same({ { 2 }, { 5 }, { 8 } }, x:index_select(-1, i32 { 2 }):totable())
    assert.are.same({ { 4, 5, 6 } }, tide.index_select(x, 1, i32 { 2 }):totable())
    assert.are.same({ 3, 0 }, x:index_select(2, i64 {}):size())
    assert.are.same({ { 7, 1, 7 }, { 8, 2, 8 }, { 9, 3, 9 } }, x:t():index_select(2, i64 { 3, 1, 3 }):totable())
    local b = tide.tensor { true, false, true }
    assert.are.same({ false, true }, b:index_select(1, i64 { 2, 3 }):totable())
  end)

  it("matches the reference on random inputs (odd sizes, non-contiguous)", function()
    for _, dt in ipairs { "float32", "float64", "int32", "int64", "uint8" } do
      local x = tide.randint(0, 100, { 7, 5, 3 }):to(dt)
      for d = 1, 3 do
        local n = x:size(d)
        local idx = tide.randint(1, n + 1, { 11 })
        assert.are.same(ref_index_select(x, d, idx), x:index_select(d, idx):double():totable())
        local xt = x:transpose(1, 3)
        local it = tide.randint(1, xt:size(d) + 1, { 4 })
        assert.are.same(ref_index_select(xt, d, it), xt:index_select(d, it):double():totable())
      end
    end
    local big = tide.randn(1023, 7)
    local idx = tide.randint(1, 1024, { 1023 })
    H.close(big:index_select(1, idx), ref_index_select(big, 1, idx), 0)
    H.close(big:t():index_select(2, idx), ref_index_select(big:t(), 2, idx), 0)
    H.close(big:index_select(2, i32 { 7, 1 }), ref_index_select(big, 2, i32 { 7, 1 }), 0)
    local st = big:slice(1, 1, 1023, 4)                                      -- every 4th row
    local si = tide.randint(1, st:size(1) + 1, { 9 })
    H.close(st:index_select(1, si), ref_index_select(st, 1, si), 0)
  end)

  it("raises on bad indices and arguments", function()
    H.raises(function() return x:index_select(2, i64 { 1, 4 }) end, "index_select: index 4 is out of range for dim 2 with size 3")
    H.raises(function() return x:index_select(1, i64 { 0 }) end, "index_select: index 0 is out of range for dim 1 with size 3")
    H.raises(function() return x:index_select(1, i64 { -2 }) end, "index_select: index -2 is out of range for dim 1 with size 3")
    H.raises(function() return x:index_select(1, i64 { { 1 } }) end, "index_select: index must be 1-D, got shape [1,1]")
    H.raises(function() return x:index_select(3, i64 { 1 }) end, "index_select: dim 3 out of range for a tensor with 2 dims")
    H.raises(function() return x:index_select(1, tide.tensor { 1.5 }) end, "index_select: indices must be an integer tensor, got float32")
    H.raises(function() return x:index_select(1, { 1 }) end, "bad argument #3 to 'index_select'")
    H.raises(function() return tide.tensor(1):index_select(1, i64 { 1 }) end, "index_select: cannot index a 0-dim tensor")
  end)

  it("differentiates to x, accumulating duplicate indices", function()
    local idx = i64 { 2, 2, 1, 4 }
    H.gradcheck(function(x) return x:index_select(1, idx) end, { H.rand64 { 4, 3 } })
    H.gradcheck(function(x) return x:index_select(2, idx) end, { H.rand64 { 2, 5, 7 } })
    H.gradcheck(function(x) return x:t():index_select(1, idx) end, { H.rand64 { 3, 5 } })
    local w = H.rand64 { 4, 2 }
    w:index_select(1, idx):sum():backward()
    H.close(w.grad, { { 1, 1 }, { 2, 2 }, { 0, 0 }, { 1, 1 } }, 0)
  end)
end)

-- -- gather / scatter_add -----------------------------------------------------------------------------

describe("gather", function()
  local x = tide.tensor { { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } }

  it("gathers along dim 1 and 2 (literal values)", function()
    assert.are.same({ { 1, 1 }, { 6, 5 }, { 8, 8 } }, x:gather(2, i64 { { 1, 1 }, { 3, 2 }, { 2, 2 } }):totable())
    assert.are.same({ { 1, 5, 9 }, { 7, 8, 3 } }, x:gather(1, i32 { { 1, 2, 3 }, { 3, 3, 1 } }):totable())
    assert.are.same({ { 3 }, { 4 } }, x:gather(-1, i64 { { 3 }, { 1 } }):totable())
    assert.are.same({ { 1, 4 }, { 8, 2 } }, x:t():gather(2, i64 { { 1, 2 }, { 3, 1 } }):totable())
    assert.are.same({ 3, 0 }, x:gather(2, tide.zeros(3, 0, { dtype = "int64" })):size())
  end)

  it("matches the reference on random inputs (odd sizes, non-contiguous)", function()
    for _, dt in ipairs { "float64", "int32", "uint8" } do
      local x = tide.randint(0, 100, { 7, 5, 3 }):to(dt)
      for _, xx in ipairs { x, x:transpose(1, 2), x:slice(1, 1, 7, 2) } do
        for d = 1, 3 do
          local s = xx:size()
          s[d] = 9
          for k, v in ipairs(s) do if k ~= d then s[k] = math.max(1, v - 1) end end
          local idx = tide.randint(1, xx:size(d) + 1, s)
          assert.are.same(ref_gather(xx, d, idx), xx:gather(d, idx):double():totable())
          local it = tide.randint(1, xx:size(d) + 1, { s[3], s[2], s[1] }):permute(3, 2, 1)
          assert.are.same(ref_gather(xx, d, it), xx:gather(d, it):double():totable())
        end
      end
    end
    local big = tide.randn(1023, 3)
    local idx = tide.randint(1, 4, { 1023, 5 })
    H.close(big:gather(2, idx), ref_gather(big, 2, idx), 0)
  end)

  it("raises on bad indices and shapes", function()
    H.raises(function() return x:gather(2, i64 { { 1 }, { 4 } }) end, "gather: index 4 is out of range for dim 2 with size 3")
    H.raises(function() return x:gather(1, i64 { { 0 } }) end, "gather: index 0 is out of range for dim 1 with size 3")
    H.raises(function() return x:gather(2, i64 { { 1 }, { 1 }, { 1 }, { 1 } }) end,
      "gather: index of shape [4,1] is larger than the input [3,3] at dim 1")
    H.raises(function() return x:gather(2, i64 { 1 }) end, "gather: index of shape [1] must have as many dims as the input [3,3]")
    H.raises(function() return x:gather(2, tide.ones(1, 1)) end, "gather: indices must be an integer tensor")
  end)

  it("differentiates to x", function()
    H.gradcheck(function(x) return x:gather(2, i64 { { 1, 1, 3 }, { 2, 3, 2 } }) end, { H.rand64 { 2, 3 } })
    H.gradcheck(function(x) return x:gather(1, i64 { { 2, 2, 1 } }) end, { H.rand64 { 2, 3 } })
    H.gradcheck(function(x) return x:t():gather(1, i64 { { 1, 2 }, { 1, 1 } }) end, { H.rand64 { 3, 2 } })
  end)
end)

describe("scatter_add", function()
  it("adds with duplicate indices (literal values)", function()
    local r = tide.zeros(3, 3):scatter_add(2, i64 { { 1, 1 }, { 3, 2 }, { 2, 2 } }, tide.ones(3, 2))
    assert.are.same({ { 2, 0, 0 }, { 0, 1, 1 }, { 0, 2, 0 } }, r:totable())
    local s = tide.long { { 1, 2, 3 }, { 10, 20, 30 } }
    local r1 = tide.zeros(2, 3, { dtype = "int64" }):scatter_add(1, i32 { { 2, 1, 2 }, { 2, 2, 1 } }, s)
    assert.are.same({ { 0, 2, 30 }, { 11, 20, 3 } }, r1:totable())
    -- index smaller than the source: only the indexed part of src is used
    local r2 = tide.ones(2, 4):scatter_add(2, i64 { { 4 }, { 4 } }, tide.tensor { { 5, 100 }, { 7, 100 } })
    assert.are.same({ { 1, 1, 1, 6 }, { 1, 1, 1, 8 } }, r2:totable())
  end)

  it("writes in place with scatter_add_", function()
    local x = tide.zeros(2, 3)
    local r = x:scatter_add_(2, i64 { { 3, 3 }, { 1, 2 } }, tide.tensor { { 1, 2 }, { 3, 4 } })
    assert.are.same({ { 0, 0, 3 }, { 3, 4, 0 } }, x:totable())
    assert.are.equal(x, r)
    -- a bad index leaves x untouched
    H.raises(function() x:scatter_add_(2, i64 { { 1, 9 } }, tide.ones(1, 2)) end, "scatter_add: index 9 is out of range for dim 2 with size 3")
    assert.are.same({ { 0, 0, 3 }, { 3, 4, 0 } }, x:totable())
  end)

  it("matches the reference on random inputs (non-contiguous base and source)", function()
    for _, dt in ipairs { "float64", "int64" } do
      for d = 1, 3 do
        local base = tide.randint(-9, 9, { 5, 4, 3 }):to(dt)
        local s = { 4, 3, 2 }
        s[d] = 7
        local idx = tide.randint(1, base:size(d) + 1, s)
        local src = tide.randint(-9, 9, { s[3], s[2], s[1] }):to(dt):permute(3, 2, 1)   -- idx's shape, strided
        assert.are.same(ref_scatter_add(base, d, idx, src), base:scatter_add(d, idx, src):double():totable())
        local big = tide.randint(-9, 9, { s[1] + 1, s[2] + 2, s[3] + 1 }):to(dt)        -- larger than idx
        assert.are.same(ref_scatter_add(base, d, idx, big), base:scatter_add(d, idx, big):double():totable())
        local bt = base:transpose(1, 2):contiguous():transpose(1, 2)
        assert.are.same(ref_scatter_add(bt, d, idx, src), bt:scatter_add(d, idx, src):double():totable())
      end
    end
    local base, src = tide.zeros(7), tide.randn(1023)
    local idx = tide.randint(1, 8, { 1023 })
    H.close(base:scatter_add(1, idx, src), ref_scatter_add(base, 1, idx, src), 1e-4)
  end)

  it("raises on bad indices, shapes and dtypes", function()
    local b = tide.zeros(2, 3)
    H.raises(function() return b:scatter_add(2, i64 { { 4 } }, tide.ones(1, 1)) end, "scatter_add: index 4 is out of range for dim 2 with size 3")
    H.raises(function() return b:scatter_add(2, i64 { { 1, 1 } }, tide.ones(1, 1)) end,
      "scatter_add: index of shape [1,2] is larger than the source [1,1] at dim 2")
    H.raises(function() return b:scatter_add(1, i64 { { 1, 1, 1, 1 } }, tide.ones(1, 4)) end,
      "scatter_add: index of shape [1,4] is larger than the tensor [2,3] at dim 2")
    H.raises(function() return b:scatter_add(1, i64 { 1 }, tide.ones(1)) end, "scatter_add: tensor [2,3], index [1] and source [1] must have the same number of dims")
    H.raises(function() return b:long():scatter_add(1, i64 { { 1 } }, tide.ones(1, 1)) end,
      "scatter_add: source of dtype float32 can't be added into a tensor of dtype int64")
  end)

  it("differentiates to base and src", function()
    local idx = i64 { { 1, 1 }, { 3, 2 }, { 2, 2 } }
    H.gradcheck(function(b, s) return b:scatter_add(2, idx, s) end, { H.rand64 { 3, 3 }, H.rand64 { 3, 2 } })
    H.gradcheck(function(b, s) return b:scatter_add(1, i64 { { 2, 1, 2 } }, s:t()) end, { H.rand64 { 2, 3 }, H.rand64 { 4, 2 } })
    H.gradcheck(function(b, s) local y = b * 1; y:scatter_add_(2, idx, s); return y end, { H.rand64 { 3, 3 }, H.rand64 { 3, 2 } })
  end)
end)

-- -- index_add ----------------------------------------------------------------------------------------

describe("index_add", function()
  it("adds slices with duplicate indices (literal values)", function()
    local r = tide.zeros(3, 3):index_add(1, i64 { 1, 1, 3 }, tide.tensor { { 1, 2, 3 }, { 10, 20, 30 }, { 5, 5, 5 } })
    assert.are.same({ { 11, 22, 33 }, { 0, 0, 0 }, { 5, 5, 5 } }, r:totable())
    local c = tide.ones(2, 3, { dtype = "int64" }):index_add(2, i32 { 3, 3 }, i64 { { 1, 2 }, { 3, 4 } })
    assert.are.same({ { 1, 1, 4 }, { 1, 1, 8 } }, c:totable())
    local e = tide.ones(2, 2):index_add(1, i64 {}, tide.zeros(0, 2))
    assert.are.same({ { 1, 1 }, { 1, 1 } }, e:totable())
  end)

  it("writes in place with index_add_ and keeps x on a bad index", function()
    local x = tide.zeros(3, 2)
    x:index_add_(1, i64 { 3, 3 }, tide.tensor { { 1, 2 }, { 3, 4 } })
    assert.are.same({ { 0, 0 }, { 0, 0 }, { 4, 6 } }, x:totable())
    H.raises(function() x:index_add_(1, i64 { 1, 4 }, tide.ones(2, 2)) end, "index_add: index 4 is out of range for dim 1 with size 3")
    assert.are.same({ { 0, 0 }, { 0, 0 }, { 4, 6 } }, x:totable())
  end)

  it("matches the reference on random inputs (odd sizes, non-contiguous)", function()
    for _, dt in ipairs { "float64", "int32" } do
      for d = 1, 3 do
        local base = tide.randint(-9, 9, { 4, 5, 3 }):to(dt):transpose(1, 2)        -- (5,4,3)
        local s = base:size()
        s[d] = 9
        local src = tide.randint(-9, 9, { s[3], s[2], s[1] }):to(dt):permute(3, 2, 1)
        local idx = tide.randint(1, base:size(d) + 1, { 9 })
        assert.are.same(ref_index_add(base, d, idx, src), base:index_add(d, idx, src):double():totable())
      end
    end
    local emb, g = tide.zeros(7, 3), tide.randn(1023, 3)
    local idx = tide.randint(1, 8, { 1023 })
    H.close(emb:index_add(1, idx, g), ref_index_add(emb, 1, idx, g), 1e-4)
  end)

  it("raises on bad indices and shapes", function()
    local b = tide.zeros(3, 2)
    H.raises(function() return b:index_add(2, i64 { 3 }, tide.ones(3, 1)) end, "index_add: index 3 is out of range for dim 2 with size 2")
    H.raises(function() return b:index_add(1, i64 { 1, 2 }, tide.ones(3, 2)) end,
      "index_add: source of shape [3,2] does not fit a tensor of shape [3,2] with 2 indices along dim 1")
    H.raises(function() return b:index_add(1, i64 { 1 }, tide.ones(1, 3)) end, "index_add: source of shape [1,3] does not fit")
    H.raises(function() return tide.ones(2, { dtype = "bool" }):index_add(1, i64 { 1 }, tide.ones(1, { dtype = "bool" })) end,
      "index_add: bool tensors are not supported")
  end)

  it("differentiates to base and src", function()
    local idx = i64 { 1, 3, 1 }
    H.gradcheck(function(b, s) return b:index_add(1, idx, s) end, { H.rand64 { 3, 2 }, H.rand64 { 3, 2 } })
    H.gradcheck(function(b, s) return b:index_add(2, idx, s:t()) end, { H.rand64 { 2, 4 }, H.rand64 { 3, 2 } })
    H.gradcheck(function(b, s) local y = b * 1; y:index_add_(1, idx, s); return y end, { H.rand64 { 3, 2 }, H.rand64 { 3, 2 } })
  end)
end)

-- -- masked_fill ---------------------------------------------------------------------------------------

describe("masked_fill", function()
  it("fills where the mask is true, with broadcasting (literal values)", function()
    local x = tide.tensor { { 1, 2, 3 }, { 4, 5, 6 } }
    assert.are.same({ { 1, 2, 3 }, { 4, 0, 0 } }, x:masked_fill(x:gt(4), 0):totable())
    assert.are.same({ { -1, 2, -1 }, { -1, 5, -1 } }, x:masked_fill(tide.tensor { true, false, true }, -1):totable())
    local y = x:double()
    y:masked_fill_(y:lt(3), 0.5)
    assert.are.same({ { 0.5, 0.5, 3 }, { 4, 5, 6 } }, y:totable())
    H.raises(function() return x:masked_fill(tide.ones(2, 3), 0) end, "where: condition must be a bool tensor")
  end)

  it("differentiates to x (zero where filled)", function()
    local mask = tide.tensor { { true, false, false }, { false, false, true } }
    H.gradcheck(function(x) return x:masked_fill(mask, 3) end, { H.rand64 { 2, 3 } })
    local x = H.rand64 { 2, 3 }
    x:masked_fill(mask, 3):sum():backward()
    assert.are.same({ { 0, 1, 1 }, { 1, 1, 0 } }, x.grad:totable())
  end)
end)

-- -- cat and stack -----------------------------------------------------------------------------------

describe("cat", function()
  local x = tide.tensor { { 1, 2, 3 }, { 4, 5, 6 } }

  it("concatenates along dims 1, 2 and -1 (literal values)", function()
    assert.are.same({ { 1, 2, 3 }, { 4, 5, 6 }, { 7, 8, 9 } }, tide.cat({ x, tide.tensor { { 7, 8, 9 } } }, 1):totable())
    assert.are.same({ { 1, 2, 3, 0 }, { 4, 5, 6, 0 } }, tide.cat({ x, tide.zeros(2, 1, { dtype = "int64" }) }, 2):totable())
    assert.are.same({ { 1, 2, 3, 1, 2 }, { 4, 5, 6, 4, 5 } }, tide.cat({ x, x:t():narrow(1, 1, 2):t() }, -1):totable())
    assert.are.same({ 1, 2, 3 }, tide.cat { tide.tensor { 1 }, tide.tensor {}:long(), tide.tensor { 2, 3 } }:totable())
    assert.are.same({ 1, 2, 3 }, tide.concat({ tide.tensor { 1, 2 }, tide.tensor { 3 } }):totable())
  end)

  it("promotes dtypes", function()
    local r = tide.cat { i64 { 1, 2 }, tide.tensor { 0.5 } }
    assert.are.equal("float32", r.dtype.name)
    assert.are.same({ 1, 2, 0.5 }, r:totable())
    assert.are.equal("float64", tide.cat({ i32 { 1 }, f64 { 2 } }).dtype.name)
    assert.are.equal("int64", tide.cat({ i32 { 1 }, i64 { 2 }, tide.tensor { true } }).dtype.name)
  end)

  it("matches slices of the result on random, non-contiguous, odd-sized inputs", function()
    for d = 1, 3 do
      local parts, sizes = {}, { 1, 7, 3, 1 }
      for k, n in ipairs(sizes) do
        local s = { 2, 3, 5 }
        s[d] = n
        local p = tide.randn(s)
        if k == 2 then p = tide.randn(s[3], s[2], s[1]):permute(3, 2, 1) end      -- strided
        if k == 3 then p = tide.randn(s):double() end                                -- another dtype
        parts[k] = p
      end
      local r = tide.cat(parts, d)
      assert.are.equal("float64", r.dtype.name)
      local pos = 1
      for _, p in ipairs(parts) do
        H.close(r:narrow(d, pos, p:size(d)), p, 1e-7)
        pos = pos + p:size(d)
      end
      assert.are.equal(12, r:size(d))
    end
    local many = {}
    for k = 1, 64 do many[k] = tide.full({ 1, 2 }, k) end
    local m = tide.cat(many, 1)
    assert.are.same({ 64, 2 }, m:size())
    assert.are.same({ 64, 64 }, m[64]:totable())
    local big = tide.randn(1023, 3)
    local c = tide.cat({ big, big:t():t() }, 2)
    H.close(c:narrow(2, 4, 3), big, 0)
  end)

  it("raises on mismatched shapes naming the argument", function()
    H.raises(function() return tide.cat({ x, tide.zeros(2, 2) }, 1) end,
      "cat: sizes must match except in dim 1, got [2,3] (argument 1) and [2,2] (argument 2)")
    H.raises(function() return tide.cat({ x, x, tide.zeros(3) }, 1) end,
      "cat: tensors must have the same number of dims, got [2,3] (argument 1) and [3] (argument 3)")
    H.raises(function() return tide.cat({ x }, 3) end, "cat: dim 3 out of range for a tensor with 2 dims")
    H.raises(function() return tide.cat({ tide.tensor(1), tide.tensor(2) }) end, "cat: zero-dimensional tensor (argument 1) cannot be concatenated")
    H.raises(function() return tide.cat({}) end, "bad argument #1 to 'cat'")
    H.raises(function() return tide.cat({ x, 3 }) end, "bad argument #1 to 'cat'")
  end)

  it("differentiates to every input", function()
    H.gradcheck(function(a, b, c) return tide.cat({ a, b, c }, 1) end, { H.rand64 { 1, 3 }, H.rand64 { 2, 3 }, H.rand64 { 1, 3 } })
    H.gradcheck(function(a, b) return tide.cat({ a, b:t() }, 2) end, { H.rand64 { 2, 3 }, H.rand64 { 1, 2 } })
    H.gradcheck(function(a, b) return tide.cat({ a, b, a }, -1) end, { H.rand64 { 2, 2 }, H.rand64 { 2, 1 } })
  end)
end)

describe("stack", function()
  it("stacks along a new dim (literal values)", function()
    local a, b = tide.tensor { 1, 2 }, tide.tensor { 3, 4 }
    assert.are.same({ { 1, 2 }, { 3, 4 } }, tide.stack({ a, b }):totable())
    assert.are.same({ { 1, 3 }, { 2, 4 } }, tide.stack({ a, b }, 2):totable())
    assert.are.same({ { 1, 3 }, { 2, 4 } }, tide.stack({ a, b }, -1):totable())
    local m = tide.stack({ tide.zeros(2, 3), tide.ones(2, 3) }, 2)
    assert.are.same({ 2, 2, 3 }, m:size())
    assert.are.same({ { 0, 0, 0 }, { 1, 1, 1 } }, m[1]:totable())
    H.raises(function() return tide.stack({ a, tide.tensor { 1, 2, 3 } }) end, "cat: sizes must match except in dim 1")
  end)

  it("differentiates to every input", function()
    H.gradcheck(function(a, b) return tide.stack({ a, b }, 2) end, { H.rand64 { 3, 2 }, H.rand64 { 3, 2 } })
  end)
end)

-- -- split and chunk -----------------------------------------------------------------------------------

describe("split and chunk", function()
  local x = tide.arange(1, 15):view(7, 2)

  it("split by size and by a table of sizes", function()
    local p = x:split(3)
    assert.are.equal(3, #p)
    assert.are.same({ { 1, 2 }, { 3, 4 }, { 5, 6 } }, p[1]:totable())
    assert.are.same({ { 13, 14 } }, p[3]:totable())
    local q = x:split({ 1, 6 }, 1)
    assert.are.same({ { 1, 2 } }, q[1]:totable())
    assert.are.same({ 6, 2 }, q[2]:size())
    local r = x:split(1, 2)
    assert.are.same({ 1, 3, 5, 7, 9, 11, 13 }, r[1]:view(7):totable())
    H.raises(function() return x:split({ 2, 2 }) end, "split: sizes sum to 4 but dim 1 has size 7")
    H.raises(function() return x:split(0) end, "bad argument #2 to 'split'")
  end)

  it("chunk into ceil(n / k) sized views", function()
    local c = x:chunk(3)
    assert.are.equal(3, #c)
    assert.are.same({ 3, 2 }, c[1]:size())
    assert.are.same({ 1, 2 }, c[3]:size())
    assert.are.same({ { 13, 14 } }, c[3]:totable())
    assert.are.equal(2, #x:chunk(2, 2))
    assert.are.equal(1, #x:chunk(1))
    -- pieces are views: writing through one changes x
    local y = x:clone()
    y:chunk(7)[2]:fill_(0)
    assert.are.same({ 0, 0 }, y[2]:totable())
  end)

  it("differentiates through the pieces", function()
    H.gradcheck(function(x) local p = x:split(2, 1); return p[1] * 2, p[3] end, { H.rand64 { 5, 3 } })
    H.gradcheck(function(x) local p = x:chunk(2, 2); return p[2] end, { H.rand64 { 3, 7 } })
  end)
end)

-- -- embedding and one_hot ---------------------------------------------------------------------------

describe("embedding", function()
  local w = tide.tensor { { 0.5, 1 }, { 2, 3 }, { 4, 5 }, { 6, 7 } }

  it("looks up rows with 1-based indices of any shape (literal values)", function()
    assert.are.same({ { { 2, 3 }, { 0.5, 1 } } }, tide.embedding(i64 { { 2, 1 } }, w):totable())
    assert.are.same({ { 6, 7 }, { 6, 7 }, { 4, 5 } }, tide.embedding(i32 { 4, 4, 3 }, w):totable())
    assert.are.same({ 2, 3, 2 }, tide.embedding(tide.ones(2, 3, { dtype = "int64" }), w):size())
    local big = tide.randn(1023, 7)
    local idx = tide.randint(1, 1024, { 3, 5 })
    local e = tide.embedding(idx, big)
    assert.are.same({ 3, 5, 7 }, e:size())
    H.close(e:view(15, 7), ref_index_select(big, 1, idx:view(15)), 0)
  end)

  it("raises on out-of-range ids", function()
    H.raises(function() return tide.embedding(i64 { 1, 5 }, w) end, "index 5 is out of range for dim 1 with size 4")
    H.raises(function() return tide.embedding(i64 { 0 }, w) end, "index 0 is out of range for dim 1 with size 4")
    H.raises(function() return tide.embedding(i64 { 1 }, tide.ones(4)) end, "embedding: weight must be 2-D, got [4]")
  end)

  it("differentiates to the weight, accumulating repeated ids", function()
    local idx = i64 { { 2, 4 }, { 2, 1 } }
    H.gradcheck(function(w) return tide.embedding(idx, w) end, { H.rand64 { 5, 3 } })
    local ww = H.rand64 { 4, 2 }
    tide.embedding(idx, ww):sum():backward()
    assert.are.same({ { 1, 1 }, { 2, 2 }, { 0, 0 }, { 1, 1 } }, ww.grad:totable())
  end)
end)

describe("one_hot", function()
  it("encodes 1-based labels (literal values)", function()
    local o = tide.one_hot(i64 { 1, 3, 2 }, 3)
    assert.are.equal("int64", o.dtype.name)
    assert.are.same({ { 1, 0, 0 }, { 0, 0, 1 }, { 0, 1, 0 } }, o:totable())
    assert.are.same({ { { 0, 1 } }, { { 1, 0 } } }, tide.one_hot(i32 { { 2 }, { 1 } }, 2):totable())
    assert.are.same({ 2, 4 }, tide.one_hot(i64 { 4, 1 }):size())
  end)

  it("raises on labels out of range", function()
    H.raises(function() return tide.one_hot(i64 { 1, 4 }, 3) end, "one_hot: label 4 is out of range for 3 classes")
    H.raises(function() return tide.one_hot(i64 { 0 }, 3) end, "one_hot: label 0 is out of range for 3 classes")
    H.raises(function() return tide.one_hot(tide.tensor { 1.5 }, 3) end, "one_hot: labels must be an integer tensor, got float32")
  end)
end)

-- -- slice_scatter (the op behind slice and select gradients) -----------------------------------------

describe("slice_scatter", function()
  local function slice_scatter(base, src, dim, start, stop, step)
    local at = tensor.attrs()
    at.i[0], at.i[1], at.i[2], at.i[3] = dim, start, stop, step
    return tensor.op2(OP.slice_scatter, base, src, at)
  end

  it("replaces a (stepped) slice of a copy of base (literal values, 0-based C attrs)", function()
    local base = tide.zeros(3, 4)
    local r = slice_scatter(base, tide.ones(3, 2), 1, 0, 4, 2)
    assert.are.same({ { 1, 0, 1, 0 }, { 1, 0, 1, 0 }, { 1, 0, 1, 0 } }, r:totable())
    assert.are.same({ { 0, 0, 0, 0 }, { 0, 0, 0, 0 }, { 0, 0, 0, 0 } }, base:totable())
    local s = slice_scatter(base, tide.tensor { { 1, 2, 3, 4 } }:t():t(), 0, -1, 100, 1)
    assert.are.same({ 0, 0, 0, 0 }, s[1]:totable())
    assert.are.same({ 1, 2, 3, 4 }, s[3]:totable())
    local p = slice_scatter(i64 { 1, 2, 3 }, tide.tensor { 0.5 }, 0, 1, 2, 1)         -- promotes
    assert.are.same({ 1, 0.5, 3 }, p:totable())
  end)

  it("raises when the source does not have the slice's shape", function()
    H.raises(function() return slice_scatter(tide.zeros(3, 4), tide.ones(3, 3), 1, 0, 4, 2) end,
      "slice_scatter: source of shape [3,3] does not match the slice shape [3,2]")
    H.raises(function() return slice_scatter(tide.zeros(3, 4), tide.ones(3, 2), 1, 0, 4, 0) end,
      "slice_scatter: step must be positive, got 0")
  end)

  it("carries slice, narrow and select gradients", function()
    H.gradcheck(function(x) return x:slice(2, 2, 7, 2) end, { H.rand64 { 3, 7 } })
    H.gradcheck(function(x) return x:narrow(1, 2, 2) end, { H.rand64 { 4, 3 } })
    H.gradcheck(function(x) return x:select(2, 3) end, { H.rand64 { 2, 3, 2 } })
    H.gradcheck(function(x) return x[{ {}, { 1, 5, 2 } }] * x[{ {}, { 2, 6, 2 } }] end, { H.rand64 { 2, 6 } })
  end)
end)
