--[[
tide.nn.layers -- the core layers: Linear, Bilinear, Embedding, LayerNorm,
RMSNorm, Dropout, Flatten, Identity, the activations (ReLU ... GELU),
Conv1d/Conv2d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, BatchNorm1d/2d, with
PyTorch's names, defaults and default initialization. nn/init.lua (Module and
the containers) loads this file at its end; its classes go into tide.nn.
--]]
local tide = require "tide"
local core = require "tide.core"
local tensor = require "tide.tensor"
local args = require "tide.args"
local nn = require "tide.nn"        -- the module being built: init.lua requires this file at its end
local F, init, Module = nn.functional, nn.init, nn.Module
local raise, is_tensor, argerr, shape_str = core.raise, tide.is_tensor, tensor.argerr, tensor.shape_str
local pyfloat, pybool, pyval, pytuple = nn._pyfloat, nn._pybool, nn._pyval, nn._pytuple

-- -- Layers --------------------------------------------------------------------------------------

-- a layer's options: `allowed` names them; layers with parameters also take dtype and device
local function opts_of(fname, opts, n, allowed) return args.opts(fname, opts, allowed, n) end
local function posint(fname, v, n, what)
  if type(v) ~= "number" or v ~= math.floor(v) or v < 0 then argerr(n, fname, "non-negative integer " .. what, v) end
  return v
end
local param = require("tide.nn.layer_util").param

-- Linear(in, out, {bias=true, dtype=}): y = x W^T + b; W (out, in) ~ kaiming_uniform(a=sqrt(5)),
-- i.e. U(-1/sqrt(in), 1/sqrt(in)), and b ~ U(-1/sqrt(in), 1/sqrt(in))
--- nn.Linear(in_features, out_features[, {bias = true, dtype, device}])
--- y = x W^T + b, W (out, in) and b uniform in +-1/sqrt(in) (PyTorch's init).
local Linear = Module:extend("Linear")
nn.Linear = Linear
function Linear:__init(in_f, out_f, opts)
  opts = opts_of("Linear", opts, 3, "bias dtype device")
  self.in_features, self.out_features = posint("Linear", in_f, 1, "in_features"), posint("Linear", out_f, 2, "out_features")
  self.weight = param({ out_f, in_f }, opts)
  if opts.bias ~= false then self.bias = param({ out_f }, opts) else self:register_parameter("bias", nil) end
  self:reset_parameters()
end
function Linear:reset_parameters()
  init.kaiming_uniform_(self.weight, math.sqrt(5))
  if self.bias ~= nil then
    local bound = self.in_features > 0 and 1 / math.sqrt(self.in_features) or 0
    init.uniform_(self.bias, -bound, bound)
  end
end
function Linear:forward(x) return F.linear(x, self.weight, self.bias) end
function Linear:extra_repr()
  return ("in_features=%d, out_features=%d, bias=%s"):format(self.in_features, self.out_features, pybool(self.bias ~= nil))
end

-- Bilinear(in1, in2, out, {bias=true, dtype=}): y = x1^T W x2 + b; W (out, in1, in2) and
-- b ~ U(-1/sqrt(in1), 1/sqrt(in1))
--- nn.Bilinear(in1, in2, out[, {bias = true, dtype, device}])
--- y = x1^T W x2 + b, W (out, in1, in2).
local Bilinear = Module:extend("Bilinear")
nn.Bilinear = Bilinear
function Bilinear:__init(in1, in2, out, opts)
  opts = opts_of("Bilinear", opts, 4, "bias dtype device")
  self.in1_features = posint("Bilinear", in1, 1, "in1_features")
  self.in2_features = posint("Bilinear", in2, 2, "in2_features")
  self.out_features = posint("Bilinear", out, 3, "out_features")
  self.weight = param({ out, in1, in2 }, opts)
  if opts.bias ~= false then self.bias = param({ out }, opts) else self:register_parameter("bias", nil) end
  self:reset_parameters()
end
function Bilinear:reset_parameters()
  local bound = self.in1_features > 0 and 1 / math.sqrt(self.in1_features) or 0
  init.uniform_(self.weight, -bound, bound)
  if self.bias ~= nil then init.uniform_(self.bias, -bound, bound) end
end
function Bilinear:forward(x1, x2) return F.bilinear(x1, x2, self.weight, self.bias) end
function Bilinear:extra_repr()
  return ("in1_features=%d, in2_features=%d, out_features=%d, bias=%s"):format(
    self.in1_features, self.in2_features, self.out_features, pybool(self.bias ~= nil))
end

-- Embedding(num, dim, {padding_idx=, dtype=}): weight (num, dim) ~ N(0, 1), the padding
-- row (1-based; negative from the end) zeroed and kept out of the gradient
--- nn.Embedding(num_embeddings, embedding_dim[, {padding_idx, dtype, device}])
--- A lookup table of rows indexed by 1-based int64 ids; weight ~ N(0, 1), the padding row zero without gradient.
local Embedding = Module:extend("Embedding")
nn.Embedding = Embedding
function Embedding:__init(num, dim, opts)
  opts = opts_of("Embedding", opts, 3, "padding_idx dtype device")
  self.num_embeddings = posint("Embedding", num, 1, "num_embeddings")
  self.embedding_dim = posint("Embedding", dim, 2, "embedding_dim")
  local pad = opts.padding_idx
  if pad ~= nil then
    if type(pad) ~= "number" or pad ~= math.floor(pad) then argerr(3, "Embedding", "integer padding_idx", pad) end
    local p = pad < 0 and num + pad + 1 or pad
    if p < 1 or p > num then raise(("Embedding: padding_idx %d is out of range for %d embeddings"):format(pad, num)) end
    pad = p
  end
  self.padding_idx = pad
  self.weight = param({ num, dim }, opts)
  self:reset_parameters()
end
function Embedding:reset_parameters()
  init.normal_(self.weight)
  if self.padding_idx then tide.no_grad(function() self.weight[self.padding_idx]:fill_(0) end) end
end
function Embedding:forward(idx) return F.embedding(idx, self.weight, { padding_idx = self.padding_idx }) end
function Embedding:extra_repr()
  local s = ("%d, %d"):format(self.num_embeddings, self.embedding_dim)
  if self.padding_idx then s = s .. ", padding_idx=" .. self.padding_idx end
  return s
end
-- Embedding.from_pretrained(weight, {freeze=true, padding_idx=})
--- nn.Embedding.from_pretrained(weight[, {freeze = true, padding_idx}]) -> Embedding
--- An Embedding with the given weight (frozen unless freeze = false).
function Embedding.from_pretrained(weight, opts)
  if not is_tensor(weight) or weight:dim() ~= 2 then argerr(1, "from_pretrained", "2-D Tensor", weight) end
  opts = opts_of("from_pretrained", opts, 2, "freeze padding_idx")
  local e = Embedding(weight:size(1), weight:size(2), { padding_idx = opts.padding_idx, dtype = weight.dtype })
  tide.no_grad(function() e.weight:copy_(weight) end)
  e.weight.requires_grad = opts.freeze == false
  return e
end

-- LayerNorm(shape, {eps=1e-5, elementwise_affine=true, bias=true, dtype=}): weight ones, bias zeros
--- nn.LayerNorm(normalized_shape[, {eps = 1e-5, elementwise_affine = true, bias = true, dtype, device}])
--- Normalizes the last dims to zero mean and unit variance, then scales and shifts.
local LayerNorm = Module:extend("LayerNorm")
nn.LayerNorm = LayerNorm
function LayerNorm:__init(shape, opts)
  opts = opts_of("LayerNorm", opts, 2, "eps elementwise_affine bias dtype device")
  self.normalized_shape = F._norm_shape("LayerNorm", shape)
  self.eps = opts.eps or 1e-5
  self.elementwise_affine = opts.elementwise_affine ~= false
  if self.elementwise_affine then
    self.weight = init.ones_(param(self.normalized_shape, opts))
    if opts.bias ~= false then self.bias = init.zeros_(param(self.normalized_shape, opts))
    else self:register_parameter("bias", nil) end
  else
    self:register_parameter("weight", nil); self:register_parameter("bias", nil)
  end
end
function LayerNorm:forward(x) return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps) end
function LayerNorm:extra_repr()
  return ("%s, eps=%s, elementwise_affine=%s"):format(pytuple(self.normalized_shape), pyfloat(self.eps),
    pybool(self.elementwise_affine))
end

-- RMSNorm(shape, {eps=nil (the dtype's epsilon), elementwise_affine=true, dtype=}): weight ones
--- nn.RMSNorm(normalized_shape[, {eps, elementwise_affine = true, dtype, device}])
--- x / sqrt(mean(x^2) + eps) over the last dims, times a weight.
local RMSNorm = Module:extend("RMSNorm")
nn.RMSNorm = RMSNorm
function RMSNorm:__init(shape, opts)
  opts = opts_of("RMSNorm", opts, 2, "eps elementwise_affine dtype device")
  self.normalized_shape = F._norm_shape("RMSNorm", shape)
  self.eps = opts.eps
  self.elementwise_affine = opts.elementwise_affine ~= false
  if self.elementwise_affine then self.weight = init.ones_(param(self.normalized_shape, opts))
  else self:register_parameter("weight", nil) end
end
function RMSNorm:forward(x) return F.rms_norm(x, self.normalized_shape, self.weight, self.eps) end
function RMSNorm:extra_repr()
  return ("%s, eps=%s, elementwise_affine=%s"):format(pytuple(self.normalized_shape),
    self.eps and pyfloat(self.eps) or "None", pybool(self.elementwise_affine))
end

-- Dropout(p=0.5): active in training mode only
--- nn.Dropout([p = 0.5])
--- Zeroes elements with probability p and scales the rest by 1/(1-p), in training mode only.
local Dropout = Module:extend("Dropout")
nn.Dropout = Dropout
function Dropout:__init(p)
  p = p == nil and 0.5 or p
  if type(p) ~= "number" or p < 0 or p > 1 then
    raise(("Dropout: probability has to be between 0 and 1, but got %s"):format(tostring(p)))
  end
  self.p = p
end
function Dropout:forward(x) return F.dropout(x, self.p, self.training) end
function Dropout:extra_repr() return ("p=%s, inplace=False"):format(pyfloat(self.p)) end

-- Flatten(start_dim=2, end_dim=-1): 1-based dims, so PyTorch's start_dim=1 is 2 here
--- nn.Flatten([start_dim = 2[, end_dim = -1]])
--- x:flatten(start_dim, end_dim) (1-based: keeps the batch dim).
local Flatten = Module:extend("Flatten")
nn.Flatten = Flatten
function Flatten:__init(s, e)
  self.start_dim = args.int(s or 2, 1, "Flatten", "integer start_dim")
  self.end_dim = args.int(e or -1, 2, "Flatten", "integer end_dim")
end
function Flatten:forward(x) return args.tensor(x, 1, "Flatten"):flatten(self.start_dim, self.end_dim) end
function Flatten:extra_repr() return ("start_dim=%d, end_dim=%d"):format(self.start_dim, self.end_dim) end

--- nn.Identity()
--- Returns its input.
local Identity = Module:extend("Identity")
nn.Identity = Identity
function Identity:forward(x) return x end

-- activations without state
--- nn.ReLU()
--- max(x, 0).
--- nn.Tanh()
--- tanh(x).
--- nn.Sigmoid()
--- 1 / (1 + e^-x).
--- nn.SiLU()
--- x * sigmoid(x).
for name, fn in pairs { ReLU = F.relu, Tanh = F.tanh, Sigmoid = F.sigmoid, SiLU = F.silu } do
  local cls = Module:extend(name)
  function cls:forward(x) return fn(x) end
  nn[name] = cls
end

--- nn.LeakyReLU([negative_slope = 0.01])
--- x for x >= 0, negative_slope * x below.
local LeakyReLU = Module:extend("LeakyReLU")
nn.LeakyReLU = LeakyReLU
function LeakyReLU:__init(slope)
  if slope ~= nil and type(slope) ~= "number" then argerr(1, "LeakyReLU", "number", slope) end
  self.negative_slope = slope or 0.01
end
function LeakyReLU:forward(x) return F.leaky_relu(x, self.negative_slope) end
function LeakyReLU:extra_repr() return "negative_slope=" .. pyval(self.negative_slope) end

-- GELU({approximate='none'|'tanh'}) or GELU('tanh')
--- nn.GELU([{approximate = "none"|"tanh"}])
--- x * Phi(x) (or the tanh approximation).
local GELU = Module:extend("GELU")
nn.GELU = GELU
function GELU:__init(opts)
  local a = opts or "none"
  if type(opts) == "table" then a = args.opts("GELU", opts, "approximate", 1).approximate or "none" end
  if a ~= "none" and a ~= "tanh" then raise(("GELU: approximate must be 'none' or 'tanh', got '%s'"):format(tostring(a))) end
  self.approximate = a
end
function GELU:forward(x) return F.gelu(x, { approximate = self.approximate }) end
function GELU:extra_repr() return ("approximate='%s'"):format(self.approximate) end

--- nn.Softmax(dim)
--- softmax along dim (1-based; -1 the last).
--- nn.LogSoftmax(dim)
--- log_softmax along dim.
for _, name in ipairs { "Softmax", "LogSoftmax" } do
  local cls = Module:extend(name)
  local fn = name == "Softmax" and F.softmax or F.log_softmax
  function cls:__init(dim)
    if type(dim) ~= "number" or dim ~= math.floor(dim) or dim == 0 then
      raise(("%s: dim must be a non-zero integer (1-based; -1 is the last), got %s"):format(name, tostring(dim)))
    end
    self.dim = dim
  end
  function cls:forward(x) return fn(x, self.dim) end
  function cls:extra_repr() return ("dim=%d"):format(self.dim) end
  nn[name] = cls
end

-- -- Convolution, pooling, batch normalization (the functions: tide.nn.conv) --------------------

local function pair_of(fname, v, n, what)
  if type(v) == "number" and v == math.floor(v) then return { v, v } end
  if type(v) == "table" and #v == 2 and type(v[1]) == "number" and type(v[2]) == "number" then return { v[1], v[2] } end
  argerr(n, fname, "integer or pair of integers " .. what, v)
end

-- Conv2d(in, out, kernel_size, {stride=1, padding=0, dilation=1, groups=1, bias=true, dtype=})
-- and Conv1d (the same over (N, C, L)): weight (out, in/groups, k...) ~ kaiming_uniform(a=sqrt(5)),
-- bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = in/groups * prod(k)
--- nn.Conv2d(in_channels, out_channels, kernel_size[, {stride = 1, padding = 0, dilation = 1, groups = 1, bias = true, dtype, device}])
--- 2-D convolution over (N, C, H, W) (cross-correlation, as PyTorch).
--- nn.Conv1d(in_channels, out_channels, kernel_size[, opts])
--- 1-D convolution over (N, C, L); opts as Conv2d.
local function conv_class(name, nd)
  local Conv = Module:extend(name)
  nn[name] = Conv
  local function tup(fname, v, n, what)
    if nd == 2 then return pair_of(fname, v, n, what) end
    if type(v) == "table" and #v == 1 then v = v[1] end
    if type(v) ~= "number" or v ~= math.floor(v) then argerr(n, fname, "integer " .. what, v) end
    return { v }
  end
  function Conv:__init(cin, cout, k, opts)
    opts = opts_of(name, opts, 4, "stride padding dilation groups bias dtype device")
    self.in_channels, self.out_channels = posint(name, cin, 1, "in_channels"), posint(name, cout, 2, "out_channels")
    self.kernel_size = tup(name, k, 3, "kernel_size")
    self.stride = tup(name, opts.stride or 1, 4, "stride")
    self.padding = tup(name, opts.padding or 0, 4, "padding")
    self.dilation = tup(name, opts.dilation or 1, 4, "dilation")
    self.groups = opts.groups or 1
    if self.groups < 1 or cin % self.groups ~= 0 or cout % self.groups ~= 0 then
      raise(("%s: in_channels %d and out_channels %d must be divisible by groups %d"):format(name, cin, cout, self.groups))
    end
    local shape = { cout, cin / self.groups }
    for _, v in ipairs(self.kernel_size) do shape[#shape + 1] = v end
    self.weight = param(shape, opts)
    if opts.bias ~= false then self.bias = param({ cout }, opts) else self:register_parameter("bias", nil) end
    self:reset_parameters()
  end
  function Conv:reset_parameters()
    init.kaiming_uniform_(self.weight, math.sqrt(5))
    if self.bias ~= nil then
      local fan_in = self.in_channels / self.groups
      for _, v in ipairs(self.kernel_size) do fan_in = fan_in * v end
      local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
      init.uniform_(self.bias, -bound, bound)
    end
  end
  function Conv:forward(x)
    local o = { groups = self.groups }
    if nd == 2 then
      o.stride, o.padding, o.dilation = self.stride, self.padding, self.dilation
      return F.conv2d(x, self.weight, self.bias, o)
    end
    o.stride, o.padding, o.dilation = self.stride[1], self.padding[1], self.dilation[1]
    return F.conv1d(x, self.weight, self.bias, o)
  end
  function Conv:extra_repr()
    local s = ("%d, %d, kernel_size=%s, stride=%s"):format(self.in_channels, self.out_channels,
      pytuple(self.kernel_size), pytuple(self.stride))
    local function nonzero(t) for _, v in ipairs(t) do if v ~= 0 then return true end end end
    local function nonone(t) for _, v in ipairs(t) do if v ~= 1 then return true end end end
    if nonzero(self.padding) then s = s .. ", padding=" .. pytuple(self.padding) end
    if nonone(self.dilation) then s = s .. ", dilation=" .. pytuple(self.dilation) end
    if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
    if self.bias == nil then s = s .. ", bias=False" end
    return s
  end
end
conv_class("Conv1d", 1)
conv_class("Conv2d", 2)

local function pyint_or_tuple(v) return type(v) == "table" and pytuple(v) or tostring(v) end

-- MaxPool2d(kernel_size, {stride=kernel_size, padding=0, dilation=1})
--- nn.MaxPool2d(kernel_size[, {stride = kernel_size, padding = 0, dilation = 1}])
--- The maximum over each window of (N, C, H, W).
local MaxPool2d = Module:extend("MaxPool2d")
nn.MaxPool2d = MaxPool2d
function MaxPool2d:__init(k, opts)
  opts = opts_of("MaxPool2d", opts, 2, "stride padding dilation")
  pair_of("MaxPool2d", k, 1, "kernel_size")
  self.kernel_size, self.stride = k, opts.stride or k
  self.padding, self.dilation = opts.padding or 0, opts.dilation or 1
end
function MaxPool2d:forward(x)
  return F.max_pool2d(x, self.kernel_size, { stride = self.stride, padding = self.padding, dilation = self.dilation })
end
function MaxPool2d:extra_repr()
  return ("kernel_size=%s, stride=%s, padding=%s, dilation=%s, ceil_mode=False"):format(pyint_or_tuple(self.kernel_size),
    pyint_or_tuple(self.stride), pyint_or_tuple(self.padding), pyint_or_tuple(self.dilation))
end

-- AvgPool2d(kernel_size, {stride=kernel_size, padding=0})
local AvgPool2d = Module:extend("AvgPool2d")
--- nn.AvgPool2d(kernel_size[, {stride = kernel_size, padding = 0}])
--- The mean over each window of (N, C, H, W).
nn.AvgPool2d = AvgPool2d
function AvgPool2d:__init(k, opts)
  opts = opts_of("AvgPool2d", opts, 2, "stride padding")
  pair_of("AvgPool2d", k, 1, "kernel_size")
  self.kernel_size, self.stride, self.padding = k, opts.stride or k, opts.padding or 0
end
function AvgPool2d:forward(x) return F.avg_pool2d(x, self.kernel_size, { stride = self.stride, padding = self.padding }) end
function AvgPool2d:extra_repr()
  return ("kernel_size=%s, stride=%s, padding=%s"):format(pyint_or_tuple(self.kernel_size), pyint_or_tuple(self.stride),
    pyint_or_tuple(self.padding))
end

-- AdaptiveAvgPool2d(output_size)
local AdaptiveAvgPool2d = Module:extend("AdaptiveAvgPool2d")
--- nn.AdaptiveAvgPool2d(output_size)
--- Average pooling to a fixed output size (H, W).
nn.AdaptiveAvgPool2d = AdaptiveAvgPool2d
function AdaptiveAvgPool2d:__init(size)
  pair_of("AdaptiveAvgPool2d", size, 1, "output_size")
  self.output_size = size
end
function AdaptiveAvgPool2d:forward(x) return F.adaptive_avg_pool2d(x, self.output_size) end
function AdaptiveAvgPool2d:extra_repr() return "output_size=" .. pyint_or_tuple(self.output_size) end

-- BatchNorm1d / BatchNorm2d(num_features, {eps=1e-5, momentum=0.1, affine=true,
-- track_running_stats=true, dtype=}): weight ones, bias zeros; buffers running_mean
-- (zeros), running_var (ones) and num_batches_tracked, as PyTorch's state_dict
--- nn.BatchNorm1d(num_features[, {eps = 1e-5, momentum = 0.1, affine = true, track_running_stats = true, dtype, device}])
--- Batch normalization over (N, C) or (N, C, L), with running statistics for eval mode.
--- nn.BatchNorm2d(num_features[, opts])
--- Batch normalization over (N, C, H, W); opts as BatchNorm1d.
local function batchnorm_class(name, dims)
  local BN = Module:extend(name)
  nn[name] = BN
  function BN:__init(n, opts)
    opts = opts_of(name, opts, 2, "eps momentum affine track_running_stats dtype device")
    self.num_features = posint(name, n, 1, "num_features")
    self.eps, self.momentum = opts.eps or 1e-5, opts.momentum or 0.1
    self.affine, self.track_running_stats = opts.affine ~= false, opts.track_running_stats ~= false
    if self.affine then
      self.weight = init.ones_(param({ n }, opts))
      self.bias = init.zeros_(param({ n }, opts))
    else
      self:register_parameter("weight", nil); self:register_parameter("bias", nil)
    end
    if self.track_running_stats then
      local dt = { dtype = self.affine and self.weight.dtype or opts.dtype, device = opts.device }
      self:register_buffer("running_mean", tide.zeros(n, dt))
      self:register_buffer("running_var", tide.ones(n, dt))
      self:register_buffer("num_batches_tracked", tide.zeros({}, { dtype = "int64", device = opts.device }))
    end
  end
  function BN:forward(x)
    local ok = false
    args.tensor(x, 1, name)
    for _, d in ipairs(dims) do if tensor.fields(x).ndim == d then ok = true end end
    if not ok then
      raise(("%s: expected a %s-D input, got %s"):format(name, table.concat(dims, "-D or "), shape_str(x)))
    end
    local training = self.training or not self.track_running_stats
    if self.training and self.track_running_stats then
      tide.no_grad(function() self.num_batches_tracked:add_(1) end)
    end
    return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
      { training = training, momentum = self.momentum, eps = self.eps })
  end
  function BN:extra_repr()
    return ("%d, eps=%s, momentum=%s, affine=%s, track_running_stats=%s"):format(self.num_features, pyfloat(self.eps),
      pyfloat(self.momentum), pybool(self.affine), pybool(self.track_running_stats))
  end
end
batchnorm_class("BatchNorm1d", { 2, 3 })
batchnorm_class("BatchNorm2d", { 4 })
