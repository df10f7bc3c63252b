--[[
tide.data.transforms -- torchvision's tensor transforms for images (..., C, H, W):
Compose, Normalize, RandomCrop, RandomHorizontalFlip. The random ones draw from
tide's RNG as torchvision draws from torch's (a crop's top and left with two
randint calls, a flip with one rand), so tide.manual_seed(n) fixes them. One draw
per call: a batch (N, C, H, W) gets the same crop or flip for all its images.
--]]
local tide = require "tide"
local core = require "tide.core"
local args = require "tide.args"
local raise, is_tensor = core.raise, core.is_tensor

local M = {}

-- a transform class: instances are called on an image, cls:apply(x) does the work
local function class(name)
  local cls = { name = name }
  cls.__index = cls
  cls.__call = function(self, x) return self:apply(x) end
  M[name] = cls
  return cls
end

local function image(x, fname)
  if not is_tensor(x) then args.argerr(1, fname, "image Tensor (..., C, H, W)", x) end
  if x:dim() < 2 then
    raise(("%s: expected an image tensor of shape (..., H, W), got shape (%s)"):format(fname, table.concat(x:size(), "x")))
  end
  return x
end

local function fmt(v)
  if type(v) ~= "table" then return tostring(v) end
  local p = {}
  for i, x in ipairs(v) do p[i] = tostring(x) end
  return "{" .. table.concat(p, ", ") .. "}"
end

-- -- Compose ---------------------------------------------------------------------------------

--- tide.data.transforms.Compose(transforms)
--- Applies each transform in order: Compose{t1, t2}(x) = t2(t1(x)).
local Compose = class("Compose")
setmetatable(Compose, { __call = function(cls, ts)
  if type(ts) ~= "table" or is_tensor(ts) then args.argerr(1, "Compose", "table of transforms", ts) end
  for i, t in ipairs(ts) do
    local mt = getmetatable(t)
    if type(t) ~= "function" and not (type(mt) == "table" and mt.__call) then
      raise(("Compose: transform %d is a %s, expected a transform or a function"):format(i, type(t)))
    end
  end
  return setmetatable({ transforms = { unpack(ts) } }, cls)
end })

--- tide.data.transforms.Compose:apply(x) -> Tensor
--- The transforms applied in order (also the call t(x)).
function Compose:apply(x)
  for _, t in ipairs(self.transforms) do x = t(x) end
  return x
end

function Compose:__tostring()
  local lines = { "Compose(" }
  for _, t in ipairs(self.transforms) do lines[#lines + 1] = "    " .. tostring(t) end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

-- -- Normalize -------------------------------------------------------------------------------

--- tide.data.transforms.Normalize(mean, std[, {inplace = false}])
--- (x - mean[c]) / std[c] per channel c of a float image (..., C, H, W); mean and std: numbers or one per channel.
local Normalize = class("Normalize")
setmetatable(Normalize, { __call = function(cls, mean, std, opts)
  opts = args.opts("Normalize", opts, "inplace", 3)
  local function list(v, n, what)
    if type(v) == "number" then return { v } end
    if type(v) ~= "table" or #v == 0 then args.argerr(n, "Normalize", what .. " (a number or a list per channel)", v) end
    for i, x in ipairs(v) do
      if type(x) ~= "number" then raise(("Normalize: %s[%d] is a %s, expected a number"):format(what, i, type(x))) end
    end
    return { unpack(v) }
  end
  local m, s = list(mean, 1, "mean"), list(std, 2, "std")
  for i, x in ipairs(s) do
    if x == 0 then raise(("Normalize: std[%d] is 0, which would divide by zero"):format(i)) end
  end
  return setmetatable({ mean = m, std = s, inplace = opts.inplace or false }, cls)
end })

--- tide.data.transforms.Normalize:apply(x) -> Tensor
--- The normalized image (also the call t(x)); in place with inplace = true.
function Normalize:apply(x)
  image(x, "Normalize")
  if not x.dtype.is_floating_point then
    raise(("Normalize: expected a float image, got dtype %s (convert it first, e.g. x:float() / 255)"):format(x.dtype.name))
  end
  if x:dim() < 3 then
    raise(("Normalize: expected an image of shape (..., C, H, W), got shape (%s)"):format(table.concat(x:size(), "x")))
  end
  local c = x:size(-3)
  for _, k in ipairs { "mean", "std" } do
    local v = self[k]
    if #v ~= 1 and #v ~= c then
      raise(("Normalize: %d %s values for an image with %d channels"):format(#v, k, c))
    end
  end
  local mean = tide.tensor(self.mean, { dtype = x.dtype, device = x.device }):view(-1, 1, 1)
  local std = tide.tensor(self.std, { dtype = x.dtype, device = x.device }):view(-1, 1, 1)
  if self.inplace then return x:sub_(mean):div_(std) end
  return (x - mean) / std
end

function Normalize:__tostring() return ("Normalize(mean=%s, std=%s)"):format(fmt(self.mean), fmt(self.std)) end

-- -- RandomCrop ------------------------------------------------------------------------------

local PAD_MODES = { constant = "constant", edge = "replicate", reflect = "reflect", symmetric = true }

-- x padded on its last two dims by {left, top, right, bottom} in torchvision's modes
local function pad_image(x, p, fill, mode)
  if mode == "symmetric" then
    -- the edge repeated: ... b a | a b c | c b ...
    local function sym(d, lo, hi)
      local n, idx = x:size(d), {}
      if lo > n or hi > n then
        raise(("RandomCrop: symmetric padding (%d, %d) must be at most the image's size %d"):format(lo, hi, n))
      end
      for i = 1 - lo, n + hi do idx[#idx + 1] = i < 1 and 1 - i or (i > n and 2 * n + 1 - i or i) end
      return tide.tensor(idx, { dtype = tide.int64, device = x.device })
    end
    return x:index_select(-1, sym(x:dim(), p[1], p[3])):index_select(-2, sym(x:dim() - 1, p[2], p[4]))
  end
  local F = tide.nn.functional
  local o = { mode = PAD_MODES[mode] }
  if mode == "constant" then o.value = fill end
  return F.pad(x, { p[1], p[3], p[2], p[4] }, o)
end

--- tide.data.transforms.RandomCrop(size[, {padding, pad_if_needed = false, fill = 0, padding_mode = 'constant'}])
--- A random size (h or {h, w}) window of the (padded) image; padding: n, {left/right, top/bottom} or {left, top, right, bottom}.
local RandomCrop = class("RandomCrop")
setmetatable(RandomCrop, { __call = function(cls, size, opts)
  local name = "RandomCrop"
  opts = args.opts(name, opts, "padding pad_if_needed fill padding_mode", 2)
  local h, w
  if type(size) == "number" then h, w = size, size
  elseif type(size) == "table" and #size == 1 then h, w = size[1], size[1]
  elseif type(size) == "table" and #size == 2 then h, w = size[1], size[2]
  else args.argerr(1, name, "size (a number or {h, w})", size) end
  for _, v in ipairs { h, w } do
    if not args.is_int(v) or v < 1 then raise(("%s: size must be positive integers, got %s"):format(name, fmt(size))) end
  end
  local pad = opts.padding
  if pad ~= nil then
    if type(pad) == "number" then pad = { pad, pad, pad, pad }
    elseif type(pad) == "table" and #pad == 2 then pad = { pad[1], pad[2], pad[1], pad[2] }
    elseif type(pad) == "table" and #pad == 4 then pad = { unpack(pad) }
    else args.argerr(2, name, "padding (a number, {left/right, top/bottom} or {left, top, right, bottom})", pad) end
    for _, v in ipairs(pad) do
      if not args.is_int(v) or v < 0 then raise(("%s: padding must be non-negative integers, got %s"):format(name, fmt(opts.padding))) end
    end
  end
  local mode = opts.padding_mode or "constant"
  if not PAD_MODES[mode] then
    raise(("%s: padding_mode must be 'constant', 'edge', 'reflect' or 'symmetric', got %s"):format(name, fmt(mode)))
  end
  local fill = opts.fill or 0
  if type(fill) ~= "number" then args.argerr(2, name, "fill (a number)", fill) end
  return setmetatable({ size = { h, w }, padding = pad, pad_if_needed = opts.pad_if_needed or false, fill = fill,
    padding_mode = mode }, cls)
end })

--- tide.data.transforms.RandomCrop:get_params(x) -> top, left
--- The crop's 1-based top row and left column for x (after padding): two draws of tide's RNG.
function RandomCrop:get_params(x)
  local H, W = x:size(-2), x:size(-1)
  local th, tw = self.size[1], self.size[2]
  if H < th or W < tw then
    raise(("RandomCrop: crop size (%d, %d) is larger than the image's (%d, %d)"):format(th, tw, H, W))
  end
  if H == th and W == tw then return 1, 1 end
  local i = tide.randint(0, H - th + 1, { 1 }):item()
  local j = tide.randint(0, W - tw + 1, { 1 }):item()
  return i + 1, j + 1
end

--- tide.data.transforms.RandomCrop:apply(x) -> Tensor
--- The padded image's random window (a view; also the call t(x)).
function RandomCrop:apply(x)
  image(x, "RandomCrop")
  if self.padding then x = pad_image(x, self.padding, self.fill, self.padding_mode) end
  local th, tw = self.size[1], self.size[2]
  if self.pad_if_needed and x:size(-1) < tw then
    local d = tw - x:size(-1)
    x = pad_image(x, { d, 0, d, 0 }, self.fill, self.padding_mode)
  end
  if self.pad_if_needed and x:size(-2) < th then
    local d = th - x:size(-2)
    x = pad_image(x, { 0, d, 0, d }, self.fill, self.padding_mode)
  end
  local i, j = self:get_params(x)
  return x:narrow(-2, i, th):narrow(-1, j, tw)
end

function RandomCrop:__tostring()
  return ("RandomCrop(size=%s, padding=%s)"):format(fmt(self.size), self.padding and fmt(self.padding) or "nil")
end

-- -- RandomHorizontalFlip --------------------------------------------------------------------

--- tide.data.transforms.RandomHorizontalFlip([p = 0.5])
--- Mirrors the image left to right with probability p (one draw of tide's RNG per call).
local Flip = class("RandomHorizontalFlip")
setmetatable(Flip, { __call = function(cls, p)
  if p == nil then p = 0.5 end
  if type(p) ~= "number" or p < 0 or p > 1 then
    raise(("RandomHorizontalFlip: p must be a probability in [0, 1], got %s"):format(tostring(p)))
  end
  return setmetatable({ p = p }, cls)
end })

--- tide.data.transforms.RandomHorizontalFlip:apply(x) -> Tensor
--- x flipped along its last dim with probability p, else x (also the call t(x)).
function Flip:apply(x)
  image(x, "RandomHorizontalFlip")
  if tide.rand(1):item() < self.p then return x:flip(-1) end
  return x
end

function Flip:__tostring() return ("RandomHorizontalFlip(p=%s)"):format(tostring(self.p)) end

return M
