--[[
tide.optim -- optimizers (SGD, Adam, AdamW, RMSprop, Adagrad here; NAdam, RAdam,
Adadelta, Adamax, LBFGS in optim_extra.lua) and learning-rate schedulers
(tide.optim.lr_scheduler). Names, defaults and update arithmetic follow
PyTorch 1.13's single-tensor implementations; updates run in place under no_grad.
Parameter indices in state_dict are 1-based, in the order the groups list them.
State buffers live on their parameter's device: made there (zeros_like), moved
there by load_state_dict, and moved along when the model moves after steps
(module:to("opencl") swaps the tensor under each parameter's handle; the
state, keyed by that handle, follows at the next step).
--]]
local core = require "tide.core"
local autograd = require "tide.autograd"
local args = require "tide.args"
local ffi, is_tensor, raise = core.ffi, core.is_tensor, core.raise

local optim = {}

-- -- Helpers ---------------------------------------------------------------------------------

local function typename(v)
  if is_tensor(v) then return "Tensor" end
  return type(v)
end

local function argerr(n, fname, msg)
  raise(("bad argument #%d to '%s' (%s)"):format(n, fname, msg))
end

-- identity of a tensor (two handles of the same C tensor compare equal): finds
-- a parameter listed twice. The state is keyed by the handle in param_groups,
-- which module:to and module:double keep while they replace its C tensor.
local function key_of(p) return tonumber(ffi.cast("intptr_t", p.p)) end

-- the state's tensors on p's device and in p's dtype (after p was moved or converted)
local function follow(p, st)
  local dev, dt = p.device_type, p.scalar_type
  for k, v in pairs(st) do
    if is_tensor(v) and (v.device_type ~= dev or (v.scalar_type ~= dt and v.scalar_type >= 4)) then
      st[k] = v:to(p.device, p.dtype)
    end
  end
end

local function shape_str(t)
  local s = t:size()
  if #s == 0 then return "()" end
  return "(" .. table.concat(s, "x") .. ")"
end

-- deep copy of plain Lua values (tables of numbers/strings/booleans); tensors are cloned
local function copy(v)
  if is_tensor(v) then return v:clone() end
  if type(v) ~= "table" then return v end
  local r = {}
  for k, x in pairs(v) do r[k] = copy(x) end
  return r
end

local function num(v) return type(v) == "number" end

-- zeros/full with p's shape and dtype, never requiring grad (state buffers)
local tide_mod
local function zeros(p) tide_mod = tide_mod or require "tide"; return tide_mod.zeros_like(p) end
local function full(p, v) tide_mod = tide_mod or require "tide"; return tide_mod.full_like(p, v) end

-- -- Optimizer base --------------------------------------------------------------------------

--- optim.Optimizer
--- The optimizers' base class: param_groups (each with params and hyperparameters), state, defaults.
local Optimizer = {}
Optimizer.__index = Optimizer
optim.Optimizer = Optimizer

-- Check one group's parameters (float leaf tensors) and hyperparameters.
local function check_params(self, group, seen)
  local name = self.name
  if is_tensor(group.params) then group.params = { group.params } end
  if type(group.params) ~= "table" then
    argerr(1, name, "params must be a list of Tensors or of parameter groups, got " .. typename(group.params))
  end
  local list = {}
  for i, p in ipairs(group.params) do
    if not is_tensor(p) then
      argerr(1, name, ("parameter %d is a %s, expected a Tensor"):format(i, typename(p)))
    end
    if not p.dtype.is_floating_point then
      raise(("%s: can only optimize floating-point Tensors, but parameter %d has dtype %s"):format(name, i, p.dtype.name))
    end
    if not p.is_leaf then
      raise(("%s: can't optimize a non-leaf Tensor (parameter %d is the result of an operation; use detach():requires_grad_())")
        :format(name, i))
    end
    local k = key_of(p)
    if seen[k] then raise(("%s: some parameters appear in more than one parameter group (parameter %d)"):format(name, i)) end
    seen[k] = true
    list[i] = p
  end
  group.params = list
end

local function make(cls, name, defaults, validate, params, opts)
  cls.__tostring = Optimizer.__tostring
  local self = setmetatable({ name = name, defaults = {}, param_groups = {}, state = {}, _validate = validate }, cls)
  local allowed = { lr = true }
  for k in pairs(defaults) do allowed[k] = true end
  opts = args.opts(name, opts, allowed, 2)
  for k, v in pairs(defaults) do self.defaults[k] = v end
  for k, v in pairs(opts) do self.defaults[k] = v end
  if self.defaults.lr == nil then argerr(2, name, "lr is required") end
  if type(params) ~= "table" or is_tensor(params) then
    if is_tensor(params) then params = { params }
    else argerr(1, name, "list of Tensors or parameter groups expected, got " .. typename(params)) end
  end
  if #params == 0 then raise(name .. ": optimizer got an empty parameter list") end
  if is_tensor(params[1]) or type(params[1]) ~= "table" then params = { { params = params } } end
  for _, g in ipairs(params) do self:add_param_group(g) end
  return self
end

-- PyTorch's layout: "Adam (\nParameter Group 0\n    amsgrad: false\n ...)", keys sorted, groups from 0
function Optimizer:__tostring()
  local lines = { self.name .. " (" }
  for gi, g in ipairs(self.param_groups) do
    lines[#lines + 1] = ("Parameter Group %d"):format(gi - 1)
    local keys = {}
    for k in pairs(g) do if k ~= "params" then keys[#keys + 1] = k end end
    table.sort(keys)
    for _, k in ipairs(keys) do
      local v = g[k]
      if type(v) == "table" then
        local parts = {}
        for i, x in ipairs(v) do parts[i] = tostring(x) end
        v = "{" .. table.concat(parts, ", ") .. "}"
      end
      lines[#lines + 1] = ("    %s: %s"):format(k, tostring(v))
    end
  end
  lines[#lines + 1] = ")"
  return table.concat(lines, "\n")
end

-- add_param_group({params = {...}, lr = ...}): the other hyperparameters default to the optimizer's
--- optim.Optimizer:add_param_group({params = {...}, lr = ...})
--- Adds a group; its other hyperparameters default to the optimizer's.
function Optimizer:add_param_group(group)
  if type(group) ~= "table" or is_tensor(group) then
    argerr(1, "add_param_group", "table with a 'params' list expected, got " .. typename(group))
  end
  local g = {}
  for k, v in pairs(group) do g[k] = v end
  local seen = {}
  for _, og in ipairs(self.param_groups) do for _, p in ipairs(og.params) do seen[key_of(p)] = true end end
  check_params(self, g, seen)
  for k, v in pairs(self.defaults) do if g[k] == nil then g[k] = copy(v) end end
  self._validate(self.name, g)
  self.param_groups[#self.param_groups + 1] = g
end

-- zero_grad({set_to_none = true}): drop the gradients (default), or zero them in place
--- optim.Optimizer:zero_grad([{set_to_none = true}])
--- Drops the parameters' gradients (or zeroes them in place with set_to_none = false).
function Optimizer:zero_grad(opts)
  local to_none = true
  if type(opts) == "boolean" then to_none = opts
  else
    opts = args.opts("zero_grad", opts, "set_to_none", 1)
    if opts.set_to_none ~= nil then to_none = opts.set_to_none end
  end
  for _, g in ipairs(self.param_groups) do
    for _, p in ipairs(g.params) do
      local gr = p.grad
      if gr ~= nil then
        if to_none then p.grad = nil else autograd.no_grad(function() gr:zero_() end) end
      end
    end
  end
end

-- step(closure): closure (optional) re-evaluates the loss with grad enabled; returns its result
--- optim.Optimizer:step([closure]) -> loss
--- One update of every parameter from its .grad (closure: re-evaluates the loss first).
function Optimizer:step(closure)
  local loss
  if closure ~= nil then
    if type(closure) ~= "function" then argerr(1, "step", "function expected, got " .. typename(closure)) end
    loss = autograd.enable_grad(closure)
  end
  autograd.no_grad(function()
    for _, g in ipairs(self.param_groups) do
      for _, p in ipairs(g.params) do
        local grad = p.grad
        if grad ~= nil then
          local st = self.state[p]
          if st == nil then st = {}; self.state[p] = st else follow(p, st) end
          self:_update(g, p, grad, st)
        end
      end
    end
  end)
  return loss
end

-- state_dict(): {state = {[i] = {step =, <buffers> = Tensor}}, param_groups = {{lr =, ..., params = {i...}}}}
-- Tensors are copies, so the dict stays valid while training continues.
--- optim.Optimizer:state_dict() -> table
--- {state = {[i] = buffers}, param_groups = {...}} with 1-based parameter indices (copies).
function Optimizer:state_dict()
  local state, groups, idx = {}, {}, 0
  for gi, g in ipairs(self.param_groups) do
    local sg = {}
    for k, v in pairs(g) do if k ~= "params" then sg[k] = copy(v) end end
    sg.params = {}
    for _, p in ipairs(g.params) do
      idx = idx + 1
      sg.params[#sg.params + 1] = idx
      local st = self.state[p]
      if st then state[idx] = copy(st) end
    end
    groups[gi] = sg
  end
  return { state = state, param_groups = groups }
end

--- optim.Optimizer:load_state_dict(sd)
--- Restores a state_dict (buffers moved to each parameter's device and dtype).
function Optimizer:load_state_dict(sd)
  local fname = "load_state_dict"
  if type(sd) ~= "table" or type(sd.param_groups) ~= "table" or type(sd.state) ~= "table" then
    argerr(1, fname, "optimizer state dict with 'state' and 'param_groups' expected, got " .. typename(sd))
  end
  local groups = self.param_groups
  if #sd.param_groups ~= #groups then
    raise(("%s: loaded state dict has %d parameter groups, the optimizer has %d"):format(fname, #sd.param_groups, #groups))
  end
  local by_index = {}
  for gi, g in ipairs(groups) do
    local sg = sd.param_groups[gi]
    local n = type(sg.params) == "table" and #sg.params or -1
    if n ~= #g.params then
      raise(("%s: parameter group %d has %d parameters in the loaded state dict, %d in the optimizer")
        :format(fname, gi, n, #g.params))
    end
    for j, p in ipairs(g.params) do by_index[tonumber(sg.params[j])] = p end
  end
  -- check everything before changing anything
  local new_state = {}
  for i, st in pairs(sd.state) do
    local p = by_index[tonumber(i)]   -- keys may come back as strings from a file
    if p == nil then raise(("%s: state for parameter %s, which no parameter group lists"):format(fname, tostring(i))) end
    if type(st) ~= "table" then raise(("%s: state for parameter %s is a %s, expected a table"):format(fname, tostring(i), typename(st))) end
    local ns = {}
    for k, v in pairs(st) do
      if is_tensor(v) then
        if not self._state_any_shape and shape_str(v) ~= shape_str(p) then
          raise(("%s: state '%s' of parameter %s has shape %s, the parameter has shape %s")
            :format(fname, tostring(k), tostring(i), shape_str(v), shape_str(p)))
        end
        ns[k] = v:to(p.device, p.dtype):clone()
      else
        ns[k] = copy(v)
      end
    end
    new_state[p] = ns
  end
  for gi, g in ipairs(groups) do
    local params = g.params
    for k in pairs(g) do g[k] = nil end
    for k, v in pairs(sd.param_groups[gi]) do if k ~= "params" then g[k] = copy(v) end end
    for k, v in pairs(self.defaults) do if g[k] == nil then g[k] = copy(v) end end   -- options newer than the file
    g.params = params
  end
  self.state = new_state
end

-- -- Validation ------------------------------------------------------------------------------

local function nonneg(name, g, key, what)
  local v = g[key]
  if not num(v) or v < 0 then raise(("%s: invalid %s: %s (must be >= 0)"):format(name, what, tostring(v))) end
end

local function check_betas(name, g)
  local b = g.betas
  if type(b) ~= "table" or not num(b[1]) or not num(b[2]) then
    raise(("%s: betas must be a table of two numbers, got %s"):format(name, typename(b)))
  end
  for i = 1, 2 do
    if b[i] < 0 or b[i] >= 1 then
      raise(("%s: invalid beta parameter at index %d: %s (must be in [0, 1))"):format(name, i, tostring(b[i])))
    end
  end
end

-- -- SGD -------------------------------------------------------------------------------------

--- optim.SGD(params, {lr, momentum = 0, dampening = 0, weight_decay = 0, nesterov = false, maximize = false})
--- Stochastic gradient descent, with momentum and Nesterov momentum as PyTorch's.
local SGD = setmetatable({}, { __index = Optimizer })
SGD.__index = SGD
optim.SGD = setmetatable(SGD, { __index = Optimizer, __call = function(cls, params, opts)
  return make(cls, "SGD", { momentum = 0, dampening = 0, weight_decay = 0, nesterov = false, maximize = false },
    function(name, g)
      nonneg(name, g, "lr", "learning rate"); nonneg(name, g, "momentum", "momentum value")
      nonneg(name, g, "weight_decay", "weight_decay value")
      if g.nesterov and (g.momentum <= 0 or g.dampening ~= 0) then
        raise(("%s: Nesterov momentum requires a momentum and zero dampening (momentum=%s, dampening=%s)")
          :format(name, tostring(g.momentum), tostring(g.dampening)))
      end
    end, params, opts)
end })

function SGD:_update(g, p, grad, st)
  local d_p = g.maximize and -grad or grad
  if g.weight_decay ~= 0 then d_p = d_p + p * g.weight_decay end
  if g.momentum ~= 0 then
    local buf = st.momentum_buffer
    if buf == nil then
      buf = d_p:clone()
      st.momentum_buffer = buf
    else
      buf:mul_(g.momentum):add_(d_p * (1 - g.dampening))
    end
    if g.nesterov then d_p = d_p + buf * g.momentum else d_p = buf end
  end
  p:add_(d_p * -g.lr)
end

-- -- Adam and AdamW --------------------------------------------------------------------------

local function adam_validate(name, g)
  nonneg(name, g, "lr", "learning rate"); nonneg(name, g, "eps", "epsilon value")
  check_betas(name, g); nonneg(name, g, "weight_decay", "weight_decay value")
  if type(g.fused) ~= "boolean" then argerr(2, name, "fused must be a boolean, got " .. typename(g.fused)) end
end

-- the fused step (rt_optim.c) takes the formula's Lua numbers, computed as below
local adam_hp = ffi.new("double[9]")
local C = core.C

local function adam_update(decoupled)
  return function(self, g, p, grad, st)
    if st.step == nil then
      st.step = 0
      st.exp_avg = zeros(p)
      st.exp_avg_sq = zeros(p)
    end
    if g.amsgrad and st.max_exp_avg_sq == nil then st.max_exp_avg_sq = zeros(p) end   -- also if turned on later
    local beta1, beta2 = g.betas[1], g.betas[2]
    st.step = st.step + 1
    -- the formula's numbers, used by both paths below
    local wd_mul = 1 - g.lr * g.weight_decay
    local step_size = g.lr / (1 - beta1 ^ st.step)
    local bc2_sqrt = math.sqrt(1 - beta2 ^ st.step)
    -- eager CPU steps: one pass over p, grad and the state, same bits as the formula
    -- (fused = false, or a traced step, runs the formula: tide.compile fuses it itself)
    if g.fused and C.td_is_tracing() == 0 then
      local h = adam_hp
      h[0], h[1], h[2], h[3], h[4], h[5] = wd_mul, g.weight_decay, beta1, 1 - beta1, beta2, 1 - beta2
      h[6], h[7], h[8] = bc2_sqrt, g.eps, -step_size
      if C.td_adam_step(p.p, grad.p, st.exp_avg.p, st.exp_avg_sq.p, g.amsgrad and st.max_exp_avg_sq.p or nil, h,
          (decoupled and C.TD_ADAM_DECOUPLED or 0) + (g.maximize and C.TD_ADAM_MAXIMIZE or 0)) == 0 then
        return
      end
    end
    if g.maximize then grad = -grad end
    if decoupled then
      p:mul_(wd_mul)
    elseif g.weight_decay ~= 0 then
      grad = grad + p * g.weight_decay
    end
    -- temporaries are updated in place (one allocation each); same arithmetic as torch
    st.exp_avg:mul_(beta1):add_(grad * (1 - beta1))
    st.exp_avg_sq:mul_(beta2):add_((grad * (1 - beta2)):mul_(grad))
    local denom
    if g.amsgrad then
      st.max_exp_avg_sq:maximum_(st.exp_avg_sq)
      denom = st.max_exp_avg_sq:sqrt():div_(bc2_sqrt):add_(g.eps)
    else
      denom = st.exp_avg_sq:sqrt():div_(bc2_sqrt):add_(g.eps)
    end
    p:add_((st.exp_avg * -step_size):div_(denom))
  end
end

local function adam_class(name, wd)
  local cls = {}
  cls.__index = cls
  cls._update = adam_update(name == "AdamW")
  return setmetatable(cls, { __index = Optimizer, __call = function(c, params, opts)
    return make(c, name, { lr = 1e-3, betas = { 0.9, 0.999 }, eps = 1e-8, weight_decay = wd, amsgrad = false,
      maximize = false, fused = true }, adam_validate, params, opts)
  end })
end
--- optim.Adam(params[, {lr = 1e-3, betas = {0.9, 0.999}, eps = 1e-8, weight_decay = 0, amsgrad, maximize}])
--- Adam (L2 weight decay added to the gradient); the update runs fused in C.
--- optim.AdamW(params[, {lr = 1e-3, betas, eps, weight_decay = 1e-2, amsgrad, maximize}])
--- Adam with decoupled weight decay.
optim.Adam = adam_class("Adam", 0)
optim.AdamW = adam_class("AdamW", 1e-2)

-- -- RMSprop ---------------------------------------------------------------------------------

--- optim.RMSprop(params[, {lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay, momentum, centered, maximize}])
--- RMSprop as PyTorch's.
local RMSprop = {}
RMSprop.__index = RMSprop
optim.RMSprop = setmetatable(RMSprop, { __index = Optimizer, __call = function(cls, params, opts)
  return make(cls, "RMSprop", { lr = 1e-2, alpha = 0.99, eps = 1e-8, weight_decay = 0, momentum = 0,
    centered = false, maximize = false }, function(name, g)
      nonneg(name, g, "lr", "learning rate"); nonneg(name, g, "eps", "epsilon value")
      nonneg(name, g, "momentum", "momentum value"); nonneg(name, g, "weight_decay", "weight_decay value")
      nonneg(name, g, "alpha", "alpha value")
    end, params, opts)
end })

function RMSprop:_update(g, p, grad, st)
  if st.step == nil then
    st.step = 0
    st.square_avg = zeros(p)
    if g.momentum > 0 then st.momentum_buffer = zeros(p) end
    if g.centered then st.grad_avg = zeros(p) end
  end
  if g.maximize then grad = -grad end
  st.step = st.step + 1
  if g.weight_decay ~= 0 then grad = grad + p * g.weight_decay end
  local alpha = g.alpha
  st.square_avg:mul_(alpha):add_((grad * (1 - alpha)):mul_(grad))
  local avg
  if g.centered then
    if st.grad_avg == nil then st.grad_avg = zeros(p) end
    st.grad_avg:mul_(alpha):add_(grad * (1 - alpha))
    avg = (st.square_avg - st.grad_avg * st.grad_avg):sqrt_()
  else
    avg = st.square_avg:sqrt()
  end
  avg:add_(g.eps)
  if g.momentum > 0 then
    if st.momentum_buffer == nil then st.momentum_buffer = zeros(p) end
    st.momentum_buffer:mul_(g.momentum):add_(grad / avg)
    p:add_(st.momentum_buffer * -g.lr)
  else
    p:add_((grad * -g.lr):div_(avg))
  end
end

-- -- Adagrad ---------------------------------------------------------------------------------

--- optim.Adagrad(params[, {lr = 1e-2, lr_decay, weight_decay, initial_accumulator_value, eps = 1e-10, maximize}])
--- Adagrad as PyTorch's.
local Adagrad = {}
Adagrad.__index = Adagrad
optim.Adagrad = setmetatable(Adagrad, { __index = Optimizer, __call = function(cls, params, opts)
  local self = make(cls, "Adagrad", { lr = 1e-2, lr_decay = 0, weight_decay = 0, initial_accumulator_value = 0,
    eps = 1e-10, maximize = false }, function(name, g)
      nonneg(name, g, "lr", "learning rate"); nonneg(name, g, "lr_decay", "lr_decay value")
      nonneg(name, g, "weight_decay", "weight_decay value"); nonneg(name, g, "eps", "epsilon value")
      nonneg(name, g, "initial_accumulator_value", "initial_accumulator_value")
    end, params, opts)
  -- PyTorch creates Adagrad's state eagerly
  for _, g in ipairs(self.param_groups) do
    for _, p in ipairs(g.params) do
      self.state[p] = { step = 0, sum = full(p, g.initial_accumulator_value) }
    end
  end
  return self
end })

function Adagrad:_update(g, p, grad, st)
  if st.step == nil then st.step, st.sum = 0, full(p, g.initial_accumulator_value) end
  st.step = st.step + 1
  if g.maximize then grad = -grad end
  if g.weight_decay ~= 0 then grad = grad + p * g.weight_decay end
  local clr = g.lr / (1 + (st.step - 1) * g.lr_decay)
  st.sum:add_(grad * grad)
  local std = st.sum:sqrt():add_(g.eps)
  p:add_((grad * -clr):div_(std))
end

-- NAdam, RAdam, Adadelta, Adamax, LBFGS (optim_extra.lua), sharing these helpers
require("tide.optim_extra")(optim, { Optimizer = Optimizer, make = make, nonneg = nonneg, check_betas = check_betas,
  zeros = zeros, argerr = argerr, typename = typename })

optim.lr_scheduler = require "tide.lr_scheduler"
for k, v in pairs(optim.lr_scheduler) do optim[k] = v end

return optim
