--[[
tide.ops_random -- sampling on tide's Philox stream (tide.rand/randn, seeded by
tide.manual_seed, the same values for any thread count): multinomial (with and
without replacement, 1-D or a 2-D batch), bernoulli, normal with tensor
mean/std, randperm, and the in-place uniform_ normal_ exponential_.
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local args = require "tide.args"
local raise, is_tensor = core.raise, core.is_tensor
local T = tensor.Tensor
local targ = args.tensor

local M = {}

local function tide() return require "tide" end
local function like(x) return { dtype = x.dtype, device = x.device } end

--- tide.multinomial(probs, num_samples[, {replacement = false}]) -> Tensor
--- 1-based category indices (int64) drawn from the rows of probs (1-D, or 2-D: one row per batch), proportional to the (unnormalized, non-negative) weights. Without replacement a row gives each category at most once (num_samples <= categories), drawn as PyTorch's: the largest p / q for q ~ Exp(1). Inside tide.compile the checks of the values (negative, all-zero rows) are skipped.
function T.multinomial(p, n, opts)
  targ(p, 1, "multinomial")
  n = args.count(n, 2, "multinomial", "positive integer num_samples")
  local repl = args.opts("multinomial", opts, "replacement", 3).replacement
  if p.ndim < 1 or p.ndim > 2 then
    raise(("multinomial: probs must be 1-D or 2-D, got %d dims"):format(p.ndim), 2)
  end
  if not p:is_floating_point() then raise("multinomial: probs must be a floating point tensor, got " .. p.dtype.name, 2) end
  local one = p.ndim == 1
  local w = one and p:unsqueeze(1) or p
  local rows, k = w:size(1), w:size(2)
  if n == 0 then raise("multinomial: num_samples must be positive, got 0", 2) end
  if k == 0 then raise("multinomial: probs has no categories", 2) end
  if not repl and n > k then
    raise(("multinomial: cannot draw %d samples without replacement from %d categories"):format(n, k), 2)
  end
  if not core.tracing() then
    local bad = w:lt(0):logical_or(w:ne(w)):logical_or(w:eq(math.huge)):any():item()
    if bad then raise("multinomial: probabilities must be finite and non-negative (no NaN, inf or negative entries)", 2) end
    local zero = w:sum(2):eq(0):any():item()
    if zero then raise("multinomial: a row of probs sums to zero", 2) end
    if not repl and w:gt(0):sum(2):lt(n):any():item() then
      raise(("multinomial: a row has fewer than %d categories with nonzero probability (without replacement)"):format(n), 2)
    end
  end
  w = w:double()
  local out
  if repl then
    -- inverse CDF: the category is 1 + the number of cumulative weights <= u * total
    local cdf = w:cumsum(2)                                      -- (rows, k)
    local total = cdf:narrow(2, k, 1)                            -- (rows, 1)
    local u = tide().rand(rows, n, { dtype = tide().float64, device = p.device }) * total
    out = cdf:unsqueeze(2):le(u:unsqueeze(3)):sum(3) + 1          -- (rows, n)
    out = out:clamp(1, k)
  else
    -- keys p / q with q ~ Exp(1); the n largest, one at a time
    local q = -(1 - tide().rand(rows, k, { dtype = tide().float64, device = p.device })):log()
    local keys = w / q
    local picks = {}
    for s = 1, n do
      local _, i = keys:max(2, true)                             -- (rows, 1), 1-based
      picks[s] = i
      if s < n then keys = keys:scatter_add(2, i, tide().full({ rows, 1 }, -math.huge, { dtype = tide().float64, device = p.device })) end
    end
    out = tide().cat(picks, 2)
  end
  return one and out:reshape(n) or out
end

--- tide.bernoulli(p[, prob]) -> Tensor
--- 1 with probability p (a tensor of probabilities, elementwise), else 0, in p's dtype; with a number prob, draws with that probability in the shape of the first argument.
function T.bernoulli(x, prob)
  targ(x, 1, "bernoulli")
  if prob ~= nil and type(prob) ~= "number" then args.argerr(2, "bernoulli", "number probability", prob) end
  if prob ~= nil and (prob < 0 or prob > 1) then
    raise(("bernoulli: probability %s is outside [0, 1]"):format(tostring(prob)), 2)
  end
  local dt = x:is_floating_point() and x.dtype or tide().get_default_dtype()
  local u = tide().rand(x:size(), { dtype = tide().float64, device = x.device })
  return u:lt(prob or x):to(dt)
end

--- tide.normal(mean, std[, size]) -> Tensor
--- Normal draws with mean and standard deviation mean, std (tensors broadcast together, or numbers; two numbers need a size).
function M.normal(mean, std, size)
  local mt, st = is_tensor(mean), is_tensor(std)
  if not mt and type(mean) ~= "number" then args.argerr(1, "normal", "Tensor or number mean", mean) end
  if not st and type(std) ~= "number" then args.argerr(2, "normal", "Tensor or number std", std) end
  if not st and std < 0 then raise(("normal: std must be non-negative, got %s"):format(tostring(std)), 2) end
  if not mt and not st then
    if type(size) ~= "table" then args.argerr(3, "normal", "size table (mean and std are numbers)", size) end
    return tide().randn(size) * std + mean
  end
  local ref = mt and mean or std
  local z = (mt and st) and (mean + std * 0) or ref
  local e = tide().randn(z:size(), { dtype = ref:is_floating_point() and ref.dtype or nil, device = ref.device })
  return e * std + mean
end

--- Tensor:uniform_([from = 0, to = 1]) -> Tensor
--- Fills x in place with uniform draws from [from, to).
function T.uniform_(x, a, b)
  targ(x, 1, "uniform_")
  a, b = a or 0, b or 1
  if type(a) ~= "number" or type(b) ~= "number" then args.argerr(2, "uniform_", "numbers from, to", a) end
  if a > b then raise(("uniform_: from (%s) must not exceed to (%s)"):format(tostring(a), tostring(b)), 2) end
  return x:copy_(tide().rand(x:size(), like(x)) * (b - a) + a)
end
--- Tensor:normal_([mean = 0, std = 1]) -> Tensor
--- Fills x in place with normal draws.
function T.normal_(x, m, s)
  targ(x, 1, "normal_")
  m, s = m or 0, s or 1
  if type(m) ~= "number" or type(s) ~= "number" then args.argerr(2, "normal_", "numbers mean, std", m) end
  if s < 0 then raise(("normal_: std must be non-negative, got %s"):format(tostring(s)), 2) end
  return x:copy_(tide().randn(x:size(), like(x)) * s + m)
end
--- Tensor:exponential_([lambd = 1]) -> Tensor
--- Fills x in place with exponential draws of rate lambd: -log(1 - u) / lambd.
function T.exponential_(x, l)
  targ(x, 1, "exponential_")
  l = l or 1
  if type(l) ~= "number" or not (l > 0) then raise(("exponential_: lambd must be a positive number, got %s"):format(tostring(l)), 2) end
  local u = tide().rand(x:size(), { dtype = tide().float64, device = x.device })
  return x:copy_(-(1 - u):log() / l)
end

--- tide.randperm(n[, opts]) -> Tensor
--- A random permutation of 1..n (int64, 1-based; opts: dtype, device), by Fisher-Yates over tide.rand draws.
function M.randperm(n, opts)
  n = args.count(n, 1, "randperm", "non-negative integer n")
  opts = args.opts("randperm", opts, "dtype device", 2)
  if core.tracing() then raise("randperm: draws a permutation in Lua, which tide.compile cannot trace; call it outside", 2) end
  if n > 2 ^ 27 then raise(("randperm: n = %.0f is above 2^27 (the permutation is drawn in a Lua table)"):format(n), 2) end
  local p = {}
  for i = 1, n do p[i] = i end
  if n > 1 then
    local u = tide().rand(n, { dtype = tide().float64 }):totable()
    for i = n, 2, -1 do
      local j = math.floor(u[i] * i) + 1
      p[i], p[j] = p[j], p[i]
    end
  end
  return tide().tensor(p, { dtype = opts.dtype or tide().int64, device = opts.device })
end

M.multinomial, M.bernoulli = T.multinomial, T.bernoulli
return M
