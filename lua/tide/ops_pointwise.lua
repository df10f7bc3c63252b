--[[
tide.ops_pointwise -- elementwise ops and reductions composed of the op table's
ones (each fuses into one kernel under tide.compile): log2 log10 exp2
reciprocal trunc frac lerp addcmul addcdiv logaddexp nan_to_num isnan isinf
isfinite, clamp with tensor bounds, all any count_nonzero aminmax nansum
nanmean; and the activations softplus elu selu celu hardtanh hardsigmoid
hardswish mish (tide.nn.functional; their modules are in tide.nn.activation).
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local args = require "tide.args"
local raise, is_tensor = core.raise, core.is_tensor
local T = tensor.Tensor

local M, F = {}, {}

local function tide() return require "tide" end
local targ = args.tensor

local LN2, LN10 = math.log(2), math.log(10)

--- Tensor:log2() -> Tensor
--- Base-2 logarithm elementwise.
function T.log2(x) return targ(x, 1, "log2"):log() * (1 / LN2) end
--- Tensor:log10() -> Tensor
--- Base-10 logarithm elementwise.
function T.log10(x) return targ(x, 1, "log10"):log() * (1 / LN10) end
--- Tensor:exp2() -> Tensor
--- 2^x elementwise (exact at integers).
function T.exp2(x)
  targ(x, 1, "exp2")
  if not x:is_floating_point() then x = x:to(tide().get_default_dtype()) end
  return tide().pow(2, x)
end
--- Tensor:reciprocal() -> Tensor
--- 1 / x elementwise (float).
function T.reciprocal(x) return 1 / targ(x, 1, "reciprocal") end

--- Tensor:trunc() -> Tensor
--- x rounded toward zero (integer tensors unchanged).
function T.trunc(x)
  targ(x, 1, "trunc")
  if not x:is_floating_point() then return x:clone() end
  return tide().where(x:ge(0), x:floor(), x:ceil())
end
T.fix = T.trunc
--- Tensor:frac() -> Tensor
--- x - trunc(x): the fractional part, with x's sign.
function T.frac(x) return targ(x, 1, "frac") - T.trunc(x) end

--- tide.lerp(start, end_, weight) -> Tensor
--- start + weight * (end_ - start) (weight a number or tensor), computed from the nearer end as PyTorch.
function M.lerp(a, b, w)
  targ(a, 1, "lerp"); targ(b, 2, "lerp")
  if type(w) ~= "number" and not is_tensor(w) then args.argerr(3, "lerp", "number or Tensor weight", w) end
  local d = b - a
  if type(w) == "number" then
    if math.abs(w) < 0.5 then return a + d * w end
    return b - d * (1 - w)
  end
  return tide().where(w:abs():lt(0.5), a + d * w, b - d * (1 - w))
end

--- tide.addcmul(input, t1, t2, {value=1}) -> Tensor
--- input + value * t1 * t2.
function M.addcmul(c, a, b, opts)
  targ(c, 1, "addcmul"); targ(a, 2, "addcmul"); targ(b, 3, "addcmul")
  local v = args.opts("addcmul", opts, "value", 4).value or 1
  if type(v) ~= "number" then args.argerr(4, "addcmul", "number value", v) end
  return c + a * b * v
end
--- tide.addcdiv(input, t1, t2, {value=1}) -> Tensor
--- input + value * t1 / t2.
function M.addcdiv(c, a, b, opts)
  targ(c, 1, "addcdiv"); targ(a, 2, "addcdiv"); targ(b, 3, "addcdiv")
  local v = args.opts("addcdiv", opts, "value", 4).value or 1
  if type(v) ~= "number" then args.argerr(4, "addcdiv", "number value", v) end
  return c + a / b * v
end

--- tide.logaddexp(a, b) -> Tensor
--- log(exp(a) + exp(b)), without overflow.
function M.logaddexp(a, b)
  targ(a, 1, "logaddexp"); targ(b, 2, "logaddexp")
  local m = tide().maximum(a, b)
  -- equal infinities (both -inf, or both +inf) give themselves, not NaN
  local d = (a - b):abs()
  local r = m + (-d):exp():log1p()
  return tide().where(a:eq(b):logical_and(a:abs():eq(math.huge)), a, r)
end

--- Tensor:isnan() -> Tensor
--- A bool tensor: true where x is NaN.
function T.isnan(x) return targ(x, 1, "isnan"):ne(x) end
--- Tensor:isinf() -> Tensor
--- A bool tensor: true where x is +inf or -inf.
function T.isinf(x) return targ(x, 1, "isinf"):abs():eq(math.huge) end
--- Tensor:isfinite() -> Tensor
--- A bool tensor: true where x is neither NaN nor infinite.
function T.isfinite(x)
  targ(x, 1, "isfinite")
  if not x:is_floating_point() then return x:eq(x) end
  return x:abs():lt(math.huge)                       -- NaN compares false

end

--- Tensor:nan_to_num({nan=0, posinf=, neginf=}) -> Tensor
--- NaN, +inf and -inf replaced (defaults: 0 and the dtype's largest and lowest finite values).
function T.nan_to_num(x, opts)
  targ(x, 1, "nan_to_num")
  opts = args.opts("nan_to_num", opts, "nan posinf neginf", 2)
  if not x:is_floating_point() then return x:clone() end
  local big = x.dtype == tide().float64 and 1.7976931348623157e308 or 3.4028234663852886e38
  local nan, pos, neg = opts.nan or 0, opts.posinf or big, opts.neginf or -big
  local y = tide().where(x:ne(x), nan, x)
  y = tide().where(x:eq(math.huge), pos, y)
  return tide().where(x:eq(-math.huge), neg, y)
end

-- clamp with tensor bounds (numbers stay the op's own attributes)
local clamp = T.clamp
function T.clamp(x, lo, hi)
  if is_tensor(lo) or is_tensor(hi) then
    targ(x, 1, "clamp")
    local y = x
    if lo ~= nil then y = tide().maximum(y, lo) end
    if hi ~= nil then y = tide().minimum(y, hi) end
    return y
  end
  return clamp(x, lo, hi)
end
T.clip = T.clamp

-- -- Reductions -----------------------------------------------------------------------------

-- (dim | dims | nil, keepdim) as the op table's reductions take them
local function red(x, dims, keep, fn)
  if dims == nil then return fn(x) end
  return fn(x, dims, keep)
end

--- Tensor:all(dim, keepdim) -> Tensor
--- True where every element (over dim, or all) is nonzero; a bool tensor.
function T.all(x, dims, keep)
  targ(x, 1, "all")
  return red(x:eq(0), dims, keep, T.sum):eq(0)
end
--- Tensor:any(dim, keepdim) -> Tensor
--- True where some element (over dim, or all) is nonzero; a bool tensor.
function T.any(x, dims, keep)
  targ(x, 1, "any")
  return red(x:ne(0), dims, keep, T.sum):ne(0)
end
--- Tensor:count_nonzero(dims) -> Tensor
--- The number of nonzero elements over dims (or all), int64.
function T.count_nonzero(x, dims)
  targ(x, 1, "count_nonzero")
  return red(x:ne(0), dims, false, T.sum)
end
--- Tensor:nansum(dim, keepdim) -> Tensor
--- The sum with NaNs counted as 0.
function T.nansum(x, dims, keep)
  targ(x, 1, "nansum")
  return red(tide().where(x:ne(x), 0, x), dims, keep, T.sum)
end
--- Tensor:nanmean(dim, keepdim) -> Tensor
--- The mean of the elements that are not NaN.
function T.nanmean(x, dims, keep)
  targ(x, 1, "nanmean")
  local ok = x:eq(x)
  return red(tide().where(ok, x, 0), dims, keep, T.sum) / red(ok, dims, keep, T.sum)
end
--- tide.aminmax(x, {dim=, keepdim=false}) -> min, max
--- The minimum and maximum (over dim, or all) in one call.
function M.aminmax(x, opts)
  targ(x, 1, "aminmax")
  opts = args.opts("aminmax", opts, "dim keepdim", 2)
  if opts.dim == nil then return x:min(), x:max() end
  local lo = x:min(opts.dim, opts.keepdim)
  local hi = x:max(opts.dim, opts.keepdim)
  return lo, hi
end
T.aminmax = M.aminmax

for _, n in ipairs { "lerp", "addcmul", "addcdiv", "logaddexp" } do T[n] = M[n] end

-- -- Activations (tide.nn.functional) -------------------------------------------------------------

--- F.softplus(x, {beta=1, threshold=20}) -> Tensor
--- log(1 + exp(beta x)) / beta, and x itself where beta x > threshold.
function F.softplus(x, opts)
  targ(x, 1, "softplus")
  opts = args.opts("softplus", opts, "beta threshold", 2)
  local beta, th = opts.beta or 1, opts.threshold or 20
  local bx = x * beta
  -- exp of the clamped value: the unused branch of where must not overflow to inf * 0
  return tide().where(bx:gt(th), x, bx:clamp(nil, th):exp():log1p() / beta)
end
--- F.elu(x, {alpha=1}) -> Tensor
--- x where x > 0, alpha (e^x - 1) elsewhere.
function F.elu(x, opts)
  targ(x, 1, "elu")
  local alpha = args.opts("elu", opts, "alpha", 2).alpha or 1
  return tide().where(x:gt(0), x, x:clamp(nil, 0):expm1() * alpha)
end
--- F.selu(x) -> Tensor
--- scale * elu(x, alpha) with PyTorch's self-normalizing constants.
local SELU_A, SELU_S = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
function F.selu(x) targ(x, 1, "selu"); return F.elu(x, { alpha = SELU_A }) * SELU_S end
--- F.celu(x, {alpha=1}) -> Tensor
--- max(0, x) + min(0, alpha (e^(x/alpha) - 1)).
function F.celu(x, opts)
  targ(x, 1, "celu")
  local alpha = args.opts("celu", opts, "alpha", 2).alpha or 1
  return tide().where(x:gt(0), x, (x:clamp(nil, 0) / alpha):expm1() * alpha)
end
--- F.hardtanh(x, {min_val=-1, max_val=1}) -> Tensor
--- x clamped to [min_val, max_val].
function F.hardtanh(x, opts)
  targ(x, 1, "hardtanh")
  opts = args.opts("hardtanh", opts, "min_val max_val", 2)
  return x:clamp(opts.min_val or -1, opts.max_val or 1)
end
--- F.hardsigmoid(x) -> Tensor
--- clamp(x / 6 + 1/2, 0, 1).
function F.hardsigmoid(x) return (targ(x, 1, "hardsigmoid") / 6 + 0.5):clamp(0, 1) end
--- F.hardswish(x) -> Tensor
--- x * clamp(x + 3, 0, 6) / 6.
function F.hardswish(x) return targ(x, 1, "hardswish") * ((x + 3):clamp(0, 6) / 6) end
--- F.mish(x) -> Tensor
--- x * tanh(softplus(x)).
function F.mish(x) return targ(x, 1, "mish") * F.softplus(x):tanh() end
--- F.logsigmoid(x) -> Tensor
--- log(sigmoid(x)) = -softplus(-x).
function F.logsigmoid(x) return -F.softplus(-targ(x, 1, "logsigmoid")) end
--- F.softmin(x, dim) -> Tensor
--- softmax(-x, dim).
function F.softmin(x, dim) return (-targ(x, 1, "softmin")):softmax(dim) end

M.F = F
return M
