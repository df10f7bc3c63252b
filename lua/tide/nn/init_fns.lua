--[[
tide.nn.init -- PyTorch's parameter initializers (torch.nn.init): each fills
its tensor in place under no_grad and returns it. Fans follow PyTorch:
fan_in = size(2) * receptive field, fan_out = size(1) * receptive field.
--]]
local tide = require "tide"
local core = require "tide.core"
local tensor = require "tide.tensor"
local raise, is_tensor, argerr = core.raise, tide.is_tensor, tensor.argerr

local I = {}

local function targ(t, fname)
  if not is_tensor(t) then argerr(1, fname, "Tensor", t) end
  if not t:is_floating_point() then raise(("%s: tensor must be floating point, got %s"):format(fname, t.dtype.name)) end
  return t
end

-- fill t from a fresh tensor made by make(t), without recording the copy
local function fill_from(t, make)
  tide.no_grad(function() t:copy_(make(t)) end)
  return t
end

-- fan_in, fan_out of a weight (out, in, *kernel)
function I._calculate_fan_in_and_fan_out(t)
  if t:dim() < 2 then
    raise(("init: fan in and fan out can not be computed for a tensor with fewer than 2 dims (shape %s)"):format(
      tensor.shape_str(t)))
  end
  local receptive = 1
  for d = 3, t:dim() do receptive = receptive * t:size(d) end
  return t:size(2) * receptive, t:size(1) * receptive
end

-- calculate_gain(nonlinearity, param): the recommended gain for an activation
--- nn.init.calculate_gain(nonlinearity[, param]) -> number
--- The recommended gain for an activation ("relu", "tanh", "leaky_relu", ...).
function I.calculate_gain(nonlinearity, param)
  local linear = { linear = true, conv1d = true, conv2d = true, conv3d = true, conv_transpose1d = true,
    conv_transpose2d = true, conv_transpose3d = true, sigmoid = true }
  if linear[nonlinearity] then return 1 end
  if nonlinearity == "tanh" then return 5 / 3 end
  if nonlinearity == "relu" then return math.sqrt(2) end
  if nonlinearity == "leaky_relu" then
    local slope = param == nil and 0.01 or param
    if type(slope) ~= "number" then raise(("calculate_gain: negative_slope %s is not a valid number"):format(tostring(slope))) end
    return math.sqrt(2 / (1 + slope * slope))
  end
  if nonlinearity == "selu" then return 3 / 4 end
  raise(("calculate_gain: unsupported nonlinearity '%s'"):format(tostring(nonlinearity)))
end

-- an optional number argument (its default when nil)
local function num(v, default, n, fname)
  if v == nil then return default end
  if type(v) ~= "number" then argerr(n, fname, "number", v) end
  return v
end

-- uniform_(t, a=0, b=1): values in [a, b)
--- nn.init.uniform_(t[, a = 0[, b = 1]]) -> t
--- Fills t with values uniform in [a, b).
function I.uniform_(t, a, b)
  targ(t, "uniform_")
  a, b = num(a, 0, 2, "uniform_"), num(b, 1, 3, "uniform_")
  return fill_from(t, function(x) return tide.rand_like(x) * (b - a) + a end)
end

-- normal_(t, mean=0, std=1)
--- nn.init.normal_(t[, mean = 0[, std = 1]]) -> t
--- Fills t with normal values.
function I.normal_(t, mean, std)
  targ(t, "normal_")
  mean, std = num(mean, 0, 2, "normal_"), num(std, 1, 3, "normal_")
  return fill_from(t, function(x) return tide.randn_like(x) * std + mean end)
end

--- nn.init.constant_(t, val) -> t
--- Fills t with val.
--- nn.init.zeros_(t) -> t
--- Fills t with 0.
--- nn.init.ones_(t) -> t
--- Fills t with 1.
function I.constant_(t, val)
  targ(t, "constant_")
  if type(val) ~= "number" then argerr(2, "constant_", "number", val) end
  tide.no_grad(function() t:fill_(val) end)
  return t
end
function I.zeros_(t) return I.constant_(t, 0) end
function I.ones_(t) return I.constant_(t, 1) end

-- xavier_uniform_(t, gain=1): U(-a, a), a = gain * sqrt(6 / (fan_in + fan_out))
--- nn.init.xavier_uniform_(t[, gain = 1]) -> t
--- U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)).
function I.xavier_uniform_(t, gain)
  targ(t, "xavier_uniform_")
  gain = num(gain, 1, 2, "xavier_uniform_")
  local fi, fo = I._calculate_fan_in_and_fan_out(t)
  local a = gain * math.sqrt(6 / (fi + fo))
  return I.uniform_(t, -a, a)
end

-- xavier_normal_(t, gain=1): N(0, std^2), std = gain * sqrt(2 / (fan_in + fan_out))
--- nn.init.xavier_normal_(t[, gain = 1]) -> t
--- N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)).
function I.xavier_normal_(t, gain)
  targ(t, "xavier_normal_")
  gain = num(gain, 1, 2, "xavier_normal_")
  local fi, fo = I._calculate_fan_in_and_fan_out(t)
  return I.normal_(t, 0, gain * math.sqrt(2 / (fi + fo)))
end

-- kaiming_*_(t, a=0, mode='fan_in', nonlinearity='leaky_relu'): std = gain / sqrt(fan)
local function kaiming_std(fname, t, a, mode, nonlinearity)
  targ(t, fname)
  mode = mode or "fan_in"
  if mode ~= "fan_in" and mode ~= "fan_out" then
    raise(("%s: mode must be 'fan_in' or 'fan_out', got '%s'"):format(fname, tostring(mode)))
  end
  local fi, fo = I._calculate_fan_in_and_fan_out(t)
  local fan = mode == "fan_in" and fi or fo
  if fan == 0 then raise(("%s: cannot initialize a tensor with zero %s (shape %s)"):format(fname, mode, tensor.shape_str(t))) end
  return I.calculate_gain(nonlinearity or "leaky_relu", a or 0) / math.sqrt(fan)
end
-- kaiming_uniform_: U(-bound, bound), bound = sqrt(3) * std
--- nn.init.kaiming_uniform_(t[, a = 0[, mode = "fan_in"[, nonlinearity = "leaky_relu"]]]) -> t
--- U(-b, b) with b = sqrt(3) * gain / sqrt(fan).
--- nn.init.kaiming_normal_(t[, a = 0[, mode = "fan_in"[, nonlinearity = "leaky_relu"]]]) -> t
--- N(0, std^2) with std = gain / sqrt(fan).
function I.kaiming_uniform_(t, a, mode, nonlinearity)
  if type(a) == "table" then a, mode, nonlinearity = a.a, a.mode, a.nonlinearity end
  local bound = math.sqrt(3) * kaiming_std("kaiming_uniform_", t, a, mode, nonlinearity)
  return I.uniform_(t, -bound, bound)
end
function I.kaiming_normal_(t, a, mode, nonlinearity)
  if type(a) == "table" then a, mode, nonlinearity = a.a, a.mode, a.nonlinearity end
  return I.normal_(t, 0, kaiming_std("kaiming_normal_", t, a, mode, nonlinearity))
end

return I
