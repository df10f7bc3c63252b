--[[
tide.compile -- compiled functions. tide.compile(fn, opts) returns a callable
object; each call traces fn (its ops are recorded, no kernels run), finds the
compiled variant for that trace (compiling on a miss, printing why) and runs
its fused kernels. The trace is the guard: shapes, dtypes, the ops Lua chose,
the Lua numbers used (a number that changes becomes a kernel argument; so do
sizes: a new batch size reuses the compiled kernels). The
C side is jit/jit_compile.c; this file handles arguments and returns.
A call whose tensors are on OpenCL compiles the same way, its kernels printed
as OpenCL C (opencl/cl_gen.c) and run on the device.
--]]
local bit = require "bit"
local core = require "tide.core"
local args = require "tide.args"
local ffi, C = core.ffi, core.C
local is_tensor = core.is_tensor

local M = {}

local Compiled = {}
Compiled.__index = Compiled

local TensorPtrs = ffi.typeof("td_tensor*[?]")

local function pack(...) return { n = select("#", ...), ... } end

-- Tensors among the arguments become the first input slots (named in messages).
local function arg_tensors(...)
  local n = select("#", ...)
  local arr, k = TensorPtrs(n + 1), 0
  for i = 1, n do
    local a = select(i, ...)
    if is_tensor(a) then arr[k] = a.p; k = k + 1 end
  end
  return arr, k
end

local function data_dependent(msg)
  return type(msg) == "string" and msg:find("tide.compile traces the function", 1, true) ~= nil
end

-- Returned tensors, at the top level or inside returned plain tables (nested).
local function collect_outputs(res)
  local where, ptrs, seen = {}, {}, {}
  local function walk(t, k, v)
    if is_tensor(v) then where[#where + 1] = { t, k }; ptrs[#ptrs + 1] = v.p
    elseif type(v) == "table" and getmetatable(v) == nil and not seen[v] then
      seen[v] = true
      for kk, x in pairs(v) do walk(v, kk, x) end
    end
  end
  for i = 2, res.n do walk(res, i, res[i]) end
  return where, ptrs
end

-- A trace belongs to its call. The function runs in a coroutine of its own, so
-- that a yield inside it (a compiled function called from a coroutine) comes
-- back here: tracing pauses while control is outside the function (ops there
-- run eagerly, never traced), the values are yielded on to the caller, and
-- tracing resumes with the function. A call abandoned while suspended ends
-- its trace when the suspended coroutine is collected (the guard's __gc), or
-- when the compiled function is called again.
local function abandon_guard(self, call)
  local g = newproxy(true)
  getmetatable(g).__gc = function()
    if self.suspended == call then self.suspended = nil; C.td_compile_abort(self.cf) end
  end
  return g
end

local function call_traced(self, ...)
  local co = coroutine.create(self.body)
  local res = pack(coroutine.resume(co, ...))
  if coroutine.status(co) ~= "suspended" then return res end
  local call = (self.calls or 0) + 1
  self.calls = call
  local guard = abandon_guard(self, call)
  repeat
    C.td_compile_pause(self.cf)
    self.suspended = call
    local back = pack(pcall(coroutine.yield, unpack(res, 2, res.n)))
    if self.suspended ~= call then
      return { n = 2, false, ("tide.compile: %s was called again while this call was suspended in a coroutine; "
        .. "its trace was abandoned"):format(self.name) }
    end
    self.suspended = nil
    if not back[1] then return { n = 2, false, back[2] } end        -- yield outside a coroutine
    if C.td_compile_resume(self.cf) ~= 0 then return { n = 2, false, core.last_error() } end
    res = pack(coroutine.resume(co, unpack(back, 2, back.n)))
  until coroutine.status(co) ~= "suspended"
  guard = nil
  return res
end

local function run(self, mode, ...)
  local args, nargs = arg_tensors(...)
  if self.suspended then self.suspended = nil end     -- begin drops that call's trace
  core.check(C.td_compile_begin(self.cf, nargs, args))
  local res = call_traced(self, ...)
  if not res[1] then
    C.td_compile_abort(self.cf)
    local msg = res[2]
    if self.fallback and data_dependent(msg) and mode == 0 then
      io.stderr:write(("tide.compile: %s reads tensor values while traced (%s); running it eagerly from now on\n")
        :format(self.name, tostring(msg):match("^[^\n]*")))
      self.eager = true
      return self.fn(...)
    end
    -- a message without a position (raised where the trace's coroutine had no user
    -- frame left, after a tail call) points at the call of the compiled function
    core.rethrow(msg)
  end
  local where, ptrs = collect_outputs(res)
  local n = #ptrs
  local outs, results = TensorPtrs(n + 1), TensorPtrs(n + 1)
  for j = 1, n do outs[j - 1] = ptrs[j] end
  local rc = C.td_compile_end(self.cf, n, outs, results, mode)
  if rc < 0 then core.fail() end
  if rc == C.TD_COMPILE_RERUN_EAGER then return self.fn(...) end
  if mode ~= 0 then return ffi.string(C.td_compile_text(self.cf)) end
  for j = 1, n do
    local w = where[j]
    w[1][w[2]] = core.wrap(results[j - 1])
  end
  return unpack(res, 2, res.n)
end

-- tensor hooks may run inside td_compile_end's backward: a C callback into
-- Lua, which LuaJIT cannot enter from compiled code
jit.off(run)

function Compiled:__call(...)
  -- a compiled function called while another one traces is simply inlined
  -- (anomaly mode checks each op's gradient: compiled code has no per-op nodes)
  if C.td_is_tracing() ~= 0 or self.eager or C.td_anomaly_enabled() ~= 0 then return self.fn(...) end
  if C.td_compile_eager_grad(self.cf) ~= 0 and C.td_grad_enabled() ~= 0 then return self.fn(...) end
  return run(self, 0, ...)
end

-- compiled:explain(args...): the trace, the kernel groups and the generated C
-- of the variant these arguments select (compiling it if needed), as a string.
-- The function runs as traced (its Lua side effects happen), its kernels do not.
--- tide.jit.Compiled:explain(args...) -> string
--- The trace, kernel groups and generated C of the variant these arguments select.
function Compiled:explain(...) return run(self, C.TD_COMPILE_EXPLAIN, ...) end

-- Number of compiled variants so far.
--- tide.jit.Compiled:variants() -> number
--- The number of compiled variants so far.
function Compiled:variants() return C.td_compile_variants(self.cf) end

local function name_of(fn)
  local info = debug.getinfo(fn, "S")
  return (info.short_src or "?"):match("[^/]*$") .. ":" .. (info.linedefined or 0)
end

-- tide.compile(fn, {fallback = "eager", name = "step", dynamic = true})
-- dynamic: sizes (a batch dim) are run-time values from the first call: a new
-- size builds a variant whose kernels are shared (no note, no variant limit).
-- Without it this starts after the first new size.
--- tide.jit.compile(fn[, opts]) -> compiled
--- tide.compile.
--- tide.jit.Compiled
--- What tide.compile returns: call it as fn; methods explain, variants.
function M.compile(fn, opts)
  if type(fn) ~= "function" and not (type(fn) == "table" and getmetatable(fn) and getmetatable(fn).__call) then
    core.raise(("bad argument #1 to 'compile' (function expected, got %s)"):format(type(fn)))
  end
  opts = args.opts("compile", opts, "fallback name dynamic", 2)
  if opts.name ~= nil and type(opts.name) ~= "string" then
    core.raise(("compile: name must be a string, got %s"):format(args.typename(opts.name)))
  end
  if opts.fallback ~= nil and opts.fallback ~= "eager" and opts.fallback ~= "error" then
    core.raise(("compile: fallback must be \"eager\" or \"error\", got %s"):format(tostring(opts.fallback)))
  end
  if opts.dynamic ~= nil and type(opts.dynamic) ~= "boolean" then
    core.raise(("compile: dynamic must be a boolean, got %s"):format(type(opts.dynamic)))
  end
  local name = opts.name or (type(fn) == "function" and name_of(fn) or "module")
  local flags = bit.bor(opts.fallback == "eager" and C.TD_COMPILE_FALLBACK_EAGER or 0,
                        opts.dynamic and C.TD_COMPILE_DYNAMIC or 0)
  local cf = C.td_compile_new(name, flags)
  if cf == nil then core.fail() end
  -- body: what the traced call's coroutine runs (a callable table is not a function)
  local body = type(fn) == "function" and fn or function(...) return fn(...) end
  return setmetatable({ fn = fn, body = body, cf = ffi.gc(cf, C.td_compile_free), name = name,
                        fallback = opts.fallback == "eager" }, Compiled)
end

-- tide.jit.to_dot(compiled, args...): the trace graph of that call as Graphviz DOT.
--- tide.jit.to_dot(compiled, args...) -> string
--- The trace graph of that call as Graphviz DOT.
function M.to_dot(compiled, ...)
  if getmetatable(compiled) ~= Compiled then
    core.raise("bad argument #1 to 'to_dot' (compiled function expected)")
  end
  return run(compiled, C.TD_COMPILE_DOT, ...)
end

-- tide.jit.stats(): counts of libgccjit compiles, disk-cache loads, memory-cache hits, kernels compiled
--- tide.jit.stats() -> table
--- Counters: compiles, disk_loads, mem_hits, kernels.
function M.stats()
  local s = ffi.new("int64_t[4]")
  C.td_jit_stats(s)
  return { compiles = tonumber(s[0]), disk_loads = tonumber(s[1]), mem_hits = tonumber(s[2]),
           kernels = tonumber(s[3]) }
end

M.Compiled = Compiled
return M
