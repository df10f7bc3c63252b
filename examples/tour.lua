--[[
examples/tour.lua -- a short tour of tide's eager API, printing as it goes:
creating tensors, dtypes and promotion, broadcasting, views and 1-based
indexing, reductions, matmul, in-place ops, and autograd on a tiny linear
regression trained by gradient descent (the loss goes down as it prints).
Run from the repository root:
  make example              installs missing Debian packages, builds, runs this
  luajit examples/tour.lua  the same, once `make` has built build/libtide.so
--]]
local root = (arg and arg[0] or ""):match("^(.*)/examples/[^/]*$") or "."
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path
local tide = require "tide"
tide.cmdline.parse(arg, { usage = "luajit examples/tour.lua",
  about = "A printed tour of tide's eager API (no options, no data needed)." })

local function section(title) print(("\n== %s %s"):format(title, ("="):rep(60 - #title))) end

tide.manual_seed(42)      -- counter-based RNG: the same numbers for any thread count

section("Creating tensors")
local x = tide.tensor({ { 1, 2, 3 }, { 4, 5, 6 } })
print(x)                                   -- numbers -> float32, the default dtype (as in Torch7)
print(tide.zeros(2, 3))
print(tide.arange(0, 1, 0.25))             -- stop excluded, as in PyTorch
print(tide.linspace(-1, 1, 5))
print(tide.randn(2, 3))
print("shape:", table.concat(x.shape, "x"), "dtype:", x.dtype, "numel:", x:numel())

section("dtypes and promotion (PyTorch's rules)")
local i = tide.long({ 1, 2, 3 })           -- int64: every dtype is a constructor
print(i / 2)                               -- true division -> float32
print((i + tide.ones(3, { dtype = tide.float64 })).dtype)   -- int64 + float64 -> float64
print(i:float() * 0.5, i:double():sqrt())

section("Broadcasting")
local col = tide.tensor({ { 1 }, { 2 }, { 3 } })   -- 3x1
local row = tide.tensor({ 10, 20, 30, 40 })        -- 4
print(col * row + 0.5)                             -- 3x4

section("Views and indexing (1-based, Torch7 ranges)")
local m = tide.arange(1, 13):view(3, 4)
print(m)
print(m[2])                      -- row 2 (a view)
print(m[{ 2, 3 }]:item())        -- row 2, column 3 -> 7
print(m[{ {}, { 2, 3 } }])       -- all rows, columns 2..3 (a view, no copy)
print(m:t():is_contiguous(), m:t().shape[1])
m[{ 1, {} }] = 0                 -- assignment writes through the view into m
m[{ {2, 3}, -1 }] = -1           -- negative indices count from the end
print(m)

section("Reductions")
local r = tide.arange(1, 7):view(2, 3):float()
print(r:sum(), r:mean())
print(r:sum(1))                  -- over dim 1 (the rows): shape {3}
print(r:mean(2, true))           -- over dim 2, keepdim: shape {2, 1}
local vals, idx = r:max(2)       -- values and 1-based indices
print(vals, idx)

section("matmul")
local A, B = tide.randn(2, 3), tide.randn(3, 4)
local C = A:matmul(B)
print(C)
print("(2x3) @ (3x4) ->", table.concat(C.shape, "x"),
      "  batched (5x2x3) @ (3x4) ->", table.concat(tide.randn(5, 2, 3):matmul(B).shape, "x"))

section("In-place ops and version counters")
local v = tide.ones(3)
print(v._version)
v:mul_(2):add_(1)                -- in-place ops bump the version counter
print(v, v._version)

section("Autograd: fit y = 3x - 2 by gradient descent")
local X = tide.randn(64, 1)
local Y = X * 3 - 2 + tide.randn(64, 1) * 0.1        -- targets with a little noise
local w = tide.zeros(1, 1, { requires_grad = true })
local b = tide.zeros(1, { requires_grad = true })
local lr = 0.02
for step = 1, 300 do
  local loss = ((X:matmul(w) + b - Y) ^ 2):mean()   -- mean squared error
  loss:backward()                                   -- fills w.grad and b.grad
  tide.no_grad(function()                           -- updates are not recorded
    w:sub_(w.grad * lr)
    b:sub_(b.grad * lr)
  end)
  w.grad, b.grad = nil, nil                         -- grads accumulate otherwise
  if step == 1 or step % 30 == 0 then print(("step %3d  loss %.6f"):format(step, loss:item())) end
end
print(("learned w = %.4f, b = %.4f (true: 3, -2)"):format(w:item(), b:item()))

-- higher-order gradients: d/dx of d/dx x^3 = 6x
local z = tide.tensor({ 2 }, { dtype = tide.float64, requires_grad = true })
local dz = tide.autograd.grad(z ^ 3, z, { create_graph = true })[1]
local d2z = tide.autograd.grad(dz, z)[1]
print(("x = 2: d(x^3)/dx = %g, d2(x^3)/dx2 = %g"):format(dz:item(), d2z:item()))

-- gradcheck: analytical gradients against float64 central differences
local t = tide.randn(4, 3, { dtype = tide.float64 }):requires_grad_()
print("gradcheck(tanh(t) * t:sum(2, true)):",
      tide.autograd.gradcheck(function(a) return a:tanh() * a:sum(2, true) end, { t }))

section("Devices: OpenCL")
if tide.opencl.is_available() then
  print("device:", tide.opencl.device_name())
  local a = tide.randn(3, 4):to("opencl")              -- or tide.randn(3, 4, { device = "opencl" })
  local y = (a:t():matmul(a) + 1):softmax(2)             -- runs on the device (CLBlast for matmul)
  print(y)                                              -- printed through a host copy, device='opencl:0'
  local p = tide.randn(4, { requires_grad = true })
  p:to("opencl"):exp():sum():backward()                 -- to() is differentiable
  print(("grad on the CPU leaf: max |p.grad - exp(p)| = %.1e"):format((p.grad - p:detach():exp()):abs():max():item()))
else
  print("no OpenCL device (install pocl-opencl-icd or a GPU driver)")
end
