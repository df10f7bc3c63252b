--[[
bench/gpu.lua -- issue 15's GPU figures for tide on the OpenCL device, one line
each, in the format bench/gpu.sh joins with PyTorch's (bench/peers/gpu_torch.py):
  RESULT <case> <peer> <median ms> <figure> <unit>
Cases (the issue's table):
  add          eager add of two 2^26 float32 tensors            GB/s (3 x 4 B/elem)
  w1_eager     sin(x)^2 + cos(x)^2 on 2^24, eager               GB/s (8 B/elem)
  w1_compiled  the same through tide.compile                    GB/s
  softmax      softmax over rows of 4096 x 4096, compiled, fwd  GB/s (8 B/elem)
  layer_norm   layer_norm 8192 x 1024 (affine), compiled, fwd   GB/s (8 B/elem)
  sgemm        4096^3 float32 matmul (CLBlast)                  TFLOP/s
  mlp_step     MLP 784-512-512-10 Adam step, batch 128, compiled ms
  launch       a 1-element add, eager, 10000 in a row           us per op
  sdpa         fused SDPA B64 H32 T256 D32 causal, fwd + bwd    ms
Every timing waits for the device's queue (tide.opencl.synchronize) before it
reads the clock. Usage (there: bash .gpu/run.sh --lua bench/gpu.lua [case...]);
here on PoCL it runs too (sizes cut by --small), measuring overheads only, and
--device cpu runs the same cases on the CPU (tide.compile through libgccjit),
the figures RESULTS.md keeps beside PoCL's.
--]]
local root = (arg and arg[0] or ""):match("^(.*)/bench/[^/]*$") or "."
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path
local tide = require "tide"
local F, nn = tide.nn.functional, tide.nn
local clock = tide.progress.clock

local small, want, DEV = false, {}, "opencl"
local i = 1
while arg and arg[i] do
  local a = arg[i]
  if a == "--small" then small = true
  elseif a == "--device" then DEV = assert(arg[i + 1], "--device needs a name"); i = i + 1
  else want[a] = true end
  i = i + 1
end
local function wanted(c) return next(want) == nil or want[c] end
local sync = DEV == "cpu" and function() end or tide.opencl.synchronize
print(("# device: %s"):format(DEV == "cpu" and "cpu (libgccjit)" or tide.opencl.device_name()))

-- median seconds of fn over reps calls after warmup calls; the queue drained around each
local function time(fn, reps, warmup)
  for _ = 1, warmup or 3 do fn() end
  sync()
  collectgarbage()
  local t = {}
  for r = 1, reps do
    local t0 = clock()
    fn()
    sync()
    t[r] = clock() - t0
  end
  table.sort(t)
  return t[math.floor((#t + 1) / 2)]
end

local function result(case, peer, sec, fig, unit)
  print(("RESULT %s %s %.4f %.4g %s"):format(case, peer, sec * 1e3, fig, unit))
  io.stdout:flush()
end

local S = small and 1 / 64 or 1

if wanted("add") then
  local n = math.floor(2 ^ 26 * S)
  local a, b = tide.rand(n, { device = DEV }), tide.rand(n, { device = DEV })
  local t = time(function() return a + b end, 20)
  result("add", "tide", t, 12 * n / t / 1e9, "GB/s")
end

if wanted("w1_eager") or wanted("w1_compiled") then
  local n = math.floor(2 ^ 24 * S)
  local x = tide.randn(n, { device = DEV })
  local function w1(y) return y:sin() ^ 2 + y:cos() ^ 2 end
  local t = time(function() return w1(x) end, 20)
  result("w1_eager", "tide", t, 8 * n / t / 1e9, "GB/s")
  local cw1 = tide.compile(w1)
  local err = (cw1(x) - 1):abs():max():item()
  assert(err < 1e-5, "w1 compiled: max |y - 1| = " .. err)
  t = time(function() return cw1(x) end, 20)
  result("w1_compiled", "tide", t, 8 * n / t / 1e9, "GB/s")
end

if wanted("softmax") then
  local r, c = math.floor(4096 * S), 4096
  local x = tide.randn(r, c, { device = DEV })
  local f = tide.compile(function(y) return y:softmax(2) end)
  local t = time(function() return f(x) end, 20)
  result("softmax", "tide", t, 8 * r * c / t / 1e9, "GB/s")
end

if wanted("layer_norm") then
  local r, c = math.floor(8192 * S), 1024
  local x = tide.randn(r, c, { device = DEV })
  local w, b = tide.randn(c, { device = DEV }), tide.randn(c, { device = DEV })
  local f = tide.compile(function(y) return F.layer_norm(y, { c }, w, b) end)
  local t = time(function() return f(x) end, 20)
  result("layer_norm", "tide", t, 8 * r * c / t / 1e9, "GB/s")
end

if wanted("sgemm") then
  local n = small and 512 or 4096
  local a, b = tide.randn(n, n, { device = DEV }), tide.randn(n, n, { device = DEV })
  local t = time(function() return a:matmul(b) end, small and 5 or 20)
  result("sgemm", "tide", t, 2 * n ^ 3 / t / 1e12, "TFLOP/s")
end

if wanted("mlp_step") then
  tide.manual_seed(0)
  local model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
  model:to(DEV)
  local opt = tide.optim.Adam(model:parameters(), { lr = 1e-3 })
  local step = tide.compile(function(x, y)
    opt:zero_grad()
    local loss = F.cross_entropy(model(x), y)
    loss:backward()
    opt:step()
    return loss
  end)
  local x = tide.randn(128, 784, { device = DEV })
  local y = tide.randint(1, 11, { 128 }, { dtype = tide.int64, device = DEV })   -- classes 1..10 (1-based)
  local t = time(function() return step(x, y) end, small and 5 or 50, 5)
  result("mlp_step", "tide", t, t * 1e3, "ms")
end

if wanted("launch") then
  local a, b = tide.ones(1, { device = DEV }), tide.ones(1, { device = DEV })
  local reps = small and 1000 or 10000
  local t = time(function() for _ = 1, reps do local _ = a + b end end, 5, 2)
  result("launch", "tide", t / reps, t / reps * 1e6, "us")
end

if wanted("sdpa") then
  local B, H, T, D = small and 2 or 64, small and 4 or 32, 256, 32
  local q = tide.randn(B, H, T, D, { device = DEV }):requires_grad_()
  local k = tide.randn(B, H, T, D, { device = DEV }):requires_grad_()
  local v = tide.randn(B, H, T, D, { device = DEV }):requires_grad_()
  local g = tide.randn(B, H, T, D, { device = DEV })
  local t = time(function()
    q.grad, k.grad, v.grad = nil, nil, nil
    F.scaled_dot_product_attention(q, k, v, { is_causal = true }):backward(g)
  end, small and 3 or 20)
  result("sdpa", "tide", t, t * 1e3, "ms")
end
