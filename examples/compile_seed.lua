--[[
examples/compile_seed.lua -- the seed example of tide.compile:
f(x) = sin(x)^2 + cos(x)^2 on 2^24 float32 values. The forward compiles into
one fused kernel (run with TIDE_LOG=schedule,code to see it), the gradient of
f(x):sum() is computed by a compiled backward and is zero within 1e-6; prints
the time per call compiled and eager.

  luajit examples/compile_seed.lua [--n 16777216]
--]]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local tide = require "tide"

local opt = tide.cmdline.parse(arg, {
  usage = "luajit examples/compile_seed.lua [options]",
  about = "sin(x)^2 + cos(x)^2 compiled into one fused kernel, with its compiled gradient.",
  { "n", 2 ^ 24, "number of float32 values" },
})
local n = opt.n
local x = tide.randn(n)

local function f(v) return v:sin() ^ 2 + v:cos() ^ 2 end
local fc = tide.compile(f, { name = "f" })

-- forward and backward of f(x):sum(), compiled as one function
local xg = x:clone():requires_grad_()
local fb = tide.compile(function(v)
  local y = f(v)
  y:sum():backward()
  return y
end, { name = "f_and_grad" })

local y = fc(x)
print(("max |f(x) - 1|      = %.3g"):format((y - 1):abs():max():item()))
fb(xg)
print(("max |d sum f / dx|  = %.3g"):format(xg.grad:abs():max():item()))

local function time(fn, reps)
  local t = {}
  for k = 1, reps do local t0 = tide.progress.clock(); fn(); t[k] = tide.progress.clock() - t0 end
  table.sort(t)
  return t[math.floor(reps / 2) + 1] * 1e3
end
print(("forward:          compiled %.1f ms, eager %.1f ms"):format(time(function() fc(x) end, 9),
  time(function() f(x) end, 9)))
print(("forward+backward: compiled %.1f ms, eager %.1f ms"):format(
  time(function() xg.grad = nil; fb(xg) end, 9),
  time(function() xg.grad = nil; f(xg):sum():backward() end, 9)))
