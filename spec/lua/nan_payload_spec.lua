-- NaNs with payload bits reach Lua as plain NaN (found by the API fuzzer: printing
-- tide.empty() failed with "bad argument #1 to 'abs' (number expected, got nil)").
-- LuaJIT keeps its type tags in NaN payloads: a float32 0xFFFFFFFF, or a float64
-- with sign and high payload bits set, read through the FFI as is, was nil or
-- a forged object (a "table" at address 1 that the collector would follow).
local tide = require "tide"
local ffi = require "ffi"

-- a tensor whose elements hold the given raw bit patterns
local function with_bits(dtype, words)
  local x = tide.zeros(#words, { dtype = dtype })
  local p = ffi.cast(dtype == "float32" and "uint32_t *" or "uint64_t *", require("tide.tensor").fields(x).ptr)
  for i, w in ipairs(words) do p[i - 1] = w end
  return x
end

local function is_nan(v) return type(v) == "number" and v ~= v end

describe("NaN payloads", function()
  local cases = {
    float32 = { 0xFFFFFFFF, 0xFFF00001, 0x7FFFFFFF },
    float64 = { 0xFFFFFFFFFFFFFFFFULL, 0xFFFA000000000001ULL, 0x7FF0000000000001ULL },
  }
  for dtype, words in pairs(cases) do
    it(dtype .. ": item, totable and tostring give nan", function()
      local x = with_bits(dtype, words)
      for i = 1, #words do assert.is_true(is_nan(x[i]:item()), ("element %d: %s"):format(i, tostring(x[i]:item()))) end
      local t = x:totable()
      assert.are.equal(#words, #t)
      for i = 1, #words do assert.is_true(is_nan(t[i]), ("totable %d: %s"):format(i, type(t[i]))) end
      assert.are.equal(#words, select(2, tostring(x):gsub("nan", "")))
      assert.are.equal(1, select(2, tostring(x[1]):gsub("nan", "")))
    end)
  end
  it("plain values and infinities are unchanged", function()
    local x = tide.tensor({ 1.5, -math.huge, math.huge, 0 }, { dtype = tide.float64 })
    assert.are.same({ 1.5, -math.huge, math.huge, 0 }, x:totable())
    assert.are.equal("tensor([1.5000,   -inf,    inf, 0.0000], dtype=float64)", tostring(x))
  end)
end)

describe("linspace into integer dtypes", function()
  it("raises for NaN or out-of-range ends instead of storing INT_MIN", function()
    local H = require "helper"
    H.raises(function() tide.linspace(0 / 0, 2, 4, { dtype = "uint8" }) end, "linspace: cannot convert nan to uint8")
    H.raises(function() tide.linspace(0, 1e300, 4, { dtype = "int32" }) end, "linspace: value 1e+300 is out of range for int32")
    assert.are.same({ 0, 127, 255 }, tide.linspace(0, 255, 3, { dtype = "uint8" }):totable())
  end)
end)
