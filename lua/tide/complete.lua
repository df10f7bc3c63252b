--[[
tide.complete -- tab completion for the REPL: globals and Lua keywords, the
fields of tables (with their metatables' __index tables, classes included),
and the methods and properties of tensors and modules. The word is a
dotted path read from the globals, never evaluated: `tide.nn.Lin`,
`x:ma` (x a tensor), `model.fc1.wei`, `tide.`; lazily loaded submodules of
tide (nn, optim, data, ...) are listed before they are loaded.
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"

local M = {}

local KEYWORDS = { "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
  "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while" }

local function add_keys(set, t, want)
  if type(t) ~= "table" then return end
  for k, v in pairs(t) do
    if type(k) == "string" and k:match("^[%a_][%w_]*$") and (want == nil or want(v)) then set[k] = true end
  end
end

-- the names a value answers to: its keys, then its metatable's __index
-- tables (a class and its bases), and names a metatable lists as lazy
local function names_of(v, methods_only)
  local set, seen = {}, {}
  local want = methods_only and function(x)
    return type(x) == "function" or (type(x) == "table" and (getmetatable(x) or {}).__call ~= nil)
  end or nil
  if core.is_tensor(v) then
    add_keys(set, tensor.Tensor, want)
    if not methods_only then for k in pairs(tensor.getters or {}) do set[k] = true end end
    return set
  end
  -- an nn module's registered parameters, buffers and children are fields too
  local regs = type(v) == "table" and rawget(v, "_regs")
  if type(regs) == "table" and not methods_only then
    for _, r in ipairs(regs) do for _, n in ipairs(r.names or {}) do set[n] = true end end
  end
  local t = v
  for _ = 1, 16 do                                  -- up the __index chain
    if type(t) ~= "table" or seen[t] then break end
    seen[t] = true
    add_keys(set, t, want)
    local mt = getmetatable(t)
    if type(mt) ~= "table" then break end
    if type(mt.__lazy) == "table" and not methods_only then for k in pairs(mt.__lazy) do set[k] = true end end
    local idx = rawget(mt, "__index")
    -- a class whose __index is a function (nn modules) holds its methods itself
    t = type(idx) == "table" and idx or (type(idx) == "function" and mt or nil)
  end
  return set
end

local lookup = require("tide.doc").lookup_path

local function sorted(set, prefix, head)
  local out = {}
  for k in pairs(set) do
    if k:sub(1, #prefix) == prefix and (prefix:sub(1, 1) == "_" or k:sub(1, 1) ~= "_") then out[#out + 1] = head .. k end
  end
  table.sort(out)
  return out
end

-- candidates(text) -> the completions of the word text (whole words)
function M.candidates(text)
  local base, sep, part = text:match("^(.*)([.:])([%w_]*)$")
  if not base then
    local set = {}
    add_keys(set, _G)
    for _, k in ipairs(KEYWORDS) do set[k] = true end
    return sorted(set, text, "")
  end
  if not base:match("^[%a_][%w_]*[%w_.]*$") or base:match("%.%.") or base:match("%.$") then return {} end
  local v = lookup(base)
  if v == nil then return {} end
  return sorted(names_of(v, sep == ":"), part, base .. sep)
end

return M
