--[[
tide.nn.layer_util -- what the layer files share (nn/init.lua, nn/convt.lua,
nn/norm.lua, nn/rnn.lua, nn/transformer.lua): a parameter tensor of the
options' dtype and device, and the positive-integer argument check.
--]]
local tide = require "tide"
local core = require "tide.core"
local args = require "tide.args"

local U = {}

-- A parameter of the given shape, dtype and device (opts.dtype, opts.device),
-- floating point; fill(t) initializes it in place before it requires grad
-- (without fill it is left for the layer's reset_parameters).
function U.param(shape, opts, fill)
  local t = tide.empty(shape, { dtype = opts.dtype, device = opts.device })
  if not t:is_floating_point() then core.raise(("parameters must be floating point, got dtype %s"):format(t.dtype.name)) end
  if fill then t = fill(t) end
  return t:requires_grad_()
end

-- v, argument n of fname, as a positive integer
function U.posint(fname, v, n, what)
  if not args.is_int(v) or v < 1 then args.argerr(n, fname, "positive integer " .. what, v) end
  return v
end

return U
