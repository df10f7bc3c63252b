-- The OpenCL device against the CPU, over the whole op table: every case of
-- spec/op_cases.lua (the gradcheck cases: odd sizes, views, broadcasting, Lua
-- numbers) runs on the CPU and on "opencl" from the same float64 inputs; the
-- results and the gradients of <w, result> for a random w must agree. An op of
-- the table with no case fails here as it does in gradcheck_spec. Skipped when
-- the machine has no OpenCL device.
local tide = require "tide"
local H = require "helper"
local ffi = require "ffi"
local C = tide.C
local cases = require "op_cases"

local describe_cl, to_dev = H.describe_cl, H.to_opencl

-- results and gradients agree to |diff| <= 1e-9 |want| + 1e-12 (NaN = NaN)
local function close(got, want, what) H.agree(got, want, 1e-9, what, 1e-12) end

local function run_case(fn, inputs)
  local want, got, dev = H.same_opencl(fn, inputs, 1e-9, "result", 1e-12)
  if not want.requires_grad then return end
  local w = tide.randn(want:size(), { dtype = want.dtype })
  local wd = w:to("opencl")
  want:mul(w):sum():backward()
  got:mul(wd):sum():backward()
  for i, x in ipairs(inputs) do
    if tide.is_tensor(x) and x.requires_grad then close(dev[i].grad, x.grad, "gradient of input " .. i) end
  end
end

describe_cl("the OpenCL device equals the CPU over the op table", function()
  for i = 0, C.td_op_count() - 1 do
    local name = ffi.string(C.td_op_name(i))
    if cases.NODIFF[name] then
      it(name, function()
        local x = H.rand64 { 3, 5 }
        close(cases.NODIFF[name](to_dev({ x })[1]), cases.NODIFF[name](x), "result")
      end)
    elseif cases.CASES[name] then
      for _, case in ipairs(cases.CASES[name]) do
        it(name .. ": " .. case[1], function() run_case(case[2], case[3]()) end)
      end
    else
      it(name .. " has a case", function() error("op '" .. name .. "' has no case in spec/op_cases.lua") end)
    end
  end
end)

describe_cl("OpenCL elementwise ops in other dtypes", function()
  local function both(f, ...)
    local args, dargs = { ... }, to_dev { ... }
    return f(unpack(args, 1, #args)), f(unpack(dargs, 1, #dargs))
  end
  it("float32 transcendental ops agree within float32 rounding", function()
    local x = tide.rand(1023) * 4 - 2
    for _, n in ipairs { "exp", "sin", "cos", "tanh", "sigmoid", "gelu", "silu", "erf" } do
      local want, got = both(function(t) return t[n](t) end, x)
      local err = (got:cpu() - want):abs():max():item()
      assert.is_true(err < 1e-5, n .. ": max |diff| " .. err)
    end
  end)
  it("integer and bool arithmetic is exact: wrap-around, integer pow, bool logic, comparisons", function()
    local a = tide.randint(-50, 50, { 7, 5 }, { dtype = "int64" })
    local b = tide.randint(-5, 6, { 5 }, { dtype = "int32" })
    local u = tide.randint(0, 256, { 9 }, { dtype = "uint8" })
    for _, f in ipairs {
      function(x, y) return x + y end, function(x, y) return x * y end, function(x, y) return x - y end,
      function(x, y) return tide.maximum(x, y) end, function(x, y) return x:lt(y) end,
      function(x) return x:abs() end, function(x) return x:sign() end, function(x) return x:clamp(-3, 4) end,
      function(x, y) return tide.pow(x:clamp(-3, 3), y:abs():clamp(0, 4)) end,
    } do
      local want, got = both(f, a, b)
      assert.are.same(want:totable(), got:cpu():totable())
    end
    local want, got = both(function(x) return x + 200 end, u)
    assert.are.equal(tide.uint8, got.dtype)
    assert.are.same(want:totable(), got:cpu():totable())
    local p, q = tide.rand(9):gt(0.5), tide.rand(9):gt(0.5)
    for _, f in ipairs { function(x, y) return x + y end, function(x, y) return x * y end,
                         function(x, y) return tide.logical_or(x, tide.logical_not(y)) end } do
      local w, g = both(f, p, q)
      assert.are.same(w:totable(), g:cpu():totable())
    end
  end)
  it("casts between every pair of dtypes", function()
    local x = tide.tensor({ -3.7, -1, 0, 0.5, 2.5, 200.2 }, { dtype = "float64" })
    for _, from in ipairs { "bool", "uint8", "int32", "int64", "float32", "float64" } do
      local src = from == "uint8" and x:abs():to(from) or x:to(from)
      for _, to in ipairs { "bool", "uint8", "int32", "int64", "float32", "float64" } do
        local want, got = both(function(t) return t:to(to) end, src)
        assert.are.same(want:totable(), got:cpu():totable(), from .. " -> " .. to)
      end
    end
  end)
  it("in-place ops write through a strided device view", function()
    local x = tide.randn(4, 6)
    local d = x:to("opencl")
    x[{ {}, { 2, 6, 2 } }]:mul_(3):add_(1)
    d[{ {}, { 2, 6, 2 } }]:mul_(3):add_(1)
    assert.are.same(x:totable(), d:cpu():totable())
    x:t():clamp_(-0.5, 0.5); d:t():clamp_(-0.5, 0.5)
    assert.are.same(x:totable(), d:cpu():totable())
  end)
end)

describe_cl("moving tensors between devices", function()
  it("keeps values, dtype, shape; a view is moved as its values", function()
    local x = tide.randn(4, 6, { dtype = "float64" })
    local d = x:t():to("opencl")
    assert.are.same({ 6, 4 }, d:size())
    assert.are.same(x:t():totable(), d:cpu():totable())
    assert.are.equal(d, d:to("opencl"))
  end)
  it("is differentiable both ways, to second order (ToCopyBackward0)", function()
    local x = H.rand64 { 3, 4 }
    local y = x:to("opencl")
    assert.are.equal("ToCopyBackward0", y.grad_fn)
    y:sin():mul(2):to("cpu"):sum():backward()
    H.close(x.grad, x:detach():cos() * 2, 1e-12)
    local x2 = H.rand64 { 5 }
    local g = tide.autograd.grad({ x2:to("opencl"):pow(3):sum() }, { x2 }, { create_graph = true })[1]
    assert.are.equal("cpu", g.device)
    local gg = tide.autograd.grad({ g:sum() }, { x2 })[1]
    H.close(gg, x2:detach() * 6, 1e-12)
  end)
end)

describe_cl("in-place ops into a device tensor through the C API", function()
  it("CPU 0-dim arguments run on the destination's device (td_op_out)", function()
    local OP = require("tide.core").OP
    local d, s = tide.randn(3, 4):to("opencl"), tide.tensor(2.5)
    assert.are.equal(0, C.td_op_out(OP.copy, 1, ffi.new("td_tensor *[1]", { s.p }), nil, d.p))
    assert.are.same({ { 2.5, 2.5, 2.5, 2.5 }, { 2.5, 2.5, 2.5, 2.5 }, { 2.5, 2.5, 2.5, 2.5 } }, d:cpu():totable())
    assert.are.equal(0, C.td_op_out(OP.mul, 2, ffi.new("td_tensor *[2]", { d.p, s.p }), nil, d.p))
    assert.are.equal(75, d:cpu():sum():item())
    -- a CPU tensor with dims is not a scalar: refused, naming both devices
    local x = tide.randn(3, 4)
    assert.are_not.equal(0, C.td_op_out(OP.copy, 1, ffi.new("td_tensor *[1]", { x.p }), nil, d.p))
    assert.matches("opencl", ffi.string(C.td_last_error()))
  end)
end)

describe_cl("OpenCL errors", function()
  it("an op on tensors of two devices names both", function()
    local a, b = tide.randn(3), tide.randn(3):to("opencl")
    local ok, err = pcall(function() return a + b end)
    assert.is_false(ok)
    assert.matches("add: tensors are on different devices %(argument 2 on opencl, argument 1 on cpu%)", err)
  end)
  it("a device that does not exist is named", function()
    local ok, err = pcall(function() return tide.randn(3):to("opencl:99") end)
    assert.is_false(ok)
    assert.matches("opencl:99", err)
  end)
  it("a number joins a device op; a CPU tensor with dims does not", function()
    local d = tide.randn(3):to("opencl")
    assert.are.equal("opencl:0", (2 * d).device)
    assert.are.equal("opencl:0", (d + tide.tensor(1.5)).device)
    assert.has_error(function() return d + tide.randn(3) end)
  end)
end)
