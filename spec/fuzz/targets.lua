--[[
fuzz.targets -- what the API fuzzer calls, enumerated at run time from tide's own
tables (so a new function is fuzzed without being listed anywhere): every
function of tide.*, the Tensor methods, fields and operators, tide.nn (modules
are constructed, then called), tide.nn.functional, nn.init, nn.utils,
tide.optim (optimizers and schedulers, stepped), tide.data, tide.autograd,
tide.compile / tide.jit, tide.opencl, tide.progress, tide.checkpoint, and each
row of the C op table (td_op_count / td_op_name) called through td_op,
td_op_aux, td_op_out and td_op_number with raw attributes.
Each call is built as a standalone Lua snippet: `build` returns its source and
the line of the call (an error on an earlier line means the arguments could not
be made, so the function was not reached).
--]]
local ffi = require "ffi"
local hints = require "fuzz.hints"

local M = {}

-- Functions that cannot be called safely at random (none today: nothing in tide
-- prompts, sleeps or writes to a fixed path). name -> reason.
M.SKIP = {}

-- argument kinds from parameter names, for functions without a hint
local BY_NAME = {
  x = "t", a = "t", b = "t", y = "t", input = "t", target = "t", src = "t", other = "t", t = "t", cond = "t",
  mask = "t", weight = "tf", bias = "tf", grad = "t", idx = "ti", index = "ti", ids = "ti", labels = "ti", w = "tf",
  q = "tf", cols = "t", c = "t",
  d = "dim@1", dim = "dim@1", d1 = "dim@1", d2 = "dim@1", dims = "dims@1", s = "dim@1", e = "dim@1",
  keep = "bool", keepdim = "bool", on = "bool", mode = "bool", requires_grad = "bool",
  opts = "opts", options = "opts",
  n = "int", k = "int", size = "size", len = "int", start = "int", stop = "int", step = "int", num = "int",
  lo = "int", hi = "int", low = "int", high = "int", steps = "size", count = "int", seed = "int", total = "int",
  shape = "shape", sizes = "shape", output_size = "pair", kernel = "pair", kernel_size = "pair",
  p = "num", value = "num", v = "num", val = "num", alpha = "num", beta = "num", eps = "num", lr = "num",
  slope = "num", scale = "num", gain = "num", mean = "num", std = "num", frac = "prob", param = "num",
  fn = "fn", f = "fn", closure = "fn", func = "fn",
  path = "path", file = "path", filename = "path",
  name = "str", key = "str", str = "str", text = "str", nonlinearity = "str",
  list = "tlist", tensors = "tlist", outputs = "tlist", inputs = "tlist", samples = "any",
  params = "params", m = "mod", module = "mod", opt = "optim", optimizer = "optim",
}

-- hint tokens for a function without a hint, from its parameter names
local function tokens_of(f, skip_self)
  local info = debug.getinfo(f, "u")
  local toks = {}
  for i = skip_self and 2 or 1, info.nparams or 0 do
    local name = debug.getlocal(f, i)
    local tok = BY_NAME[name] or "any"
    if skip_self then tok = tok:gsub("@1$", "@0") end
    toks[#toks + 1] = tok
  end
  if info.isvararg then toks[#toks + 1] = "any*" end
  return toks
end

local function sorted_keys(t)
  local k = {}
  for name in pairs(t) do k[#k + 1] = name end
  table.sort(k, function(a, b) return tostring(a) < tostring(b) end)
  return k
end

local function public(name) return type(name) == "string" and name:sub(1, 1) ~= "_" end

-- -- Enumeration ------------------------------------------------------------------------------------

function M.enumerate(tide)
  local list, seen = {}, {}
  local function add(t)
    if seen[t.name] then return end
    seen[t.name] = true
    t.hint = hints[t.name]
    if t.hint and t.hint.skip then M.SKIP[t.name] = t.hint.skip; return end
    if M.SKIP[t.name] then return end
    list[#list + 1] = t
  end
  local tensor = require "tide.tensor"
  local T = tide.Tensor

  -- tide.*: functions; the wrappers of Tensor methods take the method's hint
  for _, k in ipairs(sorted_keys(tide)) do
    local f = rawget(tide, k)
    if type(f) == "function" and public(k) then
      local toks = not hints["tide." .. k] and T[k] ~= nil
      if toks then   -- the function form of a method: a0 is the tensor
        add { name = "tide." .. k, kind = "method", method = k, f = T[k], wrap = true }
      else
        add { name = "tide." .. k, kind = "func", path = "tide." .. k, f = f }
      end
    end
  end
  -- Tensor methods, fields and operators
  for _, k in ipairs(sorted_keys(T)) do
    if type(T[k]) == "function" and public(k) then add { name = "T." .. k, kind = "method", method = k, f = T[k] } end
  end
  for _, k in ipairs(sorted_keys(tensor.getters or {})) do add { name = "T.get." .. k, kind = "get", field = k } end
  for _, k in ipairs(sorted_keys(tensor.setters or {})) do add { name = "T.set." .. k, kind = "set", field = k } end
  for _, k in ipairs(sorted_keys(tensor.mt)) do add { name = "T." .. k, kind = "meta", meta = k } end

  -- tide.nn: module classes (and their own methods), functions, Module methods
  local nn = tide.nn
  local Module = nn.Module
  for _, k in ipairs(sorted_keys(nn)) do
    local v = nn[k]
    if public(k) and type(v) == "function" then
      add { name = "nn." .. k, kind = "func", path = "tide.nn." .. k, f = v }
    elseif public(k) and type(v) == "table" and rawget(v, "__is_class") then
      add { name = "nn." .. k, kind = "class", path = "tide.nn." .. k }
      for _, m in ipairs(sorted_keys(v)) do
        local f = rawget(v, m)
        if type(f) == "function" and public(m) and m:sub(1, 2) ~= "__" and m ~= "forward" and m ~= "extra_repr"
            and f ~= rawget(Module, m) then
          add { name = "nn." .. k .. "." .. m, kind = "method", method = m, f = f, cls = k }
        end
      end
    end
  end
  for _, m in ipairs(sorted_keys(Module)) do
    local f = rawget(Module, m)
    if type(f) == "function" and public(m) and m:sub(1, 2) ~= "__" then
      add { name = "nn.Module." .. m, kind = "method", method = m, f = f, self = "mod" }
    end
  end
  local function module_funcs(prefix, path, tbl)
    for _, k in ipairs(sorted_keys(tbl)) do
      if type(tbl[k]) == "function" and public(k) then
        add { name = prefix .. k, kind = "func", path = path .. k, f = tbl[k] }
      end
    end
  end
  module_funcs("F.", "tide.nn.functional.", nn.functional)
  module_funcs("init.", "tide.nn.init.", nn.init)
  module_funcs("utils.", "tide.nn.utils.", nn.utils)
  module_funcs("utils.rnn.", "tide.nn.utils.rnn.", nn.utils.rnn)

  -- classes whose instances come from calling the class table (optim, data)
  local function classes(prefix, path, tbl, bases)
    for _, k in ipairs(sorted_keys(tbl)) do
      local v = tbl[k]
      local mt = type(v) == "table" and getmetatable(v)
      if public(k) and type(v) == "table" and ((mt and mt.__call) or bases[k]) then
        add { name = prefix .. k, kind = "ctor", path = path .. k }
        local base = mt and type(mt.__index) == "table" and mt.__index or nil
        for _, m in ipairs(sorted_keys(v)) do
          local f = rawget(v, m)
          if type(f) == "function" and public(m) and m:sub(1, 2) ~= "__" and (not base or f ~= base[m]) then
            add { name = prefix .. k .. "." .. m, kind = "method", method = m, f = f, cls = k }
          end
        end
      elseif public(k) and type(v) == "function" then
        add { name = prefix .. k, kind = "func", path = path .. k, f = v }
      end
    end
  end
  classes("optim.", "tide.optim.", tide.optim, { Optimizer = true, LRScheduler = true })
  classes("data.", "tide.data.", tide.data, { Dataset = true })

  module_funcs("autograd.", "tide.autograd.", tide.autograd)
  local jit = require "tide.compile"
  module_funcs("jit.", "tide.jit.", jit)
  for _, m in ipairs(sorted_keys(jit.Compiled)) do
    local f = rawget(jit.Compiled, m)
    if type(f) == "function" and public(m) and m:sub(1, 2) ~= "__" then
      add { name = "jit.Compiled." .. m, kind = "method", method = m, f = f }
    end
  end
  module_funcs("opencl.", "tide.opencl.", tide.opencl)
  module_funcs("progress.", "tide.progress.", tide.progress)
  local Bar = getmetatable(tide.progress.bar(1, { tty = false, out = { write = function() end } })).__index
  for _, m in ipairs(sorted_keys(Bar)) do
    if type(Bar[m]) == "function" and public(m) then
      add { name = "progress.Bar." .. m, kind = "method", method = m, f = Bar[m] }
    end
  end
  module_funcs("checkpoint.", "tide.checkpoint.", tide.checkpoint)
  -- any other module table of tide (a module added later: its functions by parameter names)
  local done = { Tensor = true, nn = true, optim = true, data = true, autograd = true, jit = true, opencl = true,
    progress = true, checkpoint = true }
  for _, k in ipairs(sorted_keys(tide)) do
    local v = rawget(tide, k)
    if public(k) and type(v) == "table" and not done[k] and v.id == nil and v ~= tide.Tensor then
      module_funcs(k .. ".", "tide." .. k .. ".", v)
    end
  end
  -- methods of objects that only functions return (their class is not in a table):
  -- hints[<name>] = { self = <expr making one>, methods = { ... } }
  for _, name in ipairs(sorted_keys(hints.objects or {})) do
    for _, m in ipairs(hints.objects[name].methods) do
      add { name = name .. "." .. m, kind = "method", method = m, self = hints.objects[name].self, f = function() end }
    end
  end

  -- the C op table
  local C = tide.C
  for i = 0, C.td_op_count() - 1 do
    add { name = "op." .. ffi.string(C.td_op_name(i)), kind = "op", id = i, arity = C.td_op_arity(i) }
  end
  return list
end

-- -- Snippets ---------------------------------------------------------------------------------------

local HEADER = 'local tide = require "tide"'

local function arg_lines(lines, args, prefix, first)
  local names = {}
  for i = first or 1, #args do
    local n = prefix .. i
    lines[#lines + 1] = ("local %s = %s"):format(n, args[i].src)
    names[#names + 1] = n
  end
  return table.concat(names, ", ")
end

local function pre_lines(lines, h, g)
  for _, l in ipairs(h and h.pre or {}) do lines[#lines + 1] = (l:gsub("%%TMP%%", g.tmp)) end
end
local function post_lines(lines, h, g)
  for _, l in ipairs(h and h.post or {}) do lines[#lines + 1] = (l:gsub("%%TMP%%", g.tmp)) end
end

-- the C-level call of op-table row t through td_op / td_op_aux / td_op_out / td_op_number
local function op_call(t, g, valid, lines)
  local arity = t.arity
  local nin = arity < 0 and g:int(1, 3) or arity
  if not valid and g:chance(0.04) then nin = g:pick { 0, arity + 1, 65, -1 } end
  local nargs = math.min(math.max(nin, 0), 4)
  local args = {}
  local shape = g:rand_shape()
  for i = 1, nargs do
    args[i] = g:tensor({ shape = g:chance(0.6) and shape or nil, float = t.name == "op.sdpa" or nil })
    lines[#lines + 1] = ("local a%d = %s"):format(i, args[i].src)
  end
  local nd = args[1] and #args[1].shape or 2
  lines[#lines + 1] = 'local ffi = require "ffi"'
  local set = {}
  if not valid then
    local r = g:rand()
    local ndims = r < 0.35 and -1 or r < 0.8 and g:int(0, math.min(nd, 3)) or g:pick { 8, 9, 100, -5, 2 ^ 31 }
    set[#set + 1] = ("at.ndims = %s"):format(g.num_src(ndims))
    for k = 0, math.min(math.max(ndims, 0), 8) - 1 do
      local v = g:chance(0.8) and g:int(-nd, math.max(nd - 1, 0)) or g:pick(g.BAD_SIZES)
      if g:chance(0.3) then v = g:int(0, 4) end
      set[#set + 1] = ("at.dims[%d] = %s"):format(k, g.num_src(v))
    end
    if g:chance(0.3) then set[#set + 1] = ("at.keepdim = %d"):format(g:pick { 1, 1, 7 }) end
    if g:chance(0.3) then set[#set + 1] = ("at.dtype = %d"):format(g:pick { 0, 1, 2, 3, 4, 5, 6, 100, -7 }) end
    if g:chance(0.3) then set[#set + 1] = ("at.flags = %d"):format(g:pick { 1, 2, 4, 6, 255, -1 }) end
    for k = 0, 3 do
      if g:chance(0.5) then
        local v = g:chance(0.85) and g:int(-3, 5) or g:pick(g.BAD_SIZES)
        set[#set + 1] = ("at.i[%d] = %s"):format(k, g.num_src(v))
      end
    end
    for k = 0, 1 do
      if g:chance(0.4) then set[#set + 1] = ("at.s[%d] = %s"):format(k, g:num()) end
    end
  end
  local noattrs = not valid and g:chance(0.05)
  if noattrs then lines[#lines + 1] = "local at = nil"
  else
    lines[#lines + 1] = 'local at = ffi.new("td_attrs"); at.ndims = -1; at.dtype = -1'
    if #set > 0 then lines[#lines + 1] = table.concat(set, "; ") end
  end
  lines[#lines + 1] = ("local inb = ffi.new(\"td_tensor *[?]\", %d)"):format(math.max(nin, 1, nargs))
  for i = 1, nargs do lines[#lines + 1] = ("inb[%d] = a%d.p"):format(i - 1, i) end
  local r = valid and 0 or g:rand()
  local fail = 'if %s then error("C error: " .. ffi.string(tide.C.td_last_error())) end'
  if arity == 2 and nargs >= 1 and r > 0.85 then
    lines[#lines + 1] = ("local p = tide.C.td_op_number(%d, a1.p, %s, %d)"):format(t.id, g:num(), g:int(0, 1))
    local call = #lines
    lines[#lines + 1] = fail:format("p == nil")
    lines[#lines + 1] = 'print(require("tide.core").wrap(p))'
    return call
  elseif r > 0.65 then
    local o = g:tensor({ shape = args[1] and args[1].shape, dtype = args[1] and args[1].dtype })
    lines[#lines + 1] = ("local out = %s"):format(o.src)
    lines[#lines + 1] = ("local rc = tide.C.td_op_out(%d, %d, inb, at, out.p)"):format(t.id, nin)
    local call = #lines
    lines[#lines + 1] = fail:format("rc ~= 0")
    lines[#lines + 1] = "print(out)"
    return call
  elseif r > 0.55 then
    lines[#lines + 1] = 'local aux = ffi.new("td_tensor *[1]")'
    lines[#lines + 1] = ("local p = tide.C.td_op_aux(%d, %d, inb, at, aux)"):format(t.id, nin)
    local call = #lines
    lines[#lines + 1] = fail:format("p == nil")
    lines[#lines + 1] = 'print(require("tide.core").wrap(p), aux[0] ~= nil and require("tide.core").wrap(aux[0]) or nil)'
    return call
  end
  lines[#lines + 1] = ("local p = tide.C.td_op(%d, %d, inb, at)"):format(t.id, nin)
  local call = #lines
  lines[#lines + 1] = fail:format("p == nil")
  lines[#lines + 1] = 'print(require("tide.core").wrap(p))'
  return call
end

local META = {
  __add = "a0 + a1", __sub = "a0 - a1", __mul = "a0 * a1", __div = "a0 / a1", __pow = "a0 ^ a1",
  __lt = "a0 < a1", __le = "a0 <= a1", __unm = "-a0", __len = "#a0", __tostring = "tostring(a0)",
  __index = "a0[a1]",
}

local function pre_or_empty(h, g)
  local r = {}
  for _, l in ipairs(h.pre or {}) do r[#r + 1] = (l:gsub("%%TMP%%", g.tmp)) .. ";" end
  return r
end

-- the receiver of a method target
-- a name as a field access in generated code: .name, or ["name"] for a Lua keyword (repeat)
local KEYWORDS = {}
for k in ("and break do else elseif end false for function goto if in local nil not or repeat return then true until while"):gmatch("%S+") do KEYWORDS[k] = true end
local function dot(name) return KEYWORDS[name] and ('["%s"]'):format(name) or "." .. name end
local function path_src(path) return (path:gsub("%.([%a_][%w_]*)", function(n) return dot(n) end)) end

local function receiver(t, h, g)
  local tok = h and h.self or t.self
  if not tok and t.cls then
    local ch = hints[(t.name:match("^(.*)%.[^.]+$"))]
    if ch and ch.inst then return { src = ch.inst } end
    if ch and not ch.skip then
      local prefix = t.name:match("^([^.]+)%.")
      local path = "tide." .. (prefix == "nn" and "nn." or prefix == "optim" and "optim." or prefix == "data" and "data." or "") .. t.cls
      local calm = g.calm
      g.calm = true
      local a = g:args(ch.args or {}, true)
      g.calm = calm
      local p = {}
      for i = 1, #a do p[i] = a[i].src end
      return { src = ("(function() %s return %s(%s) end)()"):format(
        table.concat(pre_or_empty(ch, g), " "), path, table.concat(p, ", ")) }
    end
    return { src = "nil" }
  end
  return g:value(tok or "t", {})
end

-- Build one call of target t: { src = <Lua source>, call_line = n, target = name }.
-- valid: no hostile replacements (the first calls of a run, for coverage).
function M.build(t, g, valid, seed)
  local h = t.hint
  if t.wrap then h = hints["T." .. t.method] end
  local calm = g.calm
  g.calm = valid
  local lines = { HEADER, ("tide.manual_seed(%d)"):format(seed or 0) }
  pre_lines(lines, h, g)
  local call
  local kind = t.kind
  if h and h.static then kind = "func"; t.path = t.path or ("tide." .. t.name) end
  if kind == "op" then
    call = op_call(t, g, valid, lines)
  elseif kind == "func" then
    local toks = (h and h.args) or t.toks or tokens_of(t.f, false)
    local args = g:args(toks, valid)
    local list = arg_lines(lines, args, "a")
    local path = t.path or ("tide." .. t.name)
    if h and h.static then path = "tide." .. t.name end
    path = path_src(path)
    lines[#lines + 1] = ("local r1, r2, r3 = %s(%s)"):format(path, list)
    call = #lines
    if h and h.post then
      lines[#lines] = ("local o, r2, r3 = %s(%s)"):format(path, list)
      post_lines(lines, h, g)
      lines[#lines + 1] = "print(o, r2, r3)"
    else
      lines[#lines + 1] = "print(r1, r2, r3)"
    end
  elseif kind == "method" then
    local a0 = receiver(t, h, g)
    -- sometimes a hostile receiver, through the function form (tide.add({}, 1) or
    -- tide.Tensor.add({}, 1)): a method call on a real tensor cannot pass one
    local direct = not valid and not t.cls and t.name:match("^T%.") and g:chance(g.hostile / 3)
    if (t.wrap or direct) and not valid and g:chance(g.hostile / 2) then a0 = { src = g:any() } end
    local toks = (h and h.args) or tokens_of(t.f, true)
    local args = g:args(toks, valid, a0)
    lines[#lines + 1] = ("local a0 = %s"):format(a0.src)
    local list = arg_lines(lines, args, "a")
    if t.wrap or direct then
      lines[#lines + 1] = ("local r1, r2, r3 = tide%s%s(a0%s)"):format(direct and ".Tensor" or "", dot(t.method),
        list ~= "" and (", " .. list) or "")
    elseif KEYWORDS[t.method] then
      lines[#lines + 1] = ("local r1, r2, r3 = a0%s(a0%s)"):format(dot(t.method), list ~= "" and (", " .. list) or "")
    else
      lines[#lines + 1] = ("local r1, r2, r3 = a0:%s(%s)"):format(t.method, list)
    end
    call = #lines
    post_lines(lines, h, g)
    lines[#lines + 1] = "print(r1, r2, r3)"
  elseif kind == "class" or kind == "ctor" then
    local args = g:args((h and h.args) or {}, valid)
    local list = arg_lines(lines, args, "a")
    lines[#lines + 1] = ("local o = %s(%s)"):format(t.path, list)
    call = #lines
    if kind == "class" then
      local fwd = g:args((h and h.fwd) or { "t" }, valid)
      local fl = arg_lines(lines, fwd, "b")
      lines[#lines + 1] = ("print(o(%s))"):format(fl)
      lines[#lines + 1] = "print(o)"
    else
      post_lines(lines, h, g)
      lines[#lines + 1] = "print(o)"
    end
  elseif kind == "get" then
    local a0 = g:tensor()
    lines[#lines + 1] = ("local a0 = %s"):format(a0.src)
    lines[#lines + 1] = ("local r1 = a0.%s"):format(t.field)
    call = #lines
    lines[#lines + 1] = "print(r1)"
  elseif kind == "set" then
    local a0 = g:tensor()
    lines[#lines + 1] = ("local a0 = %s"):format(a0.src)
    local args = g:args((h and h.args) or { "any" }, valid, a0)
    arg_lines(lines, args, "a")
    lines[#lines + 1] = ("a0.%s = a1"):format(t.field)
    call = #lines
    lines[#lines + 1] = "print(a0)"
  elseif kind == "meta" then
    local a0 = g:tensor()
    lines[#lines + 1] = ("local a0 = %s"):format(a0.src)
    local args = g:args(h and h.args or {}, valid, a0)
    arg_lines(lines, args, "a")
    if t.meta == "__newindex" then
      lines[#lines + 1] = "a0[a1] = a2"
      call = #lines
      lines[#lines + 1] = "print(a0)"
    else
      local e = META[t.meta] or ("getmetatable(a0).%s(a0, a1)"):format(t.meta)
      if (t.meta == "__add" or t.meta == "__sub" or t.meta == "__mul" or t.meta == "__div" or t.meta == "__pow"
          or t.meta == "__lt" or t.meta == "__le") and g:chance(0.4) then
        e = e:gsub("a0", "A"):gsub("a1", "a0"):gsub("A", "a1")      -- the tensor on the right
      end
      lines[#lines + 1] = ("local r1 = %s"):format(e)
      call = #lines
      lines[#lines + 1] = "print(r1)"
    end
  else
    error("fuzz.targets: unknown kind " .. tostring(kind))
  end
  g.calm = calm
  return { src = table.concat(lines, "\n"), call_line = call, target = t.name }
end

return M
