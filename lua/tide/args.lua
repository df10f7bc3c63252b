--[[
tide.args -- the argument checks every public Lua function shares: type errors
in Lua's wording, Lua numbers that must be integers (and fit int64, the C
API's type), sizes, 1-based dims and lists of dims, and option tables. One
place for each rule, so a rule fixed here is fixed for every op. Errors are
raised at the user's line (core.raise walks past tide's own frames).
--]]
local core = require "tide.core"
local raise, is_tensor = core.raise, core.is_tensor

local M = {}

function M.typename(x)
  if is_tensor(x) then return x.p == nil and "freed Tensor" or "Tensor" end
  return type(x)
end
local typename = M.typename

-- "bad argument #2 to 'view' (integer size expected, got 2.5)": a number that is
-- not the expected integer is shown by value, anything else by type
function M.argerr(n, fname, expected, x)
  local got = (type(x) == "number" and expected:find("integer")) and tostring(x) or typename(x)
  raise(("bad argument #%d to '%s' (%s expected, got %s)"):format(n, fname, expected, got))
end
local argerr = M.argerr

-- A live tensor argument (a freed handle holds NULL: C must never see it).
function M.tensor(x, n, fname)
  if not is_tensor(x) or x.p == nil then argerr(n, fname, "Tensor", x) end
  return x
end

-- Lua numbers that C reads as int64 must be integral and in [-2^63, 2^63):
-- NaN, inf and 2^63 would otherwise convert to INT64_MIN (the FFI's cast).
local TWO63 = 2 ^ 63
local function is_int(v)
  return type(v) == "number" and v == math.floor(v) and v >= -TWO63 and v < TWO63
end
M.is_int = is_int

function M.int(v, n, fname, what)
  if not is_int(v) then argerr(n, fname, what or "integer", v) end
  return v
end

-- an integer >= 0 (a count or a size)
function M.count(v, n, fname, what)
  if not is_int(v) or v < 0 then argerr(n, fname, what or "non-negative integer", v) end
  return v
end

-- A shape given as (3, 4) or ({3, 4}) -> {3, 4}. Entries are integers that fit
-- int64 (C rejects negative sizes, naming them; -1 means "infer" in view).
-- level: where the error is reported when raised directly (kept for callers
-- that pass it; core.raise finds the user's frame either way).
function M.shape_at(level, fname, ...)
  local a = ...
  local intable = type(a) == "table"
  local s = intable and a or { ... }
  for i = 1, #s do
    if not is_int(s[i]) then argerr(intable and 1 or i, fname, "integer size", s[i]) end
  end
  if #s > 8 then raise(fname .. ": at most 8 dims are supported, got " .. #s) end
  return s
end

-- A 1-based (or negative) Lua dim -> the C API's 0-based (or negative) dim;
-- C checks the range against the tensor.
function M.cdim(d, fname, _, argn)
  if not is_int(d) then argerr(argn or 2, fname, "integer dim", d) end
  if d == 0 then raise(fname .. ": dim 0 is invalid (dims are 1-based; -1 is the last)") end
  return d > 0 and d - 1 or d
end
local cdim = M.cdim

-- A 1-based (or negative) dim of a tensor with n dims, checked -> 1-based positive.
-- extra widens the range (unsqueeze inserts at 1..n+1).
function M.dim(d, n, fname, argn, extra)
  if not is_int(d) then argerr(argn or 2, fname, "integer dim", d) end
  if d == 0 then raise(fname .. ": dim 0 is invalid (dims are 1-based; -1 is the last)") end
  local m = n + (extra or 0)
  local r = d < 0 and m + d + 1 or d
  if r < 1 or r > m then
    raise(("%s: dim %d is out of range for a tensor with %d dims (valid: 1..%d or -%d..-1)"):format(
      fname, d, n, m, m))
  end
  return r
end

-- A list of dims into attrs (at.ndims, at.dims, 0-based). The C side checks the
-- range and repeats for every op (rt_dims_check); here only what must hold
-- before the values reach the fixed 8-entry array.
function M.dims_into(at, list, fname, argn)
  if type(list) ~= "table" then argerr(argn or 2, fname, "dim or table of dims", list) end
  local n = #list
  if n > 8 then raise(("%s: %d dims given, at most 8 are supported"):format(fname, n)) end
  for i = 1, n do at.dims[i - 1] = cdim(list[i], fname, nil, argn) end
  at.ndims = n
  return at
end

-- A function argument: a Lua function or anything with a __call metamethod.
function M.callable(f, n, fname)
  local mt = type(f) ~= "function" and getmetatable(f)
  if type(f) ~= "function" and not (type(mt) == "table" and mt.__call) then argerr(n, fname, "function", f) end
  return f
end

-- Option tables: nil -> {}; a table whose keys are all among `allowed` (a
-- string of names separated by spaces, or a table whose keys are the names);
-- anything else raises "<fn>: unknown option 'num_workrs' (valid: ...)".
local sets = {}
local function option_set(allowed)
  if type(allowed) == "table" then return allowed end
  local s = sets[allowed]
  if not s then
    s = {}
    for k in allowed:gmatch("%S+") do s[k] = true end
    sets[allowed] = s
  end
  return s
end

function M.opts(fname, opts, allowed, argn)
  if opts == nil then return {} end
  if type(opts) ~= "table" or is_tensor(opts) then argerr(argn or 2, fname, "options table", opts) end
  local s = option_set(allowed)
  for k in pairs(opts) do
    if s[k] == nil then
      local names = {}
      for name in pairs(s) do names[#names + 1] = tostring(name) end
      table.sort(names)
      raise(("%s: unknown option %s (valid: %s)"):format(fname, type(k) == "string" and "'" .. k .. "'" or tostring(k),
        #names > 0 and table.concat(names, ", ") or "none"))
    end
  end
  return opts
end

return M
