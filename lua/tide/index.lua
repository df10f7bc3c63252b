--[[
tide.index -- Lua indexing of tensors, Torch7 style, 1-based (negative from the end):
  x[i]                 select along dim 1: a view with one dim less (x[i]:item() for a number)
  x[{i, {a, b}, {}}]   one key per leading dim: an index selects (the dim goes away);
                       {a, b} is an inclusive range, {a, b, step} a strided one, {a} the
                       range a..a (the dim stays); {} or ":" keeps the whole dim
  x[idx]               idx an integer tensor: index_select along dim 1 (a copy)
  x[mask]              mask a bool tensor of x's shape: the selected elements, 1-D (a copy)
Assignment through any key but an index tensor writes into x: x[key] = number
fills, x[key] = tensor copies with broadcasting; x[mask] = v is masked_fill_.
Called from the Tensor metatype's __index/__newindex (tensor.lua).
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local ffi, C = core.ffi, core.C
local T = tensor.Tensor
local is_tensor, raise = core.is_tensor, core.raise

local M = {}

local function is_int(v)
  return type(v) == "number" and v == math.floor(v) and v ~= math.huge and v ~= -math.huge
end

local function keystr(k)
  if type(k) ~= "table" then return tostring(k) end
  local p = {}
  for i = 1, #k do p[i] = tostring(k[i]) end
  return "{" .. table.concat(p, ", ") .. "}"
end

-- Check a 1-based (or negative) index into a dim of size n; 0-based result.
local function index0(k, keypos, n)
  if not is_int(k) then raise(("index: index %s for dim %d is not an integer"):format(tostring(k), keypos)) end
  if k == 0 then raise(("index: index 0 for dim %d is invalid (indices are 1-based; -1 is the last)"):format(keypos)) end
  if k > n or k < -n then
    raise(("index: index %d is out of range for dim %d with size %d"):format(k, keypos, n))
  end
  return k > 0 and k - 1 or n + k
end

-- Apply a Torch7-style key (number or table) to x; returns a view.
local function view_of(x, key)
  local nd = x.ndim
  if type(key) == "number" then
    if nd == 0 then raise("index: cannot index a 0-dim tensor (use x:item())") end
    local i = index0(key, 1, T.size(x, 1))
    return T.select(x, 1, i + 1)
  end
  if #key > nd then
    raise(("index: too many indices (%d) for a tensor with %d dims"):format(#key, nd))
  end
  for k in pairs(key) do
    if not is_int(k) or k < 1 or k > #key then
      raise(("index: key %s is not a list of per-dim indices"):format(tostring(k)))
    end
  end
  local v, d = x, 1                   -- d: the dim of v that key[i] applies to
  for i = 1, #key do
    local k = key[i]
    if type(k) == "number" then
      local j = index0(k, i, T.size(v, d))
      v = T.select(v, d, j + 1)       -- the dim disappears; d stays
    elseif k == ":" or (type(k) == "table" and next(k) == nil) then
      d = d + 1
    elseif type(k) == "table" and #k <= 3 and type(k[1]) == "number" then
      local n = T.size(v, d)
      local a, b, step = k[1], k[2] or k[1], k[3] or 1
      if not (is_int(a) and is_int(b) and is_int(step)) then
        raise(("index: range %s for dim %d must hold integers"):format(keystr(k), i))
      end
      if step < 1 then raise(("index: range %s for dim %d has step %d; steps must be positive"):format(keystr(k), i, step)) end
      local a1 = a < 0 and n + a + 1 or a
      local b1 = b < 0 and n + b + 1 or b
      if a == 0 or b == 0 or a1 < 1 or a1 > n + 1 or b1 > n or b1 < a1 - 1 then
        raise(("index: range %s is out of range for dim %d with size %d"):format(keystr(k), i, n))
      end
      v = T.slice(v, d, a1, b1, step)
      d = d + 1
    else
      raise(("index: invalid key %s of type %s for dim %d"):format(keystr(k), tensor.typename(k), i))
    end
  end
  return v
end

local function same_shape(a, b)
  if a.ndim ~= b.ndim then return false end
  for i = 0, a.ndim - 1 do if a.sizes[i] ~= b.sizes[i] then return false end end
  return true
end

-- 1-based positions of the true entries of a bool mask, as an int64 tensor
local function mask_positions(x, mask)
  if not same_shape(mask, x) then
    raise(("index: mask of shape %s does not match tensor of shape %s"):format(
      tensor.shape_str(mask), tensor.shape_str(x)))
  end
  local buf, n = tensor.read_all(mask)
  local cnt = 0
  for i = 0, n - 1 do if buf[i] ~= 0 then cnt = cnt + 1 end end
  local pos, j = ffi.new("int64_t[?]", math.max(cnt, 1)), 0
  for i = 0, n - 1 do if buf[i] ~= 0 then pos[j] = i + 1; j = j + 1 end end
  local t = core.wrap(C.td_from_buffer(1, ffi.new("int64_t[1]", cnt), core.dtypes.int64.id, pos))
  if x.device_type ~= 0 then t = core.wrap(C.td_to_device(t.p, x.device_type, -1)) end   -- where x is
  return t, cnt
end

function M.get(x, key)
  if is_tensor(key) then
    if key.scalar_type == 0 then
      local pos, cnt = mask_positions(x, key)
      if cnt == 0 then
        local r = T.reshape(x, -1)
        return T.narrow(r, 1, 1, 0)
      end
      return T.index_select(T.reshape(x, -1), 1, pos)
    end
    if key.scalar_type >= 4 then
      raise(("index: an index tensor must be integer or bool, got %s (make one with tide.long{...} or i:long())")
      :format(key.dtype.name))
    end
    if x.ndim == 0 then raise("index: cannot index a 0-dim tensor (use x:item())") end
    return T.index_select(x, 1, key)
  end
  if type(key) ~= "number" and type(key) ~= "table" then
    raise(("index: invalid key of type %s"):format(tensor.typename(key)))
  end
  return view_of(x, key)
end

function M.set(x, key, value)
  if type(value) ~= "number" and type(value) ~= "boolean" and not is_tensor(value) then
    raise(("index: cannot assign a value of type %s to a tensor element"):format(tensor.typename(value)))
  end
  if is_tensor(key) then
    if key.scalar_type ~= 0 then
      raise("index: assignment through an index tensor is not supported; use index_add_ or scatter_add_")
    end
    if not same_shape(key, x) then
      raise(("index: mask of shape %s does not match tensor of shape %s"):format(
        tensor.shape_str(key), tensor.shape_str(x)))
    end
    if is_tensor(value) then
      if value:numel() ~= 1 then
        raise(("index: assignment through a mask takes a number or a 1-element tensor, got shape %s"):format(
          tensor.shape_str(value)))
      end
      value = value:item()
    end
    T.masked_fill_(x, key, value)
    return
  end
  if type(key) ~= "number" and type(key) ~= "table" then
    raise(("index: invalid key of type %s"):format(tensor.typename(key)))
  end
  local v = view_of(x, key)
  if is_tensor(value) then T.copy_(v, value) else T.fill_(v, value) end
end

return M
