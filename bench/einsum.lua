--[[
bench/einsum.lua -- tide.einsum on attention-shaped contractions (B 8, H 8, T 256,
D 64, float32): the scores "bhqd,bhkd->bhqk" forward, and forward+backward, and
the weighted sum "bhqk,bhkd->bhqd" forward; prints "workload<TAB>tide<TAB>median ms"
per workload (bench/pair.sh pairs it with bench/peers_torch2/einsum.py).
  luajit bench/einsum.lua [--reps 15]
--]]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local tide = require "tide"
local reps = tonumber(arg[2]) or 15

local function median(t) table.sort(t); local n = #t; return n % 2 == 1 and t[(n + 1) / 2] or (t[n / 2] + t[n / 2 + 1]) / 2 end
local ffi = require "ffi"
pcall(ffi.cdef, "struct timespec { long tv_sec; long tv_nsec; }; int clock_gettime(int clk, struct timespec *ts);")
local ts = ffi.new("struct timespec")
local function now() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end

local B, H, T, D = 8, 8, 256, 64
tide.manual_seed(1)
local q, k = tide.randn(B, H, T, D):requires_grad_(), tide.randn(B, H, T, D):requires_grad_()
local p = tide.randn(B, H, T, T)
local work = {
  { "scores fwd", function() return tide.einsum("bhqd,bhkd->bhqk", q, k) end },
  { "scores fwd+bwd", function() local s = tide.einsum("bhqd,bhkd->bhqk", q, k); s:sum():backward(); q.grad, k.grad = nil, nil end },
  { "weighted sum fwd", function() return tide.einsum("bhqk,bhkd->bhqd", p, k) end },
}
for _, w in ipairs(work) do
  local t = {}
  for i = 1, reps + 2 do
    local t0 = now()
    local y = w[2]()
    local dt = now() - t0
    if y then y:free() end
    if i > 2 then t[#t + 1] = dt end
  end
  io.write(("%s\ttide\t%.3f\n"):format(w[1], median(t) * 1e3))
end
