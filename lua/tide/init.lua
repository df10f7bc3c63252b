--[[
tide -- a numerical runtime for LuaJIT. require "tide" returns the library:
tensor creation, the op functions, autograd, and the submodules. Dims,
indices and class labels are 1-based, as in Torch7 and Lua.
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local ffi, C = core.ffi, core.C
local wrap, check, is_tensor = core.wrap, core.check, core.is_tensor
local T, shape_of, argerr = tensor.Tensor, tensor.shape_of, tensor.argerr

local tide = { Tensor = T, C = C, is_tensor = is_tensor }

for name, d in pairs(core.dtypes) do tide[name] = d end

-- tide.exp(x), tide.add(a, b), ... for every method that takes the tensor first
for name, f in pairs(T) do tide[name] = f end
for _, n in ipairs { "where", "cat", "concat", "concatenate", "stack", "embedding", "one_hot" } do tide[n] = tensor[n] end

-- -- Creation -------------------------------------------------------------------------------

-- Split (shape..., opts) arguments: a trailing table with string keys is the options.
local function split_opts(fname, ...)
  local n = select("#", ...)
  local last = n > 0 and select(n, ...) or nil
  if type(last) == "table" and next(last) ~= nil and last[1] == nil then
    return shape_of(fname, unpack({ ... }, 1, n - 1)), last
  end
  if type(last) == "table" and next(last) == nil and n == 1 then return {}, {} end
  return shape_of(fname, ...), {}
end

local i64 = ffi.new("int64_t[8]")
local function dims(s) for i = 1, #s do i64[i - 1] = s[i] end return i64 end

local function finish(t, opts)
  if opts.requires_grad then check(C.td_set_requires_grad(t.p, 1), 3) end
  return t
end

local function default_dtype(opts, fallback)
  return core.dtype_id(opts.dtype, "dtype") or fallback or tide.get_default_dtype().id
end

function tide.empty(...)
  local s, o = split_opts("empty", ...)
  return finish(wrap(C.td_empty(#s, dims(s), default_dtype(o)), 2), o)
end
function tide.zeros(...)
  local s, o = split_opts("zeros", ...)
  return finish(wrap(C.td_full(#s, dims(s), 0, default_dtype(o)), 2), o)
end
function tide.ones(...)
  local s, o = split_opts("ones", ...)
  return finish(wrap(C.td_full(#s, dims(s), 1, default_dtype(o)), 2), o)
end
-- full(shape, value, opts)
function tide.full(shape, value, opts)
  opts = opts or {}
  if type(value) ~= "number" and type(value) ~= "boolean" then argerr(2, "full", "number", value) end
  if type(value) == "boolean" then value = value and 1 or 0 end
  local s = shape_of("full", shape)
  local dt = default_dtype(opts)
  return finish(wrap(C.td_full(#s, dims(s), value, dt), 2), opts)
end
function tide.rand(...)
  local s, o = split_opts("rand", ...)
  return finish(wrap(C.td_rand(#s, dims(s), default_dtype(o)), 2), o)
end
function tide.randn(...)
  local s, o = split_opts("randn", ...)
  return finish(wrap(C.td_randn(#s, dims(s), default_dtype(o)), 2), o)
end
-- randint(low, high, shape, opts): values in [low, high); randint(high, shape)
function tide.randint(lo, hi, shape, opts)
  if type(hi) == "table" then lo, hi, shape, opts = 0, lo, hi, shape end
  opts = opts or {}
  local s = shape_of("randint", shape)
  return finish(wrap(C.td_randint(lo, hi, #s, dims(s), default_dtype(opts, tide.int64.id)), 2), opts)
end
-- arange(stop) / arange(start, stop[, step]) -- values, as in PyTorch (stop excluded)
function tide.arange(a, b, c, opts)
  if type(b) == "table" then opts, b = b, nil elseif type(c) == "table" then opts, c = c, nil end
  opts = opts or {}
  local start, stop, step = 0, a, 1
  if b ~= nil then start, stop, step = a, b, c or 1 end
  for i, v in ipairs { start, stop, step } do if type(v) ~= "number" then argerr(i, "arange", "number", v) end end
  local integral = start == math.floor(start) and stop == math.floor(stop) and step == math.floor(step)
  local dt = opts.dtype and core.dtype_id(opts.dtype) or (integral and tide.int64.id or tide.get_default_dtype().id)
  return finish(wrap(C.td_arange(start, stop, step, dt), 2), opts)
end
function tide.linspace(a, b, n, opts)
  opts = opts or {}
  return finish(wrap(C.td_linspace(a, b, n, default_dtype(opts)), 2), opts)
end
function tide.eye(n, m, opts)
  if type(m) == "table" then opts, m = m, nil end
  opts = opts or {}
  return finish(wrap(C.td_eye(n, m or -1, default_dtype(opts)), 2), opts)
end

for _, n in ipairs { "zeros", "ones", "empty", "rand", "randn" } do
  tide[n .. "_like"] = function(x, opts)
    tensor.targ(x, 1, n .. "_like")
    opts = opts or {}
    return tide[n](x:size(), { dtype = opts.dtype or x.dtype, requires_grad = opts.requires_grad })
  end
end
function tide.full_like(x, v, opts)
  opts = opts or {}
  return tide.full(x:size(), v, { dtype = opts.dtype or x.dtype, requires_grad = opts.requires_grad })
end
function tide.randint_like(x, lo, hi, opts)
  if hi == nil or type(hi) == "table" then lo, hi, opts = 0, lo, hi end
  opts = opts or {}
  return tide.randint(lo, hi, x:size(), { dtype = opts.dtype or x.dtype })
end

-- tensor(nested tables | number | bool, {dtype=, requires_grad=})
-- dtype inference as in PyTorch: bools -> bool, all integral -> int64, else float32
function tide.tensor(data, opts)
  opts = opts or {}
  if is_tensor(data) then
    local t = data:clone():detach()
    if opts.dtype then t = t:to(opts.dtype) end
    return finish(t, opts)
  end
  local shape, flat = {}, {}
  local kind = 0      -- 0 bool, 1 int, 2 float
  local function walk(v, d)
    local tv = type(v)
    if tv == "table" then
      local n = #v
      if shape[d] == nil then shape[d] = n
      elseif shape[d] ~= n then error(("tensor: ragged nested table (dim %d has sizes %d and %d)"):format(d, shape[d], n), 4) end
      for i = 1, n do walk(v[i], d + 1) end
    elseif tv == "number" then
      if #shape >= d then error("tensor: ragged nested table (a number where a table was expected)", 4) end
      if v ~= math.floor(v) or v ~= v then kind = 2 elseif kind < 1 then kind = 1 end
      flat[#flat + 1] = v
    elseif tv == "boolean" then
      flat[#flat + 1] = v and 1 or 0
    else
      error(("tensor: bad element of type %s"):format(tv), 4)
    end
  end
  if type(data) ~= "table" and type(data) ~= "number" and type(data) ~= "boolean" then
    argerr(1, "tensor", "table, number or boolean", data)
  end
  walk(data, 1)
  local n = #flat
  local expect = 1
  for i = 1, #shape do expect = expect * shape[i] end
  if expect ~= n then error("tensor: ragged nested table", 2) end
  if #shape > 8 then error("tensor: at most 8 dims are supported", 2) end
  local dt = opts.dtype and core.dtype_id(opts.dtype) or
    (kind == 2 and tide.get_default_dtype().id or kind == 1 and tide.int64.id or tide.bool.id)
  local buf = ffi.new("double[?]", math.max(n, 1), flat)
  return finish(wrap(C.td_from_doubles(#shape, dims(shape), dt, buf), 2), opts)
end

local default_dtype_obj = core.dtypes.float32
function tide.get_default_dtype() return default_dtype_obj end
function tide.set_default_dtype(d)
  local id = core.dtype_id(d, "set_default_dtype")
  if id < 4 then error("set_default_dtype: only float32 and float64 can be the default", 2) end
  default_dtype_obj = core.dtype_of[id]
end

-- -- Runtime ---------------------------------------------------------------------------------

function tide.manual_seed(n)
  if type(n) ~= "number" then argerr(1, "manual_seed", "number", n) end
  C.td_manual_seed(n)
end
function tide.get_rng_state()
  local s, o = ffi.new("uint64_t[1]"), ffi.new("uint64_t[1]")
  C.td_rng_get_state(s, o)
  return { seed = s[0], offset = o[0] }
end
function tide.set_rng_state(st) C.td_rng_set_state(st.seed, st.offset) end
function tide.set_num_threads(n) check(C.td_set_num_threads(n)) end
function tide.get_num_threads() return C.td_get_num_threads() end
function tide.live_bytes() return tonumber(C.td_live_bytes()) end
function tide.empty_cache() C.td_empty_cache() end
function tide.is_floating_point(x) return x:is_floating_point() end
function tide.numel(x) return x:numel() end

tide.autograd = require "tide.autograd"
tide.no_grad, tide.enable_grad, tide.set_grad_enabled, tide.is_grad_enabled =
  tide.autograd.no_grad, tide.autograd.enable_grad, tide.autograd.set_grad_enabled, tide.autograd.is_grad_enabled

tensor.index_get = require("tide.index").get
tensor.index_set = require("tide.index").set
tensor.tostring = require("tide.print").tostring
ffi.metatype(core.Handle, tensor.mt)

return tide
