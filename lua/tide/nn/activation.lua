--[[
tide.nn.activation -- activation, resampling and dropout layers over their
functional forms (tide.ops_pointwise's F.elu, F.softplus, ...; F.interpolate,
F.pixel_shuffle): nn.PReLU (and F.prelu), ELU, SELU, CELU, Softplus, Mish,
Hardswish, Hardsigmoid, Hardtanh, Softmin, LogSigmoid; nn.Upsample,
PixelShuffle, PixelUnshuffle; nn.Dropout1d, Dropout2d, AlphaDropout (and
F.dropout1d, F.dropout2d, F.alpha_dropout). Names, options and defaults as
PyTorch's; every one is a composite of table ops.
--]]
local tide = require "tide"
local core = require "tide.core"
local args = require "tide.args"
local raise = core.raise
local nn = require "tide.nn"        -- the module being built: init.lua requires this file at its end
local F, init = nn.functional, nn.init
local pyfloat = nn._pyfloat

local shape = require("tide.tensor").shape_str   -- "[2,3]"
local function pyval(v)
  if type(v) == "boolean" then return v and "True" or "False" end
  if v == nil then return "None" end
  if type(v) == "number" then return v == math.floor(v) and ("%d"):format(v) or pyfloat(v) end
  if type(v) == "table" then
    local s = {}
    for i, e in ipairs(v) do s[i] = pyval(e) end
    return "(" .. table.concat(s, ", ") .. (#s == 1 and ",)" or ")")
  end
  return "'" .. tostring(v) .. "'"
end

-- -- PReLU -------------------------------------------------------------------------------------

--- F.prelu(x, weight) -> Tensor
--- x where x >= 0, weight * x elsewhere; weight has 1 entry or one per channel (dim 2 of x, dim 1 of a 1-D x).
function F.prelu(x, w)
  args.tensor(x, 1, "prelu"); args.tensor(w, 2, "prelu")
  local n = tonumber(w.nelem)
  if w:dim() > 1 then raise(("prelu: weight must be 1-D, got %s"):format(shape(w))) end
  local wv = w
  if n ~= 1 then
    local cdim = x:dim() >= 2 and 2 or 1
    if x:dim() == 0 or x:size(cdim) ~= n then
      raise(("prelu: weight of %d entries needs an input with %d channels (dim %d), got %s"):format(n, n, cdim, shape(x)))
    end
    local s = {}
    for d = 1, x:dim() do s[d] = d == cdim and n or 1 end
    wv = w:view(s)
  else
    wv = w:reshape({})
  end
  return tide.where(x:ge(0), x, x * wv)
end

--- nn.PReLU([{num_parameters = 1, init = 0.25, dtype, device}])
--- x where x >= 0, a * x elsewhere, a learned (one or one per channel).
local PReLU = nn.Module:extend("PReLU")
nn.PReLU = PReLU
function PReLU:__init(opts)
  opts = args.opts("PReLU", opts, "num_parameters init dtype device", 1)
  local n = opts.num_parameters or 1
  if not args.is_int(n) or n < 1 then args.argerr(1, "PReLU", "positive integer num_parameters", n) end
  local a = opts.init or 0.25
  if type(a) ~= "number" then args.argerr(1, "PReLU", "number init", a) end
  self.num_parameters, self.init = n, a
  self.weight = tide.full({ n }, a, { dtype = opts.dtype, device = opts.device }):requires_grad_()
end
function PReLU:forward(x) return F.prelu(x, self.weight) end
function PReLU:extra_repr() return "num_parameters=" .. self.num_parameters end

-- -- Activations over an F function with an options table ----------------------------------------

-- name: class; fn: the function; keys: its options in PyTorch's order (constructor
-- arguments as an options table, e.g. nn.ELU({alpha = 2})); defaults for extra_repr
local function act(name, fn, keys, defaults)
  local cls = nn.Module:extend(name)
  nn[name] = cls
  function cls:__init(opts)
    opts = args.opts(name, opts, table.concat(keys, " "), 1)
    for _, k in ipairs(keys) do
      local v = opts[k]
      if v == nil then v = defaults[k] end
      if type(v) ~= "number" then args.argerr(1, name, "number " .. k, v) end
      self[k] = v
    end
  end
  function cls:forward(x)
    if #keys == 0 then return fn(x) end
    local o = {}
    for _, k in ipairs(keys) do o[k] = self[k] end
    return fn(x, o)
  end
  function cls:extra_repr()
    local s = {}
    for _, k in ipairs(keys) do s[#s + 1] = k .. "=" .. pyfloat(self[k]) end
    return table.concat(s, ", ")
  end
  return cls
end

--- nn.ELU([{alpha = 1}])
--- x where x > 0, alpha (e^x - 1) elsewhere.
act("ELU", F.elu, { "alpha" }, { alpha = 1 })
--- nn.CELU([{alpha = 1}])
--- max(0, x) + min(0, alpha (e^(x/alpha) - 1)).
act("CELU", F.celu, { "alpha" }, { alpha = 1 })
--- nn.SELU()
--- scale * elu(x, alpha) with the self-normalizing constants.
act("SELU", F.selu, {}, {})
--- nn.Softplus([{beta = 1, threshold = 20}])
--- log(1 + e^(beta x)) / beta (x where beta x > threshold).
act("Softplus", F.softplus, { "beta", "threshold" }, { beta = 1, threshold = 20 })
--- nn.Mish()
--- x * tanh(softplus(x)).
act("Mish", F.mish, {}, {})
--- nn.Hardswish()
--- x * clamp(x + 3, 0, 6) / 6.
act("Hardswish", F.hardswish, {}, {})
--- nn.Hardsigmoid()
--- clamp(x / 6 + 1/2, 0, 1).
act("Hardsigmoid", F.hardsigmoid, {}, {})
--- nn.Hardtanh([{min_val = -1, max_val = 1}])
--- x clamped to [min_val, max_val].
local Hardtanh = act("Hardtanh", F.hardtanh, { "min_val", "max_val" }, { min_val = -1, max_val = 1 })
local ht_init = Hardtanh.__init
function Hardtanh:__init(opts)
  ht_init(self, opts)
  if self.max_val <= self.min_val then
    raise(("Hardtanh: max_val %s must be greater than min_val %s"):format(pyval(self.max_val), pyval(self.min_val)))
  end
end
--- nn.LogSigmoid()
--- log(sigmoid(x)).
act("LogSigmoid", F.logsigmoid, {}, {})

--- nn.Softmin(dim)
--- softmax(-x) along dim (1-based; -1 the last).
local Softmin = nn.Module:extend("Softmin")
nn.Softmin = Softmin
function Softmin:__init(dim)
  if not args.is_int(dim) or dim == 0 then
    raise(("Softmin: dim must be a non-zero integer (1-based; -1 is the last), got %s"):format(tostring(dim)))
  end
  self.dim = dim
end
function Softmin:forward(x) return F.softmin(x, self.dim) end
function Softmin:extra_repr() return ("dim=%d"):format(self.dim) end

-- -- Resampling --------------------------------------------------------------------------------

--- nn.Upsample([{size, scale_factor, mode = "nearest", align_corners}])
--- F.interpolate as a layer.
local Upsample = nn.Module:extend("Upsample")
nn.Upsample = Upsample
function Upsample:__init(opts)
  opts = args.opts("Upsample", opts, "size scale_factor mode align_corners recompute_scale_factor", 1)
  if (opts.size == nil) == (opts.scale_factor == nil) then raise("Upsample: give exactly one of size and scale_factor") end
  self.size, self.scale_factor = opts.size, opts.scale_factor
  self.mode, self.align_corners = opts.mode or "nearest", opts.align_corners
  self.recompute_scale_factor = opts.recompute_scale_factor
end
function Upsample:forward(x)
  return F.interpolate(x, { size = self.size, scale_factor = self.scale_factor, mode = self.mode,
    align_corners = self.align_corners, recompute_scale_factor = self.recompute_scale_factor })
end
function Upsample:extra_repr()
  if type(self.scale_factor) == "number" then
    return ("scale_factor=%s, mode=%s"):format(pyfloat(self.scale_factor), pyval(self.mode))
  elseif self.scale_factor ~= nil then
    return ("scale_factor=%s, mode=%s"):format(pyval(self.scale_factor), pyval(self.mode))
  end
  return ("size=%s, mode=%s"):format(pyval(self.size), pyval(self.mode))
end

for name, fn in pairs { PixelShuffle = F.pixel_shuffle, PixelUnshuffle = F.pixel_unshuffle } do
  local cls = nn.Module:extend(name)
  nn[name] = cls
  local key = name == "PixelShuffle" and "upscale_factor" or "downscale_factor"
  function cls:__init(r)
    if not args.is_int(r) or r < 1 then args.argerr(1, name, "positive integer " .. key, r) end
    self[key] = r
  end
  function cls:forward(x) return fn(x, self[key]) end
  function cls:extra_repr() return key .. "=" .. self[key] end
end
--- nn.PixelShuffle(upscale_factor)
--- (N, C r^2, H, W) -> (N, C, H r, W r).
--- nn.PixelUnshuffle(downscale_factor)
--- (N, C, H r, W r) -> (N, C r^2, H, W).

-- -- Dropout variants --------------------------------------------------------------------------

local function prob(fname, p)
  p = p == nil and 0.5 or p
  if type(p) ~= "number" or p < 0 or p > 1 then
    raise(("%s: probability has to be between 0 and 1, but got %s"):format(fname, tostring(p)))
  end
  return p
end

-- zero whole channels: the mask is (N, C, 1, ...) (or (C, 1, ...) unbatched)
local function feature_dropout(fname, x, p, training, batched_dim)
  args.tensor(x, 1, fname)
  p = prob(fname, p)
  if x:dim() ~= batched_dim and x:dim() ~= batched_dim - 1 then
    raise(("%s: expected a %d-D or %d-D input, got %s"):format(fname, batched_dim - 1, batched_dim, shape(x)))
  end
  if training == false or p == 0 then return x end
  if p == 1 then return x * 0 end
  local s = x:size()
  local lead = x:dim() == batched_dim and 2 or 1
  for d = lead + 1, #s do s[d] = 1 end
  local keep = tide.rand(s, { dtype = x.dtype, device = x.device }):lt(1 - p)
  return x * keep * (1 / (1 - p))
end

--- F.dropout1d(x[, p = 0.5[, training = true]]) -> Tensor
--- Zeroes whole channels of x (N, C, L) or (C, L) with probability p, scales the rest by 1/(1-p).
function F.dropout1d(x, p, training) return feature_dropout("dropout1d", x, p, training, 3) end
--- F.dropout2d(x[, p = 0.5[, training = true]]) -> Tensor
--- Zeroes whole channels of x (N, C, H, W) or (C, H, W) with probability p, scales the rest by 1/(1-p).
function F.dropout2d(x, p, training) return feature_dropout("dropout2d", x, p, training, 4) end

-- PyTorch's alpha dropout: dropped values become SELU's negative saturation -alpha',
-- then a x + b keeps zero mean and unit variance: a = ((1 - p)(1 + p alpha'^2))^-1/2
local ALPHA = 1.7580993408473766
--- F.alpha_dropout(x[, p = 0.5[, training = false]]) -> Tensor
--- Dropout for SELU networks: keeps mean 0 and variance 1 (the identity when not training).
function F.alpha_dropout(x, p, training)
  args.tensor(x, 1, "alpha_dropout")
  p = prob("alpha_dropout", p)
  if not training or p == 0 then return x end
  if p == 1 then return x * 0 end
  local a = 1 / math.sqrt((ALPHA * ALPHA * p + 1) * (1 - p))
  local keep = tide.rand_like(x):lt(1 - p):to(x.dtype)
  -- x * keep * a + (keep - 1) * alpha' a + alpha' a p
  return x * keep * a + (keep - 1) * (ALPHA * a) + ALPHA * a * p
end

local function dropout_class(name, fn)
  local cls = nn.Module:extend(name)
  nn[name] = cls
  function cls:__init(p)
    self.p = prob(name, p)
  end
  function cls:forward(x) return fn(x, self.p, self.training) end
  function cls:extra_repr() return "p=" .. pyfloat(self.p) end
end
--- nn.Dropout1d([p = 0.5])
--- Channel dropout over (N, C, L) in training.
dropout_class("Dropout1d", F.dropout1d)
--- nn.Dropout2d([p = 0.5])
--- Channel dropout over (N, C, H, W) in training.
dropout_class("Dropout2d", F.dropout2d)
--- nn.AlphaDropout([p = 0.5])
--- Alpha dropout (keeps SELU's self-normalization) in training.
dropout_class("AlphaDropout", F.alpha_dropout)

return F
