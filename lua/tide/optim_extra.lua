--[[
tide.optim_extra -- NAdam, RAdam, Adadelta, Adamax and LBFGS (with PyTorch's strong
Wolfe line search), installed into tide.optim by optim.lua, whose helpers (make,
validation, state buffers) come in the table H. Each update follows PyTorch 2's
single-tensor algorithm operation for operation (float64 trajectories agree to
the last bits), with the scalar arithmetic on Lua numbers (doubles).
--]]
local core = require "tide.core"
local autograd = require "tide.autograd"
local raise, is_tensor, C = core.raise, core.is_tensor, core.C

-- optim.lua's helpers, set by the installer at the end of this file
local H = {}
local function make(...) return H.make(...) end
local function nonneg(...) return H.nonneg(...) end
local function check_betas(...) return H.check_betas(...) end
local function zeros(p) return H.zeros(p) end

local classes = {}      -- name -> class, put into tide.optim by the installer

-- a class whose instances are made by make(cls, name, defaults, validate, params, opts)
local function class(name, defaults, validate)
  local cls = {}
  cls.__index = cls
  classes[name] = { cls, function(c, params, opts) return make(c, name, defaults, validate, params, opts) end }
  return cls
end

-- exp_avg.lerp_(grad, w) as PyTorch computes it: from the nearer end
local function lerp_(a, b, w)
  if math.abs(w) < 0.5 then return a:add_((b - a):mul_(w)) end
  return a:copy_(b - (b - a):mul_(1 - w))
end

local function adam_family_validate(extra)
  return function(name, g)
    nonneg(name, g, "lr", "learning rate"); nonneg(name, g, "eps", "epsilon value")
    check_betas(name, g); nonneg(name, g, "weight_decay", "weight_decay value")
    if extra then extra(name, g) end
  end
end

local function first_moments(p, st)
  if st.step == nil then
    st.step = 0
    st.exp_avg = zeros(p)
    st.exp_avg_sq = zeros(p)
  end
  st.step = st.step + 1
  return st.step
end

-- -- NAdam -----------------------------------------------------------------------------------

--- optim.NAdam(params[, {lr = 2e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, momentum_decay = 4e-3, decoupled_weight_decay, maximize}])
--- Adam with Nesterov momentum (Dozat), PyTorch's NAdam; decoupled_weight_decay = true gives NAdamW.
local NAdam = class("NAdam", { lr = 2e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, momentum_decay = 4e-3,
  decoupled_weight_decay = false, maximize = false }, adam_family_validate(function(name, g)
    nonneg(name, g, "momentum_decay", "momentum_decay value")
  end))

function NAdam:_update(g, p, grad, st)
  if st.mu_product == nil then st.mu_product = 1 end
  local step = first_moments(p, st)
  if g.maximize then grad = -grad end
  local b1, b2, lr = g.betas[1], g.betas[2], g.lr
  local bc2 = 1 - b2 ^ step
  if g.weight_decay ~= 0 then
    if g.decoupled_weight_decay then p:mul_(1 - lr * g.weight_decay) else grad = grad + p * g.weight_decay end
  end
  -- the momentum schedule mu_t = beta1 (1 - 0.96^(t psi) / 2), and its running product
  local mu = b1 * (1 - 0.5 * 0.96 ^ (step * g.momentum_decay))
  local mu_next = b1 * (1 - 0.5 * 0.96 ^ ((step + 1) * g.momentum_decay))
  st.mu_product = st.mu_product * mu
  lerp_(st.exp_avg, grad, 1 - b1)
  st.exp_avg_sq:mul_(b2):add_((grad * (1 - b2)):mul_(grad))
  local denom = (st.exp_avg_sq / bc2):sqrt_():add_(g.eps)
  p:add_((grad * (-lr * (1 - mu) / (1 - st.mu_product))):div_(denom))
  p:add_((st.exp_avg * (-lr * mu_next / (1 - st.mu_product * mu_next))):div_(denom))
end

-- -- RAdam -----------------------------------------------------------------------------------

--- optim.RAdam(params[, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, decoupled_weight_decay, maximize}])
--- Rectified Adam: plain momentum steps until the variance estimate is tractable (rho_t > 5).
local RAdam = class("RAdam", { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0,
  decoupled_weight_decay = false, maximize = false }, adam_family_validate())

function RAdam:_update(g, p, grad, st)
  local step = first_moments(p, st)
  if g.maximize then grad = -grad end
  local b1, b2, lr = g.betas[1], g.betas[2], g.lr
  if g.weight_decay ~= 0 then
    if g.decoupled_weight_decay then p:mul_(1 - lr * g.weight_decay) else grad = grad + p * g.weight_decay end
  end
  lerp_(st.exp_avg, grad, 1 - b1)
  st.exp_avg_sq:mul_(b2):add_((grad * (1 - b2)):mul_(grad))
  local bc1, bc2 = 1 - b1 ^ step, 1 - b2 ^ step
  local corrected = st.exp_avg / bc1
  -- the length of the approximated simple moving average, and its limit
  local rho_inf = 2 / (1 - b2) - 1
  local rho_t = rho_inf - 2 * step * (b2 ^ step) / bc2
  if rho_t > 5 then
    local rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ^ 0.5
    local adaptive = (bc2 ^ 0.5) / st.exp_avg_sq:sqrt():add_(g.eps)
    p:sub_(corrected:mul_(lr):mul_(adaptive):mul_(rect))
  else
    p:sub_(corrected:mul_(lr))
  end
end

-- -- Adadelta --------------------------------------------------------------------------------

--- optim.Adadelta(params[, {lr = 1, rho = 0.9, eps = 1e-6, weight_decay = 0, maximize}])
--- Adadelta (Zeiler): steps scaled by the ratio of running RMS of updates and of gradients.
local Adadelta = class("Adadelta", { lr = 1, rho = 0.9, eps = 1e-6, weight_decay = 0, maximize = false },
  function(name, g)
    nonneg(name, g, "lr", "learning rate"); nonneg(name, g, "eps", "epsilon value")
    nonneg(name, g, "weight_decay", "weight_decay value")
    if type(g.rho) ~= "number" or g.rho < 0 or g.rho > 1 then
      raise(("%s: invalid rho value: %s (must be in [0, 1])"):format(name, tostring(g.rho)))
    end
  end)

function Adadelta:_update(g, p, grad, st)
  if st.step == nil then st.step, st.square_avg, st.acc_delta = 0, zeros(p), zeros(p) end
  st.step = st.step + 1
  if g.maximize then grad = -grad end
  if g.weight_decay ~= 0 then grad = grad + p * g.weight_decay end
  local rho = g.rho
  st.square_avg:mul_(rho):add_((grad * (1 - rho)):mul_(grad))
  local std = (st.square_avg + g.eps):sqrt_()
  local delta = (st.acc_delta + g.eps):sqrt_():div_(std):mul_(grad)
  st.acc_delta:mul_(rho):add_((delta * (1 - rho)):mul_(delta))
  p:add_(delta:mul_(-g.lr))
end

-- -- Adamax ----------------------------------------------------------------------------------

--- optim.Adamax(params[, {lr = 2e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, maximize}])
--- Adam with the infinity norm: the second moment is a decaying running maximum of |grad|.
local Adamax = class("Adamax", { lr = 2e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = 0, maximize = false },
  adam_family_validate())

function Adamax:_update(g, p, grad, st)
  if st.step == nil then st.step, st.exp_avg, st.exp_inf = 0, zeros(p), zeros(p) end
  st.step = st.step + 1
  if g.maximize then grad = -grad end
  if g.weight_decay ~= 0 then grad = grad + p * g.weight_decay end
  local b1, b2 = g.betas[1], g.betas[2]
  lerp_(st.exp_avg, grad, 1 - b1)
  st.exp_inf:mul_(b2):maximum_(grad:abs():add_(g.eps))
  local clr = g.lr / (1 - b1 ^ st.step)
  p:add_((st.exp_avg * -clr):div_(st.exp_inf))
end

-- -- LBFGS -----------------------------------------------------------------------------------

-- Python's min/max of two values (the first unless the second is strictly
-- beyond it): the same picks as PyTorch's line search, NaN included
local function pmax(a, b) if b > a then return b end return a end
local function pmin(a, b) if b < a then return b end return a end

-- The minimizer of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2,
-- clamped to bounds (default: the interval between the points); the midpoint
-- of the bounds when the cubic has no minimum (PyTorch's _cubic_interpolate).
local function cubic_interpolate(x1, f1, g1, x2, f2, g2, lo, hi)
  if lo == nil then
    if x1 <= x2 then lo, hi = x1, x2 else lo, hi = x2, x1 end
  end
  local d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
  local d2_square = d1 ^ 2 - g1 * g2
  if d2_square >= 0 then
    local d2 = math.sqrt(d2_square)
    local min_pos
    if x1 <= x2 then min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2)) end
    return pmin(pmax(min_pos, lo), hi)
  end
  return (lo + hi) / 2
end

local function dot(a, b) return a:dot(b):item() end
local function absmax(a) return a:abs():max():item() end

-- A step t along d from x satisfying the strong Wolfe conditions
-- (f(x + t d) <= f + c1 t gtd, |g(x + t d).d| <= -c2 gtd): bracketing, then
-- zooming with cubic interpolation (PyTorch's _strong_wolfe, from Torch7's
-- lswolfe.lua). obj(t) -> loss, flat gradient at x + t d (x restored after).
local function strong_wolfe(obj, t, d, f, g, gtd, tolerance_change, max_ls)
  local c1, c2 = 1e-4, 0.9
  local d_norm = absmax(d)
  g = g:clone()
  local f_new, g_new = obj(t)
  local evals = 1
  local gtd_new = dot(g_new, d)
  local t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
  local done, ls_iter = false, 0
  local bracket, bf, bg, bgtd
  while ls_iter < max_ls do
    if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev) then
      bracket, bf, bg, bgtd = { t_prev, t }, { f_prev, f_new }, { g_prev, g_new:clone() }, { gtd_prev, gtd_new }
      break
    end
    if math.abs(gtd_new) <= -c2 * gtd then
      bracket, bf, bg, done = { t }, { f_new }, { g_new }, true
      break
    end
    if gtd_new >= 0 then
      bracket, bf, bg, bgtd = { t_prev, t }, { f_prev, f_new }, { g_prev, g_new:clone() }, { gtd_prev, gtd_new }
      break
    end
    -- extrapolate: the cubic's minimum between 1.01 t and 10 t
    local min_step, max_step = t + 0.01 * (t - t_prev), t * 10
    local tmp = t
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, min_step, max_step)
    t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new:clone(), gtd_new
    f_new, g_new = obj(t)
    evals = evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
  end
  if ls_iter == max_ls then bracket, bf, bg = { 0, t }, { f, f_new }, { g, g_new } end

  -- zoom: shrink the bracket [low, high] until a point satisfies the conditions
  local insuf_progress = false
  local low, high = 1, 2
  if not (bf[1] <= bf[#bf]) then low, high = 2, 1 end
  while not done and ls_iter < max_ls do
    if math.abs(bracket[2] - bracket[1]) * d_norm < tolerance_change then break end
    t = cubic_interpolate(bracket[1], bf[1], bgtd[1], bracket[2], bf[2], bgtd[2])
    -- a trial too close to an end twice in a row (or at it) moves 0.1 of the bracket inside
    local bmax, bmin = pmax(bracket[1], bracket[2]), pmin(bracket[1], bracket[2])
    local eps = 0.1 * (bmax - bmin)
    if pmin(bmax - t, t - bmin) < eps then
      if insuf_progress or t >= bmax or t <= bmin then
        if math.abs(t - bmax) < math.abs(t - bmin) then t = bmax - eps else t = bmin + eps end
        insuf_progress = false
      else
        insuf_progress = true
      end
    else
      insuf_progress = false
    end
    f_new, g_new = obj(t)
    evals = evals + 1
    gtd_new = dot(g_new, d)
    ls_iter = ls_iter + 1
    if f_new > (f + c1 * t * gtd) or f_new >= bf[low] then
      -- Armijo fails, or not below the low end: the trial becomes the high end
      bracket[high], bf[high], bg[high], bgtd[high] = t, f_new, g_new:clone(), gtd_new
      if bf[1] <= bf[2] then low, high = 1, 2 else low, high = 2, 1 end
    else
      if math.abs(gtd_new) <= -c2 * gtd then
        done = true
      elseif gtd_new * (bracket[high] - bracket[low]) >= 0 then
        bracket[high], bf[high], bg[high], bgtd[high] = bracket[low], bf[low], bg[low], bgtd[low]
      end
      bracket[low], bf[low], bg[low], bgtd[low] = t, f_new, g_new:clone(), gtd_new
    end
  end
  return bf[low], bg[low], bracket[low], evals
end

--- optim.LBFGS(params[, {lr = 1, max_iter = 20, max_eval = max_iter * 5 / 4, tolerance_grad = 1e-7, tolerance_change = 1e-9, history_size = 100, line_search_fn, maximize}])
--- L-BFGS (PyTorch's, after minFunc); line_search_fn = 'strong_wolfe' or nil; step(closure) requires the closure.
local LBFGS = {}
LBFGS.__index = LBFGS
LBFGS._state_any_shape = true     -- its state holds flat vectors (load_state_dict skips the shape check)
local lbfgs_defaults = { lr = 1, max_iter = 20, max_eval = false, tolerance_grad = 1e-7, tolerance_change = 1e-9,
  history_size = 100, line_search_fn = false, maximize = false }

local function posint(name, g, key)
  local v = g[key]
  if type(v) ~= "number" or v < 1 or v ~= math.floor(v) then
    raise(("%s: %s must be a positive integer, got %s"):format(name, key, tostring(v)))
  end
end

local function lbfgs_validate(name, g)
  nonneg(name, g, "lr", "learning rate")
  posint(name, g, "max_iter"); posint(name, g, "max_eval"); posint(name, g, "history_size")
  nonneg(name, g, "tolerance_grad", "tolerance_grad value"); nonneg(name, g, "tolerance_change", "tolerance_change value")
  local ls = g.line_search_fn
  if ls ~= false and ls ~= "strong_wolfe" then
    raise(("%s: line_search_fn must be nil or 'strong_wolfe', got %s"):format(name,
      type(ls) == "string" and "'" .. ls .. "'" or tostring(ls)))
  end
end

classes.LBFGS = { LBFGS, function(cls, params, opts)
  -- max_eval's default follows max_iter (the option table is checked by make)
  if type(opts) == "table" and opts.max_eval == nil then
    local o = {}
    for k, v in pairs(opts) do o[k] = v end
    local mi = o.max_iter or 20
    if type(mi) == "number" then o.max_eval = math.floor(mi * 5 / 4) end
    opts = o
  elseif opts == nil then
    opts = { max_eval = 25 }
  end
  local self = make(cls, "LBFGS", lbfgs_defaults, lbfgs_validate, params, opts)   -- one group (add_param_group)
  self._params = self.param_groups[1].params
  return self
end }

--- optim.LBFGS:add_param_group(group)
--- L-BFGS takes a single parameter group: adding a second one raises.
function LBFGS:add_param_group(group)
  if #self.param_groups >= 1 then raise("LBFGS: doesn't support per-parameter options (parameter groups)") end
  H.Optimizer.add_param_group(self, group)
end

-- the gradients of all parameters as one flat vector (zeros where a parameter has none)
function LBFGS:_gather_flat_grad(maximize)
  local views = {}
  for i, p in ipairs(self._params) do
    local gr = p.grad
    views[i] = gr ~= nil and gr:reshape(-1) or zeros(p):reshape(-1)
  end
  local flat = #views == 1 and views[1]:clone() or require("tide").cat(views, 1)
  if maximize then flat:neg_() end
  return flat
end

-- p += step * the slice of the flat update that belongs to p
function LBFGS:_add_grad(step, update)
  local off = 0
  for _, p in ipairs(self._params) do
    local n = p:numel()
    p:add_(update:narrow(1, off + 1, n):view_as(p) * step)
    off = off + n
  end
end

local function loss_value(l)
  if is_tensor(l) then return l:item() end
  if type(l) == "number" then return l end
  raise(("LBFGS: the closure must return the loss (a Tensor or a number), got %s"):format(type(l)))
end

--- optim.LBFGS:step(closure) -> loss
--- Up to max_iter L-BFGS iterations; closure re-evaluates the model, calls backward and returns the loss.
function LBFGS:step(closure)
  if closure == nil then
    raise("LBFGS: step needs a closure that re-evaluates the model and returns the loss, e.g. "
      .. "opt:step(function() opt:zero_grad(); local l = loss_fn(); l:backward(); return l end)")
  end
  if type(closure) ~= "function" then H.argerr(1, "step", "function expected, got " .. H.typename(closure)) end
  if C.td_is_tracing() ~= 0 then
    raise("LBFGS: step cannot run inside tide.compile: its line search and stopping tests read the loss "
      .. "and gradients (data-dependent control flow); call opt:step(closure) outside the compiled function "
      .. "(the closure itself may be compiled)")
  end
  local g = self.param_groups[1]
  local lr, max_iter, max_eval = g.lr, g.max_iter, g.max_eval
  local tol_grad, tol_change, history_size = g.tolerance_grad, g.tolerance_change, g.history_size
  local maximize, line_search = g.maximize, g.line_search_fn
  local function evaluate()
    local l = autograd.enable_grad(closure)
    return l, maximize and -loss_value(l) or loss_value(l)
  end
  local orig_loss
  autograd.no_grad(function()
    local p1 = self._params[1]
    local state = self.state[p1]
    if state == nil then state = {}; self.state[p1] = state end
    state.func_evals, state.n_iter = state.func_evals or 0, state.n_iter or 0
    -- buffers made before the parameters moved or changed dtype follow them
    for k, v in pairs(state) do
      if is_tensor(v) and (v.device_type ~= p1.device_type or v.scalar_type ~= p1.scalar_type) then
        state[k] = v:to(p1.device, p1.dtype)
      elseif type(v) == "table" then
        for i, x in pairs(v) do
          if is_tensor(x) and (x.device_type ~= p1.device_type or x.scalar_type ~= p1.scalar_type) then
            v[i] = x:to(p1.device, p1.dtype)
          end
        end
      end
    end

    local loss
    orig_loss, loss = evaluate()
    local current_evals = 1
    state.func_evals = state.func_evals + 1
    local flat_grad = self:_gather_flat_grad(maximize)
    if absmax(flat_grad) <= tol_grad then return end

    local d, t, old_dirs, old_stps, ro = state.d, state.t, state.old_dirs, state.old_stps, state.ro
    local H_diag, prev_flat_grad, prev_loss = state.H_diag, state.prev_flat_grad, state.prev_loss
    local n_iter = 0
    while n_iter < max_iter do
      n_iter = n_iter + 1
      state.n_iter = state.n_iter + 1
      -- the direction: -H grad, H the L-BFGS inverse Hessian from the last history_size (s, y) pairs
      if state.n_iter == 1 then
        d = -flat_grad
        old_dirs, old_stps, ro, H_diag = {}, {}, {}, 1
      else
        local y = flat_grad - prev_flat_grad
        local s = d * t
        local ys = dot(y, s)
        if ys > 1e-10 then
          if #old_dirs == history_size then
            table.remove(old_dirs, 1); table.remove(old_stps, 1); table.remove(ro, 1)
          end
          old_dirs[#old_dirs + 1], old_stps[#old_stps + 1], ro[#ro + 1] = y, s, 1 / ys
          H_diag = ys / dot(y, y)
        end
        local num_old = #old_dirs
        state.al = state.al or {}
        local al = state.al
        -- two-loop recursion, in one buffer
        local q = -flat_grad
        for i = num_old, 1, -1 do
          al[i] = dot(old_stps[i], q) * ro[i]
          q:add_(old_dirs[i] * -al[i])
        end
        local r = q * H_diag
        d = r
        for i = 1, num_old do
          local be_i = dot(old_dirs[i], r) * ro[i]
          r:add_(old_stps[i] * (al[i] - be_i))
        end
      end
      if prev_flat_grad == nil then prev_flat_grad = flat_grad:clone() else prev_flat_grad:copy_(flat_grad) end
      prev_loss = loss

      -- the step length: a scaled first step, then lr
      if state.n_iter == 1 then t = math.min(1, 1 / flat_grad:abs():sum():item()) * lr else t = lr end
      local gtd = dot(flat_grad, d)
      if gtd > -tol_change then break end

      local ls_evals = 0
      local opt_cond = false
      if line_search then
        local x_init = {}
        for i, p in ipairs(self._params) do x_init[i] = p:clone() end
        local function obj(tt)
          self:_add_grad(tt, d)
          local _, l = evaluate()
          local fg = self:_gather_flat_grad(maximize)
          for i, p in ipairs(self._params) do p:copy_(x_init[i]) end
          return l, fg
        end
        loss, flat_grad, t, ls_evals = strong_wolfe(obj, t, d, loss, flat_grad, gtd, tol_change, max_eval - current_evals)
        self:_add_grad(t, d)
        opt_cond = absmax(flat_grad) <= tol_grad
      else
        self:_add_grad(t, d)
        if n_iter ~= max_iter then
          -- re-evaluate (not after the last iteration: the next step does)
          local _
          _, loss = evaluate()
          flat_grad = self:_gather_flat_grad(maximize)
          opt_cond = absmax(flat_grad) <= tol_grad
          ls_evals = 1
        end
      end
      current_evals = current_evals + ls_evals
      state.func_evals = state.func_evals + ls_evals

      if n_iter == max_iter or current_evals >= max_eval or opt_cond then break end
      if absmax(d * t) <= tol_change then break end          -- no progress in x
      if math.abs(loss - prev_loss) < tol_change then break end   -- nor in f
    end
    state.d, state.t, state.old_dirs, state.old_stps, state.ro = d, t, old_dirs, old_stps, ro
    state.H_diag, state.prev_flat_grad, state.prev_loss = H_diag, prev_flat_grad, prev_loss
  end)
  return orig_loss
end

-- install(optim, helpers): the classes join tide.optim, inheriting optim.Optimizer
return function(optim, helpers)
  for k, v in pairs(helpers) do H[k] = v end
  for name, c in pairs(classes) do
    optim[name] = setmetatable(c[1], { __index = helpers.Optimizer, __call = c[2] })
  end
end
