--[[
tide.nn.loss_util -- the argument helpers of the loss functions (tide.nn.losses,
tide.nn.losses_extra): the reduction option, its application, number options
and the float tensor check, each raising at the user's line with the loss's name.
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local is_tensor, raise, argerr = core.is_tensor, core.raise, tensor.argerr

local U = {}

function U.quoted(v) return type(v) == "string" and ("'" .. v .. "'") or tostring(v) end

function U.reduction_of(fname, opts, batchmean)
  local r = opts.reduction
  if r == nil then return "mean" end
  if r == "none" or r == "mean" or r == "sum" or (batchmean and r == "batchmean") then return r end
  raise(("%s: reduction must be 'none', %s'mean' or 'sum', got %s"):format(fname,
    batchmean and "'batchmean', " or "", U.quoted(r)))
end

function U.reduce(loss, reduction)
  if reduction == "none" then return loss end
  if reduction == "sum" then return loss:sum() end
  return loss:mean()
end

-- a number option: default when nil, else a number (not NaN) that ok(v) accepts
function U.number_option(fname, name, v, default, ok, what)
  if v == nil then return default end
  if type(v) ~= "number" or v ~= v or not ok(v) then
    raise(("%s: %s must be %s, got %s"):format(fname, name, what, U.quoted(v)))
  end
  return v
end

function U.float_tensor(fname, x, argn, what)
  if not is_tensor(x) then argerr(argn, fname, "Tensor", x) end
  if not x:is_floating_point() then
    raise(("%s: %s must be a floating-point tensor, got %s"):format(fname, what, x.dtype.name))
  end
  return x
end

return U
