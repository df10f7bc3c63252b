-- Gradient conformance: walks the op table (td_op_count / td_op_name) and runs
-- float64 central-difference gradchecks for every differentiable op on fresh
-- random inputs: odd sizes (1, 7, 1023), non-contiguous views, broadcasting and
-- Lua numbers. Non-differentiable ops are listed explicitly; an op in the table
-- with neither a case nor a NODIFF entry fails the spec, so a new op cannot land
-- without its gradient being checked.
local tide = require "tide"
local H = require "helper"
local ffi = require "ffi"
local C = tide.C

local cases = require "op_cases"
local CASES, NODIFF, offgrid = cases.CASES, cases.NODIFF, cases.offgrid

-- -- Second order ---------------------------------------------------------------------------
-- The derivative rules are written with the same ops, so their results are
-- differentiable: gradcheck fn2(x) = d<w, fn(x)>/dx, built with create_graph.
-- Listed: the ops whose first derivative depends on the inputs; `skip` names
-- the cases that are linear (their gradient is a constant).

local GRADGRAD = {
  exp = {}, log = {}, log1p = {}, expm1 = {}, sqrt = {}, rsqrt = {}, sin = {}, cos = {}, tan = {},
  tanh = {}, sigmoid = {}, gelu = {}, silu = {}, erf = {},
  mul = { skip = { "number on the right", "number on the left" } },
  div = { skip = { "number on the right" } }, pow = {},
  -- two zeros in one group: the first derivative is exact, the second is not
  -- (it would need exclusive cumulative products)
  prod = { skip = { "with zeros, dim 2" } }, var = {}, std = {}, logsumexp = {}, norm = { skip = { "p=1, dim 2", "p=inf, dim 1" } },
  softmax = {}, log_softmax = {}, matmul = {}, sdpa = {},
}

local function gradgrad(fn, inputs, opts)
  local wrt = {}
  for i, x in ipairs(inputs) do if tide.is_tensor(x) and x.requires_grad then wrt[#wrt + 1] = i end end
  local w
  local function fn2(...)
    local args = { ... }
    return tide.enable_grad(function()
      local outs = { fn(unpack(args, 1, #inputs)) }
      if not w then
        w = {}
        for i, o in ipairs(outs) do w[i] = tide.randn(o:size(), { dtype = "float64" }) end
      end
      local xs = {}
      for k, i in ipairs(wrt) do xs[k] = args[i] end
      local g = tide.autograd.grad(outs, xs, { grad_outputs = w, create_graph = true, allow_unused = true })
      local r = {}
      for k = 1, #xs do r[k] = g[k] or tide.zeros_like(xs[k]) end
      return unpack(r, 1, #xs)
    end)
  end
  H.gradcheck(fn2, inputs, opts)
end

-- -- The walk ---------------------------------------------------------------------------------

describe("gradcheck over the op table", function()
  local seen = {}
  for i = 0, C.td_op_count() - 1 do
    local name = ffi.string(C.td_op_name(i))
    seen[name] = true
    if NODIFF[name] then
      it(name .. " is listed as not differentiable: its result does not require grad", function()
        local x = H.rand64 { 3, 5 }
        local r = NODIFF[name](x)
        assert.is_false(r.requires_grad)
        assert.is_nil(r.grad_fn)
      end)
    elseif CASES[name] then
      for _, case in ipairs(CASES[name]) do
        it(name .. ": " .. case[1], function()
          H.gradcheck(case[2], case[3](), case[4])
        end)
      end
    else
      it(name .. " has a gradcheck case", function()
        error(("op '%s' is in the op table but has no case in spec/jit/gradcheck_spec.lua: "
          .. "add a gradcheck case, or list it in NODIFF"):format(name))
      end)
    end
  end

  it("every case names an op of the table", function()
    for name in pairs(CASES) do assert.is_true(seen[name] == true, "no op named " .. name) end
    for name in pairs(NODIFF) do assert.is_true(seen[name] == true, "no op named " .. name) end
  end)

  for _, name in ipairs((function() local k = {} for n in pairs(GRADGRAD) do k[#k + 1] = n end table.sort(k) return k end)()) do
    local skip = {}
    for _, l in ipairs(GRADGRAD[name].skip or {}) do skip[l] = true end
    for _, case in ipairs(CASES[name]) do
      if not skip[case[1]] and case[1] ~= "1023" then
        it(name .. " second order: " .. case[1], function() gradgrad(case[2], case[3](), case[4]) end)
      end
    end
  end

  it("sign, floor, ceil and round have exactly zero gradients", function()
    for _, n in ipairs { "sign", "floor", "ceil", "round" } do
      local x = offgrid { 7 }
      x[n](x):sum():backward()
      assert.same({ 0, 0, 0, 0, 0, 0, 0 }, x.grad:totable())
    end
  end)
end)
