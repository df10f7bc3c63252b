--[[
tide.ops_shape -- shape and layout ops as compositions of the op table's views,
copies and index ops (PyTorch's names; dims 1-based, negative from the end):
tril triu diag diagonal diag_embed trace flip roll repeat (repeat_tensor) tile
repeat_interleave movedim meshgrid broadcast_to. Each is differentiable
through its parts and compiles like them. Installed as Tensor methods (and so
as tide.* functions) by init.lua.
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local args = require "tide.args"
local raise, is_tensor = core.raise, core.is_tensor
local T = tensor.Tensor

local M = {}

local function tide() return require "tide" end
local function size_str(s) return "[" .. table.concat(s, ",") .. "]" end

-- the (rows, cols) positions of the last two dims as a bool mask of `col - row <op> k`
local function tri_mask(x, k, upper)
  local n, m = x:size(-2), x:size(-1)
  local on = { device = x.device }
  local i = tide().arange(n, on):view(n, 1)
  local j = tide().arange(m, on):view(1, m)
  local d = j - i
  return upper and d:ge(k) or d:le(k)
end

local function tri(fname, x, k, upper)
  args.tensor(x, 1, fname)
  k = args.int(k or 0, 2, fname, "integer diagonal")
  if x.ndim < 2 then raise(("%s: expected a tensor with at least 2 dims, got %s"):format(fname, size_str(x:size()))) end
  return tide().where(tri_mask(x, k, upper), x, 0)
end

--- Tensor:tril(diagonal) -> Tensor
--- The lower triangle of the last two dims (elements with col - row <= diagonal, default 0); the rest is 0.
function T.tril(x, k) return tri("tril", x, k, false) end
--- Tensor:triu(diagonal) -> Tensor
--- The upper triangle of the last two dims (col - row >= diagonal, default 0); the rest is 0.
function T.triu(x, k) return tri("triu", x, k, true) end

--- Tensor:diagonal(offset, dim1, dim2) -> Tensor
--- The diagonal of dims dim1, dim2 (default 1, 2) as the last dim; offset > 0 is above the main diagonal. A copy.
function T.diagonal(x, offset, d1, d2)
  args.tensor(x, 1, "diagonal")
  offset = args.int(offset or 0, 2, "diagonal", "integer offset")
  local n = x.ndim
  if n < 2 then raise(("diagonal: expected a tensor with at least 2 dims, got %s"):format(size_str(x:size()))) end
  d1 = args.dim(d1 or 1, n, "diagonal", 3)
  d2 = args.dim(d2 or 2, n, "diagonal", 4)
  if d1 == d2 then raise(("diagonal: dim1 and dim2 are the same dim (%d)"):format(d1)) end
  local y = T.movedim(x, { d1, d2 }, { n - 1, n })
  local rows, cols = y:size(-2), y:size(-1)
  local r0, c0 = offset < 0 and -offset or 0, offset > 0 and offset or 0
  local len = math.max(0, math.min(rows - r0, cols - c0))
  local s = y:size()
  s[#s] = nil; s[#s] = nil
  local flat = {}
  for i = 1, #s do flat[i] = s[i] end
  flat[#flat + 1] = rows * cols
  y = y:reshape(flat)
  if len == 0 then s[#s + 1] = 0; return y:narrow(-1, 1, 0):reshape(s) end
  -- element (r0 + t, c0 + t) sits at (r0 + t) * cols + c0 + t: a stride of cols + 1
  local start = r0 * cols + c0 + 1
  return y:slice(-1, start, start + (len - 1) * (cols + 1), cols + 1)
end

--- Tensor:trace() -> Tensor
--- The sum of the main diagonal of a 2-D tensor.
function T.trace(x)
  args.tensor(x, 1, "trace")
  if x.ndim ~= 2 then raise(("trace: expected a 2-D tensor, got %s"):format(size_str(x:size()))) end
  return T.diagonal(x):sum()
end

--- Tensor:diag_embed(offset, dim1, dim2) -> Tensor
--- The last dim of x put on the diagonal (offset) of two new dims dim1, dim2 (default -2, -1); zeros elsewhere.
function T.diag_embed(x, offset, d1, d2)
  args.tensor(x, 1, "diag_embed")
  offset = args.int(offset or 0, 2, "diag_embed", "integer offset")
  if x.ndim < 1 then raise("diag_embed: expected a tensor with at least 1 dim, got a 0-dim tensor") end
  local n = x:size(-1)
  local N = n + math.abs(offset)
  local on = { dtype = x.dtype, device = x.device }
  -- row r of the new matrix holds x[r] (offset >= 0) or x[r - |offset|] (offset < 0)
  local zs = x:size(); zs[#zs] = math.abs(offset)
  local pad = tide().zeros(zs, on)
  local col = offset >= 0 and tide().cat({ x, pad }, -1) or tide().cat({ pad, x }, -1)
  local i = tide().arange(N, { device = x.device }):view(N, 1)
  local j = tide().arange(N, { device = x.device }):view(1, N)
  local y = tide().where((j - i):eq(offset), col:unsqueeze(-1), 0)
  local nd = y.ndim
  if d1 == nil and d2 == nil then return y end
  d1 = args.dim(d1 or -2, nd, "diag_embed", 3)
  d2 = args.dim(d2 or -1, nd, "diag_embed", 4)
  if d1 == d2 then raise(("diag_embed: dim1 and dim2 are the same dim (%d)"):format(d1)) end
  return T.movedim(y, { nd - 1, nd }, { d1, d2 })
end

--- Tensor:diag(diagonal) -> Tensor
--- A 1-D x: the square matrix with x on that diagonal; a 2-D x: that diagonal of x (default 0).
function T.diag(x, k)
  args.tensor(x, 1, "diag")
  k = args.int(k or 0, 2, "diag", "integer diagonal")
  if x.ndim == 1 then return T.diag_embed(x, k) end
  if x.ndim == 2 then return T.diagonal(x, k) end
  raise(("diag: expected a 1-D or 2-D tensor, got %s"):format(size_str(x:size())))
end

-- a dim or a list of dims -> list of 1-based positive dims, no repeats
local function dim_list(fname, dims, n, argn)
  if type(dims) == "number" then dims = { dims } end
  if type(dims) ~= "table" then args.argerr(argn, fname, "dim or table of dims", dims) end
  local r, seen = {}, {}
  for i, d in ipairs(dims) do
    r[i] = args.dim(d, n, fname, argn)
    if seen[r[i]] then raise(("%s: dim %d appears multiple times in the list of dims"):format(fname, r[i])) end
    seen[r[i]] = true
  end
  return r
end

--- Tensor:flip(dims) -> Tensor
--- The elements in reverse order along each of dims (a dim or a table of them). A copy.
function T.flip(x, dims)
  args.tensor(x, 1, "flip")
  local y = x
  for _, d in ipairs(dim_list("flip", dims, x.ndim, 2)) do
    local n = x:size(d)
    if n > 1 then y = y:index_select(d, tide().arange(n, 0, -1, { device = x.device })) end
  end
  return y
end

local function roll1(x, s, d)
  local n = x:size(d)
  if n == 0 then return x end
  s = s % n
  if s == 0 then return x end
  return tide().cat({ x:narrow(d, n - s + 1, s), x:narrow(d, 1, n - s) }, d)
end

--- Tensor:roll(shifts, dims) -> Tensor
--- Elements shifted cyclically by shifts along dims (numbers or tables of them); without dims, over the flattened tensor.
function T.roll(x, shifts, dims)
  args.tensor(x, 1, "roll")
  if dims == nil then
    args.int(shifts, 2, "roll", "integer shift")
    return roll1(x:reshape(-1), shifts, 1):view(x:size())
  end
  if type(shifts) == "number" then shifts = { shifts } end
  local ds = dim_list("roll", dims, x.ndim, 3)
  if type(shifts) ~= "table" or #shifts ~= #ds then
    raise(("roll: %s shifts for %d dims (one shift per dim)"):format(type(shifts) == "table" and #shifts or type(shifts), #ds))
  end
  local y = x
  for i, d in ipairs(ds) do y = roll1(y, args.int(shifts[i], 2, "roll", "integer shift"), d) end
  return y
end

local function sizes_of(fname, ...)
  local s = ...
  if type(s) ~= "table" then s = { ... } end
  for i = 1, #s do args.count(s[i], 2, fname, "non-negative integer repeat count") end
  return s
end

-- x repeated r[i] times along dim i (r at least as long as x's dims)
local function repeat_dims(x, r)
  local lead = #r - x.ndim
  local xs, shape, expand, final = x:size(), {}, {}, {}
  for i = 1, #r do
    local d = i > lead and xs[i - lead] or 1
    shape[#shape + 1] = 1; shape[#shape + 1] = d
    expand[#expand + 1] = r[i]; expand[#expand + 1] = d
    final[i] = r[i] * d
  end
  return x:reshape(shape):expand(expand):reshape(final)
end

--- Tensor:repeat_tensor(sizes...) -> Tensor
--- x tiled sizes[i] times along dim i (PyTorch's repeat; `repeat` is a Lua keyword: x["repeat"](x, ...) works too).
function T.repeat_tensor(x, ...)
  args.tensor(x, 1, "repeat")
  local r = sizes_of("repeat", ...)
  if #r < x.ndim then
    raise(("repeat: %d repeat counts for a tensor with %d dims (at least one per dim)"):format(#r, x.ndim))
  end
  return repeat_dims(x, r)
end
T["repeat"] = T.repeat_tensor

--- Tensor:tile(dims) -> Tensor
--- As repeat, with fewer counts than dims allowed (leading dims get 1).
function T.tile(x, ...)
  args.tensor(x, 1, "tile")
  local r = sizes_of("tile", ...)
  local full = {}
  for _ = 1, x.ndim - #r do full[#full + 1] = 1 end
  for i = 1, #r do full[#full + 1] = r[i] end
  return repeat_dims(x, full)
end

--- Tensor:repeat_interleave(repeats, dim) -> Tensor
--- Each element repeated `repeats` times (a number, or an integer tensor of counts per element) along dim (flattened when nil).
function T.repeat_interleave(x, repeats, dim)
  args.tensor(x, 1, "repeat_interleave")
  if dim == nil then x = x:reshape(-1); dim = 1 end
  local d = args.dim(dim, x.ndim, "repeat_interleave", 3)
  if type(repeats) == "number" then
    args.count(repeats, 2, "repeat_interleave", "non-negative integer count")
    local s = x:size()
    local e = {}
    for i = 1, #s do e[#e + 1] = s[i]; if i == d then e[#e + 1] = repeats end end
    local out = x:unsqueeze(d + 1):expand(e)
    s[d] = s[d] * repeats
    return out:reshape(s)
  end
  args.tensor(repeats, 2, "repeat_interleave")
  if repeats:is_floating_point() or repeats.dtype == tide().bool then
    raise(("repeat_interleave: repeats must be an integer tensor, got %s"):format(repeats.dtype.name))
  end
  if core.tracing() then
    raise("repeat_interleave: with a tensor of counts the output's size depends on its values, "
      .. "which tide.compile cannot trace; call it outside the compiled function")
  end
  local counts = repeats:reshape(-1):cpu():totable()
  if #counts ~= x:size(d) then
    raise(("repeat_interleave: %d counts for dim %d of size %d"):format(#counts, d, x:size(d)))
  end
  local idx, total = {}, 0
  for _, c in ipairs(counts) do
    if c < 0 or c ~= math.floor(c) then raise(("repeat_interleave: count %s is not a non-negative integer"):format(tostring(c))) end
    total = total + c
  end
  if total > 2 ^ 27 then      -- the index is built in a Lua table
    raise(("repeat_interleave: the counts add up to %.0f, above 2^27"):format(total))
  end
  for i, c in ipairs(counts) do
    for _ = 1, c do idx[#idx + 1] = i end
  end
  return x:index_select(d, tide().tensor(idx, { dtype = tide().int64, device = x.device }))
end

--- Tensor:movedim(source, destination) -> Tensor
--- A view with dims source (a dim or a list) moved to destination, the others in order.
function T.movedim(x, src, dst)
  args.tensor(x, 1, "movedim")
  local n = x.ndim
  local s, t = dim_list("movedim", src, n, 2), dim_list("movedim", dst, n, 3)
  if #s ~= #t then raise(("movedim: %d source dims and %d destination dims"):format(#s, #t)) end
  local perm, used = {}, {}
  for i = 1, #s do perm[t[i]] = s[i]; used[s[i]] = true end
  local rest = {}
  for d = 1, n do if not used[d] then rest[#rest + 1] = d end end
  local k = 1
  for d = 1, n do if perm[d] == nil then perm[d] = rest[k]; k = k + 1 end end
  return x:permute(perm)
end
T.moveaxis = T.movedim

--- Tensor:broadcast_to(shape) -> Tensor
--- x expanded to shape (a view), as expand.
function T.broadcast_to(x, shape)
  args.tensor(x, 1, "broadcast_to")
  return x:expand(shape)
end

--- tide.meshgrid(tensors, {indexing='ij'|'xy'}) -> {Tensor...}
--- Coordinate grids from 1-D tensors: result k varies along dim k ('ij'); 'xy' swaps the first two dims.
function M.meshgrid(list, opts)
  opts = args.opts("meshgrid", opts, "indexing", 2)
  if type(list) ~= "table" or is_tensor(list) then args.argerr(1, "meshgrid", "table of 1-D Tensors", list) end
  local ix = opts.indexing or "ij"
  if ix ~= "ij" and ix ~= "xy" then raise(("meshgrid: indexing must be 'ij' or 'xy', got %s"):format(tostring(ix))) end
  local n = #list
  local sizes = {}
  for i, t in ipairs(list) do
    args.tensor(t, 1, "meshgrid")
    if t.ndim ~= 1 then raise(("meshgrid: tensor %d is not 1-D (shape %s)"):format(i, size_str(t:size()))) end
    sizes[i] = t:numel()
  end
  local swap = ix == "xy" and n >= 2
  local shape = {}
  for i = 1, n do shape[i] = sizes[i] end
  if swap then shape[1], shape[2] = shape[2], shape[1] end
  local out = {}
  for i, t in ipairs(list) do
    local pos = i
    if swap and i <= 2 then pos = 3 - i end
    local v = {}
    for k = 1, n do v[k] = 1 end
    v[pos] = sizes[i]
    out[i] = t:view(v):expand(shape)
  end
  return out
end

return M
