--[[
tide.doc -- the doc strings of the public Lua API, read from the source files
on first use (nothing is loaded at start-up): the REPL's `?name` and
help(x), the reference doc/api.md (scripts/gen-doc.lua, `make doc`) and the
spec that every public function has one (spec/lua/doc_spec.lua) all read
them here.

The form, next to the code: a run of `---` comment lines (at the start of
the line) whose first line starts with the documented name and its
signature, then one or two lines of what it does (and PyTorch's name where
it differs):

  --- tide.zeros(size..., opts) -> Tensor
  --- A tensor filled with 0; opts: dtype, device, requires_grad.

Names are paths from `tide` (tide.nn.Linear, tide.optim.SGD:step), with
three short roots: `nn.` for tide.nn., `F.` for tide.nn.functional.,
`optim.` for tide.optim.; tensor methods are `Tensor:name`, tensor
properties `Tensor.name`. `:` and `.` are the same for lookups. Functions
made in a loop are documented by one block each, anywhere in their module.
A method documented on a base class (nn.Module:parameters) documents it for
every subclass; tide.exp and Tensor:exp share one doc, and so do aliases
(Tensor:abs, Tensor:absolute); an in-place form without a doc of its own
(Tensor:exp_) is documented by its op's (Tensor:exp).
--]]
local ffi = require "ffi"

local M = {}

local ROOTS = { ["nn."] = "tide.nn.", ["F."] = "tide.nn.functional.", ["optim."] = "tide.optim." }

-- the lookup key of a name: short roots expanded, ':' as '.'
local function key_of(name)
  for short, long in pairs(ROOTS) do
    if name:sub(1, #short) == short then name = long .. name:sub(#short + 1) break end
  end
  return (name:gsub(":", "."))
end
M.key_of = key_of

-- -- Reading the sources ------------------------------------------------------------------------

-- opendir/readdir/closedir as tide.serialize declares them (tide_opendir ...,
-- asm aliases): one declaration, which a host's own cdef of opendir cannot clash with
require "tide.serialize"

-- the .lua files under dir (one level of subdirectories: lua/tide/nn)
local function lua_files(dir, depth, out)
  local d = ffi.C.tide_opendir(dir)
  if d == nil then return out end
  local names = {}
  while true do
    local e = ffi.C.tide_readdir(d)
    if e == nil then break end
    names[#names + 1] = { ffi.string(e.d_name), e.d_type }
  end
  ffi.C.tide_closedir(d)
  -- init.lua (a module's main file) and tensor.lua first: the reference follows this order
  local rank = { ["init.lua"] = 1, ["tensor.lua"] = 2 }
  table.sort(names, function(a, b)
    local ra, rb = rank[a[1]] or 3, rank[b[1]] or 3
    if ra ~= rb then return ra < rb end
    return a[1] < b[1]
  end)
  for _, n in ipairs(names) do
    local name, typ = n[1], n[2]
    if name:match("%.lua$") then out[#out + 1] = dir .. "/" .. name
    elseif depth > 0 and not name:match("^%.") and (typ == 4 or typ == 0) then lua_files(dir .. "/" .. name, depth - 1, out) end
  end
  return out
end

-- A header line: "--- " then a name rooted at tide/Tensor/nn/F/optim and its signature.
local function header(text)
  local name, rest = text:match("^([%a_][%w_]*[%.:][%w_.:]*[%w_])(.*)$")
  if not name then return nil end
  local root = name:match("^[%a_][%w_]*")
  if root ~= "tide" and root ~= "Tensor" and root ~= "nn" and root ~= "F" and root ~= "optim" then return nil end
  -- the signature's "(", "[" or "{", or " -> ", or the name alone (classes, properties);
  -- "tide.rand with x's shape" is a description, not a header
  if rest ~= "" and not rest:match("^[(%[{]") and not rest:match("^%s*%->") and not rest:match("^%s*$") then
    return nil
  end
  return name
end
M.header = header

-- parse(text, file) -> list of { name, key, sig, text, file, line }
function M.parse(src, file)
  local out, cur = {}, nil
  local n = 0
  for line in (src .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local body = line:match("^%-%-%- ?(.*)$")
    if body and not line:match("^%-%-%-%-") then
      local name = header(body)
      if name then
        cur = { name = name, key = key_of(name), sig = body, lines = {}, file = file, line = n }
        out[#out + 1] = cur
      elseif cur then
        cur.lines[#cur.lines + 1] = body
      end
    else
      cur = nil
    end
  end
  for _, e in ipairs(out) do e.text = table.concat(e.lines, "\n"); e.lines = nil end
  return out
end

local here = debug.getinfo(1, "S").source:match("^@(.*)/doc%.lua$") or "lua/tide"
M.dir = here

local db
-- all entries, by key (the first one wins; a repeated key is an error for the spec)
function M.entries()
  if db then return db end
  db = { by_key = {}, list = {}, repeated = {} }
  for _, path in ipairs(lua_files(here, 1, {})) do
    local f = io.open(path, "r")
    if f then
      local src = f:read("*a")
      f:close()
      for _, e in ipairs(M.parse(src, path:sub(#here + 2))) do
        if db.by_key[e.key] then db.repeated[#db.repeated + 1] = e
        else db.by_key[e.key] = e; db.list[#db.list + 1] = e end
      end
    end
  end
  return db
end

-- -- The public API: every function and class reachable from tide --------------------------------

-- Namespaces are found by walking tide: lowercase plain tables (tide.nn,
-- tide.nn.functional, ...) and the lazily loaded submodules its metatable
-- lists (loaded here); tide.jit is a proxy whose functions live in tide.compile.

local function is_callable(v)
  if type(v) == "function" then return true end
  local mt = type(v) == "table" and getmetatable(v)
  return type(mt) == "table" and mt.__call ~= nil
end

-- The base class of a class table: its metatable's __index, when a table.
local function base_of(cls)
  local mt = getmetatable(cls)
  local b = type(mt) == "table" and rawget(mt, "__index")
  return type(b) == "table" and b or nil
end

local api
-- api() -> { items = list of { paths = {key...}, kind = "function"|"class"|"dtype"|"method",
--            value, class = the class table of a method, names = a method's names },
--            paths = value -> list of keys, classes = class table -> its first key }
-- One item per value: aliases (tide.concat = tide.cat) are one item with two paths.
function M.api()
  if api then return api end
  local tide = require "tide"
  local items, paths, classes, namespaces = {}, {}, {}, {}
  local item_of, method_of = {}, {}
  local function add(key, kind, value, cls, name)
    local it
    if kind == "method" then                   -- aliases of a method (abs, absolute) are one item
      method_of[cls] = method_of[cls] or {}
      it = method_of[cls][value]
    else it = item_of[value] end
    if not it then
      it = { paths = {}, kind = kind, value = value, class = cls, names = {} }
      items[#items + 1] = it
      if kind == "method" then method_of[cls][value] = it else item_of[value] = it end
    end
    if name then it.names[#it.names + 1] = name end
    it.paths[#it.paths + 1] = key
    paths[value] = paths[value] or {}
    table.insert(paths[value], key)
  end
  namespaces[tide] = "tide"
  local jit_ns = require("tide.compile")
  local pending = {}
  local walk
  local function is_namespace(k, v)
    return type(v) == "table" and k:match("^%l") and getmetatable(v) == nil and not rawget(v, "__index")
  end
  function walk(ns, path)
    local keys = {}
    for k in pairs(ns) do if type(k) == "string" and not k:match("^_") then keys[#keys + 1] = k end end
    if ns == tide then                                  -- lazily loaded submodules
      local mt = getmetatable(tide)
      for k in pairs(type(mt) == "table" and mt.__lazy or {}) do
        if rawget(tide, k) == nil then keys[#keys + 1] = k end
      end
    end
    table.sort(keys)
    local subs = {}
    for _, k in ipairs(keys) do
      local v, key = ns[k], path .. "." .. k
      if key == "tide.jit" then v = jit_ns end
      if type(v) == "function" then add(key, "function", v)
      elseif type(v) == "table" and not namespaces[v] and v ~= tide.Tensor then
        if getmetatable(v) == getmetatable(tide.float32) then
          add(key, "dtype", v)
        elseif is_namespace(k, v) then
          namespaces[v] = key
          subs[#subs + 1] = { v, key }
        elseif is_callable(v) or rawget(v, "__index") == v or rawget(v, "__is_class") or k:match("^%u") then
          if not classes[v] then classes[v] = key; pending[#pending + 1] = v end
          add(key, "class", v)
        end
      end
    end
    for _, sub in ipairs(subs) do walk(sub[1], sub[2]) end
  end
  walk(tide, "tide")
  -- tensor methods
  local tkeys = {}
  for k, v in pairs(tide.Tensor) do if type(v) == "function" and not k:match("^_") then tkeys[#tkeys + 1] = k end end
  table.sort(tkeys)
  for _, k in ipairs(tkeys) do add("Tensor." .. k, "method", tide.Tensor[k], tide.Tensor, k) end
  -- class methods (own functions; `new` is the constructor, metamethods and _private are skipped)
  for _, cls in ipairs(pending) do
    local mkeys = {}
    for k, v in pairs(cls) do
      if type(k) == "string" and type(v) == "function" and not k:match("^_") and k ~= "new" then mkeys[#mkeys + 1] = k end
    end
    table.sort(mkeys)
    for _, k in ipairs(mkeys) do
      for _, cp in ipairs(paths[cls]) do add(cp .. "." .. k, "method", cls[k], cls, k) end
    end
  end
  api = { items = items, paths = paths, classes = classes }
  return api
end

-- The doc of an item (or of keys, a class and a method name): under one of
-- its paths; for a method, under a base class's path; tide.X and Tensor:X
-- share theirs. Returns the entry or nil.
function M.lookup(keys, cls, names)
  local d = M.entries().by_key
  if type(keys) == "string" then keys = { keys } end
  if type(names) == "string" then names = { names } end
  for _, k in ipairs(keys) do if d[k] then return d[k] end end
  local a = M.api()
  if type(cls) == "table" and names then
    local b = cls
    for _ = 1, 16 do
      for _, bp in ipairs(a.paths[b] or {}) do
        for _, name in ipairs(names) do
          if d[bp .. "." .. name] then return d[bp .. "." .. name] end
        end
      end
      b = base_of(b)
      if not b then break end
    end
  end
  -- x:abs_() is x:abs() in place: an in-place form without its own doc shares its op's
  for _, k in ipairs(keys) do
    local base = k:match("^(.+[%w])_$")
    if base and d[base] then return d[base], "in place" end
    local t = base and base:match("^tide%.([%w_]+)$")
    if t and d["Tensor." .. t] then return d["Tensor." .. t], "in place" end
  end
  -- tide.X wraps the method Tensor.X: the doc of any name of that method
  local T = require("tide").Tensor
  for _, k in ipairs(keys) do
    local t = k:match("^tide%.([%w_]+)$")
    if t and type(rawget(T, t)) == "function" and type(rawget(require("tide"), t)) == "function" then
      for _, p in ipairs(a.paths[rawget(T, t)] or {}) do if d[p] then return d[p] end end
    end
    t = k:match("^Tensor%.([%w_]+)$")
    if t and d["tide." .. t] then return d["tide." .. t] end
  end
  return nil
end

function M.item_doc(it) return M.lookup(it.paths, it.class, it.names) end

-- the public items without a doc, as lists of their names
function M.missing()
  local out = {}
  for _, it in ipairs(M.api().items) do
    if not M.item_doc(it) then out[#out + 1] = table.concat(it.paths, " = ") end
  end
  return out
end

-- forget what was read and walked (after the API or the sources changed)
function M.reset() db, api = nil, nil end

-- -- help --------------------------------------------------------------------------------------

local function show(e, how)
  local s = e.sig
  if e.text ~= "" then s = s .. "\n  " .. e.text:gsub("\n", "\n  ") end
  if how == "in place" then s = s .. "\n  (the name ending in _ does it in place: it writes into the tensor and returns it)" end
  return s
end

-- the class of an instance (nn modules, optimizers, loaders...), or nil
local function class_of(v)
  local a = M.api()
  local mt = type(v) == "table" and getmetatable(v)
  for _ = 1, 16 do
    if type(mt) ~= "table" then return nil end
    if a.classes[mt] then return mt end
    mt = base_of(mt)
  end
end

-- the value a dotted path names in the globals (nothing is called but the
-- library's lazy loaders and tensor properties; completion uses it too)
local function lookup_path(path)
  local v = _G
  for part in path:gmatch("[^.]+") do
    if type(v) == "table" or type(v) == "cdata" or type(v) == "userdata" then
      local ok, r = pcall(function() return v[part] end)
      v = ok and r or nil
    else return nil end
    if v == nil then return nil end
  end
  return v
end

local function help_value(v, method)
  local a = M.api()
  local tide = require "tide"
  if tide.is_tensor(v) then
    if method then
      local f = rawget(tide.Tensor, method)
      local e, how = M.lookup(type(f) == "function" and a.paths[f] or { "Tensor." .. method })
      return e and show(e, how) or nil
    end
    local e = M.lookup("tide.Tensor")
    return ("%s\n(this one: %s %s on %s)"):format(e and show(e) or "Tensor", tostring(v.shape), v.dtype, v.device)
  end
  local cls = a.classes[v] and v or class_of(v)
  if method then
    if not cls then return nil end
    local keys = {}
    for _, p in ipairs(a.paths[cls]) do keys[#keys + 1] = p .. "." .. method end
    local e, how = M.lookup(keys, cls, method)
    return e and show(e, how) or nil
  end
  local keys = a.paths[v] or (cls and a.paths[cls])
  if keys then
    local e, how = M.lookup(keys)
    if e then return show(e, how) end
  end
  return nil
end

-- names that end with (or contain) s, for "did you mean"
local function suggestions(s)
  local ends, has = {}, {}
  local low = s:lower():gsub(":", ".")
  for _, e in ipairs(M.entries().list) do
    local k = e.key:lower()
    if k:sub(-#low - 1) == "." .. low then ends[#ends + 1] = e
    elseif k:find(low, 1, true) then has[#has + 1] = e end
  end
  return #ends > 0 and ends or has
end

local OVERVIEW = [[
help(x) or ?x shows the doc of a function, class, module or tensor: ?tide.zeros,
?x:matmul (x a tensor), ?nn.Linear, ?model:parameters, ?softmax (every match).
Namespaces: tide (tensors, ops), Tensor methods (?Tensor:view), tide.nn, tide.nn.functional
(F), tide.nn.init, tide.nn.utils, tide.optim, tide.optim.lr_scheduler, tide.data,
tide.autograd, tide.jit (tide.compile), tide.opencl, tide.progress, tide.checkpoint, tide.cmdline.
The whole reference: doc/api.md (make doc).]]

-- help_text(s): the help for the text after `?`
function M.help_text(s)
  s = s:gsub("^%s+", ""):gsub("%s+$", "")
  if s == "" then return OVERVIEW end
  local e, how = M.lookup(key_of(s))
  if e then return show(e, how) end
  local base, sep, method = s:match("^(.-)([.:])([%w_]+)$")
  local v = lookup_path(s)
  if v ~= nil then
    local r = help_value(v)
    if r then return r end
  end
  if base and base ~= "" then
    local b = lookup_path(base)
    if b ~= nil then
      local r = help_value(b, method)
      if r then return r end
    end
  end
  local sug = suggestions((s:match("[%w_]+$") or s))
  if #sug == 0 then return ("no help for '%s'"):format(s) end
  local out = {}
  for i, x in ipairs(sug) do
    if i > 12 then out[#out + 1] = ("... (%d more)"):format(#sug - 12) break end
    out[#out + 1] = show(x)
  end
  return table.concat(out, "\n")
end

-- help(x): x a value or a name
function M.help(x)
  local text
  if x == nil then text = OVERVIEW
  elseif type(x) == "string" then text = M.help_text(x)
  else text = help_value(x) or ("no help for this %s"):format(type(x)) end
  io.write(text, "\n")
end

M.lookup_path = lookup_path
return M
