--[[
bench/eager_ops.lua -- tide's eager benchmarks from Lua (bench/run.sh runs one
part per process, chosen with --only):
  op        per-op cost of `c = a + b` on 1-element float32 tensors: a loop of
            --ops ops (default 1e6) timed as a whole, --reps times; ns/op.
  breakdown (with --breakdown) the same loop taken apart: an empty loop, one FFI
            call (td_live_bytes), td_op + td_release straight through the FFI
            (no handle, no GC), td_op + core.wrap (handle, finalizer, GC
            pacing) without the operator's Lua dispatch, and LuaJIT's cost of
            a handle with a finalizer alone: a NULL handle given ffi.gc
            (op_fin), a NULL userdata handle of the handle shim (op_ud).
            TIDE_HANDLES=ffi measures the library with cdata handles.
  --stepmul N  a what-if: collectgarbage("setstepmul", N) first (LuaJIT's
            default is 200; the library does not change it), the peer label
            says so.
  bw        `c = a + b` and `a:sum()` on --n float32 values (default 2^24), each
            call timed alone, --bw-reps times (default 50) after 10 warm-ups.
  pair      (with --clib path/libc_loops.so) the same two ops alternating in one
            process with the plain C loops of bench/c_loops.c on the same
            buffers, in alternating order, with a 5 ms pause before each call
            so that either thread pool is asleep while the other runs. The
            ratio is taken per pair, which cancels most of the load other
            processes put on the machine.
Run by bench/run.sh; by hand, from the repository root:
  TIDE_NUM_THREADS=2 luajit bench/eager_ops.lua [--only op|bw|pair] [--ops N] [--reps N]
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

local opt = { ops = 1e6, reps = 7, n = 2 ^ 24, ["bw-reps"] = 50, only = "all", clib = "", stepmul = 0 }
do
  local i = 1
  while arg and arg[i] do
    local k = arg[i]:match("^%-%-(.+)$")
    if k == "breakdown" then opt.breakdown = true; i = i + 1
    elseif k and opt[k] ~= nil then
      opt[k] = tonumber(arg[i + 1]) or arg[i + 1]; i = i + 2
    else
      io.stderr:write("usage: luajit bench/eager_ops.lua [--only op|bw|pair] [--ops N] [--reps N] ",
        "[--n N] [--bw-reps N] [--breakdown] [--clib libc_loops.so] [--stepmul N]\n")
      os.exit(2)
    end
  end
end

local threads = tide.get_num_threads()
local what_if = ""
if opt.stepmul > 0 then
  collectgarbage("setstepmul", opt.stepmul)
  what_if = (", GC stepmul %d"):format(opt.stepmul)
end
local out = os.getenv("BENCH_OUT") and assert(io.open(os.getenv("BENCH_OUT"), "a"))

local function stats(t)
  table.sort(t)
  local n = #t
  local med = n % 2 == 1 and t[(n + 1) / 2] or 0.5 * (t[n / 2] + t[n / 2 + 1])
  return med, t[1], t[n]
end

local function record(case, peer, t, work, unit)
  local med, lo, hi = stats(t)
  if unit == "ratio" then       -- t holds ratios, not times; work is 0
    if out then
      out:write(("%s\t%s\t%d\t%.9f\t%.9f\t%.9f\t%d\t0\n"):format(case, peer, threads, med, lo, hi, #t))
      out:flush()
    end
    print(("%-10s %-34s t=%d median %6.3f  min %6.3f  max %6.3f"):format(case, peer, threads, med, lo, hi))
    return
  end
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
  record("op_add_1", "tide eager (Lua, c = a + b)" .. what_if, time_loop(add_loop, opt.ops, opt.reps), opt.ops, "ns/op")

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
    -- LuaJIT's own cost of a cdata with a finalizer: an empty handle (NULL
    -- tensor, so the finalizer does nothing) given core's C finalizer
    local Handle, hfree = core.Handle, C.td_handle_free
    local null = ffi.cast("td_tensor *", nil)
    local function fin(n) for _ = 1, n do local h = ffi.gc(Handle(null), hfree) end end
    record("op_fin", "breakdown: empty handle + ffi.gc", time_loop(fin, opt.ops, opt.reps), opt.ops, "ns/op")
    -- the same for a userdata handle of the handle shim (tools/tide_handle.c)
    local shim = require("tide.locate").find_shim(core.libpath)
    local open = shim and package.loadlib(shim, "luaopen_tide_handle")
    if open then
      local new = open()({}, tonumber(ffi.cast("uintptr_t", C.td_release)))
      local function ud(n) for _ = 1, n do local h = new(0) end end
      record("op_ud", "breakdown: empty userdata handle", time_loop(ud, opt.ops, opt.reps), opt.ops, "ns/op")
    end
  end
end

-- -- Bandwidth: add and sum on n float32 values --------------------------------------------

if opt.only == "all" or opt.only == "bw" then
  local n, reps = opt.n, opt["bw-reps"]
  local a = tide.rand(n)
  local b = tide.ones(n)

  local function time_each(fn)
    for _ = 1, 10 do fn() end   -- reach the steady state: the caching allocator holds the buffers
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

-- -- Paired with the C loops in one process --------------------------------------------------

if opt.only == "pair" then
  ffi.cdef [[
  void cl_add(const float *a, const float *b, float *c, long n);
  float cl_sum(const float *a, long n);
  int usleep(unsigned usec);
  ]]
  local CL = ffi.load(opt.clib)
  local n, reps = opt.n, opt["bw-reps"]
  local a, b, cc = tide.rand(n), tide.ones(n), tide.zeros(n)
  local F = ffi.typeof("td_tensor_fields *")
  local function fptr(x) return ffi.cast("float *", ffi.cast(F, x.p).ptr) end
  local pa, pb, pc = fptr(a), fptr(b), fptr(cc)
  local c, s, cs

  local function pair(case, tide_fn, c_fn, bytes)
    for _ = 1, 10 do tide_fn(); c_fn() end
    local tt, tc, ratio = {}, {}, {}
    for r = 1, reps do
      local t0, t1, t2, t3
      if r % 2 == 1 then
        ffi.C.usleep(5000); t0 = now(); tide_fn(); t1 = now()
        ffi.C.usleep(5000); t2 = now(); c_fn(); t3 = now()
      else
        ffi.C.usleep(5000); t2 = now(); c_fn(); t3 = now()
        ffi.C.usleep(5000); t0 = now(); tide_fn(); t1 = now()
      end
      tt[r], tc[r] = t1 - t0, t3 - t2
      ratio[r] = tc[r] / tt[r]            -- tide GB/s / C GB/s
    end
    record(case .. "/pair", "tide eager (Lua)", tt, bytes)
    record(case .. "/pair", "C loop (gcc -O3 -march=native -fopenmp)", tc, bytes)
    record(case .. "/pair", "ratio tide / C loop (GB/s, per pair)", ratio, 0, "ratio")
  end

  pair("add", function() c = a + b end, function() CL.cl_add(pa, pb, pc, n) end, 12 * n)
  assert(math.abs(c[n]:item() - cc[n]:item()) < 1e-6, "add: tide and C disagree")
  pair("sum", function() s = a:sum() end, function() cs = CL.cl_sum(pa, n) end, 4 * n)
  assert(math.abs(s:item() - cs) < 1e-3 * math.abs(cs), "sum: tide and C disagree")
end

if out then out:close() end
