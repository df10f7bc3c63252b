--[[
bench/convt.lua -- ConvTranspose2d (issue 17): 64 -> 32 channels, 4x4 kernel,
stride 2, padding 1 on (8, 64, 28, 28) float32 with bias (output (8, 32, 56, 56)),
forward alone and forward + y:sum():backward() (x, weight, bias require grad), the
fused kernel and the composite alternating; then Conv3d 16 -> 32, 3x3x3 on (2, 16, 16, 32, 32);
bench/peers_torch2/convt.py times PyTorch the same way. Median of --reps.
  TIDE_NUM_THREADS=1 luajit bench/convt.lua [--reps 10]
--]]
local root = (arg and arg[0] or ""):match("^(.*)/bench/[^/]*$") or "."
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. root .. "/bench/?.lua;" .. package.path
local records = require "records"
local tide = require "tide"
local F = tide.nn.functional
local clock = tide.progress.clock
local reps = tonumber(arg[1] == "--reps" and arg[2] or 10)

tide.manual_seed(0)
local x = tide.randn(8, 64, 28, 28):requires_grad_()
local w = (tide.randn(64, 32, 4, 4) * 0.05):requires_grad_()
local b = tide.randn(32):requires_grad_()
local o = { stride = 2, padding = 1 }

-- each case alternates the fused kernel (F.fused, the default) and the composite (matmul + fold)
local function time(name, f)
  local t = { fused = {}, composite = {} }
  for _, mode in ipairs { "fused", "composite" } do F.fused = mode == "fused"; f(); f() end
  for i = 1, reps do
    for _, mode in ipairs { "fused", "composite" } do
      F.fused = mode == "fused"
      local t0 = clock()
      f()
      t[mode][i] = clock() - t0
    end
  end
  F.fused = true
  for _, mode in ipairs { "fused", "composite" } do
    print(("%-16s tide %-9s t=%d median %8.3f ms  min %8.3f"):format(name, mode, tide.get_num_threads(),
      records.median(t[mode]) * 1e3, math.min(unpack(t[mode])) * 1e3))
  end
end
time("convt2d_fwd", function() tide.no_grad(function() return F.conv_transpose2d(x, w, b, o) end) end)
time("convt2d_fwdbwd", function()
  x.grad, w.grad, b.grad = nil, nil, nil
  F.conv_transpose2d(x, w, b, o):sum():backward()
end)

-- Conv3d 16 -> 32, 3x3x3, padding 1 on (2, 16, 16, 32, 32) with bias (F.conv3d: float32 on x86-64-v4 the
-- register tiles in 3-D, td_conv3d; the composite is one grouped conv2d over the gathered depth taps)
local x3 = tide.randn(2, 16, 16, 32, 32):requires_grad_()
local w3 = (tide.randn(32, 16, 3, 3, 3) * 0.05):requires_grad_()
local b3 = tide.randn(32):requires_grad_()
time("conv3d_fwd", function() tide.no_grad(function() return F.conv3d(x3, w3, b3, { padding = 1 }) end) end)
time("conv3d_fwdbwd", function()
  x3.grad, w3.grad, b3.grad = nil, nil, nil
  F.conv3d(x3, w3, b3, { padding = 1 }):sum():backward()
end)
