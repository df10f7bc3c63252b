--[[
bench/losses.lua -- tide's side of the loss workloads of issue 17, timed as
bench/peers_torch2/losses.py times PyTorch 2.x (same shapes; forward and
backward, the gradient cleared inside each timed call):
  ctc      F.ctc_loss of log_softmax(x), x (T=50, N=16, C=20), padded targets S=10
  ctc_long the same with T=200, N=32, C=40, S=40
  triplet  F.triplet_margin_loss of (256, 128) float32, swap = true
  mmargin  F.multi_margin_loss of (256, 100) float32 logits, p = 2
  TIDE_NUM_THREADS=2 luajit bench/losses.lua [--reps 20]
--]]
local root = (arg and arg[0] or ""):match("^(.*)/bench/[^/]*$") or "."
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. root .. "/bench/?.lua;" .. package.path
local reps = tonumber(arg[1] == "--reps" and arg[2] or nil) or 20
local records = require "records"
local tide = require "tide"
local F = tide.nn.functional
local clock = tide.progress.clock

local function time(name, fn)
  for _ = 1, 3 do fn() end
  local t = {}
  for i = 1, reps do
    local t0 = clock(); fn(); t[i] = clock() - t0
  end
  print(("%-9s tide eager t=%d median %9.3f ms  min %9.3f"):format(name, tide.get_num_threads(),
    records.median(t) * 1e3, math.min(unpack(t)) * 1e3))
end

tide.manual_seed(0)
local function ctc_case(name, T, N, C, S)
  local x = tide.randn(T, N, C, { requires_grad = true })
  local tg = tide.randint(2, C + 1, { N, S })
  local il, tl = tide.full({ N }, T):long(), tide.full({ N }, S):long()
  time(name, function()
    x.grad = nil
    F.ctc_loss(x:log_softmax(3), tg, il, tl):backward()
    return x.grad
  end)
end
ctc_case("ctc", 50, 16, 20, 10)
ctc_case("ctc_long", 200, 32, 40, 40)
local a, p, n = tide.randn(256, 128, { requires_grad = true }), tide.randn(256, 128), tide.randn(256, 128)
time("triplet", function() a.grad = nil; F.triplet_margin_loss(a, p, n, { swap = true }):backward() end)
local lg, y = tide.randn(256, 100, { requires_grad = true }), tide.randint(1, 101, { 256 })
time("mmargin", function() lg.grad = nil; F.multi_margin_loss(lg, y, { p = 2 }):backward() end)
