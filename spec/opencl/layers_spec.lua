-- The recurrent and attention layers on the OpenCL device: the cases of
-- spec/ref/layers_reference.lua flagged cl (one of each family) run with
-- module and inputs on "opencl" in float64 and give PyTorch's values (1e-9),
-- and the gradients of their parameters and inputs agree with the CPU's.
-- Skipped when the machine has no OpenCL device.
local tide = require "tide"
local H = require "helper"
local L = require "ref.layers_cases"

-- sum of <w_i, result_i> over the float results, w fixed per case
local function objective(outs, ws)
  local s
  for i, o in ipairs(outs) do
    if o:is_floating_point() then
      local t = (o * ws[i]:to(o.device)):sum()
      s = s and s + t or t
    end
  end
  return s
end

H.describe_cl("recurrent and attention layers on OpenCL", function()
  for _, c in ipairs(L.REF) do
    if L.flag(c, "cl") then
      it(c.name .. " gives PyTorch's values and the CPU's gradients", function()
        local m, fn, xs = L.setup(c, "opencl")
        for i, x in ipairs(xs) do if x:is_floating_point() then xs[i] = x:requires_grad_() end end
        local got = L.flatten(fn(m, unpack(xs)))
        assert.equal(#c.outs, #got, "number of results")
        for i, want in ipairs(c.outs) do
          if got[i]:is_floating_point() then assert.equal("opencl", (got[i].device:match("^opencl"))) end
          H.close(got[i]:cpu(), want.data and L.tensor_of(want), 1e-9, c.name .. " result " .. i)
        end
        local mc, fc, xc = L.setup(c)
        for i, x in ipairs(xc) do if x:is_floating_point() then xc[i] = x:requires_grad_() end end
        local want = L.flatten(fc(mc, unpack(xc)))
        local ws = {}
        for i, o in ipairs(want) do ws[i] = tide.randn(o:size(), { dtype = tide.float64 }) end
        objective(got, ws):backward()
        objective(want, ws):backward()
        local pd, pc = m:parameters(), mc:parameters()
        for i = 1, #pd do H.agree(pd[i].grad, pc[i].grad, 1e-9, c.name .. " gradient of parameter " .. i, 1e-12) end
        for i = 1, #xs do
          if xc[i].grad ~= nil then H.agree(xs[i].grad, xc[i].grad, 1e-9, c.name .. " gradient of input " .. i, 1e-12) end
        end
      end)
    end
  end
end)
