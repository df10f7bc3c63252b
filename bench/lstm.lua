--[[
bench/lstm.lua -- nn.LSTM forward and forward+backward in tide, eager and
compiled (the workload of issue 17: seq 64, batch 32, input and hidden 256,
one layer, float32). Prints one line per measurement:
  lstm <what> <mode> median_ms min_ms max_ms reps
(bench/lstm.sh runs it next to bench/peers/lstm.py and makes the table.)

  luajit bench/lstm.lua [--seq 64] [--batch 32] [--hidden 256] [--reps 15] [--modes eager,compiled]
--]]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local tide = require "tide"
local opt = tide.cmdline.parse(arg, {
  usage = "luajit bench/lstm.lua [options]",
  about = "nn.LSTM forward and forward+backward, eager and compiled (bench/lstm.sh).",
  { "seq", 64, "time steps" }, { "batch", 32, "batch size" }, { "hidden", 256, "input and hidden size" },
  { "layers", 1, "LSTM layers" }, { "reps", 15, "timed repetitions (after 3 warm-up calls)" },
  { "modes", "eager,compiled", "eager and/or compiled" },
})
tide.manual_seed(0)
local lstm = tide.nn.LSTM(opt.hidden, opt.hidden, { num_layers = opt.layers })
local x = tide.randn(opt.seq, opt.batch, opt.hidden)
local clock = tide.progress.clock

local function fwd(x) return (lstm(x)) end
local function step(x)
  lstm:zero_grad()
  local y = lstm(x)
  local l = y:sum()
  l:backward()
  return l
end

local function time(name, mode, f, grad)
  local function call()
    if grad then f(x):item() else tide.no_grad(function() f(x):sum():item() end) end
  end
  local t0 = clock()
  call()                                    -- the first call compiles
  local first = clock() - t0
  for _ = 1, 2 do call() end
  local t = {}
  for k = 1, opt.reps do local s = clock(); call(); t[k] = clock() - s end
  table.sort(t)
  print(("lstm\t%s\t%s\t%.2f\t%.2f\t%.2f\t%d\tfirst %.0f ms"):format(name, mode, t[math.floor(opt.reps / 2) + 1] * 1e3,
    t[1] * 1e3, t[opt.reps] * 1e3, opt.reps, first * 1e3))
  io.stdout:flush()
end

for mode in opt.modes:gmatch("[^,]+") do
  if mode == "eager" then
    time("forward", "eager", fwd, false)
    time("forward+backward", "eager", step, true)
  elseif mode == "compiled" then
    time("forward", "compiled", tide.compile(fwd, { name = "lstm_forward" }), false)
    time("forward+backward", "compiled", tide.compile(step, { name = "lstm_step" }), true)
  else error("unknown mode " .. mode) end
end
