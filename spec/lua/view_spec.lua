-- Movement ops from Lua: values, strides, storage sharing (a write through a view
-- shows in the base), copies only where strides demand, and dim errors.
local tide = require "tide"
local H = require "helper"

-- a (2, 3, 4) tensor holding 0..23, fresh for each use
local function a234(dtype) return tide.arange(24, { dtype = dtype }):reshape(2, 3, 4) end

-- the storage element a view element sits on: write through v, read through base
local function shares(base, v, key)
  local before = base:clone()
  v[key] = -99
  local changed = (base - before):ne(0)
  return changed
end

describe("view and reshape", function()
  it("view infers one -1 and keeps the storage", function()
    local x = a234()
    local v = x:view(6, -1)
    assert.same({ 6, 4 }, v:size())
    assert.same({ 4, 1 }, v:stride())
    assert.same({ 20, 21, 22, 23 }, v[6]:totable())
    assert.same({ 24 }, x:view(-1):size())
    assert.same({ 2, 12 }, x:view { 2, -1 }:size())
    assert.same({ 1, 24, 1 }, x:view(1, 24, 1):size())
    v[{ 1, 2 }] = -7                         -- element 2 of the storage
    assert.equal(-7, x[{ 1, 1, 2 }]:item())
  end)

  it("views a non-contiguous tensor when strides allow", function()
    local y = a234():transpose(1, 2)          -- (3, 2, 4), strides (4, 12, 1)
    local v = y:view(3, 2, 2, 2)
    assert.same({ 4, 12, 2, 1 }, v:stride())
    assert.same({ { 4, 5 }, { 6, 7 } }, v[2][1]:totable())
  end)

  it("refuses an incompatible view, naming view and reshape", function()
    local y = a234():transpose(1, 2)
    local err = H.raises(function() y:view(12, 2) end, "view", "reshape", "[12,2]", "[3,2,4]")
    assert.is_truthy(err:find("view_spec.lua:%d+:"))
    H.raises(function() y:view(-1) end, "view", "reshape")
    H.raises(function() a234():view(5, -1) end, "view:", "[5,-1]", "24")
    H.raises(function() a234():view(7) end, "view:", "[7]", "invalid for input of size 24")
    H.raises(function() a234():view(-1, -1) end, "view:", "only one dimension can be inferred")
    H.raises(function() a234():view(2.5) end, "bad argument #1 to 'view'", "got 2.5")
  end)

  it("reshape copies when it must and views when it can", function()
    local x = a234()
    local y = x:transpose(1, 2)
    local r = y:reshape(12, 2)
    assert.same({ 12, 2 }, r:size())
    assert.same({ { 0, 1 }, { 2, 3 }, { 12, 13 }, { 14, 15 } }, r[{ { 1, 4 } }]:totable())
    r[{ 1, 1 }] = 100                         -- a copy: the base is untouched
    assert.equal(0, x[{ 1, 1, 1 }]:item())
    local v = x:reshape(4, 6)                 -- contiguous: a view
    v[{ 1, 1 }] = 100
    assert.equal(100, x[{ 1, 1, 1 }]:item())
    assert.same({ 3, 8 }, x:reshape { 3, -1 }:size())
    assert.same({ 0, 1, 2, 3, 12, 13 }, a234():transpose(1, 2):reshape(-1):narrow(1, 1, 6):totable())
    assert.same({ { 0, 1, 2, 3, 12, 13 } }, a234():transpose(1, 2):reshape(-1, 6):narrow(1, 1, 1):totable())
    H.raises(function() x:reshape(5, 5) end, "reshape:", "[5,5]", "24")
  end)

  it("view_as and reshape_as", function()
    local x = tide.arange(6)
    assert.same({ 2, 3 }, x:view_as(tide.zeros(2, 3)):size())
    assert.same({ 3, 2 }, x:reshape_as(tide.zeros(3, 2)):size())
  end)

  it("works on 0-dim and empty tensors", function()
    assert.same({ 1 }, tide.tensor(3):view(1):size())
    assert.same({}, tide.zeros(1, 1):reshape({}):size())
    assert.same({ 0 }, tide.zeros(0, 3):view(-1):size())
    assert.same({ 3, 0 }, tide.zeros(0, 3):reshape(3, 0):size())
  end)
end)

describe("permute, transpose, t", function()
  it("permute reorders sizes and strides", function()
    local x = a234()
    local p = x:permute(3, 1, 2)
    assert.same({ 4, 2, 3 }, p:size())
    assert.same({ 1, 12, 4 }, p:stride())
    assert.same({ { 1, 5, 9 }, { 13, 17, 21 } }, p[2]:totable())
    assert.same({ 4, 3, 2 }, x:permute { 3, 2, 1 }:size())
    assert.same({ 4, 3, 2 }, x:permute(-1, -2, -3):size())
    assert.is_false(p:is_contiguous())
    assert.is_true(shares(x, p, { 4, 2, 3 })[{ 2, 3, 4 }]:item())
  end)

  it("transpose swaps two dims; t transposes a matrix", function()
    local x = a234()
    local tr = x:transpose(1, 3)
    assert.same({ 4, 3, 2 }, tr:size())
    assert.same({ 1, 4, 12 }, tr:stride())
    assert.equal(x[{ 2, 3, 1 }]:item(), tr[{ 1, 3, 2 }]:item())
    assert.same({ 2, 4, 3 }, x:transpose(-1, -2):size())
    local m = tide.arange(6):view(2, 3)
    assert.same({ { 0, 3 }, { 1, 4 }, { 2, 5 } }, m:t():totable())
    assert.same({ 1, 3 }, m:t():stride())
    assert.same({ 3 }, tide.zeros(3):t():size())
    assert.same({ 4, 3, 2 }, x.T:size())
    H.raises(function() x:t() end, "t:", "3 dims")
  end)

  it("reports bad dims with their values", function()
    local x = a234()
    H.raises(function() x:permute(1, 2) end, "permute:", "2 dims given", "3 dims")
    H.raises(function() x:permute(1, 1, 2) end, "permute:", "dim 1 appears multiple times")
    H.raises(function() x:permute(1, 2, 4) end, "permute:", "dim 4 out of range", "3 dims")
    H.raises(function() x:transpose(1, 4) end, "transpose:", "dim 4", "3 dims")
    H.raises(function() x:transpose(-4, 1) end, "transpose:", "dim -4", "3 dims")
  end)
end)

describe("narrow, select, slice", function()
  it("narrow takes a 1-based start and a length", function()
    local x = a234()
    local n = x:narrow(3, 2, 2)
    assert.same({ 2, 3, 2 }, n:size())
    assert.same({ 12, 4, 1 }, n:stride())
    assert.same({ { 1, 2 }, { 5, 6 }, { 9, 10 } }, n[1]:totable())
    assert.same({ { 2, 3 }, { 6, 7 }, { 10, 11 } }, x:narrow(-1, -2, 2)[1]:totable())
    assert.same({ 2, 0, 4 }, x:narrow(2, 4, 0):size())
    n[{ 2, 3, 1 }] = 500                       -- x[2][3][2]
    assert.equal(500, x[{ 2, 3, 2 }]:item())
    H.raises(function() x:narrow(3, 3, 3) end, "narrow:", "start 3", "length 3", "size 4")
    H.raises(function() x:narrow(1, 0, 1) end, "narrow:", "start 0", "1-based")
  end)

  it("select drops the dim", function()
    local x = a234()
    local s = x:select(2, 3)
    assert.same({ 2, 4 }, s:size())
    assert.same({ 12, 1 }, s:stride())
    assert.same({ { 8, 9, 10, 11 }, { 20, 21, 22, 23 } }, s:totable())
    assert.same({ { 3, 7, 11 }, { 15, 19, 23 } }, x:select(-1, -1):totable())
    s[{ 1, 1 }] = -1
    assert.equal(-1, x[{ 1, 3, 1 }]:item())
    H.raises(function() x:select(2, 4) end, "select:", "index 4", "size 3")
    H.raises(function() x:select(2, -4) end, "select:", "index -4", "size 3")
    H.raises(function() x:select(2, 0) end, "select:", "index 0", "1-based")
    H.raises(function() x:select(2, 1.5) end, "bad argument #3 to 'select'", "1.5")
  end)

  it("slice takes inclusive 1-based bounds and a step", function()
    local x = tide.arange(10)
    assert.same({ 1, 3, 5 }, x:slice(1, 2, 6, 2):totable())
    assert.same({ 2 }, x:slice(1, 2, 6, 2):stride())
    assert.same({ 7, 8, 9 }, x:slice(1, -3, -1):totable())
    assert.same({ 0, 3, 6, 9 }, x:slice(1, 1, 10, 3):totable())
    assert.same({}, x:slice(1, 5, 4):totable())
  end)
end)

describe("unsqueeze, squeeze, flatten, unflatten", function()
  it("unsqueeze inserts a size-1 dim (1..n+1, negative from the end)", function()
    local x = tide.zeros(2, 3)
    assert.same({ 1, 2, 3 }, x:unsqueeze(1):size())
    assert.same({ 2, 1, 3 }, x:unsqueeze(2):size())
    assert.same({ 2, 3, 1 }, x:unsqueeze(3):size())
    assert.same({ 2, 3, 1 }, x:unsqueeze(-1):size())
    assert.same({ 1, 2, 3 }, x:unsqueeze(-3):size())
    assert.same({ 1 }, tide.tensor(5):unsqueeze(1):size())
    H.raises(function() x:unsqueeze(4) end, "unsqueeze:", "dim 4", "2 dims")
  end)

  it("squeeze drops size-1 dims, all or one", function()
    local x = tide.zeros(1, 3, 1, 2)
    assert.same({ 3, 2 }, x:squeeze():size())
    assert.same({ 1, 3, 2 }, x:squeeze(3):size())
    assert.same({ 1, 3, 1, 2 }, x:squeeze(2):size())
    assert.same({ 3, 1, 2 }, x:squeeze(-4):size())
    assert.same({}, tide.zeros(1, 1):squeeze():size())
    H.raises(function() x:squeeze(5) end, "squeeze:", "dim 5", "4 dims")
  end)

  it("flatten and unflatten", function()
    local x = a234()
    assert.same({ 24 }, x:flatten():size())
    assert.same({ 2, 12 }, x:flatten(2):size())
    assert.same({ 6, 4 }, x:flatten(1, 2):size())
    assert.same({ 1 }, tide.tensor(2):flatten():size())
    -- a non-contiguous flatten copies in logical order
    assert.same({ 0, 12, 4, 16, 8, 20 }, x:transpose(1, 3):flatten():narrow(1, 1, 6):totable())
    assert.same({ 2, 3, 2, 2 }, x:unflatten(3, { 2, 2 }):size())
    assert.same({ 2, 3, 2, 2 }, x:unflatten(-1, { 2, -1 }):size())
    assert.same({ 1, 2, 3, 4 }, x:unflatten(1, { 1, 2 }):size())
    H.raises(function() x:flatten(3, 2) end, "flatten:", "start dim 3", "end dim 2")
    H.raises(function() x:unflatten(3, { 3, 2 }) end, "unflatten:", "{3, 2}", "4")
  end)
end)

describe("expand and contiguous", function()
  it("expand broadcasts size-1 dims with stride 0", function()
    local r = tide.tensor { 1, 2, 3 }
    local e = r:expand(2, 3)
    assert.same({ 2, 3 }, e:size())
    assert.same({ 0, 1 }, e:stride())
    assert.same({ { 1, 2, 3 }, { 1, 2, 3 } }, e:totable())
    local c = tide.tensor { { 1 }, { 2 } }
    assert.same({ { 1, 1, 1 }, { 2, 2, 2 } }, c:expand(-1, 3):totable())
    assert.same({ { 1, 2, 3 }, { 1, 2, 3 } }, r:expand_as(tide.zeros(2, 3)):totable())
    assert.same({ 4, 2, 3 }, r:expand(4, 2, 3):size())
    r[2] = 20                                 -- the expanded view reads the base
    assert.same({ 1, 20, 3 }, e[2]:totable())
    H.raises(function() r:expand(2, 4) end, "expand:", "4", "3", "[3]")
    H.raises(function() r:expand(2) end, "expand:")
    H.raises(function() r:expand(2, -2) end, "expand:", "-2")
  end)

  it("contiguous copies only non-contiguous tensors", function()
    local x = a234()
    assert.is_true(x:is_contiguous())
    local same = x:contiguous()
    same[{ 1, 1, 1 }] = 42
    assert.equal(42, x[{ 1, 1, 1 }]:item())
    local y = x:transpose(2, 3)
    assert.is_false(y:is_contiguous())
    local c = y:contiguous()
    assert.is_true(c:is_contiguous())
    assert.same({ 12, 3, 1 }, c:stride())
    assert.same(y:totable(), c:totable())
    c[{ 1, 1, 2 }] = -1
    assert.equal(4, x[{ 1, 2, 1 }]:item())
  end)

  it("views of views of odd sizes read the right elements", function()
    local x = tide.randn(7, 1023, { dtype = tide.float64 })
    local v = x:t():narrow(1, 3, 1017):slice(1, 1, -1, 7):transpose(1, 2)   -- (7, 146)
    assert.same({ 7, 146 }, v:size())
    local xt = x:totable()
    local vt = v:totable()
    for i = 1, 7 do
      for j = 1, 146 do
        if vt[i][j] ~= xt[i][3 + (j - 1) * 7] then error(("mismatch at %d,%d"):format(i, j)) end
      end
    end
  end)
end)

describe("dims are 1-based", function()
  it("dim 0 is an error that says so", function()
    local x = a234()
    for name, f in pairs {
      size = function() x:size(0) end, stride = function() x:stride(0) end,
      transpose = function() x:transpose(0, 1) end, permute = function() x:permute(0, 1, 2) end,
      narrow = function() x:narrow(0, 1, 1) end, select = function() x:select(0, 1) end,
      unsqueeze = function() x:unsqueeze(0) end, squeeze = function() x:squeeze(0) end,
      flatten = function() x:flatten(0) end, slice = function() x:slice(0, 1, 2) end,
    } do
      H.raises(f, name .. ":", "dim 0", "1-based")
    end
  end)

  it("out-of-range dims name the dim and the rank", function()
    local x = a234()
    H.raises(function() x:size(4) end, "size:", "dim 4", "3 dims")
    H.raises(function() x:size(-4) end, "size:", "dim -4", "3 dims")
    H.raises(function() x:stride(7) end, "stride:", "dim 7")
    H.raises(function() x:select(4, 1) end, "select:", "dim 4", "3 dims")
    H.raises(function() x:narrow(5, 1, 1) end, "narrow:", "dim 5")
    assert.equal(4, x:size(-1))
    assert.equal(12, x:stride(1))
  end)
end)
