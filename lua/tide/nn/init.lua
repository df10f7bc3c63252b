--[[
tide.nn -- modules: the Module base class, the containers Sequential,
ModuleList and ModuleDict; the layers, with PyTorch's names, defaults and
default initialization, come from the layer files it loads at its end
(tide.nn.layers: Linear, Embedding, LayerNorm, Conv2d, BatchNorm2d ...). Dims and indices are 1-based; state_dict keys
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
-- for the layer files' extra_repr
nn._pyfloat, nn._pybool, nn._pyval, nn._pytuple = pyfloat, pybool, pyval, pytuple

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


-- layer families in files of their own, which install their classes into nn (they
-- derive from nn.Module, so they load last, and require "tide.nn" finds this table):
-- RNN, LSTM, GRU, the cells and nn.utils.rnn; MultiheadAttention and the Transformer; the loss modules
package.loaded["tide.nn"] = nn
require "tide.nn.layers"          -- Linear ... BatchNorm2d, Conv1d/2d and the 2-D pools
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
