--[[
bench/report.lua -- turn the records of bench/run.sh into the result tables
(markdown, as pasted into bench/RESULTS.md).
  luajit bench/report.lua build/bench/records.tsv
Input: TSV rows `round case peer threads median min max reps work` (times in
seconds; work = ops per timed call for op_* cases, bytes per call otherwise).
For each (case, peer): the median over rounds of each round's median, and the
min and max over every timed call. Ratios are taken within a round (tide and
its peer measured minutes apart at most) and the median over rounds is shown
with the range.
--]]
local path = arg[1] or "build/bench/records.tsv"
local here = (arg[0] or ""):match("^(.*)/[^/]*$") or "."
package.path = here .. "/?.lua;" .. package.path
local records = require "records"
local median = records.median
local order = records.read(path)

local function find(case, prefix, threads)
  for _, g in ipairs(order) do
    if g.case == case and g.threads == threads and g.peer:sub(1, #prefix) == prefix
       and (prefix:find("stepmul", 1, true) or not g.peer:find("stepmul", 1, true)) then
      return g
    end
  end
end

local thread_counts = records.thread_counts(order)   -- in order of appearance

-- ratio num/den per round (value_fn turns a median time into the compared
-- quantity), then median and range over the rounds both have
local function ratio(num, den, value_fn)
  if not (num and den) then return nil end
  local rs = {}
  for r, t in pairs(num.by_round) do
    local u = den.by_round[r]
    if u then rs[#rs + 1] = value_fn(num, t) / value_fn(den, u) end
  end
  if #rs == 0 then return nil end
  table.sort(rs)
  return median(rs), rs[1], rs[#rs], #rs
end

local function ns(g, t) return t / g.work * 1e9 end
local function gbs(g, t) return g.work / t / 1e9 end
local function rstr(m, lo, hi, n)
  if not m then return "n/a" end
  return ("%.2fx (rounds: %.2f-%.2f, n=%d)"):format(m, lo, hi, n)
end

-- -- Per-op cost ----------------------------------------------------------------------------

print("### Per-op cost: `c = a + b` on 1-element float32 tensors (ns/op, lower is better)\n")
print("| case | peer | threads | median of round medians | min | max | rounds | timed loops |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
for _, g in ipairs(order) do
  if g.case:match("^op_") then
    print(("| %s | %s | %d | %.1f | %.1f | %.1f | %d | %d x %g ops |"):format(g.case, g.peer, g.threads,
      ns(g, median(g.meds)), ns(g, g.lo), ns(g, g.hi), #g.meds, g.reps, g.work))
  end
end
print()
local m, lo, hi, n
for _, th in ipairs(thread_counts) do
  local tide_op, torch_op = find("op_add_1", "tide eager", th), find("op_add_1", "torch eager", th)
  if tide_op then
    local t = ns(tide_op, median(tide_op.meds))
    print(("* threads=%d: tide per-op cost **%.0f ns** (target < 1000 ns: %s)"):format(th, t,
      t < 1000 and "met" or "**missed**"))
  end
  m, lo, hi, n = ratio(torch_op, tide_op, ns)
  if m then
    print(("* threads=%d: PyTorch / tide per-op cost, same round: **%s** (target >= 3x: %s)"):format(th,
      rstr(m, lo, hi, n), m >= 3 and "met" or "**missed**"))
  end
  local wi = find("op_add_1", "tide eager (Lua, c = a + b), GC stepmul", th)
  if wi then
    m, lo, hi, n = ratio(torch_op, wi, ns)
    print(("* threads=%d: with LuaJIT's default GC pacing (%s instead of tide's 400): %.0f ns; PyTorch / it: %s"):format(th,
      wi.peer:match("GC stepmul %d+"), ns(wi, median(wi.meds)), rstr(m, lo, hi, n)))
  end
  m, lo, hi, n = ratio(tide_op, find("op_add_1", "tide from C", th), ns)
  if m then
    print(("* threads=%d: tide from Lua / the same op from C (td_add + td_release): %s"):format(th, rstr(m, lo, hi, n)))
  end
end

-- -- Bandwidth ------------------------------------------------------------------------------

print("\n### Bandwidth on 2^24 float32 (GB/s from the median time, higher is better)\n")
print("Cases `add/pair`, `sum/pair`: tide and the C loop alternating call by call in one process.\n")
print("| case | peer | threads | median ms | min ms | max ms | GB/s (median) | GB/s (best) | rounds x calls |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for _, g in ipairs(order) do
  if not g.case:match("^op_") and g.work > 0 then
    local med = median(g.meds)
    print(("| %s | %s | %d | %.3f | %.3f | %.3f | %.2f | %.2f | %d x %d |"):format(g.case, g.peer, g.threads,
      med * 1e3, g.lo * 1e3, g.hi * 1e3, gbs(g, med), gbs(g, g.lo), #g.meds, math.floor(g.reps / #g.meds)))
  end
end
print()
for _, th in ipairs(thread_counts) do
  for _, case in ipairs { "add", "sum" } do
    local t, c, p = find(case, "tide eager", th), find(case, "C loop", th), find(case, "torch eager", th)
    m, lo, hi, n = ratio(t, c, gbs)
    if m then
      print(("* threads=%d %s: tide / C loop GB/s, same round: **%s** (target >= 0.80: %s)"):format(th, case,
        rstr(m, lo, hi, n), m >= 0.8 and "met" or "**missed**"))
    elseif c and not t then
      print(("* threads=%d %s: tide not measured (op not available in this build)"):format(th, case))
    end
    local pr = find(case .. "/pair", "ratio", th)
    if pr then
      local pm = median(pr.meds)
      print(("* threads=%d %s: tide / C loop GB/s, alternating call by call in one process: **%.2fx** "
        .. "(median over rounds of the per-pair medians; rounds %.2f-%.2f, n=%d) (target >= 0.80: %s)"):format(th, case,
        pm, math.min(unpack(pr.meds)), math.max(unpack(pr.meds)), #pr.meds, pm >= 0.8 and "met" or "**missed**"))
    end
    m, lo, hi, n = ratio(t, p, gbs)
    if m then print(("* threads=%d %s: tide / PyTorch GB/s, same round: %s"):format(th, case, rstr(m, lo, hi, n))) end
  end
end
