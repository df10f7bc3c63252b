--[[
tide.nn -- modules: the Module base class, the containers Sequential,
ModuleList and ModuleDict, and the core layers with PyTorch's names, defaults
and default initialization. Dims and indices are 1-based; state_dict keys
are PyTorch's ("0.weight", "blocks.1.attn.weight"), so checkpoints match.

Classes. `local Block = nn.Module:extend("Block")` makes a class; define
`Block:__init(...)` (set fields) and `Block:forward(...)`; `Block(...)` makes
an instance and `block(x)` calls forward. A subclass of a class:
`Big = Block:extend("Big")`, whose __init may call `Block.__init(self, ...)`.
Assigning a field registers it, in order, like PyTorch's __setattr__: a
module becomes a child; a leaf tensor with requires_grad a parameter (use
nn.Parameter(t) to make one); anything else is a plain field.
`self:register_parameter(name, t_or_nil)` registers a parameter that does not
require grad or is absent (bias=false), `self:register_buffer(name, t)` a
state tensor saved in state_dict (running stats). Registered names are read
as fields (self.weight) and reassigned the same way. Methods win over
registered names of the same spelling (ModuleDict keys "train", ...: use md:get(k)).
Traversal: parameters() / children() / modules() / buffers() are lists;
named_parameters() / named_children() / named_modules() / named_buffers() are
iterators (`for name, p in m:named_parameters() do`), names dotted as PyTorch's.
state_dict() returns sd, keys: sd maps names to detached tensors, keys lists
them in module order (a Lua table has no order of its own).
Sequential and ModuleList hold their children in the instance's array part:
`#seq`, `seq[1]` (the child named "0"), `seq[-1]`, `ipairs(seq)` work; add with
append/insert/extend({...}) or `seq[#seq + 1] = m`.
module:to(device), to(dtype), to(device, dtype), to({device=, dtype=}),
cpu(), opencl() move or convert parameters and buffers in place: each tensor
handle keeps its identity (an optimizer built before still holds them).
Layers take {device=} like {dtype=} (made on the CPU, then moved).

Not here: the functions of Conv1d/Conv2d, BatchNorm and pooling
(tide.nn.conv), weight_norm/spectral_norm (tide.nn.parametrize), hooks
(tide.nn.hooks), the recurrent layers (tide.nn.rnn) and attention and the
Transformer (tide.nn.transformer).
--]]
local tide = require "tide"
local core = require "tide.core"
local tensor = require "tide.tensor"
local args = require "tide.args"
local F = require "tide.nn.functional"
local init = require "tide.nn.init_fns"
local raise, is_tensor, argerr, shape_str = core.raise, tide.is_tensor, tensor.argerr, tensor.shape_str

local nn = { functional = F, init = init }
nn.utils = require "tide.nn.utils"      -- clip_grad_norm_, clip_grad_value_
for k, v in pairs(require "tide.nn.parametrize") do nn.utils[k] = v end   -- weight_norm, spectral_norm

-- -- Formatting (Python's repr, for __tostring) ------------------------------------------------

-- a Lua number as Python prints a float: 1e-05, 0.5, 1.0
local function pyfloat(v)
  if v ~= v then return "nan" end
  if v == math.huge then return "inf" elseif v == -math.huge then return "-inf" end
  local a = math.abs(v)
  if a ~= 0 and (a < 1e-4 or a >= 1e16) then
    for p = 0, 17 do
      local s = ("%." .. p .. "e"):format(v)
      if tonumber(s) == v then return s end
    end
  end
  for d = 1, 17 do
    local s = ("%." .. d .. "f"):format(v)
    if tonumber(s) == v then return (s:gsub("(%.%d-)0+$", "%1"):gsub("%.$", ".0")) end
  end
  return ("%.17g"):format(v)
end
nn._pyfloat = pyfloat
local function pybool(b) return b and "True" or "False" end
local function pyval(v)
  if type(v) == "boolean" then return pybool(v) end
  if v == nil then return "None" end
  if type(v) == "number" then return v == math.floor(v) and ("%d"):format(v) or pyfloat(v) end
  return tostring(v)
end
-- a shape as a Python tuple: (4,) (2, 3)
local function pytuple(s)
  if #s == 1 then return "(" .. s[1] .. ",)" end
  return "(" .. table.concat(s, ", ") .. ")"
end

-- -- Module ------------------------------------------------------------------------------------

--- nn.Module
--- The base class of layers and models: Class = nn.Module:extend("Name"), define __init and forward;
--- m(x) calls m:forward(x); fields that hold modules or tensors that require grad are registered.
local Module = { __name = "Module" }
nn.Module = Module

local function is_module(v)
  if type(v) ~= "table" then return false end
  local mt = getmetatable(v)
  return type(mt) == "table" and rawget(mt, "__is_class") == true
end
--- nn.is_module(v) -> boolean
--- Whether v is an nn.Module instance or class.
nn.is_module = is_module

-- an ordered registry: names in insertion order, values by name
local function registry() return { names = {}, map = {}, has = {} } end
local function reg_set(r, name, v)
  if not r.has[name] then r.has[name] = true; r.names[#r.names + 1] = name end
  r.map[name] = v
end
local function reg_del(r, name)
  if not r.has[name] then return end
  r.has[name], r.map[name] = nil, nil
  for i, n in ipairs(r.names) do if n == name then table.remove(r.names, i) break end end
end

-- instance field lookup: class methods first, then registered parameters, buffers, modules
local function make_index(cls)
  return function(self, k)
    local v = cls[k]
    if v ~= nil then return v end
    local regs = rawget(self, "_regs")
    if regs then
      for i = 1, 3 do
        local r = regs[i]
        if r.has[k] then return r.map[k] end
      end
    end
    if type(k) == "number" and k < 0 then return rawget(self, #self + k + 1) end
    return nil
  end
end

local function is_param_candidate(v) return is_tensor(v) and v.requires_grad and v.is_leaf end

local function newindex(self, k, v)
  local regs = rawget(self, "_regs")
  if not regs then return rawset(self, k, v) end
  local params, buffers, modules = regs[1], regs[2], regs[3]
  if type(k) == "number" and rawget(self, "_is_list") then
    if not is_module(v) then
      raise(("%s: item %d must be a Module, got %s"):format(self.__name, k, tensor.typename(v)))
    end
    if k ~= #self + 1 then raise(("%s: index %d is out of range for %d modules"):format(self.__name, k, #self)) end
    return rawset(self, k, v)
  end
  if is_module(v) then
    reg_del(params, k); reg_del(buffers, k)
    return reg_set(modules, k, v)
  end
  if params.has[k] then
    if v ~= nil and not is_tensor(v) then
      raise(("%s: cannot assign %s as parameter '%s' (Tensor or nil expected)"):format(self.__name, tensor.typename(v), k))
    end
    return reg_set(params, k, v)
  end
  if buffers.has[k] then
    if v ~= nil and not is_tensor(v) then
      raise(("%s: cannot assign %s as buffer '%s' (Tensor or nil expected)"):format(self.__name, tensor.typename(v), k))
    end
    return reg_set(buffers, k, v)
  end
  if modules.has[k] then
    if v ~= nil then
      raise(("%s: cannot assign %s as child module '%s' (Module or nil expected)"):format(self.__name, tensor.typename(v), k))
    end
    return reg_del(modules, k)
  end
  if is_param_candidate(v) then return reg_set(params, k, v) end
  rawset(self, k, v)
end

-- module(...): forward, or with hooks through tide.nn.hooks (one rawget when there are none)
local hooks_mod
local function call(self, ...)
  local h = rawget(self, "_hooks")
  if h == nil then return self:forward(...) end
  hooks_mod = hooks_mod or require "tide.nn.hooks"
  return hooks_mod.call(self, h, ...)
end
local function tostr(self) return self:__repr() end

-- Module:extend(name) -> a new class deriving from this one
--- nn.Module:extend(name) -> class
--- A new class deriving from this one (define its __init and forward).
function Module:extend(name)
  if type(name) ~= "string" then argerr(1, "extend", "class name string", name) end
  local cls = { __name = name, super = self, __is_class = true, __call = call, __tostring = tostr,
    __newindex = newindex }
  cls.__index = make_index(cls)
  return setmetatable(cls, { __index = self, __tostring = function() return "nn." .. name end,
    __call = function(c, ...) return c:new(...) end })
end

-- cls:new(...) (what cls(...) calls): set up the registries, then run __init
function Module.new(cls, ...)
  if type(cls) ~= "table" or not rawget(cls, "__is_class") then argerr(1, "new", "module class", cls) end
  local self = setmetatable({}, cls)
  rawset(self, "_regs", { registry(), registry(), registry() })
  rawset(self, "training", true)
  if cls.__init then cls.__init(self, ...) end
  return self
end
function Module:__init() end

--- nn.Module:forward(...) -> outputs
--- The computation of the module (each class defines it); m(...) calls it.
--- nn.Module:extra_repr() -> string
--- The arguments shown in the module's printed form (each class may define it).
--- nn.Module:reset_parameters()
--- Re-initializes the parameters as at construction (layers with parameters).
function Module:forward()
  raise(("%s: forward is not implemented (define %s:forward)"):format(self.__name, self.__name))
end

-- forward pre-hooks, forward hooks, full backward hooks (tide.nn.hooks): each returns a handle with :remove()
--- nn.Module:register_forward_pre_hook(fn) -> handle
--- fn(module, inputs) runs before forward and may return new inputs; handle:remove() drops it.
--- nn.Module:register_forward_hook(fn) -> handle
--- fn(module, inputs, output) runs after forward and may return a new output.
--- nn.Module:register_full_backward_hook(fn) -> handle
--- fn(module, grad_input, grad_output) runs in the backward and may return a new grad_input.
for _, n in ipairs { "register_forward_pre_hook", "register_forward_hook", "register_full_backward_hook" } do
  Module[n] = function(self, fn) return require("tide.nn.hooks")[n](self, fn) end
end

--- nn.Module:register_parameter(name, t)
--- Registers t (or nil: absent, e.g. bias=false) as a parameter, even if it does not require grad.
function Module:register_parameter(name, t)
  if type(name) ~= "string" then argerr(1, "register_parameter", "string name", name) end
  if t ~= nil and not is_tensor(t) then argerr(2, "register_parameter", "Tensor or nil", t) end
  local regs = rawget(self, "_regs")
  reg_del(regs[2], name); reg_del(regs[3], name); rawset(self, name, nil)
  reg_set(regs[1], name, t)
end
-- register_buffer(name, t, {persistent=true}): a non-persistent buffer is left out of state_dict
--- nn.Module:register_buffer(name, t[, {persistent = true}])
--- Registers a state tensor (running stats) saved in state_dict unless persistent = false.
function Module:register_buffer(name, t, opts)
  if type(name) ~= "string" then argerr(1, "register_buffer", "string name", name) end
  if t ~= nil and not is_tensor(t) then argerr(2, "register_buffer", "Tensor or nil", t) end
  opts = args.opts("register_buffer", opts, "persistent", 3)
  local regs = rawget(self, "_regs")
  reg_del(regs[1], name); reg_del(regs[3], name); rawset(self, name, nil)
  reg_set(regs[2], name, t)
  regs[2].transient = regs[2].transient or {}
  regs[2].transient[name] = (opts and opts.persistent == false) or nil
end
--- nn.Module:add_module(name, m)
--- Registers a child module (also register_module).
function Module:add_module(name, m)
  if type(name) ~= "string" then argerr(1, "add_module", "string name", name) end
  if m ~= nil and not is_module(m) then argerr(2, "add_module", "Module or nil", m) end
  local regs = rawget(self, "_regs")
  reg_del(regs[1], name); reg_del(regs[2], name); rawset(self, name, nil)
  reg_set(regs[3], name, m)
end
Module.register_module = Module.add_module

-- nn.Parameter(t, requires_grad=true): t as a leaf that requires grad (detached if it is not a leaf)
--- nn.Parameter(t[, requires_grad = true]) -> Tensor
--- t as a leaf that requires grad (detached first if it is not a leaf): a module field holding it is a parameter.
function nn.Parameter(t, requires_grad)
  if not is_tensor(t) then argerr(1, "Parameter", "Tensor", t) end
  if not t.is_leaf then t = t:detach() end
  return t:requires_grad_(requires_grad ~= false)
end

-- -- Traversal ----------------------------------------------------------------------------------

-- ordered {name, module} pairs of the direct children (list containers: "0", "1", ... first)
function Module:_child_list()
  local out = {}
  if rawget(self, "_is_list") then
    for i = 1, #self do out[#out + 1] = { tostring(i - 1), rawget(self, i) } end
  end
  local r = rawget(self, "_regs")[3]
  for _, n in ipairs(r.names) do
    if r.map[n] ~= nil then out[#out + 1] = { n, r.map[n] } end
  end
  return out
end

local function iter(list)
  local i = 0
  return function()
    i = i + 1
    local e = list[i]
    if e then return e[1], e[2] end
  end
end

--- nn.Module:named_children() -> iterator
--- for name, m in module:named_children(): the direct children.
--- nn.Module:children() -> list
--- The direct children.
function Module:named_children() return iter(self:_child_list()) end
function Module:children()
  local out = {}
  for _, m in self:named_children() do out[#out + 1] = m end
  return out
end

-- pre-order walk: {prefix, module} for self and every descendant, each module once
-- (dedup false: a shared module appears under every name, as state_dict needs;
-- a module containing itself is an error either way)
local function walk(m, prefix, seen, out, dedup, stack)
  if dedup and seen[m] then return out end
  if stack[m] then raise(("%s: module '%s' contains itself"):format(m.__name, prefix)) end
  seen[m], stack[m] = true, true
  out[#out + 1] = { prefix, m }
  for _, c in ipairs(m:_child_list()) do
    walk(c[2], prefix == "" and c[1] or prefix .. "." .. c[1], seen, out, dedup, stack)
  end
  stack[m] = nil
  return out
end
--- nn.Module:named_modules() -> iterator
--- for name, m in module:named_modules(): self ("") and every descendant, dotted names.
--- nn.Module:modules() -> list
--- Self and every descendant, each once.
function Module:named_modules() return iter(walk(self, "", {}, {}, true, {})) end
function Module:modules()
  local out = {}
  for _, m in self:named_modules() do out[#out + 1] = m end
  return out
end

-- {name, tensor} of registry kind (1 params, 2 buffers) over all modules; each tensor once
local function named_tensors(self, kind, dedup)
  local out, seen = {}, {}
  for prefix, m in self:named_modules() do
    local r = rawget(m, "_regs")[kind]
    for _, n in ipairs(r.names) do
      local t = r.map[n]
      if t ~= nil and not (dedup and seen[t]) then
        seen[t] = true
        out[#out + 1] = { prefix == "" and n or prefix .. "." .. n, t }
      end
    end
  end
  return out
end

-- for name, p in m:named_parameters() do ... end  (shared parameters appear once)
--- nn.Module:named_parameters() -> iterator
--- for name, p in module:named_parameters(): every parameter once, named as PyTorch ("0.weight").
--- nn.Module:parameters() -> list
--- Every parameter once (what an optimizer takes).
--- nn.Module:named_buffers() -> iterator
--- for name, b in module:named_buffers(): every buffer.
--- nn.Module:buffers() -> list
--- Every buffer.
function Module:named_parameters() return iter(named_tensors(self, 1, true)) end
function Module:parameters()
  local out = {}
  for _, e in ipairs(named_tensors(self, 1, true)) do out[#out + 1] = e[2] end
  return out
end
function Module:named_buffers() return iter(named_tensors(self, 2, true)) end
function Module:buffers()
  local out = {}
  for _, e in ipairs(named_tensors(self, 2, true)) do out[#out + 1] = e[2] end
  return out
end

-- apply(fn): fn(m) for every descendant, then self (as PyTorch)
--- nn.Module:apply(fn) -> self
--- fn(m) for every descendant, then for self.
function Module:apply(fn)
  args.callable(fn, 2, "apply")
  for _, c in ipairs(self:children()) do c:apply(fn) end
  fn(self)
  return self
end

-- -- Modes, gradients, dtype ----------------------------------------------------------------------

--- nn.Module:train([mode = true]) -> self
--- Training mode (Dropout active, BatchNorm on batch statistics) for self and descendants.
--- nn.Module:eval() -> self
--- train(false).
function Module:train(mode)
  if mode == nil then mode = true end
  if type(mode) ~= "boolean" then argerr(1, "train", "boolean", mode) end
  for _, m in ipairs(self:modules()) do rawset(m, "training", mode) end
  return self
end
function Module:eval() return self:train(false) end

-- requires_grad_(b=true): set requires_grad on every parameter (freeze with false)
--- nn.Module:requires_grad_([on = true]) -> self
--- Sets requires_grad on every parameter (false freezes them).
function Module:requires_grad_(b)
  if b == nil then b = true end
  for _, p in ipairs(self:parameters()) do p.requires_grad = b end
  return self
end

-- zero_grad(): every parameter's grad becomes nil (PyTorch's set_to_none=True)
--- nn.Module:zero_grad()
--- Every parameter's grad becomes nil.
function Module:zero_grad()
  for _, p in ipairs(self:parameters()) do p.grad = nil end
end

-- Move t to device dev (a device string, or nil: stay) and convert it to dtype id
-- (or nil: keep; only floating-point tensors convert) in place: the handle keeps
-- its identity (optimizers and tables holding it see the new tensor) while its C
-- tensor is replaced by a moved or converted copy; requires_grad is kept and a
-- grad is moved and converted too.
local function convert_(t, dev, devt, id)
  if id ~= nil and not t:is_floating_point() then id = nil end
  if (devt == nil or devt == t.device_type) and (id == nil or id == t.scalar_type) then return end
  local function moved(x)
    if devt ~= nil then x = x:to(dev) end
    if id ~= nil then x = x:to(core.dtype_of[id]) end
    return x
  end
  local rg, g = t.requires_grad, t.grad
  local new = tide.no_grad(function() return moved(t:detach()) end)
  t.p, new.p = new.p, t.p          -- swap: `new` now owns (and will release) the old C tensor
  if rg then t:requires_grad_(true) end
  if g ~= nil then t.grad = tide.no_grad(function() return moved(g) end) end
end

-- to(device), to(dtype), to(device, dtype), to({device=, dtype=}), to(tensor) (its
-- device and dtype): move parameters and buffers to the device and convert the
-- floating-point ones to the dtype, in place (see convert_); returns self
--- nn.Module:to(device | dtype | {device, dtype} | tensor) -> self
--- Moves parameters and buffers to a device and/or converts the float ones, in place (handles keep identity).
--- nn.Module:float() -> self
--- to(tide.float32).
--- nn.Module:double() -> self
--- to(tide.float64).
--- nn.Module:cpu() -> self
--- to("cpu").
--- nn.Module:opencl([n]) -> self
--- to("opencl:n").
function Module:to(d, d2)
  local dev, dt = d, d2
  if is_tensor(d) then dev, dt = d.device, d.dtype
  elseif type(d) == "table" and not d.id then dev, dt = d.device, d.dtype
  elseif not tensor.parse_device(d) then
    if type(d) == "string" and core.dtypes[d] == nil then tensor.check_device(d, "to") end
    dev, dt = nil, d
  end
  if dev == nil and dt == nil then argerr(1, "to", "device or dtype", d) end
  local devt
  if dev ~= nil then
    local idx
    devt, idx = tensor.check_device(dev, "to")
    if devt ~= 0 then core.check(core.C.td_opencl_init(idx)) end   -- a device that cannot open fails before any move
  end
  local id
  if dt ~= nil then
    id = core.dtype_id(dt, "to")
    if id < 4 then raise(("to: modules can only be converted to a floating dtype, got %s"):format(core.dtype_of[id].name)) end
  end
  for _, kind in ipairs { 1, 2 } do
    for _, e in ipairs(named_tensors(self, kind, true)) do convert_(e[2], dev, devt, id) end
  end
  return self
end
function Module:float() return self:to(tide.float32) end
function Module:double() return self:to(tide.float64) end
function Module:cpu() return self:to("cpu") end
-- opencl(n): to "opencl:n" (default: the open device, or TIDE_OPENCL_DEVICE, or 0)
function Module:opencl(n)
  if n ~= nil then args.count(n, 2, "opencl", "device index") end
  return self:to(n and ("opencl:" .. n) or "opencl")
end

-- -- state_dict ----------------------------------------------------------------------------------

-- state_dict() -> sd, keys: sd maps PyTorch-style names to detached tensors (sharing
-- storage with the parameters and buffers); keys lists the names in module order
--- nn.Module:state_dict() -> sd, keys
--- sd maps PyTorch-style names ("blocks.1.attn.weight") to detached tensors; keys lists them in order.
function Module:state_dict()
  local sd, keys = {}, {}
  for _, e in ipairs(walk(self, "", {}, {}, false, {})) do
    local prefix, m = e[1], e[2]
    local regs = rawget(m, "_regs")
    for kind = 1, 2 do
      for _, n in ipairs(regs[kind].names) do
        local t = regs[kind].map[n]
        if t ~= nil and not (regs[kind].transient and regs[kind].transient[n]) then
          local k = prefix == "" and n or prefix .. "." .. n
          sd[k] = t:detach()
          keys[#keys + 1] = k
        end
      end
    end
  end
  return sd, keys
end

local function quoted(list)
  local q = {}
  for i, k in ipairs(list) do q[i] = '"' .. k .. '"' end
  return table.concat(q, ", ")
end

-- load_state_dict(sd, {strict=true}): copy every entry into the parameter or buffer of
-- the same name under no_grad. Every check runs before any copy, so a failed load
-- leaves the module unchanged. Returns {missing_keys=, unexpected_keys=}.
--- nn.Module:load_state_dict(sd[, {strict = true}]) -> {missing_keys, unexpected_keys}
--- Copies each entry into the parameter or buffer of that name (all checks first: a failed load changes nothing).
function Module:load_state_dict(sd, opts)
  if type(sd) ~= "table" then argerr(1, "load_state_dict", "table of tensors", sd) end
  -- m:load_state_dict(other:state_dict()) passes state_dict's key list along: not options
  if type(opts) == "table" and rawget(opts, 1) ~= nil then opts = nil end
  local strict = args.opts("load_state_dict", opts, "strict", 2).strict ~= false
  local own, keys = self:state_dict()
  local missing, unexpected = {}, {}
  for _, k in ipairs(keys) do if sd[k] == nil then missing[#missing + 1] = k end end
  for k, v in pairs(sd) do
    if own[k] == nil then unexpected[#unexpected + 1] = tostring(k)
    elseif not is_tensor(v) then
      raise(("load_state_dict: entry \"%s\" is a %s, expected a Tensor"):format(k, tensor.typename(v)))
    end
  end
  table.sort(unexpected)
  if strict and (#missing > 0 or #unexpected > 0) then
    local parts = {}
    if #missing > 0 then parts[#parts + 1] = "missing key(s) in state_dict: " .. quoted(missing) end
    if #unexpected > 0 then parts[#parts + 1] = "unexpected key(s) in state_dict: " .. quoted(unexpected) end
    raise(("load_state_dict: error(s) loading state_dict for %s: %s"):format(self.__name, table.concat(parts, "; ")))
  end
  for _, k in ipairs(keys) do
    local src = sd[k]
    if src ~= nil and not is_tensor(src) then     -- (a table whose __index answers for keys pairs does not list)
      raise(("load_state_dict: entry \"%s\" is a %s, expected a Tensor"):format(k, tensor.typename(src)))
    end
    if src ~= nil and not (src.shape == own[k].shape) then
      raise(("load_state_dict: size mismatch for \"%s\": copying a param with shape %s from checkpoint, the shape in the current model is %s"):format(
        k, shape_str(src), shape_str(own[k])))
    end
  end
  -- copy_ works across devices: a CPU checkpoint loads into parameters on OpenCL
  tide.no_grad(function()
    for _, k in ipairs(keys) do
      if sd[k] ~= nil then own[k]:copy_(sd[k]) end
    end
  end)
  return { missing_keys = missing, unexpected_keys = unexpected }
end

-- -- __tostring: PyTorch's module tree --------------------------------------------------------

function Module:extra_repr() return "" end

local function addindent(s, n)
  local pad = (" "):rep(n)
  return (s:gsub("\n", "\n" .. pad))
end

function Module:__repr()
  local extra = self:extra_repr()
  local extra_lines = {}
  if extra ~= "" then for line in (extra .. "\n"):gmatch("(.-)\n") do extra_lines[#extra_lines + 1] = line end end
  local child_lines = {}
  for _, c in ipairs(self:_child_list()) do
    child_lines[#child_lines + 1] = "(" .. c[1] .. "): " .. addindent(c[2]:__repr(), 2)
  end
  local s = self.__name .. "("
  if #extra_lines + #child_lines > 0 then
    if #extra_lines == 1 and #child_lines == 0 then s = s .. extra_lines[1]
    else
      local lines = {}
      for _, l in ipairs(extra_lines) do lines[#lines + 1] = l end
      for _, l in ipairs(child_lines) do lines[#lines + 1] = l end
      s = s .. "\n  " .. table.concat(lines, "\n  ") .. "\n"
    end
  end
  return s .. ")"
end

-- -- Containers ----------------------------------------------------------------------------------

-- the modules given as (m1, m2, ...) or as one list {m1, m2, ...}
local function module_args(fname, ...)
  local n = select("#", ...)
  local list = { ... }
  if n == 1 and type(list[1]) == "table" and not is_module(list[1]) then list = list[1]; n = #list end
  for i = 1, n do
    if not is_module(list[i]) then argerr(i, fname, "Module", list[i]) end
  end
  return list, n
end

--- nn.ModuleList(m1, m2, ... | {m1, ...})
--- A list of modules: #ml, ml[1], ipairs(ml); state_dict names "0", "1", ...
local ModuleList = Module:extend("ModuleList")
nn.ModuleList = ModuleList
function ModuleList:__init(...)
  rawset(self, "_is_list", true)
  local list, n = module_args(self.__name, ...)
  for i = 1, n do rawset(self, i, list[i]) end
end
--- nn.ModuleList:append(m) -> self
--- Adds m at the end.
--- nn.ModuleList:extend_list(list) -> self
--- Appends every module of list.
--- nn.ModuleList:extend({m1, m2}) -> self
--- Appends them (called on a class with a name, extend makes a subclass).
--- nn.ModuleList:insert(i, m) -> self
--- m becomes item i (1-based), later items move up.
--- nn.ModuleList:len() -> number
--- The number of modules.
function ModuleList:append(m)
  if not is_module(m) then argerr(1, "append", "Module", m) end
  rawset(self, #self + 1, m)
  return self
end
function ModuleList:extend_list(list)
  if type(list) ~= "table" then argerr(1, "extend", "list of modules", list) end
  for i = 1, #list do self:append(list[i]) end
  return self
end
-- ml:extend({m1, m2}) appends (PyTorch's ModuleList.extend); on a class, extend makes a subclass
function ModuleList:extend(x)
  if rawget(self, "_regs") then return self:extend_list(x) end
  return Module.extend(self, x)
end
-- insert(i, m): m becomes item i (1-based), later items move up
function ModuleList:insert(i, m)
  if not is_module(m) then argerr(2, "insert", "Module", m) end
  local n = #self
  if type(i) ~= "number" or i ~= math.floor(i) or i < 1 or i > n + 1 then
    raise(("insert: index %s is out of range for %d modules (valid: 1..%d)"):format(tostring(i), n, n + 1))
  end
  table.insert(self, i, m)
  return self
end
function ModuleList:len() return #self end
function ModuleList:forward()
  raise(("%s: has no forward; call its items"):format(self.__name))
end

-- Sequential(m1, m2, ...) or Sequential({m1, m2, ...}): forward runs them in order
--- nn.Sequential(m1, m2, ... | {m1, ...})
--- Runs its modules in order: seq(x) = mN(...m2(m1(x))).
local Sequential = ModuleList:extend("Sequential")
nn.Sequential = Sequential
function Sequential:forward(x, ...)
  for i = 1, #self do
    if i == 1 then x = rawget(self, i)(x, ...) else x = rawget(self, i)(x) end
  end
  return x
end

-- ModuleDict({ {"name", m}, ... }) keeps that order; ModuleDict({name = m}) sorts by name
--- nn.ModuleDict({{"name", m}, ...} | {name = m, ...})
--- Modules by name (a list of pairs keeps order; a table is sorted by name); md:get(k).
local ModuleDict = Module:extend("ModuleDict")
nn.ModuleDict = ModuleDict
function ModuleDict:__init(items)
  if items ~= nil then self:update(items) end
end
--- nn.ModuleDict:update(items) -> self
--- Adds or replaces entries (same forms as the constructor).
--- nn.ModuleDict:get(k) -> Module or nil
--- The module named k.
--- nn.ModuleDict:keys() -> list
--- The names in order.
--- nn.ModuleDict:values() -> list
--- The modules in order.
--- nn.ModuleDict:items() -> iterator
--- for name, m in md:items().
--- nn.ModuleDict:len() -> number
--- The number of entries.
--- nn.ModuleDict:contains(k) -> boolean
--- Whether k is a name.
--- nn.ModuleDict:pop(k) -> Module
--- Removes and returns the module named k.
function ModuleDict:update(items)
  if type(items) ~= "table" then argerr(1, "update", "table of modules", items) end
  if #items > 0 then
    for i, kv in ipairs(items) do
      if type(kv) ~= "table" or type(kv[1]) ~= "string" or not is_module(kv[2]) then
        argerr(1, "ModuleDict", ("list of {name, Module} pairs (item %d)"):format(i), kv)
      end
      self:add_module(kv[1], kv[2])
    end
  else
    local names = {}
    for k in pairs(items) do names[#names + 1] = k end
    table.sort(names)
    for _, k in ipairs(names) do
      if type(k) ~= "string" or not is_module(items[k]) then
        raise(("ModuleDict: entry '%s' must map a string to a Module"):format(tostring(k)))
      end
      self:add_module(k, items[k])
    end
  end
  return self
end
function ModuleDict:get(k) return rawget(self, "_regs")[3].map[k] end
function ModuleDict:keys()
  local out = {}
  for n in self:named_children() do out[#out + 1] = n end
  return out
end
function ModuleDict:values() return self:children() end
function ModuleDict:items() return self:named_children() end
function ModuleDict:len() return #self:keys() end
function ModuleDict:contains(k) return self:get(k) ~= nil end
function ModuleDict:pop(k)
  local m = self:get(k)
  if m == nil then raise(("ModuleDict: no module named '%s'"):format(tostring(k))) end
  reg_del(rawget(self, "_regs")[3], k)
  return m
end
function ModuleDict:forward() raise("ModuleDict: has no forward; call its items") end

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

-- layer families in files of their own, which install their classes into nn (they
-- derive from nn.Module, so they load last, and require "tide.nn" finds this table):
-- RNN, LSTM, GRU, the cells and nn.utils.rnn; MultiheadAttention and the Transformer; the loss modules
package.loaded["tide.nn"] = nn
require "tide.nn.rnn"
require "tide.nn.transformer"
-- ConvTranspose1d/2d, Conv3d; GroupNorm, InstanceNorm, LocalResponseNorm; pooling, resampling,
-- embedding bags, dropout variants, activations
require "tide.nn.convt"
require "tide.nn.norm"
require "tide.nn.activation"
require "tide.nn.pool"
require "tide.nn.loss_modules"     -- MSELoss ... CTCLoss: the losses of tide.nn.functional as modules

return nn
