--[[
bench/records.lua -- the records bench/run.sh collects, read back for the
reports (bench/report.lua, bench/compile.lua --only report). A record is a
TSV row `round case peer threads median min max reps work` (times in seconds;
work = bytes per call, or ops per call for op_* cases).
--]]
local M = {}

function M.median(t)
  local s = {}
  for i = 1, #t do s[i] = t[i] end
  table.sort(s)
  local n = #s
  if n == 0 then return nil end
  return n % 2 == 1 and s[(n + 1) / 2] or 0.5 * (s[n / 2] + s[n / 2 + 1])
end

-- The rows of `path` grouped by (case, peer, threads), in order of appearance:
-- { case, peer, threads, work, meds = round medians, by_round = round -> median,
--   lo, hi = min and max over every timed call, reps = timed calls }
function M.read(path)
  local rows, order = {}, {}
  for line in assert(io.open(path, "r")):lines() do
    local r, case, peer, th, med, lo, hi, reps, work = line:match(
      "^(%d+)\t([^\t]+)\t([^\t]+)\t(%d+)\t([^\t]+)\t([^\t]+)\t([^\t]+)\t(%d+)\t([^\t]+)$")
    if r then
      local key = case .. "\0" .. peer .. "\0" .. th
      local g = rows[key]
      if not g then
        g = { case = case, peer = peer, threads = tonumber(th), work = tonumber(work), meds = {}, by_round = {},
              lo = math.huge, hi = -math.huge, reps = 0 }
        rows[key] = g; order[#order + 1] = g
      end
      g.meds[#g.meds + 1] = tonumber(med)
      g.by_round[tonumber(r)] = tonumber(med)
      g.lo, g.hi = math.min(g.lo, tonumber(lo)), math.max(g.hi, tonumber(hi))
      g.reps = g.reps + tonumber(reps)
    end
  end
  return order
end

-- the thread counts of the groups, in order of appearance
function M.thread_counts(order)
  local ths, seen = {}, {}
  for _, g in ipairs(order) do if not seen[g.threads] then seen[g.threads] = true; ths[#ths + 1] = g.threads end end
  return ths
end

return M
