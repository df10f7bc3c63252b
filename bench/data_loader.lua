--[[
bench/data_loader.lua -- DataLoader with and without worker threads (num_workers):
epochs over a TensorDataset of 50000 MNIST-sized float32 rows (784 values, 157 MB)
and int64 labels, batch 256, shuffled. Two loops per setting:
  load   the loop body only touches the batch (x:sum()): the loading itself
  train  one step of a 784-256-10 MLP (forward, backward, SGD): loading next to compute
Prints the median epoch time over rounds for num_workers = 0, 1, 2, alternating
settings within a round. Run: luajit bench/data_loader.lua [rounds = 3]
(with TIDE_NUM_THREADS as for the other benchmarks; results in bench/RESULTS.md).
--]]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local tide = require "tide"
local ffi = require "ffi"
local nn, F = tide.nn, tide.nn.functional

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_dl_timespec;
int clock_gettime(int clk, bench_dl_timespec *ts);
]]
local ts = ffi.new("bench_dl_timespec")
local function now() ffi.C.clock_gettime(1, ts); return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9 end

local rounds = tonumber(arg and arg[1]) or 3
tide.manual_seed(1)
local N = 50000
local X = tide.randn(N, 784)
local Y = tide.randint(1, 11, { N }, { dtype = tide.int64 })
local ds = tide.data.TensorDataset(X, Y)
local model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
local opt = tide.optim.SGD(model:parameters(), { lr = 0.01 })

local bodies = {
  load = function(x) return x:sum() end,
  train = function(x, y)
    local loss = F.cross_entropy(model(x), y)
    opt:zero_grad(); loss:backward(); opt:step()
    return loss
  end,
}

local function epoch(body, nw)
  local loader = tide.data.DataLoader(ds, { batch_size = 256, shuffle = true, seed = 3, num_workers = nw })
  local t0 = now()
  for x, y in loader:batches() do body(x, y) end
  return now() - t0
end

local function median(t) table.sort(t); return t[math.floor((#t + 1) / 2)] end
print(("threads %d, %d rounds, %d rows x 784 float32, batch 256"):format(tide.get_num_threads(), rounds, N))
for _, name in ipairs { "load", "train" } do
  local times = { [0] = {}, {}, {} }
  epoch(bodies[name], 0)                  -- warm up (allocator cache, first touches)
  for _ = 1, rounds do
    for nw = 0, 2 do table.insert(times[nw], epoch(bodies[name], nw)) end
  end
  local base = median(times[0])
  for nw = 0, 2 do
    local m = median(times[nw])
    print(("%-5s num_workers=%d  %7.1f ms/epoch  (%.2fx of num_workers=0)"):format(name, nw, m * 1e3, base / m))
  end
end
