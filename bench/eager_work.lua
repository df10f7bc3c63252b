--[[
bench/eager_work.lua -- tide's eager side of the eager workloads of issue 16,
timed as bench/peers_torch2/eager_work.py times PyTorch 2.x (same shapes, same
calls; .grad set to nil inside each timed call):
  w1_fwd       y = sin(x)^2 + cos(x)^2, x 2^24 float32
  w1_fwdbwd    the same and y:sum():backward()
  sm_fwd       softmax over (4096, 4096), dim -1
  sm_fwdbwd    the same and (y * g):sum():backward()
  ln_fwd       F.layer_norm over (8192, 1024) with weight and bias
  ln_fwdbwd    the same and (y * g):sum():backward(), x, weight, bias require grad
  ce_fwdbwd    F.cross_entropy of logits (4096, 32000) and labels, backward
  conv_fwdbwd  F.conv2d 64 -> 64 3x3 padding 1 on (8, 64, 56, 56) with bias, y:sum():backward()
  cnn_epoch    (from --only cnn) one epoch of examples/fashion_mnist.lua --model cnn
Records (TSV, bench/records.lua) go to $BENCH_OUT; a line per case to stdout.
  TIDE_NUM_THREADS=2 luajit bench/eager_work.lua [--only w1,sm,ln,ce,conv] [--reps 10]
  TIDE_NUM_THREADS=2 luajit bench/eager_work.lua --only cnn [--limit 0]
--]]
local root = (arg and arg[0] or ""):match("^(.*)/bench/[^/]*$") or "."
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. root .. "/bench/?.lua;" .. package.path

local opt = { only = "w1,sm,ln,ce,conv", reps = 10, warmup = 2, limit = 0 }
do
  local i = 1
  while arg and arg[i] do
    local k = arg[i]:match("^%-%-(.+)$")
    if k and opt[k] ~= nil and arg[i + 1] then opt[k] = tonumber(arg[i + 1]) or arg[i + 1]; i = i + 2
    else io.stderr:write("usage: luajit bench/eager_work.lua [--only w1,sm,ln,ce,conv|cnn] [--reps N] [--limit N]\n"); os.exit(2) end
  end
end
local want = {}
for w in tostring(opt.only):gmatch("[^,]+") do want[w] = true end

local records = require "records"
local tide = require "tide"
local F = tide.nn.functional
local clock = tide.progress.clock
local threads = tide.get_num_threads()
local PEER = "tide eager"

local function record(case, t, bytes)
  local med, lo, hi = records.median(t), math.min(unpack(t)), math.max(unpack(t))
  local path = os.getenv("BENCH_OUT")
  if path then
    local f = assert(io.open(path, "a"))
    f:write(("%s\t%s\t%d\t%.9f\t%.9f\t%.9f\t%d\t%.0f\n"):format(case, PEER, threads, med, lo, hi, #t, bytes))
    f:close()
  end
  print(("%-12s %-20s t=%d median %9.3f ms  min %9.3f  max %9.3f"):format(case, PEER, threads, med * 1e3,
    lo * 1e3, hi * 1e3))
end

local function time_calls(fn)
  for _ = 1, opt.warmup do fn() end
  collectgarbage("collect")
  local t = {}
  for r = 1, opt.reps do
    local t0 = clock()
    fn()
    t[r] = clock() - t0
  end
  return t
end

tide.manual_seed(0)
if want.w1 then
  local x = tide.randn(2 ^ 24)
  record("w1_fwd", time_calls(function() return x:sin() ^ 2 + x:cos() ^ 2 end), 8 * 2 ^ 24)
  local xg = x:clone():requires_grad_()
  record("w1_fwdbwd", time_calls(function()
    xg.grad = nil
    local y = xg:sin() ^ 2 + xg:cos() ^ 2
    y:sum():backward()
    return y
  end), 12 * 2 ^ 24)
end
if want.sm then
  local x, g = tide.randn(4096, 4096), tide.randn(4096, 4096)
  record("sm_fwd", time_calls(function() return x:softmax(-1) end), 8 * 4096 * 4096)
  local xg = x:clone():requires_grad_()
  record("sm_fwdbwd", time_calls(function()
    xg.grad = nil
    local y = xg:softmax(-1)
    ;(y * g):sum():backward()
    return y
  end), 16 * 4096 * 4096)
end
if want.ln then
  local x, g, w, b = tide.randn(8192, 1024), tide.randn(8192, 1024), tide.randn(1024), tide.randn(1024)
  record("ln_fwd", time_calls(function() return F.layer_norm(x, { 1024 }, w, b, 1e-5) end), 8 * 8192 * 1024)
  local xg, wg, bg = x:clone():requires_grad_(), w:clone():requires_grad_(), b:clone():requires_grad_()
  record("ln_fwdbwd", time_calls(function()
    xg.grad, wg.grad, bg.grad = nil, nil, nil
    local y = F.layer_norm(xg, { 1024 }, wg, bg, 1e-5)
    ;(y * g):sum():backward()
    return y
  end), 16 * 8192 * 1024)
end
if want.ce then
  local x = tide.randn(4096, 32000):requires_grad_()
  local y = tide.randint(1, 32001, { 4096 })
  record("ce_fwdbwd", time_calls(function()
    x.grad = nil
    local l = F.cross_entropy(x, y)
    l:backward()
    return l
  end), 12 * 4096 * 32000)
end
if want.conv then
  local x = tide.randn(8, 64, 56, 56):requires_grad_()
  local w = (tide.randn(64, 64, 3, 3) * 0.05):requires_grad_()
  local b = tide.randn(64):requires_grad_()
  record("conv_fwd", time_calls(function() return F.conv2d(x, w, b, { padding = 1 }) end), 0)
  record("conv_fwdbwd", time_calls(function()
    x.grad, w.grad, b.grad = nil, nil, nil
    local y = F.conv2d(x, w, b, { padding = 1 })
    y:sum():backward()
    return y
  end), 0)
end
if want.cnn then
  -- one epoch of the example (its own timing line), in a child process
  local cmd = ("cd %s && luajit examples/fashion_mnist.lua --model cnn --epochs 1 --limit %d 2>&1"):format(root,
    opt.limit)
  local p = io.popen(cmd)
  local out = p:read("*a"); p:close()
  local s, acc = out:match("epoch 1: ([%d.]+) s, test accuracy ([%d.]+)%%")
  if not s then io.stderr:write(out); error("eager_work.lua: the CNN example printed no epoch time", 0) end
  print(("cnn: test accuracy %s%%"):format(acc))
  record("cnn_epoch", { tonumber(s) }, 0)
end
