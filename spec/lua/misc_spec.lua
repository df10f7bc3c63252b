-- The rest of the Lua surface: item/totable, dtype conversions, shape and size
-- queries, tide.* function forms of the methods, argument errors in Lua's
-- wording, and error positions at the caller's line.
local tide = require "tide"
local H = require "helper"

local SRC = debug.getinfo(1, "S").short_src           -- e.g. spec/lua/misc_spec.lua

-- err must start with "<this file>:<line>:"
local function at_line(err, line)
  local want = SRC .. ":" .. line .. ":"
  if err:sub(1, #want) ~= want then error(("error %q does not start with %q"):format(err, want), 2) end
end

describe("item and totable", function()
  it("item converts a one-element tensor of any shape", function()
    assert.equal(5, tide.tensor({ { 5 } }):item())
    assert.equal(-2.5, tide.tensor(-2.5):item())
    assert.equal(true, tide.tensor({ true }):item())
    assert.equal(false, tide.tensor(false):item())
    assert.equal(7, tide.arange(10)[8]:item())
    local r = tide.randn(7, 1023, { dtype = tide.float64 })
    assert.equal(r:totable()[7][1023], r[{ 7, 1023 }]:item())
  end)

  it("item refuses other element counts, with the count", function()
    H.raises(function() tide.tensor({ 1, 2 }):item() end, "item:", "2 elements")
    H.raises(function() tide.zeros(0):item() end, "item:", "0 elements")
    H.raises(function() tide.zeros(7, 3):item() end, "item:", "21 elements")
  end)

  it("totable gives nested values for every dtype", function()
    assert.same({ { 1, 2, 3 }, { 4, 5, 6 } }, tide.arange(1, 7):view(2, 3):totable())
    assert.same({ { 0.5 }, { -1.5 } }, tide.tensor({ { 0.5 }, { -1.5 } }):totable())
    assert.same({ true, false }, tide.tensor({ true, false }):totable())
    assert.same({ { { 1 }, { 2 } } }, tide.tensor({ { { 1 }, { 2 } } }, { dtype = tide.int32 }):totable())
    assert.equal(5, tide.tensor(5):totable())
    assert.same({}, tide.zeros(0):totable())
    assert.same({ { 0, 2 }, { 1, 3 } }, tide.arange(4):view(2, 2):t():totable())   -- a strided view
    assert.same(tide.arange(4):totable(), tide.arange(4):tolist())
  end)
end)

describe("dtype conversions", function()
  it("float to integer truncates toward zero", function()
    local f = tide.tensor { 1.7, -1.7, 2.5, -0.5, 0 }
    assert.same({ 1, -1, 2, 0, 0 }, f:long():totable())
    assert.equal(tide.int64, f:long().dtype)
    assert.same({ 1, -1, 2, 0, 0 }, f:int():totable())
    assert.equal(tide.int32, f:int().dtype)
    assert.same({ 1, 255, 2, 0, 0 }, tide.tensor({ 1, -1, 2, 0, 256 }):to(tide.uint8):totable())
  end)

  it("anything nonzero is true; bools become 0 and 1", function()
    assert.same({ false, true, true, true }, tide.tensor({ 0, 0.1, -2, 0 / 0 }):bool():totable())
    assert.same({ false, true }, tide.tensor({ 0, 3 }):bool():totable())
    local b = tide.tensor({ true, false, true }):float()
    assert.equal(tide.float32, b.dtype)
    assert.same({ 1, 0, 1 }, b:totable())
    assert.same({ 1, 0, 1 }, tide.tensor({ true, false, true }):long():totable())
  end)

  it("to() takes a dtype, its name or an options table; same dtype is no copy", function()
    local x = tide.long { 1, 2 }
    assert.equal(tide.float64, x:to(tide.float64).dtype)
    assert.equal(tide.float64, x:to("float64").dtype)
    assert.equal(tide.float64, x:to("double").dtype)
    assert.equal(tide.float64, x:to({ dtype = tide.float64 }).dtype)
    assert.equal(tide.float64, x:double().dtype)
    local same = x:to(tide.int64)
    same[1] = 10
    assert.equal(10, x[1]:item())
    local copy = x:float()
    copy[1] = 20
    assert.equal(10, x[1]:item())
    assert.equal("tide.int64", x:type())
    H.raises(function() x:to("float17") end, "to:", "unknown dtype 'float17'")
  end)

  it("float32 rounds float64 values", function()
    local d = tide.tensor({ 0.1 }, { dtype = tide.float64 })
    assert.equal(0.1, d:item())
    assert.are_not.equal(0.1, d:float():item())
    assert.is_true(math.abs(d:float():item() - 0.1) < 1e-8)
  end)

  it("clone copies data and dtype", function()
    local a = tide.tensor({ 1, 2 }, { dtype = tide.int32 })
    local b = a:clone()
    b[1] = 5
    assert.same({ 1, 2 }, a:totable())
    assert.equal(tide.int32, b.dtype)
    local t = tide.randn(3, 7):t()
    assert.same(t:totable(), t:clone():totable())
  end)
end)

describe("shape queries", function()
  it("shape prints as [2, 3] and compares by value", function()
    local x = tide.zeros(2, 3)
    assert.equal("[2, 3]", tostring(x.shape))
    assert.equal("[]", tostring(tide.tensor(1).shape))
    assert.is_true(x.shape == tide.ones(2, 3).shape)
    assert.is_false(x.shape == tide.ones(3, 2).shape)
    assert.equal(3, x.shape[2])
    assert.equal(2, #x.shape)
  end)

  it("size, dim, numel, #", function()
    local x = tide.zeros(7, 1, 1023)
    assert.same({ 7, 1, 1023 }, x:size())
    assert.equal(1023, x:size(3))
    assert.equal(1023, x:size(-1))
    assert.equal(7, x:size(1))
    assert.equal(3, x:dim())
    assert.equal(3, x.ndim)
    assert.equal(7 * 1023, x:numel())
    assert.equal(7, #x)
    assert.equal(0, tide.tensor(2):dim())
    assert.equal(1, tide.tensor(2):numel())
    assert.equal(0, tide.zeros(2, 0, 3):numel())
    assert.equal(tide.float32, x.dtype)
    assert.equal("cpu", x.device)
    assert.equal(4, x:element_size())
    assert.is_true(x:is_floating_point())
    assert.is_false(tide.zeros(1, { dtype = tide.int64 }):is_floating_point())
  end)
end)

describe("tide.* function forms", function()
  it("every method is also a function taking the tensor first", function()
    local x = tide.arange(6)
    assert.same({ 2, 3 }, tide.view(x, 2, 3):size())
    assert.equal(2, tide.size(tide.zeros(6, 2), 2))
    assert.equal(2, tide.dim(tide.zeros(6, 2)))
    assert.equal(6, tide.numel(x))
    assert.equal(1, tide.item(tide.ones(1)))
    assert.same({ 1, 1 }, tide.exp(tide.zeros(2)):totable())
    assert.same({ 1, 1 }, tide.sub(1, tide.zeros(2)):totable())
    assert.same({ 3, 2 }, tide.t(tide.zeros(2, 3)):size())
    local n = 0
    for name, f in pairs(tide.Tensor) do
      if type(f) == "function" and tide[name] == nil then error("tide." .. name .. " is missing") end
      n = n + 1
    end
    assert.is_true(n > 50)
    -- dtype names stay dtypes
    assert.equal("tide.float32", tostring(tide.float))
    assert.equal("tide.bool", tostring(tide.bool))
    assert.equal("tide.int64", tostring(tide.long))
  end)
end)

describe("argument errors", function()
  it("use Lua's 'bad argument' wording", function()
    H.raises(function() tide.view("x", 2, 3) end, "bad argument #1 to 'view' (Tensor expected, got string)")
    H.raises(function() tide.exp(nil) end, "bad argument #1 to 'exp' (Tensor expected, got nil)")
    H.raises(function() tide.zeros(2):view("a") end, "bad argument #1 to 'view' (integer size expected, got string)")
    H.raises(function() tide.zeros(2):view(1.5) end, "bad argument #1 to 'view' (integer size expected, got 1.5)")
    H.raises(function() tide.zeros(2):add("a") end, "bad argument #2 to 'add' (Tensor or number expected, got string)")
    H.raises(function() local _ = tide.zeros(2) + {} end, "bad argument #2 to 'add'", "got table")
    H.raises(function() local _ = "s" * tide.zeros(2) end, "bad argument #1 to 'mul'", "got string")
    H.raises(function() tide.zeros(2):select(1, "a") end, "bad argument #3 to 'select'", "got string")
    H.raises(function() tide.zeros(2):narrow(1, 1, nil) end, "bad argument #4 to 'narrow'", "got nil")
    H.raises(function() tide.zeros(2):size("a") end, "bad argument #2 to 'size'", "got string")
    H.raises(function() tide.manual_seed("a") end, "bad argument #1 to 'manual_seed'")
  end)

  it("point at the caller's line", function()
    local x = tide.zeros(2, 3)
    local ok, err = pcall(function() local _ = x:view(7) end); local line = debug.getinfo(1, "l").currentline
    assert.is_false(ok)
    at_line(err, line)
    assert.is_truthy(SRC:find("spec/lua/misc_spec.lua", 1, true))
    local cases = {
      { function() local _ = x + tide.zeros(5) end, debug.getinfo(1, "l").currentline },
      { function() local _ = x:view("a") end, debug.getinfo(1, "l").currentline },
      { function() local _ = tide.view(x, 7) end, debug.getinfo(1, "l").currentline },
      { function() local _ = x[3] end, debug.getinfo(1, "l").currentline },
      { function() local _ = x[{ 1, 4 }] end, debug.getinfo(1, "l").currentline },
      { function() x[0] = 1 end, debug.getinfo(1, "l").currentline },
      { function() local _ = x:item() end, debug.getinfo(1, "l").currentline },
      { function() local _ = x:select(3, 1) end, debug.getinfo(1, "l").currentline },
      { function() local _ = x:transpose(0, 1) end, debug.getinfo(1, "l").currentline },
      { function() local _ = tide.zeros(-1) end, debug.getinfo(1, "l").currentline },
      { function() local _ = tide.tensor { 1, { 2 } } end, debug.getinfo(1, "l").currentline },
      { function() local _ = tide.long({ 1 }, { requires_grad = true }) end, debug.getinfo(1, "l").currentline },
      { function() local _ = tide.ones_like(x, { dtype = "nope" }) end, debug.getinfo(1, "l").currentline },
      { function() local _ = x:to("nope") end, debug.getinfo(1, "l").currentline },
      { function() local _ = x.nosuchfield end, debug.getinfo(1, "l").currentline },
      { function() x.nosuchfield = 1 end, debug.getinfo(1, "l").currentline },
      { function() local _ = x:reshape(7) end, debug.getinfo(1, "l").currentline },
      { function() local _ = x:expand(4, 4) end, debug.getinfo(1, "l").currentline },
      { function() local _ = x:unflatten(2, { 2, 2 }) end, debug.getinfo(1, "l").currentline },
      { function() local _ = tide.empty(1e15) end, debug.getinfo(1, "l").currentline },
    }
    for i, c in ipairs(cases) do
      local ok2, err2 = pcall(c[1])
      assert(not ok2, "case " .. i .. " did not raise")
      at_line(err2, c[2])
    end
  end)
end)

describe("comparison operators", function()
  it("compare the values of one-element tensors and refuse larger ones", function()
    local x = tide.tensor({ 1.5, 2.5 })
    assert.is_true(x:sum() > 3.9)
    assert.is_false(x:sum() > 4.1)
    assert.is_true(x[1] <= 1.5 and x[1] < x[2] and 1 < x[1])
    local ok, err = pcall(function() return x > 0 end)
    assert.is_false(ok)
    -- a tensor with dims is a userdata handle when the shim is loaded (core.lua),
    -- and Lua compares a userdata only with a userdata: its own error, not ours
    if require("tide.core").handles == "userdata" then
      assert.truthy(err:find("attempt to compare number with userdata", 1, true), err)
    else
      assert.truthy(err:find("no single truth value", 1, true), err)
    end
    ok, err = pcall(function() return x > x end)
    assert.is_false(ok)
    assert.truthy(err:find("no single truth value", 1, true), err)
    ok, err = pcall(function() return x[1] < "a" end)
    assert.is_false(ok)
    assert.truthy(err:find("compare a tensor with a string", 1, true))
  end)
  it("name tide.where when a compiled function branches on a traced value", function()
    local f = tide.compile(function(v) if v:sum() > 0 then return v end return -v end)
    local ok, err = pcall(f, tide.ones(2))
    assert.is_false(ok)
    assert.truthy(err:find("tide.where", 1, true))
  end)
end)
