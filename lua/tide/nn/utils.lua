--[[
tide.nn.utils -- gradient utilities used between backward() and optimizer:step():
clip_grad_norm_ (scale all gradients so their joint norm is at most max_norm) and
clip_grad_value_ (clamp each gradient element), as in torch.nn.utils 1.13.
--]]
local core = require "tide.core"
local autograd = require "tide.autograd"
local is_tensor, raise = core.is_tensor, core.raise

local M = {}

local function argerr(n, fname, msg) raise(("bad argument #%d to '%s' (%s)"):format(n, fname, msg)) end

-- the gradients of params (a Tensor or a list of Tensors) that have one
local function grads(fname, params)
  if is_tensor(params) then params = { params } end
  if type(params) ~= "table" then argerr(1, fname, "Tensor or list of Tensors expected, got " .. type(params)) end
  local r = {}
  for i, p in ipairs(params) do
    if not is_tensor(p) then argerr(1, fname, ("parameter %d is a %s, expected a Tensor"):format(i, type(p))) end
    local g = p.grad
    if g ~= nil then r[#r + 1] = g end
  end
  return r
end

-- clip_grad_norm_(params, max_norm, norm_type=2, error_if_nonfinite=false) -> total norm (a number)
-- The norm is over all gradients together, as if concatenated; every gradient is then
-- multiplied by min(1, max_norm / (total_norm + 1e-6)).
--- nn.utils.clip_grad_norm_(params, max_norm[, norm_type = 2[, error_if_nonfinite = false]]) -> number
--- Scales all gradients so their joint norm is at most max_norm; returns the norm before.
function M.clip_grad_norm_(params, max_norm, norm_type, error_if_nonfinite)
  local fname = "clip_grad_norm_"
  local gs = grads(fname, params)
  if type(max_norm) ~= "number" then argerr(2, fname, "number expected, got " .. type(max_norm)) end
  if norm_type == nil then norm_type = 2 elseif norm_type == "inf" then norm_type = math.huge end
  if type(norm_type) ~= "number" then argerr(3, fname, "number or 'inf' expected, got " .. type(norm_type)) end
  if #gs == 0 then return 0 end
  local tide = require "tide"
  return autograd.no_grad(function()
    local total
    if norm_type == math.huge then
      local ms = {}
      for i, g in ipairs(gs) do ms[i] = g:abs():max() end
      total = #ms == 1 and ms[1] or tide.stack(ms):max()
    else
      local ns = {}
      for i, g in ipairs(gs) do ns[i] = g:norm(norm_type) end
      total = tide.stack(ns):norm(norm_type)
    end
    local coef = (max_norm / (total + 1e-6)):clamp(nil, 1.0)
    -- compiled (tide.compile): no values yet; scale by the tensor, skip the check
    if core.tracing() then
      for _, g in ipairs(gs) do g:mul_(coef) end
      return total
    end
    local t = total:item()
    if error_if_nonfinite and (t ~= t or t == math.huge or t == -math.huge) then
      raise(("%s: the total norm of order %s for gradients is non-finite (%s), so it cannot be clipped; "
        .. "pass error_if_nonfinite=false to scale by it anyway"):format(fname, tostring(norm_type), tostring(t)))
    end
    coef = coef:item()
    for _, g in ipairs(gs) do g:mul_(coef) end
    return t
  end)
end

-- clip_grad_value_(params, clip_value): clamp every gradient element into [-clip_value, clip_value]
--- nn.utils.clip_grad_value_(params, clip_value)
--- Clamps every gradient element into [-clip_value, clip_value].
function M.clip_grad_value_(params, clip_value)
  local fname = "clip_grad_value_"
  local gs = grads(fname, params)
  if type(clip_value) ~= "number" then argerr(2, fname, "number expected, got " .. type(clip_value)) end
  autograd.no_grad(function()
    for _, g in ipairs(gs) do g:clamp_(-clip_value, clip_value) end
  end)
end

return M
