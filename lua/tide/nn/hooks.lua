--[[
tide.nn.hooks -- module hooks, as PyTorch's: register_forward_pre_hook,
register_forward_hook and register_full_backward_hook (methods of every
Module, each returning a handle with :remove()). A module without hooks pays
one rawget per call (Module's __call); this file runs the calls that have some.

Full backward hooks see all the module's input gradients at once: the tensor
inputs that require grad enter forward as pieces of one concatenation (views
of a cat), so the hook on that cat's output gets every input gradient in one
call and may return replacements; the outputs pass through identity views
whose tensor hooks collect the output gradients first (they come earlier in
the backward).
--]]
local tide = require "tide"
local core = require "tide.core"
local args = require "tide.args"
local raise, is_tensor = core.raise, core.is_tensor

local M = {}

local function pack(...) return { n = select("#", ...), ... } end

local function callable(f)
  return type(f) == "function" or (type(f) == "table" and getmetatable(f) and getmetatable(f).__call ~= nil)
end

-- hooks[kind] is a list of { fn = f }; the table goes when the last one does
local function add(self, fname, kind, fn)
  if not callable(fn) then args.argerr(1, fname, "function", fn) end
  local hooks = rawget(self, "_hooks")
  if not hooks then hooks = { pre = {}, fwd = {}, bwd = {} }; rawset(self, "_hooks", hooks) end
  local h = { fn = fn }
  local list = hooks[kind]
  list[#list + 1] = h
  return { remove = function()
    for i, e in ipairs(list) do if e == h then table.remove(list, i) break end end
    if #hooks.pre + #hooks.fwd + #hooks.bwd == 0 and rawget(self, "_hooks") == hooks then rawset(self, "_hooks", nil) end
  end }
end

-- hook(module, inputs) -> nil, or the new inputs (a table of them, or one value)
function M.register_forward_pre_hook(self, fn) return add(self, "register_forward_pre_hook", "pre", fn) end
-- hook(module, inputs, output) -> nil, or the new output
function M.register_forward_hook(self, fn) return add(self, "register_forward_hook", "fwd", fn) end
-- hook(module, grad_input, grad_output) -> nil, or new grad_input (a table, one entry per tensor input)
function M.register_full_backward_hook(self, fn) return add(self, "register_full_backward_hook", "bwd", fn) end

-- -- Full backward hooks -------------------------------------------------------------------

-- The inputs that require grad, as views of one concatenation: returns the new
-- inputs and the state the backward hooks share.
local function wrap_inputs(self, a)
  local st = { module = self, slots = {}, grad_output = {}, nout = 0, seen = 0, fired = false }
  local parts, first = {}, nil
  for i = 1, a.n do
    local x = a[i]
    if is_tensor(x) and x.requires_grad then
      first = first or x
      if x.dtype ~= first.dtype or x.device ~= first.device then
        raise(("%s: a full backward hook needs its tensor inputs on one dtype and device (input %d is %s on %s, "
          .. "input %d %s on %s)"):format(self.__name, st.slots[1], tostring(first.dtype), first.device, i,
          tostring(x.dtype), x.device))
      end
      st.slots[#st.slots + 1] = i
      parts[#parts + 1] = x:reshape(-1)
    end
  end
  st.ninput = a.n
  if #parts == 0 then return a, st end
  local flat = tide.cat(parts, 1)
  local out, off = pack(unpack(a, 1, a.n)), 1
  for _, i in ipairs(st.slots) do
    local x = a[i]
    out[i] = flat:narrow(1, off, x:numel()):view(x:size())
    off = off + x:numel()
  end
  st.flat = flat
  return out, st
end

-- call the module's backward hooks once: grad_input (nil entries for inputs
-- without a gradient) and the collected grad_output; returns the new grad_input
local function fire(st, grad_input)
  st.fired = true
  local gi = grad_input
  for _, h in ipairs(rawget(st.module, "_hooks") and rawget(st.module, "_hooks").bwd or {}) do
    local r = h.fn(st.module, gi, st.grad_output)
    if r ~= nil then
      if type(r) ~= "table" or is_tensor(r) then
        raise(("%s: a full backward hook must return nil or a table of gradients, got %s"):format(st.module.__name,
          args.typename(r)))
      end
      gi = r
    end
  end
  return gi
end

-- Outputs through identity views whose hooks collect grad_output; the input
-- concatenation's hook splits its gradient into grad_input and fires.
local function wrap_outputs(st, res)
  local idx = 0
  local function wrap(v)
    if not (is_tensor(v) and v.requires_grad) then return v end
    idx = idx + 1
    local k = idx
    local y = v:view(v:size())
    y:register_hook(function(g)
      st.grad_output[k] = g
      st.seen = st.seen + 1
      -- no input requires grad: the hook fires once every output's gradient is in
      if not st.flat and st.seen == st.nout and not st.fired then fire(st, {}) end
    end)
    return y
  end
  for i = 1, res.n do
    local v = res[i]
    if type(v) == "table" and not is_tensor(v) and getmetatable(v) == nil then
      local t = {}
      for kk, x in pairs(v) do t[kk] = wrap(x) end
      res[i] = t
    else
      res[i] = wrap(v)
    end
  end
  st.nout = idx
  if st.flat then
    st.flat:register_hook(function(g)
      local gi, off = {}, 1
      for j, i in ipairs(st.slots) do
        local n = st.shapes[j]
        gi[i] = g:narrow(1, off, n.numel):view(n.size)
        off = off + n.numel
      end
      local new = fire(st, gi)
      if new == gi then return nil end
      local parts = {}
      for j, i in ipairs(st.slots) do
        local v = new[i]
        if not is_tensor(v) then
          raise(("%s: a full backward hook returned %s for the gradient of input %d (a Tensor expected)")
            :format(st.module.__name, args.typename(v), i))
        end
        parts[j] = v:reshape(-1)
      end
      return tide.cat(parts, 1)
    end)
  end
end

-- -- The call ----------------------------------------------------------------------------------

function M.call(self, hooks, ...)
  local a = pack(...)
  for _, h in ipairs(hooks.pre) do
    local r = h.fn(self, a)
    if r ~= nil then
      if type(r) == "table" and not is_tensor(r) and getmetatable(r) == nil then
        a = { n = r.n or #r, unpack(r, 1, r.n or #r) }
      else
        a = { n = 1, r }
      end
    end
  end
  local st
  if #hooks.bwd > 0 and tide.is_grad_enabled() then
    a, st = wrap_inputs(self, a)
    st.shapes = {}
    for j, i in ipairs(st.slots) do st.shapes[j] = { numel = a[i]:numel(), size = a[i]:size() } end
  end
  local res = pack(self:forward(unpack(a, 1, a.n)))
  for _, h in ipairs(hooks.fwd) do
    local r = h.fn(self, a, res.n == 1 and res[1] or { unpack(res, 1, res.n) })
    if r ~= nil then res = { n = 1, r } end
  end
  if st then wrap_outputs(st, res) end
  return unpack(res, 1, res.n)
end

return M
