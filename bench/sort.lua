--[[
bench/sort.lua -- sort and topk on 2^24 float32 values (issue 17): one row of
2^24 and 4096 rows of 4096, sorted or selected along the last dim (values and
indices). Prints the median ms over `reps` calls per workload, one line each
(tab-separated: workload, median ms). bench/sort.sh runs it next to PyTorch
(bench/peers_extra/sort.py, same workloads) in alternating rounds.
Run: TIDE_NUM_THREADS=2 luajit bench/sort.lua [reps = 5]
--]]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local tide = require "tide"
local ffi = require "ffi"

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_sort_timespec;
int clock_gettime(int clk, bench_sort_timespec *ts);
]]
local ts = ffi.new("bench_sort_timespec")
local function now() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end

local reps = tonumber(arg and arg[1]) or 5
tide.manual_seed(1)
for _, shape in ipairs { { 1, 2 ^ 24 }, { 4096, 4096 } } do
  local x = tide.randn(shape)
  local work = {
    { "sort", function() return x:sort(2) end },
    { "topk10", function() return x:topk(10, 2) end },
    { "topk1000", function() return x:topk(1000, 2) end },
  }
  for _, w in ipairs(work) do
    w[2]()
    local t = {}
    for r = 1, reps do
      collectgarbage()
      local t0 = now(); local v, i = w[2](); t[r] = now() - t0
      v, i = nil, nil
    end
    table.sort(t)
    print(("%s %dx%d\t%.1f"):format(w[1], shape[1], shape[2], t[math.floor((reps + 1) / 2)] * 1e3))
  end
end
