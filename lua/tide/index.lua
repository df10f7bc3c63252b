--[[
tide.index -- Lua indexing of tensors, Torch7 style, 1-based:
  x[i]               select along dim 1 (a view; x[i]:item() for a number)
  x[{i, {a, b}, {}}] per dim: an index selects, {a, b} is an inclusive range
                     (negative from the end), {a, b, step}, {} or ":" keeps the dim
  x[idx]             idx an integer tensor: index_select along dim 1 (a copy)
  x[mask]            mask a bool tensor of x's shape: the selected elements, 1-D (a copy)
Assignment through any of these writes into x (x[mask] = v is masked_fill_).
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local T = tensor.Tensor
local is_tensor = core.is_tensor

local M = {}

-- Apply a Torch7-style key to x; returns a view (or a copy for tensor keys).
local function view_of(x, key, level)
  if type(key) == "number" then
    if x.ndim == 0 then error("index: cannot index a 0-dim tensor", level) end
    return T.select(x, 1, key)
  end
  if type(key) ~= "table" then error(("index: invalid key of type %s"):format(type(key)), level) end
  if #key > x.ndim then
    error(("index: too many indices (%d) for a tensor with %d dims"):format(#key, x.ndim), level)
  end
  local v, d = x, 1
  for i = 1, #key do
    local k = key[i]
    if type(k) == "number" then
      local n = T.size(v, d)
      if k == 0 or k > n or k < -n then
        error(("index: index %d is out of range for dim %d with size %d"):format(k, i, n), level)
      end
      v = T.select(v, d, k)           -- the dim disappears; d stays
    elseif k == ":" or (type(k) == "table" and #k == 0) then
      d = d + 1
    elseif type(k) == "table" then
      local n = T.size(v, d)
      local a, b, step = k[1], k[2] or k[1], k[3] or 1
      if a < 0 then a = n + a + 1 end
      if b < 0 then b = n + b + 1 end
      if a < 1 or a > n + 1 or b > n or b < a - 1 or step < 1 then
        error(("index: range {%s, %s} is out of range for dim %d with size %d"):format(
          tostring(k[1]), tostring(k[2]), i, n), level)
      end
      v = T.slice(v, d, a, b, step)
      d = d + 1
    else
      error(("index: invalid index of type %s for dim %d"):format(type(k), i), level)
    end
  end
  return v
end

local function mask_select(x, mask, level)
  if mask.ndim ~= x.ndim or tensor.shape_str(mask) ~= tensor.shape_str(x) then
    error(("index: mask of shape %s does not match tensor of shape %s"):format(
      tensor.shape_str(mask), tensor.shape_str(x)), level)
  end
  -- positions of true entries, then a gather on the flattened tensor
  local m = mask:reshape(-1):totable()
  local pos = {}
  for i = 1, #m do if m[i] then pos[#pos + 1] = i end end
  local tide = require "tide"
  if #pos == 0 then return tide.empty(0, { dtype = x.dtype }) end
  return T.index_select(x:reshape(-1), 1, tide.tensor(pos, { dtype = "int64" }))
end

function M.get(x, key)
  if is_tensor(key) then
    if key.scalar_type == 0 then return mask_select(x, key, 3) end
    return T.index_select(x, 1, key)
  end
  return view_of(x, key, 3)
end

function M.set(x, key, value)
  if is_tensor(key) and key.scalar_type == 0 then
    if is_tensor(value) and value.ndim > 0 and value:numel() ~= 1 then
      error("index: assignment through a mask takes a number or a 1-element tensor", 2)
    end
    if is_tensor(value) then value = value:item() end
    T.masked_fill_(x, key, value)
    return
  end
  if is_tensor(key) then
    error("index: assignment through an index tensor is not supported; use index_add_ or scatter_add_", 2)
  end
  local v = view_of(x, key, 3)
  if type(value) == "number" or type(value) == "boolean" then T.fill_(v, value)
  elseif is_tensor(value) then T.copy_(v, value)
  else error(("index: cannot assign a value of type %s"):format(type(value)), 2) end
end

return M
