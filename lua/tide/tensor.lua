--[[
tide.tensor -- the Tensor type: an ffi.metatype over td_tensor with methods,
operators and field-like properties, plus the op functions exposed as
tide.* . Dims, indices and class labels are 1-based here (negative from the
end) and converted to the C API's 0-based convention in this file only.
--]]
local core = require "tide.core"
local ffi, C, OP = core.ffi, core.C, core.OP
local wrap, check, is_tensor, raise = core.wrap, core.check, core.is_tensor, core.raise
local dtypes, dtype_of, dtype_id = core.dtypes, core.dtype_of, core.dtype_id

--- tide.Tensor
--- A strided view of typed memory on a device ("cpu", "opencl"); made by tide.tensor,
--- tide.zeros, ...; methods are x:name(...) and most are also tide.name(x, ...).
--- Properties: shape, dtype, device, grad, requires_grad, is_leaf, grad_fn, T, data.
--- Dims, indices and labels are 1-based (negative from the end).
local T = {}          -- methods
local getters = {}    -- x.shape, x.grad, ...
local setters = {}    -- x.grad = g, x.requires_grad = true
local M = { Tensor = T }

local inb = ffi.new("td_tensor *[64]")
local AT = ffi.new("td_attrs")
local auxp = ffi.new("td_tensor *[1]")
local i64buf = ffi.new("int64_t[8]")

local function attrs()
  ffi.fill(AT, ffi.sizeof(AT))
  AT.ndims = -1; AT.dtype = -1
  return AT
end
M.attrs = attrs

-- -- Argument helpers (tide.args) -------------------------------------------------------

local args = require "tide.args"
local typename, argerr, targ, cdim, dim1, shape_at = args.typename, args.argerr, args.tensor, args.cdim,
  args.dim, args.shape_at
M.argerr, M.typename, M.targ, M.cdim, M.dim1, M.shape_at = argerr, typename, targ, cdim, dim1, shape_at
local function shape_of(fname, ...) return shape_at(3, fname, ...) end
M.shape_of = shape_of

local function set_i64(buf, t) for i = 1, #t do buf[i - 1] = t[i] end return buf end

-- -- Calling ops ----------------------------------------------------------------------------

local op_number, td_op = C.td_op_number, C.td_op

local function op1(id, a, at)
  inb[0] = a.p
  return wrap(td_op(id, 1, inb, at), 3)
end
M.op1 = op1

local function op2(id, a, b, at)
  inb[0], inb[1] = a.p, b.p
  return wrap(td_op(id, 2, inb, at), 3)
end
M.op2 = op2

local function opn(id, list, at)
  for i = 1, #list do inb[i - 1] = list[i].p end
  return wrap(td_op(id, #list, inb, at), 3)
end
M.opn = opn

local function number_tensor(v) return wrap(C.td_wrap_number(v), 3) end
M.number_tensor = number_tensor

-- binary op with tensors or numbers on either side
local function binop(id, fname)
  return function(a, b)
    if is_tensor(a) then
      if is_tensor(b) then inb[0], inb[1] = a.p, b.p; return wrap(td_op(id, 2, inb, nil), 2) end
      if type(b) == "number" then return wrap(op_number(id, a.p, b, 0), 2) end
      if type(b) == "boolean" then return wrap(op_number(id, a.p, b and 1 or 0, 0), 2) end
      argerr(2, fname, "Tensor or number", b)
    elseif type(a) == "number" and is_tensor(b) then
      return wrap(op_number(id, b.p, a, 1), 2)
    end
    argerr(1, fname, "Tensor", a)
  end
end

local function unop(id, fname)
  return function(a)
    if not is_tensor(a) then argerr(1, fname, "Tensor", a) end
    inb[0] = a.p
    return wrap(td_op(id, 1, inb, nil), 2)
  end
end

-- elementwise ops: name -> method, tide.name, and the in-place name_
--- Tensor:neg() -> Tensor
--- -x elementwise (also x:negative() and the operator -x).
--- Tensor:abs() -> Tensor
--- |x| elementwise (also x:absolute()).
--- Tensor:sign() -> Tensor
--- -1, 0 or 1 by the sign of each element.
--- Tensor:exp() -> Tensor
--- e^x elementwise.
--- Tensor:log() -> Tensor
--- Natural logarithm elementwise.
--- Tensor:log1p() -> Tensor
--- log(1 + x) elementwise, accurate near 0.
--- Tensor:expm1() -> Tensor
--- e^x - 1 elementwise, accurate near 0.
--- Tensor:sqrt() -> Tensor
--- Square root elementwise.
--- Tensor:rsqrt() -> Tensor
--- 1 / sqrt(x) elementwise.
--- Tensor:sin() -> Tensor
--- Sine elementwise (radians).
--- Tensor:cos() -> Tensor
--- Cosine elementwise (radians).
--- Tensor:tan() -> Tensor
--- Tangent elementwise (radians).
--- Tensor:tanh() -> Tensor
--- Hyperbolic tangent elementwise.
--- Tensor:sigmoid() -> Tensor
--- 1 / (1 + e^-x) elementwise.
--- Tensor:relu() -> Tensor
--- max(x, 0) elementwise.
--- Tensor:silu() -> Tensor
--- x * sigmoid(x) elementwise (SiLU, swish).
--- Tensor:erf() -> Tensor
--- The error function elementwise.
--- Tensor:floor() -> Tensor
--- Rounds down elementwise.
--- Tensor:ceil() -> Tensor
--- Rounds up elementwise.
--- Tensor:round() -> Tensor
--- Rounds to the nearest integer elementwise, halves to even (as PyTorch).
--- Tensor:logical_not() -> Tensor
--- not x elementwise, as a bool tensor (nonzero is true).
--- Tensor:add(y) -> Tensor
--- x + y with broadcasting; y a tensor or a number (also the operator +).
--- Tensor:sub(y) -> Tensor
--- x - y with broadcasting (also x:subtract(y) and the operator -).
--- Tensor:mul(y) -> Tensor
--- x * y elementwise with broadcasting (also x:multiply(y) and the operator *).
--- Tensor:div(y) -> Tensor
--- x / y, true division (integers give the default float dtype; also x:divide(y) and /).
--- Tensor:pow(y) -> Tensor
--- x ^ y elementwise with broadcasting (also the operator ^).
--- Tensor:minimum(y) -> Tensor
--- The smaller of x and y elementwise (NaN propagates).
--- Tensor:maximum(y) -> Tensor
--- The larger of x and y elementwise (NaN propagates).
--- Tensor:eq(y) -> Tensor
--- x == y elementwise, a bool tensor (also x:equal_elems(y); Lua's == compares handles).
--- Tensor:ne(y) -> Tensor
--- x ~= y elementwise, a bool tensor.
--- Tensor:lt(y) -> Tensor
--- x < y elementwise, a bool tensor (also x:less(y)).
--- Tensor:le(y) -> Tensor
--- x <= y elementwise, a bool tensor.
--- Tensor:gt(y) -> Tensor
--- x > y elementwise, a bool tensor (also x:greater(y)).
--- Tensor:ge(y) -> Tensor
--- x >= y elementwise, a bool tensor.
--- Tensor:logical_and(y) -> Tensor
--- x and y elementwise, a bool tensor (nonzero is true).
--- Tensor:logical_or(y) -> Tensor
--- x or y elementwise, a bool tensor (nonzero is true).
local unary = { "neg", "abs", "sign", "exp", "log", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos",
  "tan", "tanh", "sigmoid", "relu", "silu", "erf", "floor", "ceil", "round", "logical_not" }
--- Tensor:atan2(y) -> Tensor
--- The angle of the point (y, x) elementwise: atan(self / other) in the right quadrant (float).
--- Tensor:hypot(y) -> Tensor
--- sqrt(x^2 + y^2) elementwise without overflow (float).
--- Tensor:fmod(y) -> Tensor
--- The remainder of x / y rounded toward zero: it has the dividend's sign (C's fmod; integers reject a zero divisor).
--- Tensor:remainder(y) -> Tensor
--- The remainder of x / y rounded down: it has the divisor's sign (Python's %; integers reject a zero divisor).
local binary = { "add", "sub", "mul", "div", "pow", "minimum", "maximum", "eq", "ne", "lt", "le",
  "gt", "ge", "logical_and", "logical_or", "atan2", "hypot", "fmod", "remainder" }
for _, n in ipairs(unary) do T[n] = unop(OP[n], n) end
for _, n in ipairs(binary) do T[n] = binop(OP[n], n) end
T.negative, T.absolute, T.multiply, T.divide, T.subtract = T.neg, T.abs, T.mul, T.div, T.sub
T.greater, T.less, T.equal_elems = T.gt, T.lt, T.eq

--- Tensor:gelu([{approximate = "none"|"tanh"}]) -> Tensor
--- GELU: x * Phi(x), or its tanh approximation.
function T.gelu(x, opts)
  targ(x, 1, "gelu")
  local at = attrs()
  local approx = opts
  if type(opts) == "table" then approx = args.opts("gelu", opts, "approximate", 2).approximate end
  if approx == "tanh" then at.flags = 1 elseif approx ~= nil and approx ~= "none" then
    raise("gelu: approximate must be 'none' or 'tanh', got " .. tostring(approx), 2)
  end
  return op1(OP.gelu, x, at)
end

local function clamp_attrs(fname, lo, hi)
  if type(lo) == "table" and not is_tensor(lo) then lo, hi = lo.min, lo.max end
  local at = attrs()
  if lo ~= nil then
    if type(lo) ~= "number" then argerr(2, fname, "number", lo, 3) end
    at.s[0] = lo; at.flags = at.flags + 2
  end
  if hi ~= nil then
    if type(hi) ~= "number" then argerr(3, fname, "number", hi, 3) end
    at.s[1] = hi; at.flags = at.flags + 4
  end
  return at
end

--- Tensor:clamp(lo, hi) -> Tensor
--- Limits elements to [lo, hi]; either bound may be nil; also clamp{min=, max=} and x:clip.
function T.clamp(x, lo, hi)
  targ(x, 1, "clamp")
  return op1(OP.clamp, x, clamp_attrs("clamp", lo, hi))
end
T.clip = T.clamp

-- a Tensor, or a number or boolean made a 0-dim tensor (argument n of fname)
local function tensor_or_number(v, n, fname)
  if is_tensor(v) then return v end
  if type(v) == "boolean" then v = v and 1 or 0 end
  if type(v) ~= "number" then argerr(n, fname, "Tensor or number", v) end
  return number_tensor(v)
end

--- tide.where(cond, a, b) -> Tensor
--- a where cond is true, else b, with broadcasting; a and b tensors or numbers.
--- Tensor:where(a, b) -> Tensor
--- cond:where(a, b) is tide.where(cond, a, b).
function M.where(cond, a, b)
  targ(cond, 1, "where")
  a, b = tensor_or_number(a, 2, "where"), tensor_or_number(b, 3, "where")
  inb[0], inb[1], inb[2] = cond.p, a.p, b.p
  return wrap(td_op(OP.where, 3, inb, nil), 2)
end
function T.where(cond, a, b) return M.where(cond, a, b) end

-- -- In place ------------------------------------------------------------------------------

local op_out = C.td_op_out
local function inplace(id, fname, x, list, at)
  targ(x, 1, fname)
  for i = 1, #list do
    local v = list[i]
    if type(v) == "number" then v = number_tensor(v) elseif type(v) == "boolean" then v = number_tensor(v and 1 or 0)
    elseif not is_tensor(v) then   -- list = {x, y, ...} for x:op_(y, ...), else the arguments after x
      argerr(rawequal(list[1], x) and i or i + 1, fname, "Tensor or number", v, 3)
    end
    list[i] = v
    inb[i - 1] = v.p
  end
  if op_out(id, #list, inb, at, x.p) ~= 0 then core.fail(2) end
  return x
end
M.inplace = inplace

for _, n in ipairs(unary) do T[n .. "_"] = function(x) return inplace(OP[n], n .. "_", x, { x }) end end
for _, n in ipairs(binary) do
  if n ~= "eq" and n ~= "ne" and n ~= "lt" and n ~= "le" and n ~= "gt" and n ~= "ge" then
    T[n .. "_"] = function(x, y) return inplace(OP[n], n .. "_", x, { x, y }) end
  end
end
-- copy_ and fill_ work across devices, as in PyTorch: a source on another device
-- (a CPU tensor or number into an OpenCL tensor, or back) is moved to x's device
-- first, since the C copy runs where its arguments are. The move is a plain
-- copy, so no gradient flows back to a source on the other device.
local function on_device_of(x, v)
  if type(v) == "number" or type(v) == "boolean" then
    if x.p == nil or x.device_type == 0 then return v end
    v = wrap(C.td_scalar(v == true and 1 or v == false and 0 or v, x.scalar_type), 3)
  elseif not is_tensor(v) or x.p == nil or v.device_type == x.device_type then
    return v
  end
  return wrap(C.td_to_device(v.p, x.device_type, -1), 3)
end
--- Tensor:copy_(src) -> self
--- Writes src (broadcast, converted, from any device) into x.
function T.copy_(x, src) targ(x, 1, "copy_"); return inplace(OP.copy, "copy_", x, { on_device_of(x, src) }) end
--- Tensor:fill_(v) -> self
--- Sets every element to the number v.
function T.fill_(x, v)
  targ(x, 1, "fill_")
  if type(v) ~= "number" and type(v) ~= "boolean" and not is_tensor(v) then argerr(2, "fill_", "number", v) end
  return inplace(OP.copy, "fill_", x, { on_device_of(x, v) })
end
--- Tensor:zero_() -> self
--- Sets every element to 0.
function T.zero_(x) targ(x, 1, "zero_"); return inplace(OP.copy, "zero_", x, { on_device_of(x, 0) }) end
function T.clamp_(x, lo, hi) return inplace(OP.clamp, "clamp_", x, { x }, clamp_attrs("clamp_", lo, hi)) end
function T.masked_fill_(x, mask, v) return inplace(OP.where, "masked_fill_", x, { mask, v, x }) end

-- -- Properties --------------------------------------------------------------------------------
-- (the receiver is checked too: tide.Tensor.dim(5) is a call a user can make)

--- Tensor:dim() -> number
--- The number of dims.
--- Tensor:numel() -> number
--- The number of elements.
--- Tensor:nelement() -> number
--- The number of elements (numel's old name).
function T.dim(x) return targ(x, 1, "dim").ndim end
function T.numel(x) return tonumber(targ(x, 1, "numel").nelem) end
function T.nelement(x) return tonumber(targ(x, 1, "nelement").nelem) end
-- Sizes and strides print as [2, 3] and compare by value (a == b); they are
-- plain arrays otherwise (s[1], #s, unpack(s), tide.save)
--- Tensor:size([d]) -> sizes or number
--- The sizes as a table that prints as [2, 3] (x.shape is the same), or the size of dim d.
--- Tensor:stride([d]) -> strides or number
--- The strides in elements, or the stride of dim d.
local shape_mt = { __tostring = function(s) return "[" .. table.concat(s, ", ") .. "]" end,
  __eq = function(a, b)
    if #a ~= #b then return false end
    for i = 1, #a do if a[i] ~= b[i] then return false end end
    return true
  end }
M.shape_mt = shape_mt

-- x:size() / x:size(d), x:stride() / x:stride(d): one read of the raw fields
local function geometry(field, fname)
  return function(x, d)
    local f = M.fields(targ(x, 1, fname))
    if d == nil then
      local s = {}
      for i = 0, f.ndim - 1 do s[i + 1] = tonumber(f[field][i]) end
      return setmetatable(s, shape_mt)
    end
    return tonumber(f[field][dim1(d, f.ndim, fname) - 1])
  end
end
T.size, T.stride = geometry("sizes", "size"), geometry("strides", "stride")
--- Tensor:is_contiguous() -> boolean
--- Whether the elements lie in row-major order with no gaps.
--- Tensor:is_floating_point() -> boolean
--- Whether the dtype is float32 or float64.
--- Tensor:element_size() -> number
--- Bytes per element.
function T.is_contiguous(x) return C.td_is_contiguous(targ(x, 1, "is_contiguous").p) ~= 0 end
function T.is_floating_point(x) return targ(x, 1, "is_floating_point").scalar_type >= 4 end
function T.element_size(x) return C.td_dtype_size(targ(x, 1, "element_size").scalar_type) end

-- raw fields: td_tensor is opaque to the FFI; read it through td_tensor_fields
local FIELDS = ffi.typeof("td_tensor_fields *")
M.fields = function(x)
  if x.p == nil then targ(x, 1, "size") end      -- Tensor.size(freed) and friends: never read NULL
  return ffi.cast(FIELDS, x.p)
end
for _, f in ipairs { "ndim", "scalar_type", "device_type", "sizes", "strides", "offset", "nelem", "ptr", "flags" } do
  getters[f] = function(x) return ffi.cast(FIELDS, x.p)[f] end
end

--- Tensor.shape
--- The sizes (x:size()), printing as [2, 3]; x.shape[1] is the first.
--- Tensor.dtype
--- The dtype object (tide.float32, ...).
--- Tensor.device
--- "cpu" or "opencl:N".
--- Tensor.requires_grad
--- Whether autograd tracks the tensor; assignable (x.requires_grad = true).
--- Tensor.is_leaf
--- Whether the tensor was made by the user (not by an op on tensors that require grad).
--- Tensor.grad
--- The accumulated gradient of a leaf after backward, or nil; assignable.
--- Tensor.grad_fn
--- The name of the op that made it (PyTorch's, e.g. "MulBackward0"), or nil for leaves.
--- Tensor.T
--- The dims reversed (a view).
--- Tensor.data
--- x:detach().
getters.shape = function(x) return T.size(x) end
getters.dtype = function(x) return dtype_of[x.scalar_type] end
getters.device = function(x)
  if x.device_type == 0 then return "cpu" end
  return "opencl:" .. C.td_opencl_device_index()
end
getters.requires_grad = function(x) return C.td_requires_grad(x.p) ~= 0 end
getters.is_leaf = function(x) return C.td_is_leaf(x.p) ~= 0 end
getters.grad = function(x) local g = C.td_grad(x.p); if g ~= nil then return wrap(g) end end
-- the node's rule "mul_backward" shows as "MulBackward0", the name PyTorch gives it
getters.grad_fn = function(x)
  local s = C.td_grad_fn_name(x.p)
  if s == nil then return nil end
  local base = ffi.string(s):gsub("_backward$", "")
  return base:gsub("^%l", string.upper):gsub("_(%w)", string.upper) .. "Backward0"
end
getters._version = function(x) return tonumber(C.td_version(x.p)) end
getters.T = function(x) return T.permute(x, (function() local p = {} for i = x.ndim, 1, -1 do p[#p + 1] = i end return p end)()) end
getters.data = function(x) return T.detach(x) end

setters.grad = function(x, g)
  if g ~= nil and (not is_tensor(g) or g.p == nil) then argerr(2, "grad", "Tensor or nil", g) end
  check(C.td_set_grad(x.p, g ~= nil and g.p or nil), 3)
end
setters.requires_grad = function(x, b) check(C.td_set_requires_grad(x.p, b and 1 or 0), 3) end

--- Tensor:requires_grad_([on = true]) -> self
--- Makes autograd track x (a leaf) or stop tracking it.
function T.requires_grad_(x, b)
  targ(x, 1, "requires_grad_")
  if b == nil then b = true end
  check(C.td_set_requires_grad(x.p, b and 1 or 0))
  return x
end
--- Tensor:retain_grad() -> self
--- Keeps .grad of a non-leaf tensor after backward.
--- Tensor:detach() -> Tensor
--- The same values without autograd history (shares memory).
--- Tensor:detach_()
--- Not supported (raises): use x = x:detach().
function T.retain_grad(x) check(C.td_retain_grad(targ(x, 1, "retain_grad").p)); return x end
function T.detach(x) return wrap(C.td_detach(targ(x, 1, "detach").p)) end
function T.detach_(x)
  raise("detach_: not supported; use x = x:detach()", 2)
end

-- -- Conversion ------------------------------------------------------------------------------

-- "cpu", "opencl", "opencl:N" -> device type, index (-1: the default device); nil if not a device
local function parse_device(d)
  if type(d) ~= "string" then return nil end
  if d == "cpu" then return 0, 0 end
  if d == "opencl" then return 1, -1 end
  local n = d:match("^opencl:(%d+)$")
  if n then return 1, tonumber(n) end
end
M.parse_device = parse_device

-- parse_device, or an error naming fname for anything else
local function check_device(d, fname)
  local dev, idx = parse_device(d)
  if dev then return dev, idx end
  raise(("%s: unknown device '%s' (expected \"cpu\", \"opencl\" or \"opencl:N\")"):format(fname, tostring(d)))
end
M.check_device = check_device

-- to(dtype), to(device), to(device, dtype), to({device=, dtype=}): a copy, or x when nothing changes
-- and to(other): other's device and dtype
--- Tensor:to(device | dtype | other [, dtype]) -> Tensor
--- A copy on another device ("cpu", "opencl", "opencl:N") and/or dtype, or x itself when nothing changes.
function T.to(x, d, d2)
  targ(x, 1, "to")
  if is_tensor(d) then d, d2 = d.device, d.dtype
  elseif type(d) == "table" and not d.id then d, d2 = d.device or d.dtype, d.device and d.dtype end
  local dev, idx = parse_device(d)
  if dev then
    if dev ~= x.device_type then x = wrap(C.td_to_device(x.p, dev, idx))
    elseif dev == 1 and idx >= 0 then check(C.td_opencl_init(idx)) end
    if d2 == nil then return x end
    d = d2
  elseif type(d) == "string" and (d:match("^opencl") or d:match("^cuda") or d == "gpu") then
    raise(("to: unknown device '%s' (expected \"cpu\", \"opencl\" or \"opencl:N\")"):format(d), 2)
  end
  if d == nil then argerr(2, "to", "dtype, device or Tensor", d) end
  local id = dtype_id(d, "to")
  if id == x.scalar_type then return x end
  local at = attrs(); at.dtype = id
  return op1(OP.cast, x, at)
end
--- Tensor:cpu() -> Tensor
--- x on the CPU (x itself if it is there).
--- Tensor:opencl([n]) -> Tensor
--- x on the OpenCL device (n: the device index).
--- Tensor:type([dtype]) -> string or Tensor
--- The type name ("tide.float32"), or x converted to dtype.
--- Tensor:float() -> Tensor
--- x as float32 (also double, long (int64), int (int32), bool, byte (uint8)).
--- Tensor:double() -> Tensor
--- x as float64.
--- Tensor:long() -> Tensor
--- x as int64.
--- Tensor:int() -> Tensor
--- x as int32.
--- Tensor:bool() -> Tensor
--- x as bool (nonzero is true).
--- Tensor:byte() -> Tensor
--- x as uint8.
function T.cpu(x) return T.to(targ(x, 1, "cpu"), "cpu") end
function T.opencl(x, n)
  if n ~= nil then args.count(n, 2, "opencl", "device index") end
  return T.to(x, n and ("opencl:" .. n) or "opencl")
end
T.type = function(x, d) targ(x, 1, "type"); if d == nil then return "tide." .. dtype_of[x.scalar_type].name end return T.to(x, d) end
for name, d in pairs { float = "float32", double = "float64", long = "int64", int = "int32", bool = "bool", byte = "uint8" } do
  T[name] = function(x) return T.to(targ(x, 1, name), d) end
end
--- Tensor:clone() -> Tensor
--- A contiguous copy (differentiable).
--- Tensor:contiguous() -> Tensor
--- x if contiguous, else a contiguous copy.
function T.clone(x) targ(x, 1, "clone"); return op1(OP.copy, x, nil) end
function T.contiguous(x)
  targ(x, 1, "contiguous")
  if C.td_is_contiguous(x.p) ~= 0 then return x end
  return op1(OP.copy, x, nil)
end

local dbuf, dbuf_n = nil, 0
local function read_all(x)
  local n = tonumber(x.nelem)
  if n > dbuf_n then dbuf, dbuf_n = ffi.new("double[?]", n), n end
  check(C.td_read(x.p, dbuf), 3)
  return dbuf, n
end

--- Tensor:item() -> number or boolean
--- The value of a one-element tensor.
--- Tensor:totable() -> table
--- The values as nested Lua tables (a number for a 0-dim tensor; PyTorch's tolist).
--- Tensor:tolist() -> table
--- x:totable().
local item_buf = ffi.new("double[1]")
function T.item(x)
  check(C.td_item(targ(x, 1, "item").p, item_buf))
  local v = item_buf[0]
  if x.scalar_type == 0 then return v ~= 0 end
  return v
end

function T.totable(x)
  local buf = read_all(targ(x, 1, "totable"))
  local isbool = x.scalar_type == 0
  local sizes, nd = T.size(x), x.ndim
  if nd == 0 then local v = buf[0]; if isbool then return v ~= 0 end return v end
  local pos = 0
  local function build(d)
    local t = {}
    if d == nd then
      for i = 1, sizes[d] do local v = buf[pos]; pos = pos + 1; if isbool then v = v ~= 0 end t[i] = v end
    else
      for i = 1, sizes[d] do t[i] = build(d + 1) end
    end
    return t
  end
  return build(1)
end

function T.tolist(x) targ(x, 1, "tolist"); return T.totable(x) end
M.read_all = read_all

-- -- Movement ---------------------------------------------------------------------------------

local function shape_op(id, fname)
  return function(x, ...)
    targ(x, 1, fname)
    local s = shape_of(fname, ...)
    local at = attrs()
    at.ndims = #s
    for i = 1, #s do at.dims[i - 1] = s[i] end
    return op1(id, x, at)
  end
end
--- Tensor:view(size...) -> Tensor
--- The same memory seen with another shape (one size may be -1); the strides must allow it.
--- Tensor:expand(size...) -> Tensor
--- Size-1 dims repeated to size without copying (-1 keeps a dim).
T.view = shape_op(OP.view, "view")
T.expand = shape_op(OP.expand, "expand")
--- Tensor:reshape(size...) -> Tensor
--- x:view(...) when possible, else a copy with that shape.
function T.reshape(x, ...)
  targ(x, 1, "reshape")
  local s = shape_of("reshape", ...)
  -- resolve a single -1 here: td_reshape gives up on -1 before trying its copy
  local infer, known = nil, 1
  for i = 1, #s do if s[i] == -1 and infer == nil then infer = i else known = known * s[i] end end
  local n = tonumber(x.nelem)
  if infer and known > 0 and n % known == 0 then
    s = { unpack(s) }
    s[infer] = n / known
  end
  local p = C.td_reshape(x.p, #s, set_i64(i64buf, s))
  if p == nil then raise((core.last_error():gsub("^view:", "reshape:"))) end
  return wrap(p)
end
--- Tensor:view_as(y) -> Tensor
--- x:view(y:size()).
--- Tensor:reshape_as(y) -> Tensor
--- x:reshape(y:size()).
--- Tensor:expand_as(y) -> Tensor
--- x:expand(y:size()).
function T.view_as(x, y) targ(y, 2, "view_as"); return T.view(x, T.size(y)) end
function T.reshape_as(x, y) targ(y, 2, "reshape_as"); return T.reshape(x, T.size(y)) end
function T.expand_as(x, y) targ(y, 2, "expand_as"); return T.expand(x, T.size(y)) end

--- Tensor:permute(dims...) -> Tensor
--- The dims reordered (a view): x:permute(2, 1) swaps two dims.
function T.permute(x, ...)
  targ(x, 1, "permute")
  local p = ...
  if type(p) ~= "table" then p = { ... } end
  return op1(OP.permute, x, args.dims_into(attrs(), p, "permute", 2))
end

--- Tensor:transpose(d1, d2) -> Tensor
--- Dims d1 and d2 swapped (a view).
function T.transpose(x, d1, d2)
  targ(x, 1, "transpose")
  local n = x.ndim
  local a, b = dim1(d1, n, "transpose", 2), dim1(d2, n, "transpose", 3)
  local p = {}
  for i = 1, n do p[i] = i end
  p[a], p[b] = p[b], p[a]
  return T.permute(x, p)
end
--- Tensor:t() -> Tensor
--- The transpose of a 2-D tensor (1-D and 0-D: x itself).
function T.t(x)
  targ(x, 1, "t")
  if x.ndim > 2 then raise(("t: expects a tensor with <= 2 dims, got %d dims (use transpose)"):format(x.ndim), 2) end
  if x.ndim < 2 then return x end
  return T.permute(x, 2, 1)
end

-- narrow(dim, start, length): start is 1-based (negative from the end)
--- Tensor:narrow(d, start, length) -> Tensor
--- length elements of dim d from index start (1-based), a view.
function T.narrow(x, d, start, len)
  targ(x, 1, "narrow")
  local dd = dim1(d, x.ndim, "narrow")
  args.int(start, 3, "narrow", "integer start")
  args.int(len, 4, "narrow", "integer length")
  local n = tonumber(x.sizes[dd - 1])
  local s0 = start < 0 and n + start or start - 1
  if start == 0 or s0 < 0 or s0 > n or len < 0 or s0 + len > n then
    raise(("narrow: start %d and length %d are out of range for dim %d of size %d%s"):format(start, len, d, n,
      start == 0 and " (indices are 1-based)" or ""))
  end
  local at = attrs()
  at.i[0], at.i[1], at.i[2], at.i[3] = dd - 1, s0, s0 + len, 1
  return op1(OP.slice, x, at)
end

-- slice(dim, start, stop, step): 1-based inclusive start and stop (Torch7 ranges,
-- negative from the end), clamped to the dim like Python slices
--- Tensor:slice(d, start, stop[, step]) -> Tensor
--- Indices start..stop of dim d, inclusive and 1-based (Torch7 ranges), every step-th; a view.
function T.slice(x, d, start, stop, step)
  targ(x, 1, "slice")
  local dd = dim1(d, x.ndim, "slice")
  local n = tonumber(x.sizes[dd - 1])
  start, stop, step = start or 1, stop or n, step or 1
  -- bounds are integers or +-inf, clamped to the dim as Python clamps huge ones
  -- (slice(d, 1, math.huge) is "to the end"); NaN fails the integer test
  for i, v in ipairs { start, stop } do
    if type(v) ~= "number" or v ~= math.floor(v) then argerr(i + 2, "slice", "integer", v) end
  end
  args.int(step, 5, "slice", "integer step")
  start, stop = math.max(math.min(start, n + 1), -n - 1), math.max(math.min(stop, n + 1), -n - 1)
  if start < 0 then start = n + start + 1 end
  if stop < 0 then stop = n + stop + 1 end
  local at = attrs()
  at.i[0], at.i[1], at.i[2], at.i[3] = dd - 1, math.max(start - 1, 0), math.max(stop, 0), step
  return op1(OP.slice, x, at)
end

--- Tensor:select(d, i) -> Tensor
--- Index i of dim d (1-based), the dim removed; a view.
function T.select(x, d, idx)
  targ(x, 1, "select")
  local at = attrs()
  at.i[0] = cdim(d, "select")
  args.int(idx, 3, "select", "integer index")
  if idx == 0 then raise("select: index 0 is invalid (indices are 1-based; -1 is the last)") end
  at.i[1] = idx > 0 and idx - 1 or idx
  return op1(OP.select, x, at)
end

--- Tensor:unsqueeze(d) -> Tensor
--- A size-1 dim inserted at position d (a view).
function T.unsqueeze(x, d)
  targ(x, 1, "unsqueeze")
  local p = dim1(d, x.ndim, "unsqueeze", 2, 1)
  local s = T.size(x)
  table.insert(s, p, 1)
  return T.view(x, s)
end

-- squeeze() drops every size-1 dim; squeeze(d) only dim d (if its size is 1)
--- Tensor:squeeze([d]) -> Tensor
--- Size-1 dims removed (all of them, or only dim d).
function T.squeeze(x, d)
  targ(x, 1, "squeeze")
  local s, r = T.size(x), {}
  local only = d ~= nil and dim1(d, #s, "squeeze") or nil
  for i = 1, #s do
    if not (s[i] == 1 and (only == nil or only == i)) then r[#r + 1] = s[i] end
  end
  return T.view(x, r)
end

-- flatten(start=1, end=-1): dims start..end become one (a view when strides allow)
--- Tensor:flatten([start = 1[, end = -1]]) -> Tensor
--- Dims start..end merged into one.
function T.flatten(x, s, e)
  targ(x, 1, "flatten")
  local n = x.ndim
  if n == 0 then return T.reshape(x, 1) end
  s, e = dim1(s or 1, n, "flatten", 2), dim1(e or -1, n, "flatten", 3)
  if s > e then raise(("flatten: start dim %d comes after end dim %d"):format(s, e)) end
  local sz, r = T.size(x), {}
  for i = 1, s - 1 do r[#r + 1] = sz[i] end
  local m = 1
  for i = s, e do m = m * sz[i] end
  r[#r + 1] = m
  for i = e + 1, n do r[#r + 1] = sz[i] end
  return T.reshape(x, r)
end

-- unflatten(d, sizes): dim d becomes sizes (one of them may be -1)
--- Tensor:unflatten(d, sizes) -> Tensor
--- Dim d split into sizes (a table; one may be -1).
function T.unflatten(x, d, sizes)
  targ(x, 1, "unflatten")
  local sz = T.size(x)
  local p = dim1(d, #sz, "unflatten")
  if type(sizes) ~= "table" then argerr(3, "unflatten", "table of sizes", sizes) end
  local prod, infer = 1, nil
  for i, v in ipairs(sizes) do
    if type(v) ~= "number" or v ~= math.floor(v) or v < -1 then argerr(3, "unflatten", "table of integer sizes", v) end
    if v == -1 then
      if infer then raise("unflatten: only one size can be -1") end
      infer = i
    else prod = prod * v end
  end
  if (infer == nil and prod ~= sz[p]) or (infer ~= nil and (prod == 0 or sz[p] % prod ~= 0)) then
    raise(("unflatten: sizes {%s} do not multiply to %d, the size of dim %d"):format(
      table.concat(sizes, ", "), sz[p], d))
  end
  local r = {}
  for i = 1, p - 1 do r[#r + 1] = sz[i] end
  for _, v in ipairs(sizes) do r[#r + 1] = v end
  for i = p + 1, #sz do r[#r + 1] = sz[i] end
  return T.reshape(x, r)
end

-- -- Reductions ----------------------------------------------------------------------------

-- (dim | {dims} | nil, keepdim | {keepdim=...}) -> attrs
local function red_attrs(fname, x, dims, keep)
  local at = attrs()
  if type(keep) == "table" then keep = args.opts(fname, keep, "keepdim", 3).keepdim end
  if type(dims) == "table" and dims.dim ~= nil then keep = args.opts(fname, dims, "dim keepdim", 2).keepdim; dims = dims.dim end
  if dims == nil then at.ndims = -1
  elseif type(dims) == "number" then at.ndims = 1; at.dims[0] = cdim(dims, fname, 3)
  else args.dims_into(at, dims, fname, 2) end
  at.keepdim = keep and 1 or 0
  return at
end
M.red_attrs = red_attrs

--- Tensor:sum([dims[, keepdim]]) -> Tensor
--- The sum over all elements, or over dim(s) dims (a number or a table); keepdim keeps them as size 1.
--- Tensor:mean([dims[, keepdim]]) -> Tensor
--- The mean over all elements or over dims.
--- Tensor:prod([dims[, keepdim]]) -> Tensor
--- The product over all elements or over dims.
--- Tensor:logsumexp([dims[, keepdim]]) -> Tensor
--- log(sum(exp(x))) over dims, computed stably.
for _, n in ipairs { "sum", "mean", "prod", "logsumexp" } do
  local id = OP[n]
  T[n] = function(x, dims, keep)
    targ(x, 1, n)
    return op1(id, x, red_attrs(n, x, dims, keep))
  end
end

--- Tensor:argmax([dim[, keepdim]]) -> Tensor
--- The 1-based index of the largest element (of the flattened tensor, or along dim).
--- Tensor:argmin([dim[, keepdim]]) -> Tensor
--- The 1-based index of the smallest element.
for _, n in ipairs { "argmax", "argmin" } do
  local id = OP[n]
  T[n] = function(x, dims, keep)
    targ(x, 1, n)
    local at = red_attrs(n, x, dims, keep)
    return op1(id, x, at) + 1            -- 1-based indices
  end
end

-- max(), max(dim[, keepdim]) -> values, indices (1-based); max(tensor) -> maximum
--- Tensor:max([dim[, keepdim]]) -> Tensor[, Tensor]
--- The largest element; along dim: values and their 1-based indices; x:max(y): tide.maximum.
--- Tensor:min([dim[, keepdim]]) -> Tensor[, Tensor]
--- The smallest element; along dim: values and their 1-based indices; x:min(y): tide.minimum.
for _, n in ipairs { "max", "min" } do
  local id, elementwise = OP[n], n == "max" and T.maximum or T.minimum
  T[n] = function(x, dims, keep)
    targ(x, 1, n)
    if is_tensor(dims) then return elementwise(x, dims) end
    local at = red_attrs(n, x, dims, keep)
    inb[0] = x.p
    local v = wrap(C.td_op_aux(id, 1, inb, at, auxp), 2)
    if auxp[0] ~= nil then
      local idx = wrap(auxp[0])
      return v, idx + 1
    end
    return v
  end
end
-- amax/amin: values only; tied maxima share the gradient (max(dim) sends it to the index)
--- Tensor:amax([dims[, keepdim]]) -> Tensor
--- The largest values over dims (no indices; ties share the gradient).
--- Tensor:amin([dims[, keepdim]]) -> Tensor
--- The smallest values over dims (no indices; ties share the gradient).
for _, n in ipairs { "amax", "amin" } do
  local id = n == "amax" and OP.max or OP.min
  T[n] = function(x, dims, keep)
    targ(x, 1, n)
    local at = red_attrs(n, x, dims, keep)
    at.flags = 1
    return op1(id, x, at)
  end
end

-- var/std(dim, {correction=1 | unbiased=true, keepdim=false})
--- Tensor:var([dims[, {correction = 1, keepdim = false}]]) -> Tensor
--- The variance over dims (correction 1: unbiased; 0: population; also unbiased = false).
--- Tensor:std([dims[, {correction = 1, keepdim = false}]]) -> Tensor
--- The standard deviation over dims.
for _, n in ipairs { "var", "std" } do
  local id = OP[n]
  T[n] = function(x, dims, opts)
    targ(x, 1, n)
    local keep, corr = false, 1
    if type(opts) == "table" then
      args.opts(n, opts, "correction unbiased keepdim", 3)
      keep = opts.keepdim
      if opts.correction ~= nil then corr = opts.correction elseif opts.unbiased == false then corr = 0 end
    elseif type(opts) == "boolean" then keep = opts end
    local at = red_attrs(n, x, dims, keep)
    at.s[0] = corr
    return op1(id, x, at)
  end
end

-- norm(p=2, dim, keepdim)
--- Tensor:norm([p = 2[, dims[, keepdim]]]) -> Tensor
--- The p-norm over all elements or dims (p a number, "fro" or "inf").
function T.norm(x, p, dims, keep)
  targ(x, 1, "norm")
  if p == "fro" or p == nil then p = 2 elseif p == "inf" then p = math.huge end
  if type(p) ~= "number" then
    raise(("norm: p must be a number, 'fro' or 'inf', got %s"):format(type(p) == "string" and "'" .. p .. "'" or typename(p)))
  end
  local at = red_attrs("norm", x, dims, keep)
  at.s[0] = p
  return op1(OP.norm, x, at)
end

--- Tensor:softmax(dim) -> Tensor
--- exp(x) / sum(exp(x)) along dim, computed stably.
--- Tensor:log_softmax(dim) -> Tensor
--- log(softmax(x, dim)), computed stably.
for _, n in ipairs { "softmax", "log_softmax" } do
  local id = OP[n]
  T[n] = function(x, d)
    targ(x, 1, n)
    if d == nil then raise(n .. ": dim is required (e.g. -1)", 2) end
    local at = attrs()
    at.i[0] = cdim(d, n)
    return op1(id, x, at)
  end
end

-- -- Contraction ------------------------------------------------------------------------------

--- Tensor:matmul(b) -> Tensor
--- Matrix product: 1-D (dot), 2-D, and batched with broadcasting over leading dims.
function T.matmul(a, b)
  targ(a, 1, "matmul"); targ(b, 2, "matmul")
  return op2(OP.matmul, a, b)
end
local function shape_str(x) return "[" .. table.concat(T.size(x), ",") .. "]" end
M.shape_str = shape_str
-- the fixed-rank forms of matmul: name -> ranks of a and b and what the message says
local function fixed_rank(name, ra, rb, what, same_batch)
  T[name] = function(a, b)
    targ(a, 1, name); targ(b, 2, name)
    if a.ndim ~= ra or b.ndim ~= rb or (same_batch and a.sizes[0] ~= b.sizes[0]) then
      raise(("%s: expected %s, got %s and %s"):format(name, what, shape_str(a), shape_str(b)), 2)
    end
    return op2(OP.matmul, a, b)
  end
end
--- Tensor:mm(b) -> Tensor
--- The product of two 2-D tensors.
--- Tensor:bmm(b) -> Tensor
--- Batched product of 3-D tensors with the same batch size.
--- Tensor:dot(b) -> Tensor
--- The dot product of two 1-D tensors.
--- Tensor:mv(v) -> Tensor
--- Matrix (2-D) times vector (1-D).
fixed_rank("mm", 2, 2, "2-D tensors")
fixed_rank("bmm", 3, 3, "3-D tensors with the same batch size", true)
fixed_rank("dot", 1, 1, "1-D tensors")
fixed_rank("mv", 2, 1, "a 2-D and a 1-D tensor")
--- Tensor:outer(b) -> Tensor
--- The outer product of two 1-D tensors (also x:ger(b)).
function T.outer(a, b)
  targ(a, 1, "outer"); targ(b, 2, "outer")
  if a.ndim ~= 1 or b.ndim ~= 1 then
    raise(("outer: expected 1-D tensors, got %s and %s"):format(shape_str(a), shape_str(b)), 2)
  end
  return T.mul(T.unsqueeze(a, 2), T.unsqueeze(b, 1))
end
T.ger = T.outer
-- addmm(c, a, b, {beta=1, alpha=1}) = beta c + alpha (a @ b)
--- Tensor:addmm(a, b[, {beta = 1, alpha = 1}]) -> Tensor
--- beta * c + alpha * (a @ b), c being the tensor it is called on.
function T.addmm(c, a, b, opts)
  targ(c, 1, "addmm")
  opts = args.opts("addmm", opts, "beta alpha", 4)
  local beta, alpha = opts.beta or 1, opts.alpha or 1
  if type(beta) ~= "number" then argerr(4, "addmm", "number beta", beta) end
  if type(alpha) ~= "number" then argerr(4, "addmm", "number alpha", alpha) end
  local p = T.mm(a, b)
  if alpha ~= 1 then p = p * alpha end
  -- beta = 0 ignores c's values (NaN and inf included), as PyTorch: only its
  -- shape and dtype take part, through zeros of them
  if beta == 0 then
    local z = wrap(C.td_full(c.ndim, set_i64(i64buf, T.size(c)), 0, c.scalar_type))
    if c.device_type ~= 0 then z = wrap(C.td_to_device(z.p, c.device_type, -1)) end
    return p + z
  end
  if beta ~= 1 then c = c * beta end
  return c + p
end

-- -- Indexing ops (indices are 1-based tensors; C takes 0-based) --------------------------------

local function idx0(idx, fname, n)
  if not is_tensor(idx) then argerr(n, fname, "Tensor of indices", idx, 3) end
  local st = idx.scalar_type
  if st == 0 or st >= 4 then
    raise(("%s: indices must be an integer tensor, got %s (make one with tide.long{...} or x:long())")
      :format(fname, dtype_of[st].name), 3)
  end
  return wrap(op_number(OP.sub, idx.p, 1, 0), 3)
end
M.idx0 = idx0

-- (x, dim, idx) gathers and (x, dim, idx, src) accumulations, plus the in-place
-- forms of the latter
local function index_op(name, id, with_src)
  T[name] = function(x, d, idx, src)
    targ(x, 1, name)
    if with_src then targ(src, 4, name) end
    local at = attrs(); at.i[0] = cdim(d, name)
    local ix = idx0(idx, name, 3)
    if with_src then return opn(id, { x, ix, src }, at) end
    return op2(id, x, ix, at)
  end
  if with_src then
    local iname = name .. "_"
    T[iname] = function(x, d, idx, src)
      local at = attrs(); at.i[0] = cdim(d, iname)
      return inplace(id, iname, x, { x, idx0(idx, iname, 3), src }, at)
    end
  end
end
--- Tensor:index_select(d, idx) -> Tensor
--- The entries of dim d at the 1-based integer indices idx (a copy).
--- Tensor:gather(d, idx) -> Tensor
--- out[i][j] = x[idx[i][j]][j] for d = 1 (and so on): values picked along d at 1-based indices.
--- Tensor:scatter_add(d, idx, src) -> Tensor
--- A copy of x with src added at the 1-based indices idx along d (the reverse of gather).
--- Tensor:index_add(d, idx, src) -> Tensor
--- A copy of x with the slices of src added at the 1-based indices idx of dim d.
index_op("index_select", OP.index_select)
index_op("gather", OP.gather)
index_op("scatter_add", OP.scatter_add, true)
index_op("index_add", OP.index_add, true)

--- Tensor:masked_fill(mask, v) -> Tensor
--- x with v where the bool mask is true (broadcast).
function T.masked_fill(x, mask, v)
  targ(x, 1, "masked_fill"); targ(mask, 2, "masked_fill")
  return M.where(mask, tensor_or_number(v, 3, "masked_fill"), x)
end

--- tide.cat(tensors[, dim = 1]) -> Tensor
--- The tensors joined along dim (also tide.concat, tide.concatenate).
function M.cat(list, d)
  if type(list) ~= "table" or #list == 0 then argerr(1, "cat", "non-empty table of Tensors", list) end
  if #list > 64 then raise("cat: at most 64 tensors at once, got " .. #list, 2) end
  for i = 1, #list do if not is_tensor(list[i]) then argerr(1, "cat", "table of Tensors", list[i]) end end
  local at = attrs(); at.i[0] = cdim(d or 1, "cat")
  return opn(OP.cat, list, at)
end
M.concat, M.concatenate = M.cat, M.cat

--- tide.stack(tensors[, dim = 1]) -> Tensor
--- The tensors (same shape) joined along a new dim.
function M.stack(list, d)
  if type(list) ~= "table" or #list == 0 then argerr(1, "stack", "non-empty table of Tensors", list) end
  d = args.int(d or 1, 2, "stack", "integer dim")
  local u = {}
  for i = 1, #list do
    local x = targ(list[i], 1, "stack")
    local n = x.ndim
    local p = d < 0 and n + d + 2 or d
    u[i] = T.unsqueeze(x, p)
  end
  return M.cat(u, d < 0 and d or d)
end

-- split(x, size | {sizes}, dim) -> list of views
--- Tensor:split(size | sizes[, dim = 1]) -> list of Tensor
--- Views of pieces of size elements along dim (the last may be smaller), or of the given sizes.
function T.split(x, size, d)
  targ(x, 1, "split")
  d = d or 1
  local n, parts, pos = T.size(x, d), {}, 1
  if type(size) == "table" then
    local total = 0
    for _, s in ipairs(size) do args.count(s, 2, "split", "table of non-negative integer sizes"); total = total + s end
    if total ~= n then raise(("split: sizes sum to %d but dim %d has size %d"):format(total, d, n), 2) end
    for _, s in ipairs(size) do parts[#parts + 1] = T.narrow(x, d, pos, s); pos = pos + s end
  else
    if not args.is_int(size) or size < 1 then argerr(2, "split", "positive integer size", size) end
    while pos <= n do
      local s = math.min(size, n - pos + 1)
      parts[#parts + 1] = T.narrow(x, d, pos, s); pos = pos + s
    end
  end
  return parts
end
--- Tensor:chunk(k[, dim = 1]) -> list of Tensor
--- At most k views of nearly equal size along dim.
function T.chunk(x, k, d)
  targ(x, 1, "chunk")
  if not args.is_int(k) or k < 1 then argerr(2, "chunk", "positive integer number of chunks", k) end
  local n = T.size(x, d or 1)
  return T.split(x, math.max(1, math.ceil(n / k)), d)
end

-- embedding(idx, weight): rows of weight (V, D) at 1-based indices idx (any shape) -> idx.shape .. {D}
--- tide.embedding(idx, weight) -> Tensor
--- The rows of weight (V, D) at the 1-based indices idx (any shape): idx.shape .. {D}.
function M.embedding(idx, weight)
  targ(weight, 2, "embedding")
  if not is_tensor(idx) then argerr(1, "embedding", "Tensor of indices", idx) end
  if weight.ndim ~= 2 then raise(("embedding: weight must be 2-D, got %s"):format(shape_str(weight)), 2) end
  local s = T.size(idx)
  s[#s + 1] = T.size(weight, 2)
  return T.view(T.index_select(weight, 1, T.reshape(idx, -1)), s)
end

-- one_hot(idx, n): 1-based class labels -> int64 tensor idx.shape .. {n}
--- tide.one_hot(labels[, n]) -> Tensor
--- int64 one-hot rows of n classes for 1-based integer labels: labels.shape .. {n}.
function M.one_hot(idx, n)
  if not is_tensor(idx) then argerr(1, "one_hot", "Tensor of indices", idx) end
  local st = idx.scalar_type
  if st == 0 or st >= 4 then
    raise(("one_hot: labels must be an integer tensor, got %s (make one with tide.long{...} or x:long())"):format(dtype_of[st].name), 2)
  end
  if n ~= nil then args.int(n, 2, "one_hot", "integer number of classes") end
  if n == nil or n < 0 then n = T.item(T.max(idx)) end
  if idx:numel() > 0 then
    local lo, hi = T.item(T.min(idx)), T.item(T.max(idx))
    if lo < 1 or hi > n then
      raise(("one_hot: label %d is out of range for %d classes (labels are 1-based)"):format(lo < 1 and lo or hi, n), 2)
    end
  end
  local classes = wrap(C.td_arange(1, n + 1, 1, st), 2)
  if idx.device_type ~= 0 then classes = wrap(C.td_to_device(classes.p, idx.device_type, -1), 2) end
  return T.long(T.eq(T.unsqueeze(idx, -1), classes))
end

-- -- Sliding windows (im2col / col2im, as torch.nn.functional.unfold / fold) ----------------

local function pair(v, what, fname, min)
  if type(v) == "number" then v = { v, v } end
  if type(v) ~= "table" or #v ~= 2 or type(v[1]) ~= "number" or type(v[2]) ~= "number" then
    raise(("%s: %s must be a number or a pair of numbers, got %s"):format(fname, what, tostring(v)))
  end
  if v[1] < min or v[2] < min then raise(("%s: %s must be >= %d, got {%d, %d}"):format(fname, what, min, v[1], v[2])) end
  return v
end

local function window_attrs(fname, kernel, opts, argn)
  opts = args.opts(fname, opts, "stride padding dilation", argn)
  local k = pair(kernel, "kernel_size", fname, 1)
  local st = pair(opts.stride or 1, "stride", fname, 1)
  local pd = pair(opts.padding or 0, "padding", fname, 0)
  local dl = pair(opts.dilation or 1, "dilation", fname, 1)
  local at = attrs()
  at.i[0], at.i[1], at.i[2], at.i[3] = k[1], k[2], st[1], st[2]
  at.ndims = 6
  at.dims[0], at.dims[1], at.dims[2], at.dims[3] = pd[1], pd[2], dl[1], dl[2]
  return at
end

-- im2col(x, kernel_size, {stride=1, padding=0, dilation=1}): x (N, C, H, W) ->
-- (N, C*kh*kw, L), column l holding the window at output position l (row-major)
--- tide.im2col(x, kernel_size[, {stride, padding, dilation}]) -> Tensor
--- Sliding windows of x (N, C, H, W) as columns (N, C*kh*kw, L) (PyTorch's F.unfold).
function M.im2col(x, kernel, opts)
  targ(x, 1, "im2col")
  return op1(OP.unfold, x, window_attrs("im2col", kernel, opts, 3))
end

-- col2im(cols, output_size, kernel_size, opts): the adjoint, summing overlapping windows
--- tide.col2im(cols, output_size, kernel_size[, opts]) -> Tensor
--- The adjoint of im2col: columns summed back into (N, C, H, W) (PyTorch's F.fold).
function M.col2im(cols, output_size, kernel, opts)
  targ(cols, 1, "col2im")
  local o = pair(output_size, "output_size", "col2im", 1)
  local at = window_attrs("col2im", kernel, opts, 4)
  at.dims[4], at.dims[5] = o[1], o[2]
  return op1(OP.fold, cols, at)
end

-- -- Operators ----------------------------------------------------------------------------------

local mt = {}
mt.__add = binop(OP.add, "add")
mt.__sub = binop(OP.sub, "sub")
mt.__mul = binop(OP.mul, "mul")
mt.__div = binop(OP.div, "div")
mt.__pow = binop(OP.pow, "pow")
mt.__unm = unop(OP.neg, "neg")
mt.__len = function(x) return x.ndim > 0 and tonumber(x.sizes[0]) or 0 end
-- a < b and a <= b on one-element tensors compare their values (Lua wants a
-- boolean here, as Python's bool(tensor)); elementwise comparisons are x:lt(y).
-- Inside tide.compile this reads a traced value: the error says how to branch.
local function cmp_value(x, op)
  if type(x) == "number" then return x end
  if not is_tensor(x) then raise(("attempt to compare a tensor with a %s"):format(type(x))) end
  if x.nelem ~= 1 then
    raise(("%s: a tensor with %d elements has no single truth value; compare elementwise with x:%s(y)")
      :format(op == "<" and "lt" or "le", tonumber(x.nelem), op == "<" and "lt" or "le"))
  end
  local v = T.item(x)
  if type(v) == "boolean" then v = v and 1 or 0 end     -- a bool tensor compares as 0/1
  return v
end
mt.__lt = function(a, b) return cmp_value(a, "<") < cmp_value(b, "<") end
mt.__le = function(a, b) return cmp_value(a, "<=") <= cmp_value(b, "<=") end
local function freed(k) raise(("Tensor used after free() (looking up '%s')"):format(tostring(k))) end
-- x.p of a userdata handle comes here (a cdata handle has the field): the
-- payload is the pointer, read through the td_handle layout (core.lua)
local HP, cast = ffi.typeof("td_handle *"), ffi.cast
mt.__index = function(x, k)
  local p = cast(HP, x).p
  if k == "p" then return p end
  if p == nil and k ~= "free" then freed(k) end   -- a freed handle holds NULL; C must never see it
  local m = T[k]
  if m ~= nil then return m end
  local g = getters[k]
  if g then return g(x) end
  if type(k) == "number" or type(k) == "table" or is_tensor(k) then return M.index_get(x, k) end
  raise(("Tensor has no field or method '%s'"):format(tostring(k)), 2)
end
mt.__newindex = function(x, k, v)
  if k == "p" then cast(HP, x).p = v; return end         -- x:free() on a userdata handle
  if cast(HP, x).p == nil then freed(k) end
  local s = setters[k]
  if s then return s(x, v) end
  if type(k) == "number" or type(k) == "table" or is_tensor(k) then return M.index_set(x, k, v) end
  raise(("Tensor field '%s' cannot be assigned"):format(tostring(k)), 2)
end
mt.__tostring = function(x) return M.tostring(x) end
M.mt = mt
M.getters = getters       -- (the REPL's completion lists them)
M.setters = setters       -- (the API fuzzer walks the fields: x.shape, x.grad = g)

-- Release the tensor's memory now instead of at the next collection; x is unusable after.
--- Tensor:free()
--- Releases the memory now; x is unusable after (never required: the GC frees it).
function T.free(x)
  if not is_tensor(x) then argerr(1, "free", "Tensor", x) end   -- freeing twice is fine
  local p = x.p
  x.p = nil
  if p ~= nil then C.td_release(p) end
end

return M
