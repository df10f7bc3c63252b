--[[
tide.lr_scheduler (tide.optim.lr_scheduler) -- learning-rate schedulers that rewrite an optimizer's
param_groups[i].lr on each step() (ReduceLROnPlateau: on each step(metric)). The recurrences
(chainable forms) and closed forms are PyTorch's (1.13's; PolynomialLR, CyclicLR and
ReduceLROnPlateau 2.x's), so the lr sequence equals torch's to the last bit.
Epochs count from 0 as in PyTorch: construction performs step 0.
--]]
local core = require "tide.core"
local args = require "tide.args"
local raise = core.raise

local M = {}

local function argerr(n, fname, msg) raise(("bad argument #%d to '%s' (%s)"):format(n, fname, msg)) end

local function copy(v)
  if type(v) ~= "table" then return v end
  local r = {}
  for k, x in pairs(v) do r[k] = copy(x) end
  return r
end

-- number of entries of sorted list a that are <= x (Python's bisect_right)
local function bisect_right(a, x)
  local n = 0
  for i = 1, #a do if a[i] <= x then n = i end end
  return n
end

-- -- Base ------------------------------------------------------------------------------------

--- optim.lr_scheduler.LRScheduler
--- The schedulers' base class: sched:step() once per epoch (or step) sets each group's lr.
local LRScheduler = {}
LRScheduler.__index = LRScheduler
M.LRScheduler = LRScheduler

local function check_opt(name, opt)
  if type(opt) ~= "table" or type(opt.param_groups) ~= "table" then
    argerr(1, name, "optimizer expected, got " .. type(opt))
  end
end

local function options(name, opts, allowed) return args.opts(name, opts, allowed, 2) end

local function number_opt(name, opts, key, default, required)
  local v = opts[key]
  if v == nil then
    if required then argerr(2, name, ("option '%s' is required"):format(key)) end
    return default
  end
  if type(v) ~= "number" then argerr(2, name, ("option '%s' must be a number, got %s"):format(key, type(v))) end
  return v
end

-- Record initial_lr in each group, then take step 0 (PyTorch's _initial_step).
local function init(self, name, opt, last_epoch)
  self.name, self.optimizer = name, opt
  last_epoch = last_epoch or -1
  if last_epoch == -1 then
    for _, g in ipairs(opt.param_groups) do if g.initial_lr == nil then g.initial_lr = g.lr end end
  else
    for i, g in ipairs(opt.param_groups) do
      if g.initial_lr == nil then
        raise(("%s: param 'initial_lr' is not specified in param_groups[%d] when resuming an optimizer"):format(name, i))
      end
    end
  end
  self.base_lrs = {}
  for i, g in ipairs(opt.param_groups) do self.base_lrs[i] = g.initial_lr end
  self.last_epoch = last_epoch
  self._step_count = 0
  self:_initial_step()
  return self
end

-- _is_initial is true during this step only (PyTorch 2's _initial_mode; PolynomialLR reads it)
function LRScheduler:_initial_step()
  self._step_count = 0
  self._is_initial = true
  self:step()
  self._is_initial = nil
end

-- step(): advance one epoch. step(epoch) (deprecated in PyTorch) jumps to epoch via the closed form.
--- optim.lr_scheduler.LRScheduler:step([epoch])
--- Advances one epoch and sets the optimizer's learning rates (epoch: jump there, deprecated).
function LRScheduler:step(epoch)
  self._step_count = self._step_count + 1
  local values
  if epoch == nil then
    self.last_epoch = self.last_epoch + 1
    values = self:get_lr()
  else
    if type(epoch) ~= "number" then argerr(1, "step", "epoch number expected, got " .. type(epoch)) end
    self.last_epoch = epoch
    values = self._closed_form and self:_closed_form() or self:get_lr()
  end
  for i, g in ipairs(self.optimizer.param_groups) do g.lr = values[i] end
  self._last_lr = {}
  for i, g in ipairs(self.optimizer.param_groups) do self._last_lr[i] = g.lr end
end

-- the lrs the last step() set, one per param group
--- optim.lr_scheduler.LRScheduler:get_last_lr() -> table
--- The learning rates the last step set, one per param group.
--- optim.lr_scheduler.LRScheduler:get_lr() -> table
--- The learning rates of the current epoch (each scheduler's rule; called by step).
function LRScheduler:get_last_lr() return copy(self._last_lr) end

-- every field but the optimizer (as PyTorch's state_dict)
--- optim.lr_scheduler.LRScheduler:state_dict() -> table
--- Every field but the optimizer (as PyTorch's).
function LRScheduler:state_dict()
  local sd = {}
  for k, v in pairs(self) do
    if k ~= "optimizer" and type(v) ~= "function" then sd[k] = copy(v) end
  end
  return sd
end

--- optim.lr_scheduler.LRScheduler:load_state_dict(sd)
--- Restores a state_dict of the same kind of scheduler.
function LRScheduler:load_state_dict(sd)
  if type(sd) ~= "table" then argerr(1, "load_state_dict", "table expected, got " .. type(sd)) end
  if sd.name ~= nil and sd.name ~= self.name then
    raise(("load_state_dict: state dict is for a %s, this scheduler is a %s"):format(tostring(sd.name), self.name))
  end
  for k, v in pairs(sd) do self[k] = copy(v) end
end

-- setup(self, opts, optimizer) reads the options before the initial step; after(self), if given, runs after it
local function class(name, allowed, setup, after)
  local cls = setmetatable({}, { __index = LRScheduler })
  cls.__index = cls
  allowed.last_epoch = true
  setmetatable(cls, { __index = LRScheduler, __call = function(c, opt, opts)
    check_opt(name, opt)
    opts = options(name, opts, allowed)
    local self = setmetatable({}, c)
    setup(self, opts, opt)
    init(self, name, opt, opts.last_epoch)
    if after then after(self) end
    return self
  end })
  M[name] = cls
  return cls
end

local function group_lrs(self)
  local r = {}
  for i, g in ipairs(self.optimizer.param_groups) do r[i] = g.lr end
  return r
end

-- -- StepLR, MultiStepLR, ExponentialLR ------------------------------------------------------

--- optim.lr_scheduler.StepLR(optimizer, {step_size, gamma = 0.1, last_epoch})
--- lr times gamma every step_size epochs.
local StepLR = class("StepLR", { step_size = true, gamma = true }, function(self, o)
  self.step_size = number_opt("StepLR", o, "step_size", nil, true)
  if self.step_size < 1 or self.step_size ~= math.floor(self.step_size) then
    argerr(2, "StepLR", ("step_size must be a positive integer, got %s"):format(tostring(self.step_size)))
  end
  self.gamma = number_opt("StepLR", o, "gamma", 0.1)
end)
function StepLR:get_lr()
  local r = group_lrs(self)
  if self.last_epoch == 0 or self.last_epoch % self.step_size ~= 0 then return r end
  for i = 1, #r do r[i] = r[i] * self.gamma end
  return r
end
function StepLR:_closed_form()
  local r = {}
  for i, b in ipairs(self.base_lrs) do r[i] = b * self.gamma ^ math.floor(self.last_epoch / self.step_size) end
  return r
end

--- optim.lr_scheduler.MultiStepLR(optimizer, {milestones, gamma = 0.1})
--- lr times gamma at each milestone epoch.
local MultiStepLR = class("MultiStepLR", { milestones = true, gamma = true }, function(self, o)
  local ms = o.milestones
  if type(ms) ~= "table" then argerr(2, "MultiStepLR", "option 'milestones' (a list of epochs) is required") end
  self.milestones = {}
  for i, m in ipairs(ms) do
    if type(m) ~= "number" then argerr(2, "MultiStepLR", ("milestone %d is a %s, expected a number"):format(i, type(m))) end
    self.milestones[i] = m
  end
  table.sort(self.milestones)
  self.gamma = number_opt("MultiStepLR", o, "gamma", 0.1)
end)
function MultiStepLR:get_lr()
  local r = group_lrs(self)
  local count = 0          -- a milestone listed twice decays twice (PyTorch's Counter)
  for _, m in ipairs(self.milestones) do if m == self.last_epoch then count = count + 1 end end
  if count == 0 then return r end
  for i = 1, #r do r[i] = r[i] * self.gamma ^ count end
  return r
end
function MultiStepLR:_closed_form()
  local r = {}
  for i, b in ipairs(self.base_lrs) do r[i] = b * self.gamma ^ bisect_right(self.milestones, self.last_epoch) end
  return r
end

--- optim.lr_scheduler.ExponentialLR(optimizer, {gamma})
--- lr times gamma every epoch.
local ExponentialLR = class("ExponentialLR", { gamma = true }, function(self, o)
  self.gamma = number_opt("ExponentialLR", o, "gamma", nil, true)
end)
function ExponentialLR:get_lr()
  local r = group_lrs(self)
  if self.last_epoch == 0 then return r end
  for i = 1, #r do r[i] = r[i] * self.gamma end
  return r
end
function ExponentialLR:_closed_form()
  local r = {}
  for i, b in ipairs(self.base_lrs) do r[i] = b * self.gamma ^ self.last_epoch end
  return r
end

-- -- CosineAnnealingLR, LinearLR -------------------------------------------------------------

--- optim.lr_scheduler.CosineAnnealingLR(optimizer, {T_max, eta_min = 0})
--- Cosine annealing from the initial lr down to eta_min over T_max epochs.
local Cosine = class("CosineAnnealingLR", { T_max = true, eta_min = true }, function(self, o)
  self.T_max = number_opt("CosineAnnealingLR", o, "T_max", nil, true)
  if self.T_max <= 0 then argerr(2, "CosineAnnealingLR", ("T_max must be positive, got %s"):format(tostring(self.T_max))) end
  self.eta_min = number_opt("CosineAnnealingLR", o, "eta_min", 0)
end)
function Cosine:get_lr()
  local e, T, eta, pi = self.last_epoch, self.T_max, self.eta_min, math.pi
  local r = group_lrs(self)
  if e == 0 then return r end
  if self._step_count == 1 and e > 0 then
    for i, b in ipairs(self.base_lrs) do r[i] = eta + (b - eta) * (1 + math.cos(e * pi / T)) / 2 end
  elseif (e - 1 - T) % (2 * T) == 0 then
    for i, b in ipairs(self.base_lrs) do r[i] = r[i] + (b - eta) * (1 - math.cos(pi / T)) / 2 end
  else
    for i = 1, #r do
      r[i] = (1 + math.cos(pi * e / T)) / (1 + math.cos(pi * (e - 1) / T)) * (r[i] - eta) + eta
    end
  end
  return r
end
function Cosine:_closed_form()
  local r = {}
  for i, b in ipairs(self.base_lrs) do
    r[i] = self.eta_min + (b - self.eta_min) * (1 + math.cos(math.pi * self.last_epoch / self.T_max)) / 2
  end
  return r
end

--- optim.lr_scheduler.LinearLR(optimizer, {start_factor = 1/3, end_factor = 1, total_iters = 5})
--- The lr's factor goes linearly from start_factor to end_factor over total_iters epochs.
local LinearLR = class("LinearLR", { start_factor = true, end_factor = true, total_iters = true }, function(self, o)
  self.start_factor = number_opt("LinearLR", o, "start_factor", 1 / 3)
  self.end_factor = number_opt("LinearLR", o, "end_factor", 1)
  self.total_iters = number_opt("LinearLR", o, "total_iters", 5)
  if self.start_factor > 1 or self.start_factor <= 0 then
    raise(("LinearLR: start_factor must be in (0, 1], got %s"):format(tostring(self.start_factor)))
  end
  if self.end_factor > 1 or self.end_factor < 0 then
    raise(("LinearLR: end_factor must be in [0, 1], got %s"):format(tostring(self.end_factor)))
  end
end)
function LinearLR:get_lr()
  local e, s, f, n = self.last_epoch, self.start_factor, self.end_factor, self.total_iters
  local r = group_lrs(self)
  if e == 0 then
    for i = 1, #r do r[i] = r[i] * s end
  elseif e <= n then
    for i = 1, #r do r[i] = r[i] * (1 + (f - s) / (n * s + (e - 1) * (f - s))) end
  end
  return r
end
function LinearLR:_closed_form()
  local r = {}
  local s, f, n = self.start_factor, self.end_factor, self.total_iters
  for i, b in ipairs(self.base_lrs) do r[i] = b * (s + (f - s) * math.min(n, self.last_epoch) / n) end
  return r
end

-- -- ConstantLR, LambdaLR --------------------------------------------------------------------

--- optim.lr_scheduler.ConstantLR(optimizer, {factor = 1/3, total_iters = 5})
--- lr times factor until total_iters, then the initial lr.
local ConstantLR = class("ConstantLR", { factor = true, total_iters = true }, function(self, o)
  self.factor = number_opt("ConstantLR", o, "factor", 1 / 3)
  self.total_iters = number_opt("ConstantLR", o, "total_iters", 5)
  if self.factor > 1 or self.factor < 0 then
    raise(("ConstantLR: factor must be in [0, 1], got %s"):format(tostring(self.factor)))
  end
end)
function ConstantLR:get_lr()
  local r = group_lrs(self)
  if self.last_epoch == 0 then
    for i = 1, #r do r[i] = r[i] * self.factor end
  elseif self.last_epoch == self.total_iters then
    for i = 1, #r do r[i] = r[i] * (1 / self.factor) end
  end
  return r
end
function ConstantLR:_closed_form()
  local r = {}
  local f = self.factor
  for i, b in ipairs(self.base_lrs) do r[i] = b * (f + (self.last_epoch >= self.total_iters and 1 or 0) * (1 - f)) end
  return r
end

-- LambdaLR(opt, {lr_lambda = fn | {fn per group}}): lr = initial_lr * fn(epoch)
--- optim.lr_scheduler.LambdaLR(optimizer, {lr_lambda})
--- lr = initial lr * lr_lambda(epoch) (one function, or one per group).
local LambdaLR = class("LambdaLR", { lr_lambda = true }, function(self, o, opt)
  local l = o.lr_lambda
  local n = #opt.param_groups
  if type(l) == "function" then
    self.lr_lambdas = {}
    for i = 1, n do self.lr_lambdas[i] = l end
  elseif type(l) == "table" then
    if #l ~= n then raise(("LambdaLR: expected %d lr_lambdas, but got %d"):format(n, #l)) end
    for i = 1, n do
      if type(l[i]) ~= "function" then raise(("LambdaLR: lr_lambda %d is a %s, expected a function"):format(i, type(l[i]))) end
    end
    self.lr_lambdas = { unpack(l) }
  else
    argerr(2, "LambdaLR", "option 'lr_lambda' (a function of the epoch) is required")
  end
end)
function LambdaLR:get_lr()
  local r = {}
  for i, b in ipairs(self.base_lrs) do
    local f = self.lr_lambdas[i](self.last_epoch)
    if type(f) ~= "number" then
      raise(("LambdaLR: lr_lambda %d returned a %s for epoch %d, expected a number"):format(i, args.typename(f), self.last_epoch))
    end
    r[i] = b * f
  end
  return r
end
-- the functions are not state: they stay the ones given to the constructor
function LambdaLR:state_dict()
  local sd = LRScheduler.state_dict(self)
  sd.lr_lambdas = nil
  return sd
end

-- -- OneCycleLR ------------------------------------------------------------------------------

local function per_group(name, opt, key, v)
  local n = #opt.param_groups
  if type(v) == "table" then
    if #v ~= n then raise(("%s: expected %d values for %s, got %d"):format(name, n, key, #v)) end
    return copy(v)
  end
  if type(v) ~= "number" then argerr(2, name, ("option '%s' must be a number or a list, got %s"):format(key, type(v))) end
  local r = {}
  for i = 1, n do r[i] = v end
  return r
end

--- optim.lr_scheduler.OneCycleLR(optimizer, {max_lr, total_steps | epochs and steps_per_epoch, pct_start = 0.3, ...})
--- The 1cycle policy (warm up to max_lr, then anneal), with momentum cycling; step once per batch.
local OneCycleLR = class("OneCycleLR", { max_lr = true, total_steps = true, epochs = true, steps_per_epoch = true,
  pct_start = true, anneal_strategy = true, cycle_momentum = true, base_momentum = true, max_momentum = true,
  div_factor = true, final_div_factor = true, three_phase = true }, function(self, o, opt)
  local name = "OneCycleLR"
  local function posint(k)
    local v = o[k]
    if type(v) ~= "number" or v <= 0 or v ~= math.floor(v) then
      raise(("%s: expected positive integer %s, but got %s"):format(name, k, tostring(v)))
    end
    return v
  end
  if o.max_lr == nil then argerr(2, name, "option 'max_lr' is required") end
  if o.total_steps ~= nil then self.total_steps = posint("total_steps")
  elseif o.epochs ~= nil or o.steps_per_epoch ~= nil then
    self.total_steps = posint("epochs") * posint("steps_per_epoch")
  else
    raise(name .. ": you must define either total_steps OR (epochs AND steps_per_epoch)")
  end
  local pct = number_opt(name, o, "pct_start", 0.3)
  if pct < 0 or pct > 1 then raise(("%s: expected pct_start between 0 and 1, but got %s"):format(name, tostring(pct))) end
  local strat = o.anneal_strategy or "cos"
  if strat ~= "cos" and strat ~= "linear" then
    raise(("%s: anneal_strategy must be one of 'cos' or 'linear', got '%s'"):format(name, tostring(strat)))
  end
  self.anneal_strategy = strat
  local T = self.total_steps
  if o.three_phase then
    self._schedule_phases = {
      { end_step = pct * T - 1, start_lr = "initial_lr", end_lr = "max_lr", start_momentum = "max_momentum", end_momentum = "base_momentum" },
      { end_step = 2 * pct * T - 2, start_lr = "max_lr", end_lr = "initial_lr", start_momentum = "base_momentum", end_momentum = "max_momentum" },
      { end_step = T - 1, start_lr = "initial_lr", end_lr = "min_lr", start_momentum = "max_momentum", end_momentum = "max_momentum" },
    }
  else
    self._schedule_phases = {
      { end_step = pct * T - 1, start_lr = "initial_lr", end_lr = "max_lr", start_momentum = "max_momentum", end_momentum = "base_momentum" },
      { end_step = T - 1, start_lr = "max_lr", end_lr = "min_lr", start_momentum = "base_momentum", end_momentum = "max_momentum" },
    }
  end
  local div, final_div = number_opt(name, o, "div_factor", 25), number_opt(name, o, "final_div_factor", 1e4)
  local max_lrs = per_group(name, opt, "max_lr", o.max_lr)
  local fresh = (o.last_epoch or -1) == -1
  if fresh then
    for i, g in ipairs(opt.param_groups) do
      g.initial_lr = max_lrs[i] / div
      g.max_lr = max_lrs[i]
      g.min_lr = g.initial_lr / final_div
    end
  end
  self.cycle_momentum = o.cycle_momentum ~= false
  if self.cycle_momentum then
    local d = opt.defaults or {}
    if d.momentum == nil and d.betas == nil then
      raise(name .. ": optimizer must support momentum (momentum or betas) with the cycle_momentum option enabled")
    end
    self.use_beta1 = d.betas ~= nil
    local maxm = per_group(name, opt, "max_momentum", o.max_momentum or 0.95)
    local basem = per_group(name, opt, "base_momentum", o.base_momentum or 0.85)
    if fresh then
      for i, g in ipairs(opt.param_groups) do
        if self.use_beta1 then g.betas = { maxm[i], g.betas[2] } else g.momentum = maxm[i] end
        g.max_momentum, g.base_momentum = maxm[i], basem[i]
      end
    end
  end
end)

local function anneal(strategy, a, b, pct)
  if strategy == "cos" then return b + (a - b) / 2 * (math.cos(math.pi * pct) + 1) end
  return (b - a) * pct + a
end

function OneCycleLR:get_lr()
  local step = self.last_epoch
  if step > self.total_steps then
    raise(("OneCycleLR: tried to step %d times; the specified number of total steps is %d"):format(step + 1, self.total_steps))
  end
  local lrs, phases = {}, self._schedule_phases
  for gi, g in ipairs(self.optimizer.param_groups) do
    local start, lr, mom = 0, nil, nil
    for i, ph in ipairs(phases) do
      if step <= ph.end_step or i == #phases then
        local pct = (step - start) / (ph.end_step - start)
        lr = anneal(self.anneal_strategy, g[ph.start_lr], g[ph.end_lr], pct)
        if self.cycle_momentum then mom = anneal(self.anneal_strategy, g[ph.start_momentum], g[ph.end_momentum], pct) end
        break
      end
      start = ph.end_step
    end
    lrs[gi] = lr
    if self.cycle_momentum then
      if self.use_beta1 then g.betas = { mom, g.betas[2] } else g.momentum = mom end
    end
  end
  return lrs
end

-- -- SequentialLR ----------------------------------------------------------------------------

--- optim.lr_scheduler.SequentialLR(optimizer, {schedulers, milestones})
--- Runs schedulers one after another, switching at the milestone epochs.
local SequentialLR = setmetatable({}, { __index = LRScheduler })
SequentialLR.__index = SequentialLR
M.SequentialLR = SequentialLR
setmetatable(SequentialLR, { __index = LRScheduler, __call = function(cls, opt, opts)
  local name = "SequentialLR"
  check_opt(name, opt)
  opts = options(name, opts, { schedulers = true, milestones = true, last_epoch = true })
  local scheds, ms = opts.schedulers, opts.milestones
  if type(scheds) ~= "table" or #scheds == 0 then argerr(2, name, "option 'schedulers' (a list of schedulers) is required") end
  if type(ms) ~= "table" then argerr(2, name, "option 'milestones' (a list of epochs) is required") end
  for i, s in ipairs(scheds) do
    if type(s) ~= "table" or s.optimizer ~= opt then
      raise(("%s: expects all schedulers to belong to the optimizer passed in, but scheduler %d does not"):format(name, i))
    end
  end
  if #ms ~= #scheds - 1 then
    raise(("%s: expects one more scheduler than milestones, got %d schedulers and %d milestones"):format(name, #scheds, #ms))
  end
  local self = setmetatable({ name = name, optimizer = opt, _schedulers = scheds, _milestones = copy(ms),
    last_epoch = (opts.last_epoch or -1) + 1 }, cls)
  for _, g in ipairs(opt.param_groups) do g.lr = g.initial_lr end
  for _, s in ipairs(scheds) do s.last_epoch = s.last_epoch - 1 end
  scheds[1]:_initial_step()
  self._last_lr = scheds[1]:get_last_lr()
  return self
end })

function SequentialLR:step()
  self.last_epoch = self.last_epoch + 1
  local idx = bisect_right(self._milestones, self.last_epoch)
  local s = self._schedulers[idx + 1]
  if idx > 0 and self._milestones[idx] == self.last_epoch then s:step(0) else s:step() end
  self._last_lr = s:get_last_lr()
end

function SequentialLR:state_dict()
  local sd = { name = self.name, last_epoch = self.last_epoch, _milestones = copy(self._milestones),
    _last_lr = copy(self._last_lr), _schedulers = {} }
  for i, s in ipairs(self._schedulers) do sd._schedulers[i] = s:state_dict() end
  return sd
end

function SequentialLR:load_state_dict(sd)
  if type(sd) ~= "table" or type(sd._schedulers) ~= "table" then
    argerr(1, "load_state_dict", "SequentialLR state dict expected")
  end
  if #sd._schedulers ~= #self._schedulers then
    raise(("load_state_dict: state dict has %d schedulers, this SequentialLR has %d"):format(#sd._schedulers, #self._schedulers))
  end
  for k, v in pairs(sd) do if k ~= "_schedulers" then self[k] = copy(v) end end
  for i, s in ipairs(self._schedulers) do s:load_state_dict(sd._schedulers[i]) end
end

-- -- PolynomialLR ----------------------------------------------------------------------------

local function positive_int(name, key, v)
  if type(v) ~= "number" or v < 1 or v ~= math.floor(v) then
    raise(("%s: %s must be a positive integer, got %s"):format(name, key, tostring(v)))
  end
  return v
end

--- optim.lr_scheduler.PolynomialLR(optimizer, {total_iters = 5, power = 1})
--- lr = initial lr * (1 - epoch / total_iters)^power, reaching 0 at total_iters.
local PolynomialLR = class("PolynomialLR", { total_iters = true, power = true }, function(self, o)
  self.total_iters = positive_int("PolynomialLR", "total_iters", number_opt("PolynomialLR", o, "total_iters", 5))
  self.power = number_opt("PolynomialLR", o, "power", 1)
end)
function PolynomialLR:get_lr()
  local r = group_lrs(self)
  local e, n = self.last_epoch, self.total_iters
  if self._is_initial or e > n then return r end
  local f = ((1 - e / n) / (1 - (e - 1) / n)) ^ self.power
  for i = 1, #r do r[i] = r[i] * f end
  return r
end
function PolynomialLR:_closed_form()
  local r = {}
  local f = (1 - math.min(self.total_iters, self.last_epoch) / self.total_iters) ^ self.power
  for i, b in ipairs(self.base_lrs) do r[i] = b * f end
  return r
end

-- -- CyclicLR --------------------------------------------------------------------------------

-- the built-in amplitude scalings and the argument each reads (cycle number or iteration)
local CYCLIC = {
  triangular = { function() return 1 end, "cycle" },
  triangular2 = { function(x) return 1 / (2 ^ (x - 1)) end, "cycle" },
  exp_range = { function(x, gamma) return gamma ^ x end, "iterations" },
}

--- optim.lr_scheduler.CyclicLR(optimizer, {base_lr, max_lr, step_size_up = 2000, step_size_down, mode = 'triangular', gamma = 1, scale_fn, scale_mode = 'cycle', cycle_momentum = true, base_momentum = 0.8, max_momentum = 0.9})
--- Cycles lr between base_lr and max_lr (triangular, triangular2, exp_range or scale_fn), momentum inversely; step per batch.
local CyclicLR = class("CyclicLR", { base_lr = true, max_lr = true, step_size_up = true, step_size_down = true,
  mode = true, gamma = true, scale_fn = true, scale_mode = true, cycle_momentum = true, base_momentum = true,
  max_momentum = true }, function(self, o, opt)
  local name = "CyclicLR"
  if o.base_lr == nil then argerr(2, name, "option 'base_lr' is required") end
  if o.max_lr == nil then argerr(2, name, "option 'max_lr' is required") end
  local base_lrs = per_group(name, opt, "base_lr", o.base_lr)
  local fresh = (o.last_epoch or -1) == -1
  if fresh then for i, g in ipairs(opt.param_groups) do g.lr = base_lrs[i] end end
  self.max_lrs = per_group(name, opt, "max_lr", o.max_lr)
  local up = positive_int(name, "step_size_up", number_opt(name, o, "step_size_up", 2000))
  local down = o.step_size_down == nil and up or positive_int(name, "step_size_down", number_opt(name, o, "step_size_down"))
  self.total_size = up + down
  self.step_ratio = up / self.total_size
  local mode = o.mode or "triangular"
  if o.scale_fn ~= nil and type(o.scale_fn) ~= "function" then
    argerr(2, name, "option 'scale_fn' must be a function, got " .. type(o.scale_fn))
  end
  if not CYCLIC[mode] and o.scale_fn == nil then
    raise(("%s: mode must be 'triangular', 'triangular2' or 'exp_range' (or give scale_fn), got %s"):format(name,
      type(mode) == "string" and "'" .. mode .. "'" or tostring(mode)))
  end
  self.mode, self.gamma = mode, number_opt(name, o, "gamma", 1)
  self._scale_fn_custom = o.scale_fn
  self.scale_mode = o.scale_mode or "cycle"
  if self.scale_mode ~= "cycle" and self.scale_mode ~= "iterations" then
    raise(("%s: scale_mode must be 'cycle' or 'iterations', got '%s'"):format(name, tostring(self.scale_mode)))
  end
  if o.scale_fn == nil then self.scale_mode = CYCLIC[mode][2] end   -- a built-in mode fixes it
  self.cycle_momentum = o.cycle_momentum ~= false
  if self.cycle_momentum then
    local d = opt.defaults or {}
    if d.momentum == nil and d.betas == nil then
      raise(name .. ": optimizer must support momentum (momentum or betas) with the cycle_momentum option enabled")
    end
    self.use_beta1 = d.betas ~= nil
    self.base_momentums = per_group(name, opt, "base_momentum", o.base_momentum or 0.8)
    self.max_momentums = per_group(name, opt, "max_momentum", o.max_momentum or 0.9)
    if fresh then
      for i, g in ipairs(opt.param_groups) do
        local m = self.max_momentums[i]
        if self.use_beta1 then g.betas = { m, g.betas[2] } else g.momentum = m end
        g.max_momentum, g.base_momentum = m, self.base_momentums[i]
      end
    end
  end
  self._base_lrs = base_lrs
end, function(self)
  -- the cycle's low ends, not a resumed group's initial_lr (as PyTorch, after its initial step)
  self.base_lrs, self._base_lrs = self._base_lrs, nil
end)

--- optim.lr_scheduler.CyclicLR:scale_fn(x) -> number
--- The amplitude's scale at x (the cycle number or the iteration, per scale_mode).
function CyclicLR:scale_fn(x)
  if self._scale_fn_custom then
    local s = self._scale_fn_custom(x)
    if type(s) ~= "number" then
      raise(("CyclicLR: scale_fn returned a %s for %s, expected a number"):format(args.typename(s), tostring(x)))
    end
    return s
  end
  return CYCLIC[self.mode][1](x, self.gamma)
end

function CyclicLR:get_lr()
  local e = self.last_epoch
  local cycle = math.floor(1 + e / self.total_size)
  local x = 1 + e / self.total_size - cycle
  local scale_factor
  if x <= self.step_ratio then scale_factor = x / self.step_ratio
  else scale_factor = (x - 1) / (self.step_ratio - 1) end
  local s = self:scale_fn(self.scale_mode == "cycle" and cycle or e)
  local lrs = {}
  for i, b in ipairs(self.base_lrs) do lrs[i] = b + (self.max_lrs[i] - b) * scale_factor * s end
  if self.cycle_momentum then
    for i, g in ipairs(self.optimizer.param_groups) do
      local maxm = self.max_momentums[i]
      local m = maxm - (maxm - self.base_momentums[i]) * scale_factor * s
      if self.use_beta1 then g.betas = { m, g.betas[2] } else g.momentum = m end
    end
  end
  return lrs
end

-- -- ReduceLROnPlateau -----------------------------------------------------------------------

--- optim.lr_scheduler.ReduceLROnPlateau(optimizer, {mode = 'min', factor = 0.1, patience = 10, threshold = 1e-4, threshold_mode = 'rel', cooldown = 0, min_lr = 0, eps = 1e-8})
--- Multiplies lr by factor when a metric (sched:step(metric)) has not improved for patience epochs.
local Plateau = setmetatable({}, { __index = LRScheduler })
Plateau.__index = Plateau
M.ReduceLROnPlateau = Plateau

local function check_plateau_modes(self)
  local name = "ReduceLROnPlateau"
  if self.mode ~= "min" and self.mode ~= "max" then
    raise(("%s: mode must be 'min' or 'max', got '%s'"):format(name, tostring(self.mode)))
  end
  if self.threshold_mode ~= "rel" and self.threshold_mode ~= "abs" then
    raise(("%s: threshold_mode must be 'rel' or 'abs', got '%s'"):format(name, tostring(self.threshold_mode)))
  end
end

setmetatable(Plateau, { __index = LRScheduler, __call = function(cls, opt, opts)
  local name = "ReduceLROnPlateau"
  check_opt(name, opt)
  opts = options(name, opts, { mode = true, factor = true, patience = true, threshold = true, threshold_mode = true,
    cooldown = true, min_lr = true, eps = true })
  local self = setmetatable({ name = name, optimizer = opt, last_epoch = 0 }, cls)
  self.factor = number_opt(name, opts, "factor", 0.1)
  if self.factor >= 1 then raise(("%s: factor should be < 1.0, got %s"):format(name, tostring(self.factor))) end
  local function count(key, default)
    local v = number_opt(name, opts, key, default)
    if v < 0 or v ~= math.floor(v) then raise(("%s: %s must be a non-negative integer, got %s"):format(name, key, tostring(v))) end
    return v
  end
  self.patience, self.cooldown = count("patience", 10), count("cooldown", 0)
  self.threshold, self.eps = number_opt(name, opts, "threshold", 1e-4), number_opt(name, opts, "eps", 1e-8)
  local min_lr = opts.min_lr or 0
  if type(min_lr) == "table" then
    if #min_lr ~= #opt.param_groups then
      raise(("%s: expected %d min_lrs, got %d"):format(name, #opt.param_groups, #min_lr))
    end
    self.min_lrs = copy(min_lr)
  else
    self.default_min_lr = number_opt(name, opts, "min_lr", 0)
    self.min_lrs = per_group(name, opt, "min_lr", min_lr)
  end
  self.mode, self.threshold_mode = opts.mode or "min", opts.threshold_mode or "rel"
  check_plateau_modes(self)
  self.mode_worse = self.mode == "min" and math.huge or -math.huge
  self._last_lr = group_lrs(self)
  self:_reset()
  return self
end })

function Plateau:_reset()
  self.best, self.cooldown_counter, self.num_bad_epochs = self.mode_worse, 0, 0
end

-- a beats best by more than the threshold (relative or absolute)
function Plateau:_is_better(a, best)
  if self.mode == "min" and self.threshold_mode == "rel" then return a < best * (1 - self.threshold)
  elseif self.mode == "min" then return a < best - self.threshold
  elseif self.threshold_mode == "rel" then return a > best * (self.threshold + 1)
  end
  return a > best + self.threshold
end

--- optim.lr_scheduler.ReduceLROnPlateau:step(metric[, epoch])
--- Records this epoch's metric (a number or a one-element tensor) and reduces the lrs after patience bad epochs.
function Plateau:step(metric, epoch)
  if core.is_tensor(metric) then metric = metric:item() end
  if type(metric) ~= "number" then argerr(1, "step", "metric (number or one-element Tensor) expected, got " .. type(metric)) end
  if epoch ~= nil and type(epoch) ~= "number" then argerr(2, "step", "epoch number expected, got " .. type(epoch)) end
  self.last_epoch = epoch or self.last_epoch + 1
  if self:_is_better(metric, self.best) then
    self.best, self.num_bad_epochs = metric, 0
  else
    self.num_bad_epochs = self.num_bad_epochs + 1
  end
  if self.cooldown_counter > 0 then
    self.cooldown_counter = self.cooldown_counter - 1
    self.num_bad_epochs = 0          -- bad epochs in cooldown do not count
  end
  if self.num_bad_epochs > self.patience then
    self:_reduce_lr()
    self.cooldown_counter, self.num_bad_epochs = self.cooldown, 0
  end
  self._last_lr = group_lrs(self)
end

function Plateau:_reduce_lr()
  local groups = self.optimizer.param_groups
  if #groups ~= #self.min_lrs then
    if self.default_min_lr == nil then
      raise(("ReduceLROnPlateau: the optimizer has %d param groups, %d when the scheduler was made (a group was "
        .. "added?): set the scheduler's min_lrs to one value per group"):format(#groups, #self.min_lrs))
    end
    self.min_lrs = per_group("ReduceLROnPlateau", self.optimizer, "min_lr", self.default_min_lr)
  end
  for i, g in ipairs(groups) do
    local old = g.lr
    local new = math.max(old * self.factor, self.min_lrs[i])
    if old - new > self.eps then g.lr = new end   -- smaller changes are ignored
  end
end

function Plateau:load_state_dict(sd)
  LRScheduler.load_state_dict(self, sd)
  check_plateau_modes(self)
end

function Plateau:get_lr()
  raise("ReduceLROnPlateau: the lrs follow the metric passed to step(metric); read them with get_last_lr()")
end

return M
