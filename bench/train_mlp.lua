--[[
bench/train_mlp.lua -- W2: one eager training step of the MLP 784-512-512-10
(ReLU), batch 128, cross-entropy, zero_grad + forward + backward + Adam(1e-3)
step, the same step as ../shared/peers/w2_mlp.py (bench/peers/w2_mlp.py).
Prints the median step time over --reps timed steps after a warm-up.
--profile: the profiler's overhead; steps alternate, one plain, one inside
tide.profiler.profile (its report, with the step's events, built each time),
so both see the same machine; prints the medians of both and their ratio.
  luajit bench/train_mlp.lua [--reps 200] [--profile]
--]]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local tide = require "tide"
local nn, F = tide.nn, tide.nn.functional
local reps, profile = 200, false
for i = 1, #arg do
  if arg[i] == "--reps" then reps = tonumber(arg[i + 1]) elseif arg[i] == "--profile" then profile = true end
end
tide.manual_seed(0)
local model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
local opt = tide.optim.Adam(model:parameters(), { lr = 1e-3 })
local x, y = tide.randn(128, 784), tide.randint(1, 11, { 128 })
local clock = tide.progress.clock
local function step()
  opt:zero_grad()
  local loss = F.cross_entropy(model(x), y)
  loss:backward()
  opt:step()
  return loss
end
for _ = 1, 20 do step() end
if profile then
  local events = 0
  local function profiled() events = #tide.profiler.profile(step).events end
  for _ = 1, 5 do profiled() end
  local off, on = {}, {}
  for i = 1, reps do
    local t0 = clock(); step(); off[i] = clock() - t0
    t0 = clock(); profiled(); on[i] = clock() - t0
  end
  table.sort(off); table.sort(on)
  local m = math.floor(reps / 2) + 1
  print(("W2 train step  profiler off  median %.3f ms  min %.3f  |  on (%d events a step)  median %.3f ms  min %.3f"
    .. "  |  on/off %.3f (medians), %.3f (mins)  (%d steps each, alternating, threads=%d)"):format(
    off[m] * 1e3, off[1] * 1e3, events, on[m] * 1e3, on[1] * 1e3, on[m] / off[m], on[1] / off[1], reps,
    tide.get_num_threads()))
  return
end
local t = {}
for i = 1, reps do local t0 = clock(); step(); t[i] = clock() - t0 end
table.sort(t)
print(("W2 train step  tide eager (Lua)  threads=%d  median %.3f ms  min %.3f  max %.3f  (%d steps)"):format(
  tide.get_num_threads(), t[math.floor(reps / 2) + 1] * 1e3, t[1] * 1e3, t[reps] * 1e3, reps))
