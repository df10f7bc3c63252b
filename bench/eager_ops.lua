--[[
bench/eager_ops.lua -- tide's eager benchmarks from Lua, one process per call:
  op        per-op cost of `c = a + b` on 1-element float32 tensors: a loop of
            --ops ops (default 1e6) timed as a whole, --reps times; ns/op.
  breakdown (with --breakdown) the same loop taken apart: an empty loop, one FFI
            call (td_live_bytes), td_op + td_release straight through the FFI
            (no handle, no GC), and td_op + core.wrap (handle, finalizer, GC
            pacing) without the operator's Lua dispatch.
  bw        `c = a + b` and `a:sum()` on --n float32 values (default 2^24), each
            call timed alone, --bw-reps times (default 50) after 3 warm-ups.
Run by bench/run.sh; by hand, from the repository root:
  TIDE_NUM_THREADS=2 luajit bench/eager_ops.lua [--only op|bw] [--ops N] [--reps N]
Records go to $BENCH_OUT (appended; TSV: case peer threads median min max reps
work, times in seconds, work = ops per rep or bytes per call); a human
line per case goes to stdout.
--]]
local root = (arg and arg[0] or ""):match("^(.*)/bench/[^/]*$") or "."
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path

local tide = require "tide"
local ffi = require "ffi"
local C = tide.C

ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk, bench_timespec *ts);
]]
local ts = ffi.new("bench_timespec")
local function now()
  ffi.C.clock_gettime(1, ts)          -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- -- Options -----------------------------------------------------------------------------

local opt = { ops = 1e6, reps = 7, n = 2 ^ 24, ["bw-reps"] = 50, only = "all" }
do
  local i = 1
  while arg and arg[i] do
    local k = arg[i]:match("^%-%-(.+)$")
    if k == "breakdown" then opt.breakdown = true; i = i + 1
    elseif k and opt[k] ~= nil then
      opt[k] = tonumber(arg[i + 1]) or arg[i + 1]; i = i + 2
    else
      io.stderr:write("usage: luajit bench/eager_ops.lua [--only op|bw] [--ops N] [--reps N] ",
        "[--n N] [--bw-reps N] [--breakdown]\n")
      os.exit(2)
    end
  end
end

local threads = tide.get_num_threads()
local out = os.getenv("BENCH_OUT") and assert(io.open(os.getenv("BENCH_OUT"), "a"))

local function stats(t)
  table.sort(t)
  local n = #t
  local med = n % 2 == 1 and t[(n + 1) / 2] or 0.5 * (t[n / 2] + t[n / 2 + 1])
  return med, t[1], t[n]
end

local function record(case, peer, t, work, unit)
  local med, lo, hi = stats(t)
  if out then
    out:write(("%s\t%s\t%d\t%.9f\t%.9f\t%.9f\t%d\t%.0f\n"):format(case, peer, threads, med, lo, hi, #t, work))
    out:flush()
  end
  if unit == "ns/op" then
    print(("%-10s %-34s t=%d median %8.1f ns/op  min %8.1f  max %8.1f"):format(
      case, peer, threads, med / work * 1e9, lo / work * 1e9, hi / work * 1e9))
  else
    print(("%-10s %-34s t=%d median %8.3f ms  min %8.3f  max %8.3f  %6.2f GB/s"):format(
      case, peer, threads, med * 1e3, lo * 1e3, hi * 1e3, work / med / 1e9))
  end
end

-- time `body(nops)` (a loop of nops ops) reps times after one warm-up
local function time_loop(body, nops, reps)
  body(nops)
  collectgarbage("collect")
  local t = {}
  for r = 1, reps do
    local t0 = now()
    body(nops)
    t[r] = now() - t0
  end
  return t
end

-- -- Per-op cost -------------------------------------------------------------------------

if opt.only == "all" or opt.only == "op" then
  local a, b = tide.randn(1), tide.randn(1)
  assert(math.abs((a + b):item() - (a:item() + b:item())) < 1e-6)

  local function add_loop(n)
    for _ = 1, n do local c = a + b end
  end
  record("op_add_1", "tide eager (Lua, c = a + b)", time_loop(add_loop, opt.ops, opt.reps), opt.ops, "ns/op")

  if opt.breakdown then
    local core = require "tide.core"
    local td_op, td_release, wrap, ADD = C.td_op, C.td_release, core.wrap, core.OP.add
    local inb = ffi.new("td_tensor *[2]", a.p, b.p)
    local function empty(n) for _ = 1, n do end end
    local function ffi_call(n) local f = C.td_live_bytes; for _ = 1, n do f() end end
    local function raw(n) for _ = 1, n do td_release(td_op(ADD, 2, inb, nil)) end end
    -- the result wrapped as the library wraps it (handle, GC finalizer, GC pacing)
    local function wrapped(n) for _ = 1, n do local c = wrap(td_op(ADD, 2, inb, nil)) end end
    record("op_empty", "breakdown: empty Lua loop", time_loop(empty, opt.ops, opt.reps), opt.ops, "ns/op")
    record("op_ffi", "breakdown: one FFI call", time_loop(ffi_call, opt.ops, opt.reps), opt.ops, "ns/op")
    record("op_raw", "breakdown: td_op+td_release via FFI", time_loop(raw, opt.ops, opt.reps), opt.ops, "ns/op")
    record("op_wrap", "breakdown: td_op via FFI + core.wrap", time_loop(wrapped, opt.ops, opt.reps), opt.ops, "ns/op")
  end
end

-- -- Bandwidth: add and sum on n float32 values --------------------------------------------

if opt.only == "all" or opt.only == "bw" then
  local n, reps = opt.n, opt["bw-reps"]
  local a = tide.rand(n)
  local b = tide.ones(n)

  local function time_each(fn)
    for _ = 1, 3 do fn() end
    local t = {}
    for r = 1, reps do
      local t0 = now()
      fn()
      t[r] = now() - t0
    end
    return t
  end

  local c
  -- eager c = a + b: a fresh output every call, as a user writes it; the old c
  -- becomes garbage and its buffer returns to the caching allocator when collected
  record("add", "tide eager (Lua, c = a + b)", time_each(function() c = a + b end), 12 * n)
  assert(math.abs(c[n]:item() - (a[n]:item() + 1)) < 1e-6, "add: wrong result")
  c = nil

  local ok, err = pcall(function() return a:sum() end)
  if ok then
    local s
    record("sum", "tide eager (Lua, a:sum())", time_each(function() s = a:sum() end), 4 * n)
    local want = n / 2
    assert(math.abs(s:item() - want) < 0.01 * want, "sum: result far from n/2")
  else
    print("sum        tide: skipped (" .. tostring(err) .. ")")
  end
end

if out then out:close() end
-- Exit without lua_close(): closing the state dlclose()s libtide.so, which can
-- crash (SIGSEGV) while a pool worker is still spinning inside it after the
-- last big op.
os.exit(0)
