--[[
tide -- a numerical runtime for LuaJIT. require "tide" returns the library:
tensor creation, the op functions, autograd, and the submodules. Dims,
indices and class labels are 1-based, as in Torch7 and Lua.
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local ffi, C = core.ffi, core.C
local wrap, check, is_tensor, raise = core.wrap, core.check, core.is_tensor, core.raise
local T, shape_of, argerr = tensor.Tensor, tensor.shape_of, tensor.argerr

local tide = { Tensor = T, C = C, is_tensor = is_tensor }

-- dtype names win over the same-named conversion methods (tide.float is a dtype, x:float() converts)
--- tide.float32(data[, opts]) -> Tensor
--- The default dtype (also tide.float); called, it is tide.tensor(data, {dtype = tide.float32}).
--- tide.float64(data[, opts]) -> Tensor
--- 64-bit float dtype (also tide.double); called, makes a float64 tensor.
--- tide.int64(data[, opts]) -> Tensor
--- 64-bit integer dtype (also tide.long); tide.long{1, 2} makes an int64 tensor (indices, labels).
--- tide.int32(data[, opts]) -> Tensor
--- 32-bit integer dtype (also tide.int); called, makes an int32 tensor.
--- tide.uint8(data[, opts]) -> Tensor
--- 8-bit unsigned dtype (also tide.byte); called, makes a uint8 tensor.
--- tide.bool(data[, opts]) -> Tensor
--- The bool dtype; called, makes a bool tensor.
--- tide.is_tensor(x) -> boolean
--- Whether x is a tensor.
for name, d in pairs(core.dtypes) do tide[name] = d end
for _, n in ipairs { "where", "cat", "concat", "concatenate", "stack", "embedding", "one_hot", "im2col", "col2im" } do tide[n] = tensor[n] end

-- -- Creation -------------------------------------------------------------------------------

local shape_at = tensor.shape_at
local TD_MAX_DIMS = 8

local args = require "tide.args"
-- the options every creation function takes
local CREATE_OPTS = "dtype device requires_grad"

-- Split (shape..., opts) arguments: a trailing table with string keys is the options;
-- a trailing dtype is short for {dtype = it} (zeros(2, 3, tide.float64)).
local dtype_mt = getmetatable(core.dtypes.float32)
local function split_opts(fname, ...)
  local n = select("#", ...)
  local last = n > 0 and select(n, ...) or nil
  if getmetatable(last) == dtype_mt then
    return shape_at(3, fname, unpack({ ... }, 1, n - 1)), { dtype = last }
  end
  -- zeros({}) is 0-dim; zeros(2, {}) and zeros({2}, {}) take empty options
  if type(last) == "table" and last[1] == nil and (next(last) ~= nil or n > 1) then
    return shape_at(3, fname, unpack({ ... }, 1, n - 1)), args.opts(fname, last, CREATE_OPTS, n)
  end
  return shape_at(3, fname, ...), {}
end

local i64 = ffi.new("int64_t[8]")
local function dims(s) for i = 1, #s do i64[i - 1] = s[i] end return i64 end

-- A new tensor from C, or the C error renamed for the Lua function that was
-- called (C reports the allocation as "empty:" or "full:"; zeros(-1) should say "zeros:").
local function create(fname, p)
  if p == nil then
    local e = core.last_error()
    if e:find("^out of device memory") then raise(fname .. ": " .. e) end
    raise((e:gsub("^[%w_]+:", fname .. ":", 1)))
  end
  return wrap(p)
end

-- The device of a new tensor: opts.device, else like's (the *_like functions and
-- tide.tensor(t)), else the CPU. Checked before anything is made.
local function device_opt(fname, opts, like)
  local d = opts.device
  if d == nil then
    if like == nil or like.device_type == 0 then return nil end
    return like.device_type, -1
  end
  local dev, idx = tensor.check_device(d, fname)
  if dev == 0 then return nil end
  return dev, idx
end

-- Move the new tensor t to the device (if any and it is not there), then set
-- requires_grad. Tensors of the makers below are made on their device (random
-- ones from the same Philox stream as the CPU's: the same values for a seed).
local function finish(t, opts, dev, idx)
  if dev ~= nil and dev ~= t.device_type then
    local cpu = t
    t = wrap(C.td_to_device(cpu.p, dev, idx))
    cpu:free()
  end
  if opts.requires_grad then check(C.td_set_requires_grad(t.p, 1)) end
  return t
end

local function options(fname, opts, n) return args.opts(fname, opts, CREATE_OPTS, n) end

local function default_dtype(opts, fname, fallback)
  return core.dtype_id(opts.dtype, fname) or fallback or tide.get_default_dtype().id
end

local integer = args.int

--- tide.empty(size...[, opts]) -> Tensor
--- A tensor with uninitialized values; size as numbers or a table; opts: dtype, device, requires_grad.
--- tide.zeros(size...[, opts]) -> Tensor
--- A tensor of zeros; opts: dtype (a trailing dtype also works), device, requires_grad.
--- tide.ones(size...[, opts]) -> Tensor
--- A tensor of ones.
--- tide.rand(size...[, opts]) -> Tensor
--- Uniform random values in [0, 1) (counter-based RNG: tide.manual_seed).
--- tide.randn(size...[, opts]) -> Tensor
--- Standard normal random values.
--- tide.empty_like(x[, opts]) -> Tensor
--- tide.empty with x's shape (and dtype and device unless given).
--- tide.zeros_like(x[, opts]) -> Tensor
--- Zeros with x's shape, dtype and device.
--- tide.ones_like(x[, opts]) -> Tensor
--- Ones with x's shape, dtype and device.
--- tide.rand_like(x[, opts]) -> Tensor
--- tide.rand with x's shape, dtype and device.
--- tide.randn_like(x[, opts]) -> Tensor
--- tide.randn with x's shape, dtype and device.
-- make(shape, dtype, device, index): on the device (0 = the CPU)
local makers = {
  empty = function(s, dt, d, i) return C.td_empty_on(d, i, #s, dims(s), dt) end,
  zeros = function(s, dt, d, i) return C.td_full_on(d, i, #s, dims(s), 0, dt) end,
  ones = function(s, dt, d, i) return C.td_full_on(d, i, #s, dims(s), 1, dt) end,
  rand = function(s, dt, d, i) return C.td_rand_on(d, i, 0, 0, 0, #s, dims(s), dt) end,
  randn = function(s, dt, d, i) return C.td_rand_on(d, i, 1, 0, 0, #s, dims(s), dt) end,
}
-- a device opened first (its errors as td_to_device gives them)
local function on_dev(dev, idx)
  if dev == nil then return 0, -1 end
  if dev == 1 then check(C.td_opencl_init(idx)) end
  return dev, idx
end
for name, make in pairs(makers) do
  -- empty(3, 4), empty({3, 4}), empty(3, 4, {dtype=, device=, requires_grad=})
  tide[name] = function(...)
    local s, o = split_opts(name, ...)
    local dev, idx = device_opt(name, o)
    local t = finish(create(name, make(s, default_dtype(o, name), on_dev(dev, idx))), o, dev, idx)
    return t
  end
  -- zeros_like(x, {dtype=, device=, requires_grad=}): x's shape, and x's dtype and device unless given
  tide[name .. "_like"] = function(x, opts)
    local fname = name .. "_like"
    tensor.targ(x, 1, fname)
    opts = options(fname, opts, 2)
    local dev, idx = device_opt(fname, opts, x)
    local t = finish(create(fname, make(x:size(), default_dtype(opts, fname, x.scalar_type), on_dev(dev, idx))), opts,
                     dev, idx)
    return t
  end
end

-- full(shape, value, opts)
--- tide.full(size, value[, opts]) -> Tensor
--- A tensor of shape size (a table) filled with value.
--- tide.full_like(x, value[, opts]) -> Tensor
--- tide.full with x's shape, dtype and device.
function tide.full(shape, value, opts)
  opts = options("full", opts, 3)
  if type(value) ~= "number" and type(value) ~= "boolean" then argerr(2, "full", "number", value) end
  if type(value) == "boolean" then value = value and 1 or 0 end
  local s = shape_at(2, "full", shape)
  local dev, idx = device_opt("full", opts)
  local d, i = on_dev(dev, idx)
  local t = finish(create("full", C.td_full_on(d, i, #s, dims(s), value, default_dtype(opts, "full"))), opts, dev, idx)
  return t
end
function tide.full_like(x, value, opts)
  tensor.targ(x, 1, "full_like")
  opts = options("full_like", opts, 3)
  if type(value) ~= "number" and type(value) ~= "boolean" then argerr(2, "full_like", "number", value) end
  if type(value) == "boolean" then value = value and 1 or 0 end
  local s = x:size()
  local dt = default_dtype(opts, "full_like", x.scalar_type)
  local dev, idx = device_opt("full_like", opts, x)
  local d, i = on_dev(dev, idx)
  local t = finish(create("full_like", C.td_full_on(d, i, #s, dims(s), value, dt)), opts, dev, idx)
  return t
end

-- randint(low, high, shape, opts): values in [low, high); randint(high, shape, opts)
local function randint(fname, lo, hi, s, opts, dt, like)
  integer(lo, 1, fname); integer(hi, 2, fname)
  if hi <= lo then raise(("%s: empty range [%d, %d) (high must be > low)"):format(fname, lo, hi)) end
  local dev, idx = device_opt(fname, opts, like)
  local d, i = on_dev(dev, idx)
  return finish(create(fname, C.td_rand_on(d, i, 2, lo, hi, #s, dims(s), dt)), opts, dev, idx)
end
--- tide.randint([low = 0,] high, size[, opts]) -> Tensor
--- Random integers in [low, high) (int64 by default).
--- tide.randint_like(x, [low,] high[, opts]) -> Tensor
--- tide.randint with x's shape.
function tide.randint(lo, hi, shape, opts)
  if type(hi) == "table" or hi == nil then lo, hi, shape, opts = 0, lo, hi, shape end
  opts = options("randint", opts, 4)
  local s = shape_at(2, "randint", shape)
  local t = randint("randint", lo, hi, s, opts, default_dtype(opts, "randint", tide.int64.id))
  return t
end
-- randint_like(x, high) / randint_like(x, low, high, opts)
function tide.randint_like(x, lo, hi, opts)
  tensor.targ(x, 1, "randint_like")
  if hi == nil or type(hi) == "table" then lo, hi, opts = 0, lo, hi end
  opts = options("randint_like", opts, 4)
  local t = randint("randint_like", lo, hi, x:size(), opts, default_dtype(opts, "randint_like", x.scalar_type), x)
  return t
end

-- arange(stop) / arange(start, stop[, step]) -- values, as in PyTorch (stop excluded);
-- int64 when all three are integers, else the default float dtype
--- tide.arange([start = 0,] stop[, step = 1][, opts]) -> Tensor
--- start, start+step, ... below stop (stop excluded, as PyTorch); int64 when all are integers.
function tide.arange(a, b, c, opts)
  if type(b) == "table" then opts, b = b, nil elseif type(c) == "table" then opts, c = c, nil end
  opts = options("arange", opts, 4)
  local start, stop, step = 0, a, 1
  if b ~= nil then start, stop, step = a, b, c or 1 end
  if type(a) ~= "number" then argerr(1, "arange", "number", a) end
  if b ~= nil and type(b) ~= "number" then argerr(2, "arange", "number", b) end
  if c ~= nil and type(c) ~= "number" then argerr(3, "arange", "number", c) end
  local integral = start == math.floor(start) and stop == math.floor(stop) and step == math.floor(step)
  local dt = default_dtype(opts, "arange", integral and tide.int64.id or nil)
  local dev, idx = device_opt("arange", opts)
  local t = finish(create("arange", C.td_arange(start, stop, step, dt)), opts, dev, idx)
  return t
end
-- linspace(start, stop, steps): steps values, both ends included exactly
--- tide.linspace(start, stop, steps[, opts]) -> Tensor
--- steps values evenly spaced from start to stop, both included.
function tide.linspace(a, b, n, opts)
  opts = options("linspace", opts, 4)
  if type(a) ~= "number" then argerr(1, "linspace", "number", a) end
  if type(b) ~= "number" then argerr(2, "linspace", "number", b) end
  integer(n, 3, "linspace", "integer number of steps")
  local dev, idx = device_opt("linspace", opts)
  local t = finish(create("linspace", C.td_linspace(a, b, n, default_dtype(opts, "linspace"))), opts, dev, idx)
  return t
end
-- eye(n[, m]): n x m with ones on the diagonal
--- tide.eye(n[, m][, opts]) -> Tensor
--- An n x m matrix with ones on the diagonal.
function tide.eye(n, m, opts)
  if type(m) == "table" then opts, m = m, nil end
  opts = options("eye", opts, 3)
  integer(n, 1, "eye")
  if m ~= nil then integer(m, 2, "eye") end
  if n < 0 or (m and m < 0) then raise(("eye: sizes must be non-negative, got %d x %d"):format(n, m or n)) end
  local dev, idx = device_opt("eye", opts)
  local t = finish(create("eye", C.td_eye(n, m or -1, default_dtype(opts, "eye"))), opts, dev, idx)
  return t
end

-- tensor(nested tables | number | bool | Tensor, {dtype=, device=, requires_grad=})
-- Lua has one number type, so numbers make the default float dtype (as in
-- Torch7), whatever their values; all bools make bool. Integer tensors are
-- asked for: tide.long{1, 2, 3} (every dtype is a constructor) or {dtype=}.
local function walk_data(v, d, st)
  local tv = type(v)
  if tv == "table" then
    if st.leaf and d >= st.leaf then
      return ("a table at depth %d where a number was expected (ragged nested table)"):format(d)
    end
    local n = #v
    if st.shape[d] == nil then st.shape[d] = n
    elseif st.shape[d] ~= n then
      return ("ragged nested table (dim %d has sizes %d and %d)"):format(d, st.shape[d], n)
    end
    if d > TD_MAX_DIMS then return ("at most %d dims are supported"):format(TD_MAX_DIMS) end
    for i = 1, n do
      local err = walk_data(v[i], d + 1, st)
      if err then return err end
    end
    if n == 0 and st.leaf == nil then st.empty_at = math.max(st.empty_at or 0, d) end
    return nil
  end
  if tv ~= "number" and tv ~= "boolean" then return ("bad element of type %s"):format(tv) end
  if st.leaf == nil then
    st.leaf = d
    if #st.shape >= d or (st.empty_at and st.empty_at >= d) then
      return ("a number at depth %d where a table was expected (ragged nested table)"):format(d)
    end
  elseif st.leaf ~= d then
    return ("a number at depth %d where a table was expected (ragged nested table)"):format(d)
  end
  local flat = st.flat
  if tv == "boolean" then
    flat[#flat + 1] = v and 1 or 0
    if st.kind == nil then st.kind = 0 end
  else
    flat[#flat + 1] = v
    st.kind = 1
  end
end

--- tide.tensor(data[, opts]) -> Tensor
--- A tensor from nested tables of numbers (default float dtype) or booleans (bool), a number, or a tensor (a copy).
function tide.tensor(data, opts)
  opts = options("tensor", opts, 2)
  if is_tensor(data) then
    local dev, idx = device_opt("tensor", opts, data)
    local t = data:clone():detach()
    if opts.dtype then t = t:to(opts.dtype) end
    if dev == nil and t.device_type ~= 0 then t = t:cpu() end
    return finish(t, opts, dev, idx)
  end
  if type(data) ~= "table" and type(data) ~= "number" and type(data) ~= "boolean" then
    argerr(1, "tensor", "table, number or boolean", data)
  end
  local st = { shape = {}, flat = {} }
  local err = walk_data(data, 1, st)
  if err then raise("tensor: " .. err) end
  local shape, flat = st.shape, st.flat
  local n, expect = #flat, 1
  for i = 1, #shape do expect = expect * shape[i] end
  if expect ~= n then raise("tensor: ragged nested table") end
  local dt = opts.dtype and core.dtype_id(opts.dtype, "tensor") or
    (st.kind == 0 and tide.bool.id or tide.get_default_dtype().id)
  local dev, idx = device_opt("tensor", opts)
  local buf = ffi.new("double[?]", math.max(n, 1), flat)
  local t = finish(create("tensor", C.td_from_doubles(#shape, dims(shape), dt, buf)), opts, dev, idx)
  return t
end

-- Every dtype is a constructor: tide.long{1, 2, 3}, tide.int32({{1, 2}}, {device=}),
-- tide.float64{...}: tide.tensor with that dtype (Torch7's LongTensor{...}).
dtype_mt.__call = function(d, data, opts)
  local o = { dtype = d }
  for k, v in pairs(options(d.name, opts, 2)) do
    if k == "dtype" then raise(("%s: the dtype is given by the constructor; drop the dtype option"):format(d.name)) end
    o[k] = v
  end
  return tide.tensor(data, o)
end

local default_dtype_obj = core.dtypes.float32
--- tide.get_default_dtype() -> dtype
--- The dtype of new float tensors (tide.float32 unless set).
--- tide.set_default_dtype(dtype)
--- Sets it: tide.float32 or tide.float64.
function tide.get_default_dtype() return default_dtype_obj end
function tide.set_default_dtype(d)
  if d == nil then argerr(1, "set_default_dtype", "dtype", d) end
  local id = core.dtype_id(d, "set_default_dtype")
  if id < 4 then raise("set_default_dtype: only float32 and float64 can be the default") end
  default_dtype_obj = core.dtype_of[id]
end

-- -- Runtime ---------------------------------------------------------------------------------

--- tide.manual_seed(n)
--- Seeds the random number generator: the same numbers on any thread count and device.
--- tide.get_rng_state() -> state
--- The generator's {seed, offset}.
--- tide.set_rng_state(state)
--- Restores a state from get_rng_state.
--- tide.set_num_threads(n)
--- The size of the thread pool of the CPU kernels (TIDE_NUM_THREADS; default: the cores).
--- tide.get_num_threads() -> number
--- The thread pool's size.
function tide.manual_seed(n)
  if type(n) ~= "number" then argerr(1, "manual_seed", "number", n) end
  C.td_manual_seed(n)
end
function tide.get_rng_state()
  local s, o = ffi.new("uint64_t[1]"), ffi.new("uint64_t[1]")
  C.td_rng_get_state(s, o)
  return { seed = s[0], offset = o[0] }
end
-- set_rng_state(get_rng_state()): seed and offset as uint64 cdata or integers in [0, 2^64)
local u64 = ffi.typeof("uint64_t")
local function rng_word(st, k)
  local v = st[k]
  if ffi.istype(u64, v) then return v end
  if type(v) ~= "number" or v ~= math.floor(v) or v < 0 or v >= 2 ^ 64 then
    raise(("set_rng_state: %s must be an integer in [0, 2^64) or a uint64_t, got %s"):format(k,
      type(v) == "number" and tostring(v) or args.typename(v)))
  end
  return v
end
function tide.set_rng_state(st)
  if type(st) ~= "table" then argerr(1, "set_rng_state", "RNG state table {seed =, offset =}", st) end
  C.td_rng_set_state(rng_word(st, "seed"), rng_word(st, "offset"))
end
function tide.set_num_threads(n)
  if not args.is_int(n) or n < 1 or n >= 2 ^ 31 then argerr(1, "set_num_threads", "positive integer", n) end
  check(C.td_set_num_threads(n))
end
function tide.get_num_threads() return C.td_get_num_threads() end
-- what this process runs on, as torch.__config__: the thread count, OpenBLAS's
-- kernels and the ISA level of compiled kernels
--- tide.config() -> table
--- What this process runs on: num_threads, blas_core (OpenBLAS's kernels), jit_isa (compiled code's ISA).
--- tide.live_bytes() -> number
--- Bytes held by live tensors and storages (the Lua GC is paced by it).
--- tide.empty_cache()
--- Frees the blocks the caching allocator keeps for reuse.
function tide.config()
  return { num_threads = C.td_get_num_threads(), blas_core = ffi.string(C.td_blas_core()),
           jit_isa = ffi.string(C.td_jit_isa()), eager_isa = ffi.string(C.td_eager_isa()) }
end
-- matmul_stats(): float32 products run on tide's register tile (a short A,
-- x86-64-v4), the transposed-B packs its cache made, and the calls run on the
-- batched 64-column tile (README: Eager speed)
--- tide.matmul_stats() -> table
--- {tile = products run on tide's small-M register tile, packs = transposed B operands packed for its cache, bmm = calls run on the batched 64-column tile}.
function tide.matmul_stats()
  local v = ffi.new("int64_t[2]")
  C.td_mm_tile_stats(v, v + 1)
  return { tile = tonumber(v[0]), packs = tonumber(v[1]), bmm = tonumber(C.td_bmm_tile_calls()) }
end
function tide.live_bytes() return tonumber(C.td_live_bytes()) end
-- memory_stats(): storage bytes per device, as torch.cuda.memory_stats in short:
-- { cpu = { live=, peak=, allocs=, cached= }, opencl = {...}, host_total=, streamed= }
--- tide.memory_stats() -> table
--- Storage bytes per device: {cpu = {live, peak, allocs, cached}, opencl = {...}, host_total}, and streamed: eager results written with streaming stores (torch.cuda.memory_stats in short).
--- tide.reset_peak_memory_stats()
--- Starts the peak figures of memory_stats over from the live bytes.
function tide.memory_stats()
  local m = ffi.new("td_mem_stats")
  C.td_memory_stats(m)
  local r = { host_total = tonumber(m.host_total), streamed = tonumber(m.streamed) }
  for d, name in pairs { [0] = "cpu", [1] = "opencl" } do
    r[name] = { live = tonumber(m.live[d]), peak = tonumber(m.peak[d]), allocs = tonumber(m.allocs[d]),
                cached = tonumber(m.cached[d]) }
  end
  return r
end
function tide.reset_peak_memory_stats() C.td_reset_peak_memory_stats() end
function tide.empty_cache() C.td_empty_cache() end

-- -- OpenCL ------------------------------------------------------------------------------------

-- tide.opencl, as torch.cuda: is_available() (never raises), device_count(),
-- device_name([n]) (opens device n, default: the open one or TIDE_OPENCL_DEVICE
-- or 0; one OpenCL device per process), current_device() (the open one, or nil)
--- tide.opencl.device_count() -> number
--- The number of OpenCL devices (0 without a driver; never raises).
--- tide.opencl.is_available() -> boolean
--- Whether there is an OpenCL device.
--- tide.opencl.device_name([n]) -> string
--- The device's name, opening device n (default: TIDE_OPENCL_DEVICE or 0; one device per process).
--- tide.opencl.current_device() -> number or nil
--- The index of the open device.
tide.opencl = {}
function tide.opencl.device_count()
  local ok, n = pcall(function() return C.td_opencl_device_count() end)
  return ok and tonumber(n) or 0
end
function tide.opencl.is_available() return tide.opencl.device_count() > 0 end
function tide.opencl.device_name(n)
  if n ~= nil then integer(n, 1, "device_name") end
  check(C.td_opencl_init(n or -1))
  return ffi.string(C.td_opencl_device_name())
end
function tide.opencl.current_device()
  local i = C.td_opencl_device_index()
  if i < 0 then return nil end
  return i
end
-- the device allocator and queue (opencl/cl_mem.c)
--- tide.opencl.memory_stats() -> table
--- The device's caching allocator and queue: created, reused (buffers), oom_flushes (cache emptied on a full device), held and cached (bytes), syncs (host waits for the queue).
--- tide.opencl.set_memory_limit(bytes) -> number
--- Caps the device bytes tide holds (0: the device's memory); returns the previous cap.
--- tide.opencl.synchronize()
--- Waits until the device has run everything queued (timing; values read back wait by themselves).
function tide.opencl.memory_stats()
  local s = ffi.new("int64_t[6]")
  C.td_opencl_memory_stats(s)
  return { created = tonumber(s[0]), reused = tonumber(s[1]), oom_flushes = tonumber(s[2]), held = tonumber(s[3]),
           cached = tonumber(s[4]), syncs = tonumber(s[5]) }
end
function tide.opencl.set_memory_limit(bytes)
  if not args.is_int(bytes) or bytes < 0 then argerr(1, "set_memory_limit", "non-negative integer", bytes) end
  return tonumber(C.td_opencl_memory_limit(bytes))
end
function tide.opencl.synchronize() C.td_opencl_finish() end

tide.autograd = require "tide.autograd"
tide.no_grad, tide.enable_grad, tide.set_grad_enabled, tide.is_grad_enabled =
  tide.autograd.no_grad, tide.autograd.enable_grad, tide.autograd.set_grad_enabled, tide.autograd.is_grad_enabled
tide.inference_mode = tide.autograd.inference_mode

-- the tensor ops composed in Lua (shape, contractions, pointwise composites): Tensor
-- methods, and module functions that take no tensor first (meshgrid, einsum)
for _, name in ipairs { "tide.ops_shape", "tide.ops_contract", "tide.ops_pointwise", "tide.ops_sort", "tide.ops_scan",
                         "tide.ops_random" } do
  for k, v in pairs(require(name)) do if type(v) == "function" and tide[k] == nil then tide[k] = v end end
end

tensor.index_get = require("tide.index").get
tensor.index_set = require("tide.index").set
tensor.tostring = require("tide.print").tostring
ffi.metatype(core.Handle, tensor.mt)
-- userdata handles through the shim (tools/tide_handle.c) when it loads, else ffi.gc handles
core.handles, core.handles_why = core.use_handles(tensor.mt)

-- tide.exp(x), tide.add(a, b), ... for every method that takes the tensor first.
-- The function form checks its first argument (a method call always has a
-- tensor there); a number is let through when a tensor follows (tide.sub(1, x)).
-- Runs last, so methods other modules add (autograd's backward) are included;
-- names tide already has (dtypes, where, cat, ...) are kept.
for name, f in pairs(T) do
  if tide[name] == nil then
    tide[name] = function(x, ...)
      if not is_tensor(x) and not (type(x) == "number" and is_tensor((...))) then
        argerr(1, name, "Tensor", x)
      end
      if is_tensor(x) and x.p == nil then raise(("%s: Tensor used after free()"):format(name)) end
      return f(x, ...)
    end
  end
end

-- submodules that require "tide" themselves load on first use (tide.data, ...)
local lazy = { data = "tide.data", progress = "tide.progress", nn = "tide.nn", optim = "tide.optim",
  checkpoint = "tide.checkpoint", profiler = "tide.profiler", cmdline = "tide.cmdline" }
setmetatable(tide, { __lazy = lazy, __index = function(t, k)     -- (__lazy: names for the REPL's completion)
  local m = lazy[k]
  if m then local v = require(m); rawset(t, k, v); return v end
end })

-- tide.compile(fn, opts) and tide.jit.to_dot / stats (tide.compile, loaded on first use)
--- tide.compile(fn[, {fallback = "eager"|"error", name =, dynamic =}]) -> compiled
--- A callable that traces fn once per input signature and runs it as fused kernels (C by libgccjit).
function tide.compile(fn, opts) return require("tide.compile").compile(fn, opts) end
tide.jit = setmetatable({}, { __index = function(t, k) return require("tide.compile")[k] end })

-- memory that tide does not own, tensors from C (tide.blob)
local blob = require "tide.blob"
tide.from_blob, tide.from_ptr = blob.from_blob, blob.from_ptr

-- checkpoints: safetensors and .npy (tide.serialize, loaded on first use)
for _, n in ipairs { "save", "load", "save_npy", "load_npy" } do
  tide[n] = function(...) return require("tide.serialize")[n](...) end
end

return tide
