-- Lua indexing: x[i], Torch7 ranges x[{2, {1, 3}}], steps, masks, index tensors,
-- assignment through all of them, and the errors for bad keys.
local tide = require "tide"
local H = require "helper"

local function m34() return tide.arange(12):reshape(3, 4) end   -- {{0..3}, {4..7}, {8..11}}

describe("reading", function()
  it("x[i] selects along dim 1, negative from the end", function()
    local x = m34()
    assert.same({ 4, 5, 6, 7 }, x[2]:totable())
    assert.same({ 8, 9, 10, 11 }, x[-1]:totable())
    assert.same({ 0, 1, 2, 3 }, x[-3]:totable())
    assert.equal(6, x[2][3]:item())
    assert.equal(0, x[1][1]:dim())
    local v = tide.tensor { 1.5, 2.5, 3.5 }
    assert.equal(3.5, v[3]:item())
    assert.equal(2.5, v[-2]:item())
  end)

  it("tables of per-dim keys: indices, ranges, {} and ':'", function()
    local x = m34()
    assert.same({ 4, 5, 6 }, x[{ 2, { 1, 3 } }]:totable())
    assert.same({ 1, 5, 9 }, x[{ {}, 2 }]:totable())
    assert.same({ 3, 7, 11 }, x[{ ":", -1 }]:totable())
    assert.equal(6, x[{ 2, 3 }]:item())
    assert.same({ { 4, 5, 6, 7 } }, x[{ { 2 } }]:totable())            -- {a}: a range, the dim stays
    assert.same({ { 5, 6 }, { 9, 10 } }, x[{ { 2, 3 }, { 2, -2 } }]:totable())
    assert.same(x:totable(), x[{}]:totable())
    assert.same({ 0, 4 }, x[{ { 3, 2 } }]:size())                        -- empty range
  end)

  it("ranges with steps", function()
    local x = m34()
    assert.same({ { 0, 1, 2, 3 }, { 8, 9, 10, 11 } }, x[{ { 1, -1, 2 } }]:totable())
    assert.same({ { 1, 3 }, { 5, 7 }, { 9, 11 } }, x[{ {}, { 2, -1, 2 } }]:totable())
    assert.same({ 3, 2 }, x[{ {}, { 2, -1, 2 } }]:size())
    assert.same({ 4, 2 }, x[{ {}, { 2, -1, 2 } }]:stride())
    local r = tide.arange(1023)
    local s = r[{ { 1, -1, 7 } }]
    assert.equal(147, s:numel())
    assert.equal(1022, s[-1]:item())
    assert.equal(7 * 50, s[51]:item())
  end)

  it("keys on non-contiguous views", function()
    local x = m34():t()                       -- (4, 3)
    assert.same({ 5, 6 }, x[{ { 2, 3 }, 2 }]:totable())
    assert.same({ 1, 5, 9 }, x[2]:totable())
    assert.same({ { 3, 11 } }, x[{ { 4 }, { 1, 3, 2 } }]:totable())
  end)

  it("x[mask] gathers the true elements into a 1-D copy", function()
    local x = m34()
    local sel = x[x:gt(5)]
    assert.same({ 6, 7, 8, 9, 10, 11 }, sel:totable())
    assert.equal(tide.int64, sel.dtype)
    assert.same({ 0 }, x[x:gt(50)]:size())
    local f = tide.tensor { { 1.5, -2 }, { 3, -4.5 } }
    assert.same({ -2, -4.5 }, f[f:lt(0)]:totable())
    local t = x:t()
    assert.same({ 8, 5, 9, 6, 10, 7, 11 }, t[t:ge(5)]:totable())      -- row-major order of the view
    sel[1] = 100                               -- a copy
    assert.equal(6, x[{ 2, 3 }]:item())
  end)

  it("x[idx] selects rows by an integer tensor (1-based)", function()
    local x = m34()
    assert.same({ { 8, 9, 10, 11 }, { 0, 1, 2, 3 }, { 8, 9, 10, 11 } }, x[tide.long { 3, 1, 3 }]:totable())
    assert.same({ 1, 4 }, x[tide.long { 2 }]:size())
    assert.same({ 30, 10 }, tide.tensor({ 10, 20, 30 })[tide.tensor({ 3, 1 }, { dtype = tide.int32 })]:totable())
  end)
end)

describe("assignment", function()
  it("x[i] = number fills the selected slice", function()
    local x = m34()
    x[2] = 0
    assert.same({ { 0, 1, 2, 3 }, { 0, 0, 0, 0 }, { 8, 9, 10, 11 } }, x:totable())
    local v = tide.zeros(3)
    v[-1] = 5
    v[1] = true
    assert.same({ 1, 0, 5 }, v:totable())
  end)

  it("x[{..}] = number and = tensor (broadcast)", function()
    local x = m34()
    x[{ 2, 3 }] = 100
    assert.equal(100, x[2][3]:item())
    x[{ {}, 2 }] = tide.tensor { 7, 8, 9 }
    assert.same({ 7, 8, 9 }, x[{ {}, 2 }]:totable())
    x[{ { 1, 2 } }] = tide.tensor { 1, 2, 3, 4 }     -- (4) broadcast over (2, 4)
    assert.same({ { 1, 2, 3, 4 }, { 1, 2, 3, 4 }, { 8, 9, 10, 11 } }, x:totable())
    x[{ {}, { 1, -1, 3 } }] = -1
    assert.same({ { -1, 2, 3, -1 }, { -1, 2, 3, -1 }, { -1, 9, 10, -1 } }, x:totable())
    local f = tide.zeros(2, 3)
    f[1] = tide.tensor { 0.5, 1.5, 2.5 }
    assert.same({ { 0.5, 1.5, 2.5 }, { 0, 0, 0 } }, f:totable())
  end)

  it("writes through views into the base", function()
    local x = m34()
    local t = x:t()
    t[{ {}, 1 }] = -5                            -- column 1 of t is row 1 of x
    assert.same({ -5, -5, -5, -5 }, x[1]:totable())
    local fresh = tide.randn(7, 5)
    local copy = fresh:clone()
    fresh[{ { 2, 6, 2 }, { 1, 5, 4 } }] = 0
    for i = 1, 7 do
      for j = 1, 5 do
        local want = (i % 2 == 0 and i <= 6 and (j == 1 or j == 5)) and 0 or copy[{ i, j }]:item()
        assert.equal(want, fresh[{ i, j }]:item())
      end
    end
  end)

  it("x[mask] = v", function()
    local x = m34()
    x[x:gt(5)] = -1
    assert.same({ { 0, 1, 2, 3 }, { 4, 5, -1, -1 }, { -1, -1, -1, -1 } }, x:totable())
    local f = tide.tensor { 1.5, -2, 3 }
    f[f:lt(0)] = tide.tensor(0.25)
    assert.same({ 1.5, 0.25, 3 }, f:totable())
  end)
end)

describe("bad keys", function()
  it("out-of-range indices name the index, the dim and its size", function()
    local x = m34()
    H.raises(function() local _ = x[4] end, "index 4", "dim 1", "size 3")
    H.raises(function() local _ = x[-4] end, "index -4", "dim 1", "size 3")
    H.raises(function() local _ = x[{ 1, 5 }] end, "index 5", "dim 2", "size 4")
    H.raises(function() local _ = x[{ { 2, 9 } }] end, "{2, 9}", "dim 1", "size 3")
    H.raises(function() local _ = x[{ {}, { 0, 2 } }] end, "{0, 2}", "dim 2", "size 4")
    H.raises(function() local _ = x[{ 1, 1, 1 }] end, "too many indices (3)", "2 dims")
    H.raises(function() x[{ 4, 1 }] = 0 end, "index 4", "size 3")
    H.raises(function() local _ = x[tide.long { 4 }] end, "index 4", "size 3")
    H.raises(function() local _ = x[tide.tensor { 2 }] end, "index tensor must be integer or bool, got float32", "tide.long")
  end)

  it("x[0] says indices are 1-based", function()
    local x = m34()
    local err = H.raises(function() local _ = x[0] end, "index 0", "1-based")
    assert.is_truthy(err:find("index_spec.lua:%d+:"), err)
    H.raises(function() local _ = x[{ 1, 0 }] end, "index 0", "1-based")
    H.raises(function() x[0] = 1 end, "index 0", "1-based")
  end)

  it("other bad keys and values", function()
    local x = m34()
    H.raises(function() local _ = x[1.5] end, "index 1.5", "not an integer")
    H.raises(function() local _ = x[{ true }] end, "invalid key true", "boolean")
    H.raises(function() local _ = x[{ { 1, 3, 0 } }] end, "step 0")
    H.raises(function() local _ = tide.tensor(3)[1] end, "0-dim")
    H.raises(function() local _ = x[tide.tensor { true, false }] end, "mask of shape [2]", "[3,4]")
    H.raises(function() local _ = x[tide.tensor { 1.5 }] end, "integer or bool", "float32")
    H.raises(function() x[1] = "a" end, "cannot assign", "string")
    H.raises(function() x[{ { 1, 2 } }] = tide.tensor { 1, 2, 3 } end, "[3]", "[2,4]")
    H.raises(function() x[x:gt(1)] = tide.tensor { 1, 2 } end, "mask", "1-element")
    H.raises(function() x[tide.tensor { 1 }] = 0 end, "index tensor", "not supported")
    H.raises(function() local _ = x.nosuchfield end, "no field or method 'nosuchfield'")
  end)
end)
