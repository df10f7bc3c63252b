--[[
tide.autograd -- backward, grad, grad-mode scopes and gradcheck. The engine
and every derivative rule are in C (jit/jit_autograd.c, jit/jit_grad.c);
this module marshals tables of tensors across the FFI.
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local args = require "tide.args"
local ffi, C = core.ffi, core.C
local bit = require "bit"
local is_tensor, check = core.is_tensor, core.check
local T = tensor.Tensor

local A = {}

local function list_of(x, fname, n)
  if is_tensor(x) then return { x } end
  if type(x) ~= "table" then tensor.argerr(n, fname, "Tensor or table of Tensors", x, 3) end
  for i = 1, #x do if not is_tensor(x[i]) then tensor.argerr(n, fname, "table of Tensors", x[i], 3) end end
  return x
end

local function ptrs(list)
  local p = ffi.new("td_tensor *[?]", math.max(#list, 1))
  for i = 1, #list do p[i - 1] = list[i].p end
  return p
end

-- -- Tensor hooks --------------------------------------------------------------------------
-- x:register_hook(fn): fn(grad) runs when a backward has x's whole gradient
-- (a leaf: before .grad takes it; a non-leaf: before its producer's backward
-- runs), and may return a tensor of x's shape to use instead. Returns a handle
-- with :remove(). C keeps a flag on x and calls back into Lua (the runner
-- below) with the tensor and the gradient; the hooks live here, by address.
-- Callbacks cannot be entered from JIT-compiled code, so the functions that
-- start a backward are never compiled (jit.off below); a hook's error is
-- raised by the backward call that ran it.
local hooks_of = {}                 -- address -> { list of fns in order, by id }
local hook_error                    -- the error a hook raised, until its backward reports it
local runner

local function addr(p) return tonumber(ffi.cast("intptr_t", p)) end

local function run_hooks(t, g)
  local list = hooks_of[addr(t)]
  local cur = core.own(g)
  if list then
    for _, h in ipairs(list) do
      local ok, r = pcall(h.fn, cur)
      if not ok then hook_error = r; return nil end
      if r ~= nil then
        if not is_tensor(r) or r.p == nil then
          hook_error = ("backward: a tensor hook returned %s (a Tensor or nil expected)"):format(args.typename(r))
          return nil
        end
        cur = r
      end
    end
  end
  C.td_retain(cur.p)
  return cur.p
end

--- Tensor:register_hook(fn) -> handle
--- fn(grad) runs when a backward has x's whole gradient and may return a replacement; handle:remove() drops it.
function T.register_hook(x, fn)
  tensor.targ(x, 1, "register_hook")
  if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn) and getmetatable(fn).__call) then
    args.argerr(2, "register_hook", "function", fn)
  end
  if not x.requires_grad then
    core.raise("register_hook: cannot register a hook on a tensor that does not require grad")
  end
  if not runner then
    runner = ffi.cast("td_tensor *(*)(td_tensor *, td_tensor *)", run_hooks)
    C.td_set_hook_runner(runner)
  end
  local key = addr(x.p)
  -- an entry for this address while x is not flagged belongs to a dead tensor
  if bit.band(x.flags, C.TD_TF_HOOKED) == 0 then hooks_of[key] = nil end
  local list = hooks_of[key] or {}
  hooks_of[key] = list
  local h = { fn = fn }
  list[#list + 1] = h
  check(C.td_set_hooked(x.p, 1))
  local p = x.p
  return { remove = function()
    for i, e in ipairs(list) do
      if e == h then
        table.remove(list, i)
        if #list == 0 and hooks_of[key] == list then hooks_of[key] = nil; C.td_set_hooked(p, 0) end
        return
      end
    end
  end }
end

-- a failed backward: the hook's own error if one raised, else the C error
local function check_backward(rc)
  if rc == 0 then return end
  local e = hook_error
  hook_error = nil
  if e ~= nil then error(e, 0) end
  core.fail()
end

-- x:backward([grad], {retain_graph=false, create_graph=false})
--- Tensor:backward([grad][, {retain_graph = false, create_graph = false}])
--- Accumulates d x / d leaf into each leaf's .grad (grad: the seed, required unless x has one element).
function T.backward(x, grad, opts)
  tensor.targ(x, 1, "backward")
  if type(grad) == "table" and not is_tensor(grad) then opts, grad = grad, nil end
  opts = args.opts("backward", opts, "retain_graph create_graph", 3)
  local outs, gs = ffi.new("td_tensor *[1]", x.p), nil
  if grad ~= nil then
    if type(grad) == "number" then grad = require("tide").full_like(x, grad) end
    tensor.targ(grad, 2, "backward")
    gs = ffi.new("td_tensor *[1]", grad.p)
  end
  local retain = opts.retain_graph
  if retain == nil then retain = opts.create_graph end
  check_backward(C.td_backward(1, outs, gs, 0, nil, nil, retain and 1 or 0, opts.create_graph and 1 or 0))
end
jit.off(T.backward)

-- tide.autograd.backward(tensors, grads, opts)
--- tide.autograd.backward(tensors[, grads][, opts])
--- backward from several outputs at once (grads: their seeds); opts as Tensor:backward.
function A.backward(outputs, grads, opts)
  outputs = list_of(outputs, "backward", 1)
  opts = args.opts("backward", opts, "retain_graph create_graph", 3)
  local gp = nil
  if grads ~= nil then grads = list_of(grads, "backward", 2); gp = ptrs(grads) end
  local retain = opts.retain_graph
  if retain == nil then retain = opts.create_graph end
  check_backward(C.td_backward(#outputs, ptrs(outputs), gp, 0, nil, nil, retain and 1 or 0, opts.create_graph and 1 or 0))
end
jit.off(A.backward)

-- tide.autograd.grad(outputs, inputs, {grad_outputs=, retain_graph=, create_graph=, allow_unused=})
-- returns a table of gradients, one per input (nil where unused and allow_unused)
--- tide.autograd.grad(outputs, inputs[, {grad_outputs, retain_graph, create_graph, allow_unused}]) -> list
--- The gradients of outputs w.r.t. inputs (lists or tensors), without touching .grad.
function A.grad(outputs, inputs, opts)
  outputs = list_of(outputs, "grad", 1)
  inputs = list_of(inputs, "grad", 2)
  opts = args.opts("grad", opts, "grad_outputs retain_graph create_graph allow_unused", 3)
  local gp = nil
  if opts.grad_outputs then gp = ptrs(list_of(opts.grad_outputs, "grad", 3)) end
  local res = ffi.new("td_tensor *[?]", #inputs)
  local retain = opts.retain_graph
  if retain == nil then retain = opts.create_graph end
  check_backward(C.td_backward(#outputs, ptrs(outputs), gp, #inputs, ptrs(inputs), res,
    retain and 1 or 0, opts.create_graph and 1 or 0))
  local out = {}
  for i = 1, #inputs do
    if res[i - 1] == nil then
      if not opts.allow_unused then
        error(("grad: input %d was not used in the graph (pass allow_unused=true)"):format(i), 2)
      end
    else
      out[i] = core.wrap(res[i - 1])
    end
  end
  return out
end
jit.off(A.grad)

-- Run fn(...) with grad mode set, restoring the previous mode even on error.
local function with_mode(on, fn, ...)
  local prev = C.td_set_grad_enabled(on and 1 or 0)
  local r = { pcall(fn, ...) }
  C.td_set_grad_enabled(prev)
  if not r[1] then core.rethrow(r[2]) end
  return unpack(r, 2, table.maxn(r))
end
--- tide.no_grad(fn, ...) -> fn's results
--- Runs fn(...) with autograd off (restored after, even on error); also tide.inference_mode.
--- tide.enable_grad(fn, ...) -> fn's results
--- Runs fn(...) with autograd on.
--- tide.set_grad_enabled(on) -> boolean
--- Turns autograd on or off for this thread; returns the new mode.
--- tide.is_grad_enabled() -> boolean
--- Whether autograd records ops on this thread.
function A.no_grad(fn, ...) return with_mode(false, args.callable(fn, 1, "no_grad"), ...) end
--- tide.inference_mode(fn, ...) -> fn's results
--- PyTorch 1.9's inference mode: no_grad by another name (grad-disabled mode records nothing).
-- inference_mode(fn, ...): PyTorch 1.9's mode without autograd bookkeeping. In
-- tide, grad-disabled mode already records nothing (no nodes, no saved tensors,
-- no view bases tracked for autograd), so it is no_grad by another name.
function A.inference_mode(fn, ...) return with_mode(false, args.callable(fn, 1, "inference_mode"), ...) end
function A.enable_grad(fn, ...) return with_mode(true, args.callable(fn, 1, "enable_grad"), ...) end
function A.set_grad_enabled(on) return C.td_set_grad_enabled(on and 1 or 0) ~= 0 end
function A.is_grad_enabled() return C.td_grad_enabled() ~= 0 end

-- -- Anomaly detection -------------------------------------------------------------------------

-- PyTorch's torch.autograd.detect_anomaly. While on, every recorded op keeps the
-- user's line that called it (C asks through a callback: the first stack frame
-- outside tide's files), and a NaN or inf that a derivative rule returns fails
-- the backward naming the rule, the op and that line. LuaJIT cannot enter a
-- callback from JIT-compiled code, so the JIT compiler is off meanwhile; and
-- compiled functions run eagerly (their fused backward has no per-op nodes).
-- A debugging mode: it is slow.
local where_str, where_cb           -- the last answer (kept alive for C) and the callback
local function user_where()
  for level = 2, 100 do
    local info = debug.getinfo(level, "Sl")
    if not info then break end
    if info.what ~= "C" and info.source:sub(1, #core.tide_dir) ~= core.tide_dir then
      where_str = ("%s:%d"):format(info.short_src, info.currentline)
      return where_str
    end
  end
  return nil
end

local jit_was_on
--- tide.autograd.set_detect_anomaly(on)
--- Anomaly mode: each op keeps the line that called it and a NaN/inf gradient fails naming it (slow; JIT off).
--- tide.autograd.is_anomaly_enabled() -> boolean
--- Whether anomaly mode is on.
function A.set_detect_anomaly(on)
  on = on and true or false
  if on == (C.td_anomaly_enabled() ~= 0) then return end
  if on then
    where_cb = where_cb or ffi.cast("const char *(*)(void)", user_where)
    jit_was_on = jit.status()
    jit.off(); jit.flush()
    C.td_set_anomaly(1, where_cb)
  else
    C.td_set_anomaly(0, nil)
    if jit_was_on then jit.on() end
  end
end
function A.is_anomaly_enabled() return C.td_anomaly_enabled() ~= 0 end

-- detect_anomaly(fn, ...): fn(...) in anomaly mode (restored after, even on error)
--- tide.autograd.detect_anomaly(fn, ...) -> fn's results
--- Runs fn(...) in anomaly mode.
function A.detect_anomaly(fn, ...)
  if type(fn) ~= "function" then args.argerr(1, "detect_anomaly", "function", fn) end
  local prev = A.is_anomaly_enabled()
  A.set_detect_anomaly(true)
  local r = { pcall(fn, ...) }
  A.set_detect_anomaly(prev)
  if not r[1] then core.rethrow(r[2]) end
  return unpack(r, 2, table.maxn(r))
end

-- -- gradcheck --------------------------------------------------------------------------------

-- Compare analytical gradients of sum(fn(inputs...) * w) for a random w with
-- float64 central differences. Inputs that require grad are perturbed.
-- opts: eps=1e-6, atol=1e-5, rtol=1e-3, raise=true. Returns true or false, msg.
--- tide.autograd.gradcheck(fn, inputs[, {eps, atol, rtol, raise = true}]) -> boolean[, msg]
--- Checks fn's gradients w.r.t. its float64 inputs that require grad against central differences.
function A.gradcheck(fn, inputs, opts)
  opts = args.opts("gradcheck", opts, "eps atol rtol raise", 3)
  local eps, atol, rtol = opts.eps or 1e-6, opts.atol or 1e-5, opts.rtol or 1e-3
  args.callable(fn, 1, "gradcheck")
  if is_tensor(inputs) then inputs = { inputs } end
  if type(inputs) ~= "table" then args.argerr(2, "gradcheck", "Tensor or table of inputs", inputs) end
  local wrt = {}
  for i, x in ipairs(inputs) do
    if is_tensor(x) and x.requires_grad then
      if x.scalar_type ~= 5 then error(("gradcheck: input %d must be float64, got %s"):format(i, tostring(x.dtype)), 2) end
      wrt[#wrt + 1] = i
    end
  end
  if #wrt == 0 then error("gradcheck: no input requires grad", 2) end
  local function outputs()
    local r = { fn(unpack(inputs, 1, table.maxn(inputs))) }
    for i = 1, #r do if not is_tensor(r[i]) then error("gradcheck: fn must return tensors", 3) end end
    return r
  end
  local outs = outputs()
  -- random projection weights so one backward checks the whole Jacobian-vector product
  local w = {}
  for i, o in ipairs(outs) do w[i] = require("tide").randn(o:size(), { dtype = "float64", device = o.device }) end
  local function objective(rs)
    local s = 0
    for i, o in ipairs(rs) do
      if o.scalar_type >= 4 then s = s + (o:detach():double() * w[i]):sum():item() end
    end
    return s
  end
  local diff, gouts = {}, {}
  for i, o in ipairs(outs) do if o.requires_grad then diff[#diff + 1] = o; gouts[#gouts + 1] = w[i] end end
  if #diff == 0 then error("gradcheck: no output requires grad", 2) end
  local wrt_t = {}
  for k, i in ipairs(wrt) do wrt_t[k] = inputs[i] end
  local an = A.grad(diff, wrt_t, { grad_outputs = gouts, allow_unused = true })
  for k, i in ipairs(wrt) do
    local x = inputs[i]
    local n = x:numel()
    local a = an[k] and an[k]:contiguous():reshape(n):totable() or {}
    -- perturb through a flat contiguous view of x's data
    local flat = x:detach()
    if not flat:is_contiguous() then error("gradcheck: inputs must be contiguous (pass a contiguous tensor; a view of it inside fn is fine)", 2) end
    flat = flat:reshape(n)
    for j = 1, n do
      local v = flat[j]:item()
      A.no_grad(function() flat[j] = v + eps end)
      local fp = objective(A.no_grad(outputs))
      A.no_grad(function() flat[j] = v - eps end)
      local fm = objective(A.no_grad(outputs))
      A.no_grad(function() flat[j] = v end)
      local num = (fp - fm) / (2 * eps)
      local got = a[j] or 0
      if math.abs(got - num) > atol + rtol * math.abs(num) then
        local msg = ("gradcheck: input %d element %d: analytical %.10g vs numerical %.10g"):format(i, j, got, num)
        if opts.raise == false then return false, msg end
        error(msg, 2)
      end
    end
  end
  return true
end

return A
