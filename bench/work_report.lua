--[[
bench/work_report.lua -- the table of issue 16's eager workloads (bench/run.sh,
BENCH_PARTS=torch2): tide eager next to PyTorch 2.x eager and torch.compile,
and Debian's torch 1.13 when it ran, from the records of bench/eager_work.lua
and bench/peers_torch2/eager_work.py.
  luajit bench/work_report.lua build/bench/work.tsv
Times: the median over rounds of each round's median. The ratio tide / torch
2.x eager is taken within each round (the two ran back to back), its median
and range over rounds shown; the target is <= 1 (stretch 0.8).
--]]
local path = arg[1] or "build/bench/work.tsv"
local here = (arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local records = require "records"
local median = records.median
local order = records.read(path)

local CASES = {
  { "w1_fwd", "sin(x)^2 + cos(x)^2, 2^24 float32, fwd" },
  { "w1_fwdbwd", "the same, fwd+bwd" },
  { "sm_fwd", "softmax (4096, 4096), fwd" },
  { "sm_fwdbwd", "softmax (4096, 4096), fwd+bwd" },
  { "ln_fwd", "layer_norm (8192, 1024), fwd" },
  { "ln_fwdbwd", "layer_norm (8192, 1024), fwd+bwd" },
  { "ce_fwdbwd", "cross_entropy (4096, 32000), fwd+bwd" },
  { "conv_fwd", "Conv2d 64->64 3x3, 8x64x56x56, fwd" },
  { "conv_fwdbwd", "Conv2d 64->64 3x3, 8x64x56x56, fwd+bwd" },
  { "cnn_epoch", "CNN example, one Fashion-MNIST epoch" },
}

local function find(case, th, pred)
  for _, g in ipairs(order) do
    if g.case == case and g.threads == th and pred(g.peer) then return g end
  end
end
local function is(prefix, suffix)
  return function(p) return p:sub(1, #prefix) == prefix and (not suffix or p:sub(-#suffix) == suffix) end
end
local function fmt(g)
  if not g then return "-" end
  local m = median(g.meds)
  return m >= 1 and ("%.2f s"):format(m) or ("%.1f ms"):format(m * 1e3)
end
local function ratio(a, b)
  if not (a and b) then return nil end
  local rs = {}
  for r, t in pairs(a.by_round) do if b.by_round[r] then rs[#rs + 1] = t / b.by_round[r] end end
  if #rs == 0 then return nil end
  table.sort(rs)
  return median(rs), rs[1], rs[#rs], #rs
end

for _, th in ipairs(records.thread_counts(order)) do
  local t2name
  for _, g in ipairs(order) do
    if g.peer:match("^torch2") and g.peer:match("eager$") then t2name = g.peer:match("^(%S+)") end
  end
  print(("#### eager workloads, threads=%d\n"):format(th))
  print(("| workload | tide eager | %s eager | tide / torch eager | %s compile | torch 1.13 eager |"):format(
    t2name or "torch 2.x", t2name or "torch 2.x"))
  print("| --- | --- | --- | --- | --- | --- |")
  for _, c in ipairs(CASES) do
    local tide = find(c[1], th, is("tide eager"))
    local t2e = find(c[1], th, is("torch2", "eager"))
    local t2c = find(c[1], th, is("torch2", "compile"))
    local t1 = find(c[1], th, is("torch1", "eager"))
    if tide or t2e then
      local m, lo, hi, n = ratio(tide, t2e)
      local rs = m and ("**%.2fx** (%.2f-%.2f, n=%d)%s"):format(m, lo, hi, n, m <= 1 and "" or " (target <= 1: missed)") or "-"
      print(("| %s | %s | %s | %s | %s | %s |"):format(c[2], fmt(tide), fmt(t2e), rs, fmt(t2c), fmt(t1)))
    end
  end
  print()
end
