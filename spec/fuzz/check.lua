--[[
fuzz.check -- what counts as a failure in the API fuzzer, for an error raised by
a call (signals, timeouts and sanitizer reports are judged by the fork server):
  internal     the message points into tide's own files (lua/tide/...:NNN:)
  raw          a raw Lua/FFI error (attempt to index, cannot convert, ...): the
               user gets the runtime's complaint instead of the op's
  position     the message does not start at the user's line (fuzz:N:)
  message      an empty C message, a non-string error value
  memory       Lua ran out of memory (a size was not checked before a loop)
Messages that pass name the op and point at the user's line.
--]]
local M = {}

-- raw Lua / FFI complaints: any of these reaching the user is a tide bug
local RAW = {
  "attempt to index", "attempt to perform arithmetic", "attempt to call", "attempt to concatenate",
  "attempt to compare %a+ with %a+", "attempt to compare two", "attempt to get length",
  "bad argument #%d+ to 'cdata'", "cannot convert '", "td_wrap_number", "table index is nil",
  "invalid key to 'next'", "'for' initial value", "'for' limit", "'for' step", "wrong number of arguments",
  "size of C type", "invalid C type", "number has no integer representation", "string length overflow",
  "table overflow", "invalid value %(at index", "invalid order function", "stack overflow",
  -- Lua's own functions (names tide also uses, like 'select' or 'max', are left out)
  "bad argument #%d+ to '(format|rep|unpack|ipairs|pairs|setmetatable|tostring|tonumber|rawget|rawset|typeof|sizeof|char|tobit|band|bor|lshift|rshift|gsub|gmatch|istype|metatype|string)'",
}
-- Lua patterns cannot alternate: expand the builtin-name pattern into one pattern per name
do
  local last = RAW[#RAW]
  RAW[#RAW] = nil
  for name in last:match("%((.-)%)"):gmatch("[^|]+") do RAW[#RAW + 1] = "bad argument #%d+ to '" .. name .. "'" end
end
M.RAW = RAW

-- A tensor with dims is a userdata handle (lua/tide/core.lua), and Lua 5.1 compares
-- a userdata only with another userdata: the user's own `x < 1` on such a tensor
-- raises Lua's error before any metamethod runs, by design (README, Memory model;
-- 0-dim tensors are cdata and compare with numbers). Not a finding.
local function userdata_compare(err)
  if err:find("attempt to compare two userdata values", 1, true) then return true end  -- another kind of userdata
  local a, b = err:match("attempt to compare (%a+) with (%a+)")
  return a ~= nil and (a == "userdata") ~= (b == "userdata")
end

-- Likewise LuaJIT's arithmetic on a plain FFI cdata (ffi.new("int[2]") ^ x) looks
-- for the metamethod in the cdata operands' ctypes only, never in the userdata
-- tensor's metatable: the user's own expression raises before tide runs. Not a finding.
local function cdata_arith(err)
  return err:find("attempt to perform arithmetic on '[^']+' and '?userdata'?") ~= nil
    or err:find("attempt to perform arithmetic on '?userdata'? and '[^']+'") ~= nil
end

-- Classify the error `err` of a call whose call line is `call_line` in chunk "fuzz".
-- Returns status ("setup": not reached; "err": a clean error) or a failure kind,
-- and a detail string.
function M.classify(err, call_line)
  if type(err) ~= "string" then
    return "message", ("error value is a %s, not a message string"):format(type(err))
  end
  local line = tonumber(err:match("^fuzz:(%d+): "))
  local tide_pos = err:match("(lua/tide/[%w_/]+%.lua:%d+:)")
  if tide_pos then return "internal", "points into tide (" .. tide_pos .. ")" end
  -- a raw error at an earlier line comes from the user's own code (a callback defined there)
  if (not line or line >= call_line) and not (line == call_line and (userdata_compare(err) or cdata_arith(err))) then
    for _, p in ipairs(RAW) do
      if err:find(p) then return "raw", "raw Lua/FFI error (" .. p .. ")" end
    end
  end
  if err:find("not enough memory", 1, true) then return "memory", "Lua ran out of memory" end
  if err:find("C error: $") then return "message", "C returned an error with an empty message" end
  if not line then return "position", "the message does not point at the user's line" end
  if err:match("^fuzz:%d+: %s*$") then return "message", "empty message" end
  if line < call_line then return "setup" end
  return "err"
end

M.FAILURES = { internal = true, raw = true, position = true, message = true, memory = true, crash = true,
  hang = true, sanitizer = true, state = true, exit = true }

-- A finding's signature for deduplication: kind, target and the message with its
-- numbers, positions and quoted values blurred.
function M.signature(kind, target, msg)
  msg = tostring(msg or ""):gsub("^fuzz:%d+: ", ""):gsub("0x%x+", "P"):gsub("%-?%d+%.?%d*e?[%+%-]?%d*", "N")
    :gsub("'[^']*'", "'S'"):gsub("%b[]", "[..]")
  return kind .. " | " .. target .. " | " .. msg:sub(1, 120)
end

return M
