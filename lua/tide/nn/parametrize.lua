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

local function regs(m)
  local r = rawget(m, "_regs")
  if not r then raise("parametrization: expected a tide.nn Module") end
  return r
end

-- take parameter `name` out of m's parameters (it becomes a computed field)
local function take_param(fname, m, name)
  local params = regs(m)[1]
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

function M.spectral_norm(m, opts)
  opts = args.opts("spectral_norm", opts, "name n_power_iterations eps dim", 2)
  local name, iters, eps = opts.name or "weight", opts.n_power_iterations or 1, opts.eps or 1e-12
  if iters < 1 then raise(("spectral_norm: n_power_iterations must be positive, got %d"):format(iters)) end
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

return M
