--[[
tide.nn.functional_extra -- resampling and distances as PyTorch's
torch.nn.functional (merged into tide.nn.functional): pad (constant, reflect,
replicate, circular), interpolate (nearest, linear, bilinear, bicubic,
align_corners), pixel_shuffle / pixel_unshuffle, unfold / fold (im2col /
col2im with PyTorch's names), normalize, cosine_similarity,
pairwise_distance. Linear and cubic resampling are separable: one small
(out, in) weight matrix per resized dim, applied by matmul, so the backward
is a matmul too and every size works.
--]]
local tide = require "tide"
local core = require "tide.core"
local args = require "tide.args"
local raise, is_tensor = core.raise, core.is_tensor

local F = {}
local targ = args.tensor
local function size_str(s) return "[" .. table.concat(s, ",") .. "]" end

-- -- pad --------------------------------------------------------------------------------------

-- indices (1-based, length n + lo + hi) into a dim of size n for the index modes
local function pad_index(mode, n, lo, hi, device)
  local idx = {}
  for i = 1 - lo, n + hi do
    local j
    if mode == "reflect" then
      j = i
      while j < 1 or j > n do j = j < 1 and 2 - j or 2 * n - j end
    elseif mode == "replicate" then j = math.min(math.max(i, 1), n)
    else j = (i - 1) % n + 1 end                                       -- circular
    idx[#idx + 1] = j
  end
  return tide.tensor(idx, { dtype = tide.int64, device = device })
end

--- F.pad(x, pad, {mode='constant', value=0}) -> Tensor
--- Pads the last dims: pad = {left, right[, top, bottom[, front, back]]} (negative crops); modes constant, reflect, replicate, circular.
function F.pad(x, pad, opts)
  targ(x, 1, "pad")
  opts = args.opts("pad", opts, "mode value", 3)
  local mode, value = opts.mode or "constant", opts.value or 0
  if mode ~= "constant" and mode ~= "reflect" and mode ~= "replicate" and mode ~= "circular" then
    raise(("pad: mode must be 'constant', 'reflect', 'replicate' or 'circular', got %s"):format(tostring(mode)))
  end
  if type(pad) ~= "table" or #pad % 2 == 1 or #pad == 0 then
    args.argerr(2, "pad", "table of an even number of pad sizes", pad)
  end
  if #pad / 2 > x.ndim then
    raise(("pad: %d pad sizes for a tensor with %d dims"):format(#pad, x.ndim))
  end
  local y = x
  for k = 1, #pad / 2 do
    local d = x.ndim - k + 1
    local lo, hi = args.int(pad[2 * k - 1], 2, "pad", "integer pad size"), args.int(pad[2 * k], 2, "pad", "integer pad size")
    local n = y:size(d)
    if mode == "constant" then
      if lo < 0 then y = y:narrow(d, 1 - lo, n + lo); n = n + lo; lo = 0 end
      if hi < 0 then y = y:narrow(d, 1, n + hi); n = n + hi; hi = 0 end
      if n < 0 then raise(("pad: cropping more than dim %d's size %d"):format(d, x:size(d))) end
      local parts = {}
      local function block(w)
        local s = y:size(); s[d] = w
        return tide.full(s, value, { dtype = y.dtype, device = y.device })
      end
      if lo > 0 then parts[#parts + 1] = block(lo) end
      parts[#parts + 1] = y
      if hi > 0 then parts[#parts + 1] = block(hi) end
      if #parts > 1 then y = tide.cat(parts, d) end
    else
      if lo < 0 or hi < 0 then raise(("pad: negative pad sizes need mode 'constant', got '%s'"):format(mode)) end
      if mode == "reflect" and (lo >= n or hi >= n) then
        raise(("pad: reflect padding (%d, %d) must be smaller than dim %d's size %d"):format(lo, hi, d, n))
      end
      if mode == "circular" and (lo > n or hi > n) then
        raise(("pad: circular padding (%d, %d) must be at most dim %d's size %d"):format(lo, hi, d, n))
      end
      if n == 0 then raise(("pad: %s padding of an empty dim %d"):format(mode, d)) end
      if lo + hi > 0 then y = y:index_select(d, pad_index(mode, n, lo, hi, y.device)) end
    end
  end
  return y
end

-- -- interpolate ------------------------------------------------------------------------------

-- PyTorch's source coordinate of output position o (0-based) for a dim
-- resized in -> out: align_corners maps ends to ends, else centers to centers
local function src_coord(o, inn, out, align, scale)
  if align then return out > 1 and o * (inn - 1) / (out - 1) or 0 end
  local r = scale and 1 / scale or inn / out
  return (o + 0.5) * r - 0.5
end

local function cubic_w(t, A)
  t = math.abs(t)
  if t <= 1 then return ((A + 2) * t - (A + 3)) * t * t + 1 end
  if t < 2 then return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A end
  return 0
end

-- the (out, in) resampling matrix of one dim, as a table of rows
local function weights(mode, inn, out, align, scale)
  local W = {}
  for o = 0, out - 1 do
    local row = {}
    for i = 1, inn do row[i] = 0 end
    if mode == "nearest" then
      local r = scale and 1 / scale or inn / out
      row[math.min(math.floor(o * r), inn - 1) + 1] = 1
    elseif mode == "linear" then
      local x = src_coord(o, inn, out, align, scale)
      if not align then x = math.max(x, 0) end
      local i0 = math.min(math.floor(x), inn - 1)
      local i1 = math.min(i0 + 1, inn - 1)
      local l = x - i0
      row[i0 + 1] = row[i0 + 1] + (1 - l)
      row[i1 + 1] = row[i1 + 1] + l
    else                                                                 -- cubic, A = -0.75, edges clamped
      local x = src_coord(o, inn, out, align, scale)
      local i0 = math.floor(x)
      local t = x - i0
      for k = -1, 2 do
        local j = math.min(math.max(i0 + k, 0), inn - 1)
        row[j + 1] = row[j + 1] + cubic_w(t - k, -0.75)
      end
    end
    W[o + 1] = row
  end
  return W
end

--- F.interpolate(x, {size=, scale_factor=, mode='nearest', align_corners=false}) -> Tensor
--- Resizes the spatial dims of x (N, C, L), (N, C, H, W) or (N, C, D, H, W); modes nearest, linear, bilinear, bicubic.
function F.interpolate(x, opts)
  targ(x, 1, "interpolate")
  opts = args.opts("interpolate", opts, "size scale_factor mode align_corners recompute_scale_factor", 2)
  local mode = opts.mode or "nearest"
  local ns = x.ndim - 2
  if ns < 1 or ns > 3 then
    raise(("interpolate: expected a 3-D, 4-D or 5-D input (N, C, ...), got %s"):format(size_str(x:size())))
  end
  local kinds = { nearest = "nearest", linear = "linear", bilinear = "linear", bicubic = "cubic", trilinear = "linear" }
  local kind = kinds[mode]
  if not kind then raise(("interpolate: unknown mode '%s' (nearest, linear, bilinear, bicubic, trilinear)"):format(tostring(mode))) end
  local need = { linear = 1, bilinear = 2, bicubic = 2, trilinear = 3 }
  if need[mode] and need[mode] ~= ns then
    raise(("interpolate: mode '%s' takes %d spatial dims, the input has %d"):format(mode, need[mode], ns))
  end
  if opts.align_corners ~= nil and kind == "nearest" then
    raise("interpolate: align_corners only goes with the linear and cubic modes")
  end
  local align = opts.align_corners and true or false
  local size, scale = opts.size, opts.scale_factor
  if (size == nil) == (scale == nil) then raise("interpolate: give exactly one of size and scale_factor") end
  local outs, scales = {}, {}
  for k = 1, ns do
    local inn = x:size(k + 2)
    if size ~= nil then
      local s = type(size) == "table" and size[k] or size
      outs[k] = args.count(s, 2, "interpolate", "non-negative integer size")
    else
      local f = type(scale) == "table" and scale[k] or scale
      if type(f) ~= "number" or f <= 0 then args.argerr(2, "interpolate", "positive scale_factor", f) end
      outs[k] = math.floor(inn * f)
      -- PyTorch uses the given factor for the coordinates unless told to recompute it
      if not opts.recompute_scale_factor then scales[k] = f end
    end
  end
  local y = x
  for k = 1, ns do
    local d = k + 2
    local inn, out = x:size(d), outs[k]
    if inn ~= out or kind ~= "nearest" or scales[k] then
      if out * inn > 2 ^ 26 then       -- the resampling matrix is built in Lua tables
        raise(("interpolate: output size %.0f along dim %d needs a %.0f x %d resampling matrix, above 2^26 entries"):format(
          out, d, out, inn))
      end
      local W = tide.tensor(weights(kind, inn, out, align, scales[k]), { dtype = x.dtype, device = x.device })
      -- y (..., in, ...) -> (..., out, ...): move dim d last, multiply by W^T, move back
      y = y:movedim(d, -1):matmul(W:t()):movedim(-1, d)
    end
  end
  return y
end

--- F.upsample(x, opts) -> Tensor
--- interpolate by its old name.
F.upsample = F.interpolate

-- -- pixel shuffle ----------------------------------------------------------------------------

--- F.pixel_shuffle(x, r) -> Tensor
--- (N, C r^2, H, W) -> (N, C, H r, W r).
function F.pixel_shuffle(x, r)
  targ(x, 1, "pixel_shuffle")
  r = args.int(r, 2, "pixel_shuffle", "integer upscale factor")
  if x.ndim < 3 or r < 1 or x:size(-3) % (r * r) ~= 0 then
    raise(("pixel_shuffle: channels of %s are not divisible by %d^2"):format(size_str(x:size()), r))
  end
  local s = x:size()
  local n = #s
  local C, H, W = s[n - 2] / (r * r), s[n - 1], s[n]
  local lead = {}
  for i = 1, n - 3 do lead[i] = s[i] end
  local v = { unpack(lead) }
  for _, e in ipairs { C, r, r, H, W } do v[#v + 1] = e end
  local p = {}
  for i = 1, #lead do p[i] = i end
  local L = #lead
  for _, e in ipairs { 1, 4, 2, 5, 3 } do p[#p + 1] = L + e end
  local out = { unpack(lead) }
  for _, e in ipairs { C, H * r, W * r } do out[#out + 1] = e end
  return x:reshape(v):permute(p):reshape(out)
end

--- F.pixel_unshuffle(x, r) -> Tensor
--- (N, C, H r, W r) -> (N, C r^2, H, W).
function F.pixel_unshuffle(x, r)
  targ(x, 1, "pixel_unshuffle")
  r = args.int(r, 2, "pixel_unshuffle", "integer downscale factor")
  if x.ndim < 3 or r < 1 or x:size(-1) % r ~= 0 or x:size(-2) % r ~= 0 then
    raise(("pixel_unshuffle: height and width of %s are not divisible by %d"):format(size_str(x:size()), r))
  end
  local s = x:size()
  local n = #s
  local C, H, W = s[n - 2], s[n - 1] / r, s[n] / r
  local lead = {}
  for i = 1, n - 3 do lead[i] = s[i] end
  local v = { unpack(lead) }
  for _, e in ipairs { C, H, r, W, r } do v[#v + 1] = e end
  local p = {}
  for i = 1, #lead do p[i] = i end
  local L = #lead
  for _, e in ipairs { 1, 3, 5, 2, 4 } do p[#p + 1] = L + e end
  local out = { unpack(lead) }
  for _, e in ipairs { C * r * r, H, W } do out[#out + 1] = e end
  return x:reshape(v):permute(p):reshape(out)
end

-- -- unfold / fold ----------------------------------------------------------------------------

--- F.unfold(x, kernel_size, {stride=1, padding=0, dilation=1}) -> Tensor
--- Sliding blocks of (N, C, H, W) as columns (N, C kh kw, L): tide.im2col with PyTorch's name.
function F.unfold(x, kernel, opts) return tide.im2col(x, kernel, opts) end
--- F.fold(cols, output_size, kernel_size, {stride=1, padding=0, dilation=1}) -> Tensor
--- The adjoint of unfold, summing overlapping blocks: tide.col2im with PyTorch's name.
function F.fold(cols, output_size, kernel, opts) return tide.col2im(cols, output_size, kernel, opts) end

-- -- Distances --------------------------------------------------------------------------------

--- F.normalize(x, {p=2, dim=2, eps=1e-12}) -> Tensor
--- x divided by its p-norm over dim (at least eps).
function F.normalize(x, opts)
  targ(x, 1, "normalize")
  opts = args.opts("normalize", opts, "p dim eps", 2)
  local p, d, eps = opts.p or 2, opts.dim or 2, opts.eps or 1e-12
  return x / x:norm(p, d, true):clamp(eps)
end

--- F.cosine_similarity(x1, x2, {dim=2, eps=1e-8}) -> Tensor
--- The cosine of the angle between x1 and x2 along dim (norms at least eps).
function F.cosine_similarity(a, b, opts)
  targ(a, 1, "cosine_similarity"); targ(b, 2, "cosine_similarity")
  opts = args.opts("cosine_similarity", opts, "dim eps", 3)
  local d, eps = opts.dim or 2, opts.eps or 1e-8
  local na = a:norm(2, d):clamp(eps)
  local nb = b:norm(2, d):clamp(eps)
  return (a * b):sum(d) / (na * nb)
end

--- F.pairwise_distance(x1, x2, {p=2, eps=1e-6, keepdim=false}) -> Tensor
--- The p-norm of x1 - x2 + eps over the last dim.
function F.pairwise_distance(a, b, opts)
  targ(a, 1, "pairwise_distance"); targ(b, 2, "pairwise_distance")
  opts = args.opts("pairwise_distance", opts, "p eps keepdim", 3)
  return (a - b + (opts.eps or 1e-6)):norm(opts.p or 2, -1, opts.keepdim)
end

for k, v in pairs(require("tide.ops_pointwise").F) do F[k] = v end

return F
