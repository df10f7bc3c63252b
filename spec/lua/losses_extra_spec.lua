-- The losses of tide.nn.losses_extra (ctc_loss, triplet_margin_loss, ...) against
-- PyTorch's values and input gradients (spec/ref/losses_reference.lua, written by
-- spec/ref/losses_reference.py with torch 2.x), then per case: float64 gradcheck,
-- tide.compile equal to eager (or its clear error, flag nocompile) and OpenCL
-- equal to CPU; the nn modules; the errors.
local tide = require "tide"
local H = require "helper"
local R = require "ref_cases"
local REF = dofile("spec/ref/losses_reference.lua")
local F, nn = tide.nn.functional, tide.nn

describe("losses against PyTorch", function()
  for _, c in ipairs(REF) do
    it(c.name .. ": " .. c.lua, function()
      local fn, xs, names = R.case_fn(c)
      local got = fn(unpack(xs))
      R.same(got, c.outs[1], 1e-10, c.name)

      local keys = R.grad_keys(c)
      if #keys > 0 then
        local pos = {}
        for i, k in ipairs(names) do pos[k] = i end
        -- the gradient of the summed loss against torch's
        local gx = {}
        for i, x in ipairs(xs) do gx[i] = x end
        for _, k in ipairs(keys) do gx[pos[k]] = xs[pos[k]]:clone():requires_grad_() end
        fn(unpack(gx)):sum():backward()
        for _, k in ipairs(keys) do R.same(gx[pos[k]].grad, c.grads[k], 1e-9, c.name .. " gradient of " .. k) end
        -- and the float64 gradcheck
        local function f(...)
          local a, all = { ... }, {}
          for i = 1, #xs do all[i] = xs[i] end
          for j, k in ipairs(keys) do all[pos[k]] = a[j] end
          return fn(unpack(all))
        end
        local ins = {}
        for j, k in ipairs(keys) do ins[j] = xs[pos[k]]:clone():requires_grad_() end
        H.gradcheck(f, ins)
      end

      local compiled = tide.compile(fn, { name = c.name })
      if R.flag(c, "nocompile") then
        H.raises(function() return compiled(unpack(xs)) end, "tide.compile")
      else
        R.same(compiled(unpack(xs)), c.outs[1], 1e-10, c.name .. " compiled")
      end

      if H.has_opencl() then
        local dx = {}
        for i, x in ipairs(xs) do dx[i] = x:to("opencl") end
        R.same(fn(unpack(dx)):cpu(), c.outs[1], 1e-9, c.name .. " on OpenCL")
      end
    end)
  end
end)
