--[[
tide.nn.norm -- the normalization layers beside BatchNorm and LayerNorm:
F.group_norm / nn.GroupNorm, F.instance_norm / nn.InstanceNorm1d and
nn.InstanceNorm2d, F.local_response_norm / nn.LocalResponseNorm, as PyTorch
(names, defaults, parameter and buffer names).

All three are composites of table ops (means, biased variances, a square
root), so their gradients come from the ops' rules, they lower under
tide.compile and run on the OpenCL device.
  group_norm:      x (N, C, ...) in G groups of C/G channels; each (n, group) is
                   normalized over its channels and positions, then the
                   per-channel affine weight * y + bias.
  instance_norm:   each (n, c) normalized over its positions; running
                   statistics (when given) move toward the batch's mean of the
                   instance means and unbiased variances, as PyTorch's.
  local_response_norm: x / (k + alpha/size * sum of x^2 over the `size`
                   channels around c)^beta (zero beyond the edges).
--]]
local tide = require "tide"
local core = require "tide.core"
local args = require "tide.args"
local raise, is_tensor = core.raise, core.is_tensor
local nn = require "tide.nn"        -- the module being built: init.lua requires this file at its end
local F, init = nn.functional, nn.init
local pyfloat = nn._pyfloat

local shape = require("tide.tensor").shape_str   -- "[2,3]"
local pybool = nn._pybool

local function opt_tensor(v, n, fname)
  if v ~= nil and (not is_tensor(v) or v.p == nil) then args.argerr(n, fname, "Tensor or nil", v) end
  return v
end
local function number(fname, v, n, what)
  if type(v) ~= "number" then args.argerr(n, fname, "number " .. what, v) end
  return v
end
-- a per-channel tensor (weight, bias, running stats) of C entries, viewed (1, C, 1, ...)
local function per_channel(fname, what, t, C, nd)
  if t == nil then return nil end
  if t:dim() ~= 1 or t:size(1) ~= C then
    raise(("%s: %s must be 1-D of size %d (the channels), got %s"):format(fname, what, C, shape(t)))
  end
  local s = { 1, C }
  for _ = 3, nd do s[#s + 1] = 1 end
  return t:view(s)
end

--- F.group_norm(x, num_groups[, weight[, bias[, eps = 1e-5]]]) -> Tensor
--- Normalizes x (N, C, ...) over each group of C/num_groups channels and all positions, then weight * y + bias per channel.
function F.group_norm(x, G, w, b, eps)
  local fname = "group_norm"
  args.tensor(x, 1, fname)
  opt_tensor(w, 3, fname); opt_tensor(b, 4, fname)
  eps = number(fname, eps or 1e-5, 5, "eps")
  if x:dim() < 2 then raise(("%s: expected an input (N, C, ...), got %s"):format(fname, shape(x))) end
  if not args.is_int(G) or G < 1 then args.argerr(2, fname, "positive integer num_groups", G) end
  local s = x:size()
  local N, C = s[1], s[2]
  if C % G ~= 0 then raise(("%s: %d channels of input %s are not divisible by num_groups %d"):format(fname, C, shape(x), G)) end
  local xg = x:reshape(N, G, -1)
  local mean = xg:mean(3, true)
  local var = xg:var(3, { correction = 0, keepdim = true })
  local y = ((xg - mean) * (var + eps):rsqrt()):reshape(s)
  if w ~= nil then y = y * per_channel(fname, "weight", w, C, #s) end
  if b ~= nil then y = y + per_channel(fname, "bias", b, C, #s) end
  return y
end

--- F.instance_norm(x[, running_mean, running_var, weight, bias][, {use_input_stats = true, momentum = 0.1, eps = 1e-5}]) -> Tensor
--- Normalizes each (n, c) of x (N, C, ...) over its positions; with use_input_stats the running statistics (if given) are updated in place, else they normalize.
function F.instance_norm(x, rm, rv, w, b, opts)
  local fname = "instance_norm"
  opts = args.opts(fname, opts, "use_input_stats momentum eps", 6)
  args.tensor(x, 1, fname)
  local given = { rm, rv, w, b }
  for i = 1, 4 do opt_tensor(given[i], i + 1, fname) end
  if x:dim() < 3 then raise(("%s: expected an input (N, C, L...) with at least one spatial dim, got %s"):format(fname, shape(x))) end
  if (rm == nil) ~= (rv == nil) then raise(fname .. ": running_mean and running_var must be given together (or neither)") end
  local eps = number(fname, opts.eps or 1e-5, 6, "eps")
  local momentum = number(fname, opts.momentum or 0.1, 6, "momentum")
  local use_input = opts.use_input_stats ~= false
  local nd, C = x:dim(), x:size(2)
  local dims, count = {}, 1
  for d = 3, nd do dims[#dims + 1] = d; count = count * x:size(d) end
  local mean, var
  if use_input then
    if count < 2 then
      raise(("%s: expected more than 1 spatial element when training, got input %s"):format(fname, shape(x)))
    end
    mean = x:mean(dims, true)
    var = x:var(dims, { correction = 0, keepdim = true })
    if rm ~= nil then
      per_channel(fname, "running_mean", rm, C, 1); per_channel(fname, "running_var", rv, C, 1)
      tide.no_grad(function()
        local N = x:size(1)
        rm:mul_(1 - momentum):add_(mean:detach():reshape(N, C):mean(1) * momentum)
        rv:mul_(1 - momentum):add_(var:detach():reshape(N, C):mean(1) * (momentum * count / (count - 1)))
      end)
    end
  else
    if rm == nil then raise(fname .. ": use_input_stats=false needs running_mean and running_var") end
    mean, var = per_channel(fname, "running_mean", rm, C, nd), per_channel(fname, "running_var", rv, C, nd)
  end
  local y = (x - mean) * (var + eps):rsqrt()
  if w ~= nil then y = y * per_channel(fname, "weight", w, C, nd) end
  if b ~= nil then y = y + per_channel(fname, "bias", b, C, nd) end
  return y
end

--- F.local_response_norm(x, size[, {alpha = 1e-4, beta = 0.75, k = 1}]) -> Tensor
--- x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta, for x (N, C, ...) (zero padding at the channel edges, as PyTorch).
function F.local_response_norm(x, size, opts)
  local fname = "local_response_norm"
  opts = args.opts(fname, opts, "alpha beta k", 3)
  args.tensor(x, 1, fname)
  if x:dim() < 3 then raise(("%s: expected an input (N, C, ...) of 3 or more dims, got %s"):format(fname, shape(x))) end
  if not args.is_int(size) or size < 1 then args.argerr(2, fname, "positive integer size", size) end
  local alpha = number(fname, opts.alpha or 1e-4, 3, "alpha")
  local beta = number(fname, opts.beta or 0.75, 3, "beta")
  local k = number(fname, opts.k or 1, 3, "k")
  local C = x:size(2)
  local sq = x * x
  -- the window of channel c: c - floor(size/2) .. c + floor((size-1)/2), zeros beyond the
  -- edges (so at most C - 1 channels either side matter, however large size is)
  local before, after = math.min(math.floor(size / 2), C - 1), math.min(math.floor((size - 1) / 2), C - 1)
  local parts = {}
  if before > 0 then
    local s = x:size(); s[2] = before
    parts[#parts + 1] = tide.zeros(s, { dtype = x.dtype, device = x.device })
  end
  parts[#parts + 1] = sq
  if after > 0 then
    local s = x:size(); s[2] = after
    parts[#parts + 1] = tide.zeros(s, { dtype = x.dtype, device = x.device })
  end
  local padded = #parts > 1 and tide.cat(parts, 2) or sq
  local sum = padded:narrow(2, 1, C)
  for i = 2, before + after + 1 do sum = sum + padded:narrow(2, i, C) end
  return x / (sum * (alpha / size) + k):pow(beta)
end

-- -- The layers -------------------------------------------------------------------------------

local U = require "tide.nn.layer_util"
local posint = U.posint
local function param(n, opts, fill) return U.param({ n }, opts, fill) end

--- nn.GroupNorm(num_groups, num_channels[, {eps = 1e-5, affine = true, dtype, device}])
--- Group normalization of (N, C, ...): weight (ones) and bias (zeros) per channel when affine.
local GroupNorm = nn.Module:extend("GroupNorm")
nn.GroupNorm = GroupNorm
function GroupNorm:__init(G, C, opts)
  opts = args.opts("GroupNorm", opts, "eps affine dtype device", 3)
  self.num_groups = posint("GroupNorm", G, 1, "num_groups")
  self.num_channels = posint("GroupNorm", C, 2, "num_channels")
  if C % G ~= 0 then raise(("GroupNorm: num_channels %d must be divisible by num_groups %d"):format(C, G)) end
  self.eps, self.affine = number("GroupNorm", opts.eps or 1e-5, 3, "eps"), opts.affine ~= false
  if self.affine then
    self.weight = param(C, opts, init.ones_)
    self.bias = param(C, opts, init.zeros_)
  else
    self:register_parameter("weight", nil); self:register_parameter("bias", nil)
  end
end
function GroupNorm:forward(x)
  args.tensor(x, 1, "GroupNorm")
  if x:dim() < 2 or x:size(2) ~= self.num_channels then
    raise(("GroupNorm: expected an input (N, %d, ...), got %s"):format(self.num_channels, shape(x)))
  end
  return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
end
function GroupNorm:extra_repr()
  return ("%d, %d, eps=%s, affine=%s"):format(self.num_groups, self.num_channels, pyfloat(self.eps), pybool(self.affine))
end

-- InstanceNorm1d / InstanceNorm2d: an unbatched input (C, L...) is one image
local function instancenorm_class(name, sd)
  local IN = nn.Module:extend(name)
  nn[name] = IN
  function IN:__init(n, opts)
    opts = args.opts(name, opts, "eps momentum affine track_running_stats dtype device", 2)
    self.num_features = posint(name, n, 1, "num_features")
    self.eps = number(name, opts.eps or 1e-5, 2, "eps")
    self.momentum = number(name, opts.momentum or 0.1, 2, "momentum")
    self.affine, self.track_running_stats = opts.affine == true, opts.track_running_stats == true
    if self.affine then
      self.weight = param(n, opts, init.ones_)
      self.bias = param(n, opts, init.zeros_)
    else
      self:register_parameter("weight", nil); self:register_parameter("bias", nil)
    end
    if self.track_running_stats then
      local dt = { dtype = opts.dtype, device = opts.device }
      self:register_buffer("running_mean", tide.zeros(n, dt))
      self:register_buffer("running_var", tide.ones(n, dt))
      self:register_buffer("num_batches_tracked", tide.zeros({}, { dtype = "int64", device = opts.device }))
    end
  end
  function IN:forward(x)
    args.tensor(x, 1, name)
    local nd = x:dim()
    if nd ~= sd + 1 and nd ~= sd + 2 then
      raise(("%s: expected a %d-D or %d-D input, got %s"):format(name, sd + 1, sd + 2, shape(x)))
    end
    if nd == sd + 1 then return self:forward(x:unsqueeze(1)):squeeze(1) end
    if x:size(2) ~= self.num_features and self.affine then
      raise(("%s: expected input with %d channels, got %s"):format(name, self.num_features, shape(x)))
    end
    local use_input = self.training or not self.track_running_stats
    if self.training and self.track_running_stats then
      tide.no_grad(function() self.num_batches_tracked:add_(1) end)
    end
    return F.instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
      { use_input_stats = use_input, momentum = self.momentum, eps = self.eps })
  end
  function IN:extra_repr()
    return ("%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s"):format(self.num_features, pyfloat(self.eps),
      pyfloat(self.momentum), pybool(self.affine), pybool(self.track_running_stats))
  end
end
--- nn.InstanceNorm1d(num_features[, {eps = 1e-5, momentum = 0.1, affine = false, track_running_stats = false, dtype, device}])
--- Instance normalization of (N, C, L) or (C, L).
instancenorm_class("InstanceNorm1d", 1)
--- nn.InstanceNorm2d(num_features[, opts])
--- Instance normalization of (N, C, H, W) or (C, H, W); opts as InstanceNorm1d.
instancenorm_class("InstanceNorm2d", 2)

--- nn.LocalResponseNorm(size[, {alpha = 1e-4, beta = 0.75, k = 1}])
--- Local response normalization across channels (F.local_response_norm).
local LRN = nn.Module:extend("LocalResponseNorm")
nn.LocalResponseNorm = LRN
function LRN:__init(size, opts)
  opts = args.opts("LocalResponseNorm", opts, "alpha beta k", 2)
  self.size = posint("LocalResponseNorm", size, 1, "size")
  self.alpha, self.beta, self.k = opts.alpha or 1e-4, opts.beta or 0.75, opts.k or 1
end
function LRN:forward(x) return F.local_response_norm(x, self.size, { alpha = self.alpha, beta = self.beta, k = self.k }) end
function LRN:extra_repr()
  return ("%d, alpha=%s, beta=%s, k=%s"):format(self.size, pyfloat(self.alpha), pyfloat(self.beta), pyfloat(self.k))
end

return F
