--[[
tide.nn.parametrize -- reparametrizations of a module's weight, recomputed
before every forward, as torch.nn.utils 1.13 (merged into tide.nn.utils):
  weight_norm(m, {name="weight", dim=1}):   weight = g * v / ||v||, with
      parameters weight_g (norms over every dim but `dim`, 1-based; dim=false:
      one norm) and weight_v (the direction)
  spectral_norm(m, {name="weight", n_power_iterations=1, eps=1e-12, dim=1}):
      weight = weight_orig / sigma, sigma the largest singular value of
      weight_orig viewed as (size(dim), -1), estimated by power iteration on
      the buffers weight_u, weight_v (updated in training mode only)
--]]
local tide = require "tide"
local core = require "tide.core"
local args = require "tide.args"
local raise, is_tensor = core.raise, core.is_tensor

local M = {}

local function regs(m, fname)
  local r = type(m) == "table" and rawget(m, "_regs")
  if not r then args.argerr(1, fname or "parametrization", "Module", m) end
  return r
end

-- take parameter `name` out of m's parameters (it becomes a computed field)
local function take_param(fname, m, name)
  local params = regs(m, fname)[1]
  local w = params.has[name] and params.map[name]
  if not is_tensor(w) then raise(("%s: module %s has no parameter '%s'"):format(fname, m.__name, name)) end
  params.has[name], params.map[name] = nil, nil
  for i, n in ipairs(params.names) do if n == name then table.remove(params.names, i) break end end
  return w
end

-- run `compute` before every forward of m
local function before_forward(m, name, compute)
  local forward = m.forward
  rawset(m, "forward", function(self, ...)
    rawset(self, name, compute(self))
    return forward(self, ...)
  end)
  rawset(m, name, compute(m))
end

-- the dims of w other than d (1-based), for a norm that keeps d
local function other_dims(w, d)
  local r = {}
  for i = 1, w:dim() do if i ~= d then r[#r + 1] = i end end
  return r
end

local function norm_except(v, d)
  if not d then return v:norm() end
  local dims = other_dims(v, d)
  if #dims == 0 then return v:abs() end
  return v:norm(2, dims, true)
end

--- nn.utils.weight_norm(m[, {name = "weight", dim = 1}]) -> m
--- weight = g * v / ||v||, recomputed before each forward, with parameters weight_g and weight_v.
function M.weight_norm(m, opts)
  opts = args.opts("weight_norm", opts, "name dim", 2)
  local name = opts.name or "weight"
  local d = opts.dim
  if d == nil then d = 1 end
  local w = take_param("weight_norm", m, name)
  if d and d < 0 then d = w:dim() + d + 1 end
  local g, v = tide.no_grad(function() return norm_except(w, d):clone(), w:clone() end)
  m[name .. "_g"] = g:requires_grad_()
  m[name .. "_v"] = v:requires_grad_()
  before_forward(m, name, function(self)
    local vv = self[name .. "_v"]
    return vv * (self[name .. "_g"] / norm_except(vv, d))
  end)
  return m
end

local function normalize(x, eps) return x / (x:norm():clamp(eps)) end

--- nn.utils.spectral_norm(m[, {name = "weight", n_power_iterations = 1, eps = 1e-12, dim = 1}]) -> m
--- weight = weight_orig / sigma, its largest singular value estimated by power iteration.
function M.spectral_norm(m, opts)
  opts = args.opts("spectral_norm", opts, "name n_power_iterations eps dim", 2)
  local name, iters, eps = opts.name or "weight", opts.n_power_iterations or 1, opts.eps or 1e-12
  if not args.is_int(iters) or iters < 1 or iters >= 2 ^ 31 then
    raise(("spectral_norm: n_power_iterations must be a positive integer below 2^31, got %s"):format(tostring(iters)))
  end
  if type(eps) ~= "number" then raise(("spectral_norm: eps must be a number, got %s"):format(args.typename(eps))) end
  if opts.dim ~= nil and not args.is_int(opts.dim) then
    raise(("spectral_norm: dim must be an integer, got %s"):format(tostring(opts.dim)))
  end
  local w = take_param("spectral_norm", m, name)
  local d = opts.dim or 1
  local function matrix(t)                    -- (size(d), -1)
    if d ~= 1 then
      local perm = { d }
      for i = 1, t:dim() do if i ~= d then perm[#perm + 1] = i end end
      t = t:permute(perm)
    end
    return t:reshape(t:size(1), -1)
  end
  m[name .. "_orig"] = w
  local W = tide.no_grad(function() return matrix(w) end)
  m:register_buffer(name .. "_u", normalize(tide.randn(W:size(1), { dtype = w.dtype, device = w.device }), eps))
  m:register_buffer(name .. "_v", normalize(tide.randn(W:size(2), { dtype = w.dtype, device = w.device }), eps))
  local function power(self, n)
    tide.no_grad(function()
      local Wm = matrix(self[name .. "_orig"])
      local u, v = self[name .. "_u"], self[name .. "_v"]
      for _ = 1, n do
        v:copy_(normalize(Wm:t():mv(u), eps))
        u:copy_(normalize(Wm:mv(v), eps))
      end
    end)
  end
  power(m, 15)                                 -- PyTorch also starts from 15 iterations
  before_forward(m, name, function(self)
    if self.training then power(self, iters) end
    local Wm = matrix(self[name .. "_orig"])
    local sigma = self[name .. "_u"]:dot(Wm:mv(self[name .. "_v"]))
    return self[name .. "_orig"] / sigma
  end)
  return m
end

-- -- register_parametrization ------------------------------------------------------------------
-- torch.nn.utils.parametrize: m[name] becomes parametrization(original), with
-- the original parameter at m.parametrizations[name].original (state_dict key
-- "parametrizations.<name>.original") and the parametrization modules as that
-- list's children ("parametrizations.<name>.0.base"); registering again on the
-- same name chains them. The value is recomputed before every forward.

local nn_mod
local function nn() nn_mod = nn_mod or require "tide.nn"; return nn_mod end

local function param_list_class()
  local NN = nn()
  if not M._PL then
    local PL = NN.ModuleList:extend("ParametrizationList")
    function PL:value()
      local x = self.original
      for i = 1, #self do x = self[i](x) end
      return x
    end
    function PL:forward() return self:value() end
    M._PL = PL
  end
  return M._PL
end

-- register_parametrization(m, name, p, {unsafe=false}): p a Module (or a
-- callable) whose forward maps the original to the value; a p:right_inverse(w)
-- sets the original from the current value (else the original is the value)
--- nn.utils.register_parametrization(m, name, p[, {unsafe = false}]) -> m
--- m[name] becomes p(original), recomputed before every forward; the original lives at m.parametrizations[name].original.
function M.register_parametrization(m, name, p, opts)
  opts = args.opts("register_parametrization", opts, "unsafe", 4)
  regs(m, "register_parametrization")
  if type(name) ~= "string" then args.argerr(2, "register_parametrization", "string name", name) end
  if type(p) ~= "table" or type(p.forward) ~= "function" then
    args.argerr(3, "register_parametrization", "Module with a forward", p)
  end
  local NN = nn()
  local plist = rawget(m, "parametrizations") or (m.parametrizations)
  if plist == nil then
    m.parametrizations = NN.ModuleDict({})
    plist = m.parametrizations
  end
  local entry = plist:get(name)
  if entry then                                 -- chain onto the existing list
    entry:append(p)
  else
    local w = take_param("register_parametrization", m, name)
    local orig = tide.no_grad(function()
      if p.right_inverse then return p:right_inverse(w:detach()) end
      return w:detach():clone()
    end)
    if not opts.unsafe then
      local y = tide.no_grad(function() return p(orig) end)
      local function desc(t) return is_tensor(t) and ("%s [%s]"):format(t.dtype.name, table.concat(t:size(), ",")) or type(t) end
      if desc(y) ~= desc(w) then
        raise(("register_parametrization: the parametrization changes %s from %s to %s; pass {unsafe = true} to allow it")
          :format(name, desc(w), desc(y)))
      end
    end
    entry = param_list_class()(p)
    entry.original = tide.nn.Parameter(orig)
    plist:update({ { name, entry } })
    before_forward(m, name, function(self) return self.parametrizations:get(name):value() end)
  end
  rawset(m, name, entry:value())
  return m
end

--- nn.utils.is_parametrized(m[, name]) -> boolean
--- Whether m (or its parameter name) has a parametrization.
function M.is_parametrized(m, name)
  local plist = type(m) == "table" and rawget(m, "_regs") and m.parametrizations
  if not plist then return false end
  if name == nil then return true end
  return plist:get(name) ~= nil
end

-- -- orthogonal --------------------------------------------------------------------------------
-- torch.nn.utils.parametrizations.orthogonal with the matrix exponential map
-- and the dynamic trivialization: weight = base @ exp(A)[:, :k], A the
-- skew-symmetric matrix of the original's strictly lower triangle, base an
-- orthogonal buffer set from the weight at registration (the original starts
-- at -I, so exp(A) = I and the weight is base's first k columns).

-- exp(A) by scaling and squaring with a degree-18 Taylor polynomial (error below
-- 1e-17 relative once ||A / 2^s|| <= 1): differentiable, made of matmuls. The
-- scaling reads ||A||_1 eagerly; while traced (tide.compile) it is fixed at 2^8.
--- nn.utils.matrix_exp(A) -> Tensor
--- The matrix exponential of a square matrix (scaling and squaring; differentiable).
function M.matrix_exp(A)
  if not is_tensor(A) or A:dim() ~= 2 or A:size(1) ~= A:size(2) then
    args.argerr(1, "matrix_exp", "square 2-D Tensor", A)
  end
  local s = 8
  if not core.tracing() then
    local nrm = tide.no_grad(function() return A:abs():sum(1):max():item() end)
    -- an inf norm would square forever; inf or NaN entries give NaN, as PyTorch's
    s = (nrm > 1 and nrm < math.huge) and math.ceil(math.log(nrm) / math.log(2)) or 0
  end
  local B = A / 2 ^ s
  local n = A:size(1)
  local I = tide.eye(n, { dtype = A.dtype, device = A.device })
  -- Horner: I + B (I + B/2 (I + B/3 (...)))
  local E = I + B / 18
  for k = 17, 1, -1 do E = I + B:matmul(E) / k end
  for _ = 1, s do E = E:matmul(E) end
  return E
end

-- Q with orthonormal columns from A (n x k, n >= k), signs fixed so that the
-- diagonal of R is positive: modified Gram-Schmidt in float64 (no gradient)
local function make_orthogonal(A)
  return tide.no_grad(function()
    local X = A:double():clone()
    local n, k = X:size(1), X:size(2)
    for j = 1, k do
      local v = X:narrow(2, j, 1)
      for i = 1, j - 1 do
        local q = X:narrow(2, i, 1)
        v:sub_(q * (q * v):sum())
      end
      local nv = v:norm():item()
      if nv < 1e-12 then                   -- a dependent column: any unit vector orthogonal to the others
        v:copy_(tide.randn(n, 1, { dtype = tide.float64 }))
        for i = 1, j - 1 do local q = X:narrow(2, i, 1); v:sub_(q * (q * v):sum()) end
        nv = v:norm():item()
      end
      v:div_(nv)
    end
    return X:to(A.dtype)
  end)
end

local function lower_mask(n, k, like)
  local i = tide.arange(n, { dtype = tide.float64 }):view(n, 1)
  local j = tide.arange(k, { dtype = tide.float64 }):view(1, k)
  return i:gt(j):to(like.dtype):to(like.device)
end

--- nn.utils.orthogonal(m[, {name = "weight"}]) -> m
--- Keeps m's weight orthogonal (a parametrization through the matrix exponential, as PyTorch's).
function M.orthogonal(m, opts)
  opts = args.opts("orthogonal", opts, "name orthogonal_map use_trivialization", 2)
  regs(m, "orthogonal")
  local name = opts.name or "weight"
  local map = opts.orthogonal_map or "matrix_exp"
  if map ~= "matrix_exp" then
    raise(("orthogonal: orthogonal_map '%s' is not available (tide has 'matrix_exp')"):format(tostring(map)))
  end
  if opts.use_trivialization == false then
    raise("orthogonal: use_trivialization=false is not available (the matrix exponential needs it, as in PyTorch)")
  end
  local w = rawget(m, "_regs") and regs(m)[1].map[name]
  if not is_tensor(w) or w:dim() ~= 2 then
    raise(("orthogonal: %s.%s must be a 2-D parameter, got %s"):format(m.__name, name,
      is_tensor(w) and "[" .. table.concat(w:size(), ",") .. "]" or type(w)))
  end
  if not w.dtype.is_floating_point then raise("orthogonal: the weight must be floating point") end
  local NN = nn()
  local Orth = NN.Module:extend("_Orthogonal")
  local n0, k0 = w:size(1), w:size(2)
  local transpose = n0 < k0
  local n, k = transpose and k0 or n0, transpose and n0 or k0
  function Orth:forward(X)
    if transpose then X = X:t() end
    local L = X * lower_mask(n, k, X)                          -- strictly lower part
    if n > k then L = tide.cat({ L, tide.zeros(n, n - k, { dtype = X.dtype, device = X.device }) }, 2) end
    local Q = M.matrix_exp(L - L:t())
    if n > k then Q = Q:narrow(2, 1, k) end
    Q = self.base:matmul(Q)
    return transpose and Q:t() or Q
  end
  -- the current weight made orthogonal (completed to n x n) becomes base; the original is -I
  function Orth:right_inverse(W)
    if transpose then W = W:t() end
    local Q = W
    if n > k then Q = tide.cat({ W, tide.randn(n, n - k, { dtype = W.dtype, device = W.device }) }, 2) end
    self.base:copy_(make_orthogonal(Q))
    local neg = tide.zeros(n, k, { dtype = W.dtype, device = W.device })
    for i = 1, k do neg[{ i, i }] = -1 end
    return transpose and neg:t():contiguous() or neg
  end
  local o = Orth()
  o:register_buffer("base", tide.zeros(n, n, { dtype = w.dtype, device = w.device }))
  return M.register_parametrization(m, name, o)
end

return M
