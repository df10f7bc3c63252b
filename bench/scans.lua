--[[
bench/scans.lua -- tide's cumsum on 2^24 float32 values: one row of 2^24 (the
blocked scan of rt_scan.c) and 4096 rows of 4096 (rows in parallel); prints
"workload<TAB>tide<TAB>median ms<TAB>GB/s" per workload (bench/scans.sh pairs
it with PyTorch, bench/peers/scans.py).
  luajit bench/scans.lua [--reps 15]
--]]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local tide = require "tide"
local reps = tonumber(arg[2]) or 15

local function median(t) table.sort(t); local n = #t; return n % 2 == 1 and t[(n + 1) / 2] or (t[n / 2] + t[n / 2 + 1]) / 2 end

local ffi = require "ffi"
ffi.cdef [[ int clock_gettime(int clk, struct timespec *ts); ]]
pcall(ffi.cdef, "struct timespec { long tv_sec; long tv_nsec; };")
local ts = ffi.new("struct timespec")
local function now() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end

local N = 2 ^ 24
for _, w in ipairs { { "cumsum 1x2^24", { 1, N }, 2 }, { "cumsum 4096x4096", { 4096, 4096 }, 2 } } do
  local x = tide.rand(w[2])
  local t = {}
  for i = 1, reps + 2 do
    local t0 = now()
    local y = x:cumsum(w[3])
    local dt = now() - t0
    y:free()
    if i > 2 then t[#t + 1] = dt end
  end
  local m = median(t)
  io.write(("%s\ttide\t%.3f\t%.1f\n"):format(w[1], m * 1e3, 2 * 4 * N / m / 1e9))
end
