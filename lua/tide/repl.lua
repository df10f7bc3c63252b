--[[
tide.repl -- the interactive prompt of the `tide` command (tools/tide.c),
in the spirit of Torch7's `th`: results print themselves (tensors as
tostring, tables one level deep, sizes as [2, 3]), a statement continues on
the next line while it is incomplete, readline gives line editing, a history
file and tab completion (tide.readline), `?name` / help(name) show the doc
strings (tide.doc), `%time expr` times an expression, and Ctrl-C stops the
running code and comes back to the prompt with every global intact.

Ctrl-C: under the tide command, its SIGINT handler (tools/tide.c) sets tide's
interrupt request, which fails the next tensor op, and a Lua hook that stops
an interpreted pure-Lua loop (outside tide's own code). In another host
(luajit -e 'require("tide.repl").main()') the handler is libtide's
td_interrupt_catch and the hook is a count hook polling the request.
--]]
local ffi = require "ffi"
local tide = require "tide"
local core = require "tide.core"
local C = core.C

local M = {}

-- -- Printing results ---------------------------------------------------------------------------

local MAX_ITEMS = 30

local function is_ident(k) return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil end

-- A value as one line: tensors and other values with __tostring as they print,
-- strings quoted, tables one level deep ({1, 2, x = 3, t = table: 0x...}).
local function short(v)
  if type(v) == "string" then return ("%q"):format(v):gsub("\\\n", "\\n") end
  return tostring(v)
end

function M.format(v)
  if type(v) ~= "table" then return type(v) == "string" and short(v) or tostring(v) end
  local mt = getmetatable(v)
  if mt and mt.__tostring then return tostring(v) end
  local parts, n = {}, #v
  for i = 1, math.min(n, MAX_ITEMS) do parts[#parts + 1] = short(v[i]) end
  if n > MAX_ITEMS then parts[#parts + 1] = ("... (%d items)"):format(n) end
  local keys = {}
  for k in pairs(v) do
    if not (type(k) == "number" and k >= 1 and k <= n and k == math.floor(k)) then keys[#keys + 1] = k end
  end
  table.sort(keys, function(a, b)
    if type(a) == type(b) and (type(a) == "string" or type(a) == "number") then return a < b end
    return type(a) < type(b)
  end)
  for i, k in ipairs(keys) do
    if i > MAX_ITEMS then parts[#parts + 1] = ("... (%d more keys)"):format(#keys - MAX_ITEMS); break end
    local name = is_ident(k) and k or "[" .. short(k) .. "]"
    parts[#parts + 1] = name .. " = " .. short(v[k])
  end
  return "{" .. table.concat(parts, ", ") .. "}"
end

local function print_results(r)
  if r.n == 0 then return end
  local out = {}
  for i = 1, r.n do
    local ok, s = pcall(M.format, r[i])
    out[i] = ok and s or ("<%s: cannot print: %s>"):format(type(r[i]), tostring(s))
  end
  io.write(table.concat(out, "\t"), "\n")
end

-- -- Compiling input ----------------------------------------------------------------------------

-- A chunk of input: an expression (its values print) or statements; "incomplete"
-- while Lua's parser stopped at the end of the text, as luajit's REPL does.
local function compile(buf)
  local src = buf:gsub("^%s*=", "return ", 1)
  local f = loadstring("return " .. src, "=stdin")
  if f then return f end
  local err
  f, err = loadstring(src, "=stdin")
  if f then return f end
  if err:find("'<eof>'$") then return nil, "incomplete" end
  return nil, err
end
M.compile = compile

-- -- Running code, with Ctrl-C --------------------------------------------------------------------

local has_host, host = pcall(require, "tide.host")
local tide_dir = core.tide_dir

-- Ctrl-C outside the tide command: libtide's handler sets the request; a count
-- hook (interpreted code only) raises it in the user's code, tide's own code
-- reaching its next op instead.
local function count_hook()
  if C.td_interrupt_pending(0) == 0 then return end
  local info = debug.getinfo(2, "S")
  if info and info.source:sub(1, #tide_dir) == tide_dir then return end
  C.td_interrupt_pending(1)
  error("interrupted", 2)
end

local function sigint(mode)
  if has_host then return host.sigint(mode, tide_dir) end
  if mode == "off" then C.td_interrupt_catch(0); debug.sethook(); return end
  C.td_interrupt_catch(1)
  if mode == "eval" then debug.sethook(count_hook, "", 1000) else debug.sethook() end
end
M.sigint = sigint

local function traceback(e)
  if type(e) ~= "string" then
    local mt = getmetatable(e)
    e = (mt and mt.__tostring) and tostring(e) or ("(error object is a %s value)"):format(type(e))
  end
  return debug.traceback(e, 2)
end

-- Keep the user's frames of a traceback: drop the REPL's own and xpcall's.
local function user_traceback(tb)
  local lines, keep = {}, {}
  for l in tb:gmatch("[^\n]+") do lines[#lines + 1] = l end
  local msg_end = 1
  for i, l in ipairs(lines) do if l == "stack traceback:" then msg_end = i break end end
  local lib = tide_dir:sub(2)                       -- frames in tide's own Lua files are not the user's
  for i = msg_end + 1, #lines do
    local l = lines[i]
    if l:find("[C]: in function 'xpcall'", 1, true) then break end
    if not l:find(lib, 1, true) and not l:find("^%s*%[C%]: in function 'error'") then keep[#keep + 1] = l end
  end
  local msg = table.concat(lines, "\n", 1, msg_end - 1)
  -- a traceback only when the error came from inside a function (more than the chunk itself)
  if #keep <= 1 then return msg end
  return msg .. "\nstack traceback:\n" .. table.concat(keep, "\n")
end

local function pack(...) return { n = select("#", ...), ... } end

-- Run f, returning true and its results, or false and the message. Ctrl-C
-- is armed meanwhile; grad mode comes back as it was when an error ends the
-- call half way (a with-mode helper interrupted before it restored it).
function M.run(f, ...)
  local grad = C.td_grad_enabled()
  C.td_interrupt_pending(1)                        -- a stale request (Ctrl-C at the prompt) is dropped
  sigint("eval")
  local r = pack(xpcall(f, traceback, ...))
  sigint("input")
  C.td_interrupt_pending(1)
  if not r[1] then
    C.td_set_grad_enabled(grad)
    return false, user_traceback(tostring(r[2]))
  end
  return true, { n = r.n - 1, unpack(r, 2, r.n) }
end

-- -- Commands: ?name, %time expr -----------------------------------------------------------------

local clock = tide.progress.clock

local function fmt_time(s)
  if s < 1e-3 then return ("%.1f us"):format(s * 1e6) end
  if s < 1 then return ("%.2f ms"):format(s * 1e3) end
  return ("%.3f s"):format(s)
end

-- %time expr: run it once, print its results and the wall time
local function time_cmd(src)
  local f, err = compile(src)
  if not f then io.write(err == "incomplete" and "%time: incomplete expression\n" or (err .. "\n")); return end
  local t0 = clock()
  local ok, r = M.run(f)
  local dt = clock() - t0
  if not ok then io.write(r, "\n") else print_results(r) end
  io.write(("time: %s\n"):format(fmt_time(dt)))
end

local function help_cmd(src)
  local doc = require "tide.doc"
  io.write(doc.help_text(src), "\n")
end

-- One complete entry: a command or Lua code.
function M.eval(buf)
  local cmd, rest = buf:match("^%s*(%%%a+)%s*(.-)%s*$")
  if cmd == "%time" then return time_cmd(rest) end
  if cmd then io.write(("unknown command %s (commands: %%time expr, ?name)\n"):format(cmd)); return end
  local q = buf:match("^%s*%?%s*(.-)%s*$")
  if q then return help_cmd(q) end
  local f, err = compile(buf)
  if not f then io.write(err, "\n"); return end
  local ok, r = M.run(f)
  if not ok then io.write(r, "\n") else print_results(r) end
end

-- -- The prompt -------------------------------------------------------------------------------------

local function history_path()
  local h = os.getenv("TIDE_HISTORY")
  if h then return h ~= "" and h or nil end
  local home = os.getenv("HOME")
  return home and home .. "/.tide_history" or nil
end

-- Does a line start a %command or ?help (which never continue)?
local function is_command(s) return s:match("^%s*[%%?]") ~= nil end

function M.main(opts)
  opts = opts or {}
  _G.tide = _G.tide or tide
  _G.help = _G.help or function(x) return require("tide.doc").help(x) end
  local reader = require("tide.readline").new {
    history = history_path(),
    complete = function(text, line, start) return require("tide.complete").candidates(text, line, start) end,
  }
  if opts.banner ~= false then
    io.write(("tide %s on %s -- ?name or help(name) for help, %%time expr, Ctrl-D to quit\n")
      :format(ffi.string(C.td_version_string()), jit.version))
    if reader.kind == "plain" and ffi.C.isatty(0) == 1 then
      io.write("(no line editing or history: install libreadline8 or libedit2)\n")
    end
  end
  local interrupted = function() return C.td_interrupt_pending(1) ~= 0 end
  sigint("input")
  local buf
  while true do
    local line = reader:read(buf and ">> " or "> ", interrupted)
    if line == nil then                              -- end of input
      if buf == nil then break end
      io.write("\n")
      M.eval(buf)                                    -- what was typed so far (as luajit: a syntax error)
      buf = nil
    elseif line == false then
      buf = nil                                      -- Ctrl-C drops the statement being typed
    else
      buf = buf and (buf .. "\n" .. line) or line
      local incomplete = not is_command(buf) and select(2, compile(buf)) == "incomplete"
      if not incomplete then
        reader:add(buf)
        M.eval(buf)
        buf = nil
      end
    end
  end
  sigint("off")
  if ffi.C.isatty(0) == 1 then io.write("\n") end
end
jit.off(M.main, true)

return M
