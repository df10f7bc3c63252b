--[[
tide.ops_scan -- scans along a dim (cumsum cumprod cummax cummin logcumsumexp:
op table rows with CPU kernels in runtime/rt_scan.c, run as eager steps inside
tide.compile, and on OpenCL through the host) and the indexing ops built on
them and the index ops (nonzero masked_select take_along_dim index_put_
index_copy_ index_fill_ masked_scatter_). Installed as Tensor methods (and so
tide.* functions) by init.lua.
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local args = require "tide.args"
local raise, is_tensor, OP = core.raise, core.is_tensor, core.OP
local T = tensor.Tensor
local targ = args.tensor

local M = {}

local function tide() return require "tide" end
-- index tensors follow the data's device (a literal tide.long{...} with an OpenCL x)
local function on(x, t) if t.device_type ~= x.device_type then return t:to(x.device) end return t end
local function size_str(s) return "[" .. table.concat(s, ",") .. "]" end

-- the broadcast of several shapes (tables), named in errors by fname
local function broadcast(fname, shapes)
  local n = 0
  for _, s in ipairs(shapes) do n = math.max(n, #s) end
  local r = {}
  for i = 1, n do
    local v = 1
    for _, s in ipairs(shapes) do
      local e = s[#s - n + i] or 1
      if e ~= 1 and v ~= 1 and e ~= v then
        local txt = {}
        for j, t in ipairs(shapes) do txt[j] = size_str(t) end
        raise(("%s: shapes %s cannot be broadcast"):format(fname, table.concat(txt, " and ")), 3)
      end
      if e ~= 1 then v = e end
    end
    r[i] = v
  end
  return r
end

-- -- Scans --------------------------------------------------------------------------------------

local function scan_attrs(x, dim, fname)
  if dim == nil then args.argerr(2, fname, "integer dim", dim) end
  local at = tensor.attrs()
  at.i[0] = args.cdim(dim, fname, nil, 2)
  return at
end

--- Tensor:cumsum(dim[, {dtype = }]) -> Tensor
--- Running sums along dim; integers and bool sum in int64; dtype casts the input first. On OpenCL it runs on the host (copied there and back).
function T.cumsum(x, dim, opts)
  targ(x, 1, "cumsum")
  local dt = args.opts("cumsum", opts, "dtype", 3).dtype
  if dt ~= nil then x = x:to(dt) end
  return tensor.op1(OP.cumsum, x, scan_attrs(x, dim, "cumsum"))
end
--- Tensor:cumprod(dim[, {dtype = }]) -> Tensor
--- Running products along dim (integers in int64); its gradient handles zeros as PyTorch's. On OpenCL it runs on the host.
function T.cumprod(x, dim, opts)
  targ(x, 1, "cumprod")
  local dt = args.opts("cumprod", opts, "dtype", 3).dtype
  if dt ~= nil then x = x:to(dt) end
  return tensor.op1(OP.cumprod, x, scan_attrs(x, dim, "cumprod"))
end
--- Tensor:logcumsumexp(dim) -> Tensor
--- log(cumsum(exp(x))) along dim without overflow (float). On OpenCL it runs on the host.
function T.logcumsumexp(x, dim)
  targ(x, 1, "logcumsumexp")
  return tensor.op1(OP.logcumsumexp, x, scan_attrs(x, dim, "logcumsumexp"))
end

local auxp = core.ffi.new("td_tensor *[1]")
local inb = core.ffi.new("td_tensor *[1]")
local function cumext(id, fname)
  return function(x, dim)
    targ(x, 1, fname)
    if x.dtype == tide().bool then raise(fname .. ": bool tensors are not supported", 2) end
    local at = scan_attrs(x, dim, fname)
    inb[0] = x.p
    local v = core.wrap(core.C.td_op_aux(id, 1, inb, at, auxp), 2)
    return v, core.wrap(auxp[0]) + 1
  end
end
--- Tensor:cummax(dim) -> values, indices
--- The running maximum along dim and the 1-based index where it was taken (the later one on ties; NaN propagates). On OpenCL it runs on the host.
T.cummax = cumext(OP.cummax, "cummax")
--- Tensor:cummin(dim) -> values, indices
--- The running minimum along dim and the 1-based index where it was taken (the later one on ties; NaN propagates). On OpenCL it runs on the host.
T.cummin = cumext(OP.cummin, "cummin")

-- -- Indexing ------------------------------------------------------------------------------------

local function data_dependent(fname, what)
  if core.tracing() then
    raise(fname .. ": " .. (what or "the output's size depends on the input's values") .. ", which tide.compile cannot "
      .. "trace; call it outside the compiled function", 3)
  end
end

-- the 1-based positions (int64, flat) of the true elements of a bool tensor, and their count
local function true_positions(mask)
  local flat = mask:reshape(-1)
  local n = flat:size(1)
  local count = flat:sum():item()
  local rank = flat:cumsum(1)                                   -- 1.. over the true elements
  local slot = tide().where(flat, rank, count + 1)              -- the others into a spare slot
  local pos = tide().zeros(count + 1, { dtype = tide().int64, device = mask.device })
  pos = pos:scatter_add(1, slot, tide().arange(1, n + 1, { dtype = tide().int64, device = mask.device }))
  return pos:narrow(1, 1, count), count, slot
end

--- Tensor:nonzero([{as_tuple = false}]) -> Tensor
--- The 1-based indices of the nonzero elements, one row per element (count x ndim, int64), in row-major order; as_tuple: one 1-D tensor per dim. Data-dependent: raises inside tide.compile.
function T.nonzero(x, opts)
  targ(x, 1, "nonzero")
  local as_tuple = args.opts("nonzero", opts, "as_tuple", 2).as_tuple
  data_dependent("nonzero")
  local pos, count = true_positions(x:ne(0))
  local s, cols = x:size(), {}
  local lin = pos - 1                                           -- 0-based flat positions
  local stride = 1
  for d = #s, 1, -1 do
    local q = stride == 1 and lin or (lin - lin:remainder(stride)):div(stride):long()
    cols[d] = q:remainder(s[d]) + 1
    stride = stride * s[d]
  end
  if as_tuple then
    if #s == 0 then return { pos } end
    return cols
  end
  if #s == 0 then return pos:reshape(count, 0) end
  for d = 1, #s do cols[d] = cols[d]:unsqueeze(2) end
  return tide().cat(cols, 2)
end

--- Tensor:masked_select(mask) -> Tensor
--- The elements of x where the bool mask (broadcast) is true, as a 1-D tensor. Data-dependent: raises inside tide.compile.
function T.masked_select(x, mask)
  targ(x, 1, "masked_select"); targ(mask, 2, "masked_select")
  if mask.dtype ~= tide().bool then raise("masked_select: mask must be a bool tensor, got " .. mask.dtype.name, 2) end
  data_dependent("masked_select")
  local s = broadcast("masked_select", { x:size(), mask:size() })
  local pos = true_positions(mask:expand(s))
  return x:expand(s):reshape(-1):index_select(1, pos)
end

--- tide.take_along_dim(x, indices[, dim]) -> Tensor
--- Values of x at the 1-based indices along dim (x and indices broadcast over the other dims); without dim, of x flattened.
function T.take_along_dim(x, idx, dim)
  targ(x, 1, "take_along_dim"); targ(idx, 2, "take_along_dim")
  idx = on(x, idx)
  if dim == nil then return x:reshape(-1):gather(1, idx:reshape(-1)) end
  if x.ndim ~= idx.ndim then
    raise(("take_along_dim: input %s and indices %s must have the same number of dims"):format(
      size_str(x:size()), size_str(idx:size())), 2)
  end
  local d = args.dim(dim, x.ndim, "take_along_dim", 3)
  local xs, is = x:size(), idx:size()
  local bx, bi = {}, {}
  for i = 1, #xs do
    if i == d then bx[i], bi[i] = xs[i], is[i]
    else
      if xs[i] ~= is[i] and xs[i] ~= 1 and is[i] ~= 1 then
        raise(("take_along_dim: input %s and indices %s cannot be broadcast outside dim %d"):format(
          size_str(xs), size_str(is), d), 2)
      end
      bx[i] = math.max(xs[i], is[i]); bi[i] = bx[i]
    end
  end
  return x:expand(bx):gather(d, idx:expand(bi))
end

-- (dim of x, 1-based indices) -> a bool mask of x's shape, true on the indexed slices
local function slice_mask(x, d, idx, fname)
  idx = on(x, idx)
  if idx.ndim > 1 then raise(("%s: index must be 1-D, got %s"):format(fname, size_str(idx:size())), 3) end
  local n = x:size(d)
  local hit = tide().zeros(n, { dtype = tide().int64, device = x.device })
  hit = hit:index_add(1, idx:reshape(-1), tide().ones(idx:numel(), { dtype = tide().int64, device = x.device })):gt(0)
  local s = {}
  for i = 1, x.ndim do s[i] = i == d and n or 1 end
  return hit:reshape(s)
end

--- Tensor:index_fill(dim, index, value) -> Tensor
--- A copy of x with the slices at the 1-based indices along dim set to value (also index_fill_ in place).
function T.index_fill(x, dim, idx, v)
  targ(x, 1, "index_fill"); targ(idx, 3, "index_fill")
  local d = args.dim(dim, math.max(x.ndim, 1), "index_fill", 2)
  if type(v) ~= "number" and not is_tensor(v) then args.argerr(4, "index_fill", "number value", v) end
  return tide().where(slice_mask(x, d, idx, "index_fill"), v, x)
end
--- Tensor:index_copy(dim, index, source) -> Tensor
--- A copy of x with its slices at the 1-based indices along dim replaced by source's slices in order (also index_copy_; repeated indices: undefined, as PyTorch).
function T.index_copy(x, dim, idx, src)
  targ(x, 1, "index_copy"); targ(idx, 3, "index_copy"); targ(src, 4, "index_copy")
  local d = args.dim(dim, math.max(x.ndim, 1), "index_copy", 2)
  local placed = tide().zeros_like(x):index_add(d, on(x, idx), src)
  return tide().where(slice_mask(x, d, idx, "index_copy"), placed, x)
end
for _, n in ipairs { "index_fill", "index_copy" } do
  T[n .. "_"] = function(x, ...) targ(x, 1, n .. "_"); return x:copy_(T[n](x, ...)) end
end
--- Tensor:index_fill_(dim, index, value) -> Tensor
--- index_fill in place.
--- Tensor:index_copy_(dim, index, source) -> Tensor
--- index_copy in place.

--- Tensor:index_put(indices, values[, accumulate = false]) -> Tensor
--- A copy of x with x[indices[1][k], indices[2][k], ...] = values[k] (index tensors broadcast together, 1-based; a bool tensor stands for its true positions; dims not indexed are whole slices); accumulate adds instead (repeated indices add up). Also index_put_ in place.
function T.index_put(x, indices, values, accumulate)
  targ(x, 1, "index_put")
  if type(indices) ~= "table" or is_tensor(indices) or #indices == 0 then
    args.argerr(2, "index_put", "non-empty table of index Tensors", indices)
  end
  if #indices > x.ndim then
    raise(("index_put: %d index tensors for a tensor with %d dims"):format(#indices, x.ndim), 2)
  end
  -- a bool index stands for the indices of its true elements over the dims it spans
  local expanded = {}
  for i = 1, #indices do
    local t = targ(indices[i], 2, "index_put")
    if t.dtype == tide().bool then
      data_dependent("index_put", "a bool index stands for the positions of its true elements")
      for _, c in ipairs(T.nonzero(t, { as_tuple = true })) do expanded[#expanded + 1] = c end
    else expanded[#expanded + 1] = t end
  end
  indices = expanded
  if #indices > x.ndim then
    raise(("index_put: %d index tensors for a tensor with %d dims"):format(#indices, x.ndim), 2)
  end
  if type(values) == "number" then values = tide().tensor(values, { dtype = x.dtype, device = x.device }) end
  targ(values, 3, "index_put")
  local s, k = x:size(), #indices
  local shapes = {}
  for i = 1, k do shapes[i] = targ(indices[i], 2, "index_put"):size() end
  local b = broadcast("index_put", shapes)
  local lin, stride = nil, 1
  for i = k, 1, -1 do                                            -- flat 0-based position in the first k dims
    local ix = on(x, indices[i]):expand(b):long()
    local bad = ix:lt(1):logical_or(ix:gt(s[i])):any()
    if not core.tracing() and bad:item() then
      raise(("index_put: an index for dim %d is out of range for size %d"):format(i, s[i]), 2)
    end
    local term = (ix - 1) * stride
    lin = lin and lin + term or term
    stride = stride * s[i]
  end
  lin = lin:reshape(-1) + 1
  local rest, vs = {}, { lin:size(1) }
  for i = k + 1, #s do rest[#rest + 1] = s[i]; vs[#vs + 1] = s[i] end
  local bs = {}
  for i = 1, #b do bs[i] = b[i] end
  for i = 1, #rest do bs[#bs + 1] = rest[i] end
  local v = values:to(x.dtype):expand(bs):reshape(vs)
  local flat = { stride }
  for i = 1, #rest do flat[#flat + 1] = rest[i] end
  local x2 = x:reshape(flat)
  local r
  if accumulate then r = x2:index_add(1, lin, v)
  else r = T.index_copy(x2, 1, lin, v) end
  return r:reshape(s)
end
--- Tensor:index_put_(indices, values[, accumulate = false]) -> Tensor
--- index_put in place.
function T.index_put_(x, ...) targ(x, 1, "index_put_"); return x:copy_(T.index_put(x, ...)) end

--- Tensor:masked_scatter(mask, source) -> Tensor
--- A copy of x whose elements where the bool mask (broadcast to x) is true take source's elements in row-major order (also masked_scatter_).
function T.masked_scatter(x, mask, src)
  targ(x, 1, "masked_scatter"); targ(mask, 2, "masked_scatter"); targ(src, 3, "masked_scatter")
  if mask.dtype ~= tide().bool then raise("masked_scatter: mask must be a bool tensor, got " .. mask.dtype.name, 2) end
  local m = mask:expand(x:size())
  local rank = m:reshape(-1):cumsum(1)
  if not core.tracing() then
    local need = rank:numel() > 0 and rank[-1]:item() or 0
    if need > src:numel() then
      raise(("masked_scatter: the mask selects %d elements, the source has %d"):format(need, src:numel()), 2)
    end
  end
  local pick = tide().where(m:reshape(-1), rank, 1)
  local vals = src:reshape(-1):gather(1, pick):reshape(x:size())
  return tide().where(m, vals, x)
end
--- Tensor:masked_scatter_(mask, source) -> Tensor
--- masked_scatter in place.
function T.masked_scatter_(x, ...) targ(x, 1, "masked_scatter_"); return x:copy_(T.masked_scatter(x, ...)) end

return M
