--[[
tide.cmd -- the options of the `tide` command (tools/tide.c calls main(argv)
with argv[0..n]): the REPL, a script with its arguments, -e chunks, -l
libraries, -i, --version, --help. `arg` is set as luajit sets it: arg[0] is
the script, arg[1..] its arguments, the command and options below 0.
--]]
local ffi = require "ffi"

local M = {}

M.USAGE = [==[
usage: tide [options] [script [args...]]
  -e chunk       run the Lua string chunk (the global `tide` is loaded)
  -l name        require library name as the global name
  -i             enter the REPL after the script or the -e chunks
  -v, --version  print the versions of tide, LuaJIT and libgccjit and the OpenCL devices
  -h, --help     print this help
  --             stop handling options
  -              run the standard input as the script
With no script and no -e, tide opens the REPL when the standard input is a
terminal and runs it as a script otherwise. In the REPL: ?name or help(name)
shows help, %time expr times an expression, Ctrl-C stops the running code,
Ctrl-D quits; the history goes to ~/.tide_history (TIDE_HISTORY).
]==]

pcall(ffi.cdef, "int isatty(int fd);")

-- -- --version --------------------------------------------------------------------------------

-- ffi.load of a library that stays loaded for the process, as tide's own
-- dlopen of it does (RTLD_NODELETE): LuaJIT unloads what ffi.load loaded when
-- the state closes, and the leak checker then cannot name the library's frames
pcall(ffi.cdef, "void *tide_cmd_dlopen(const char *name, int flags) __asm__(\"dlopen\");")
local function load_kept(name)
  local ok, lib = pcall(ffi.load, name)
  if ok then ffi.C.tide_cmd_dlopen(name, 0x1002) end   -- RTLD_NOW | RTLD_NODELETE: pins it
  return ok, lib
end

-- libgccjit's version from the library itself (the file tide.compile would load:
-- TIDE_GCCJIT or libgccjit.so.0), or why not
local function gccjit_version()
  pcall(ffi.cdef, "int gcc_jit_version_major(void); int gcc_jit_version_minor(void); int gcc_jit_version_patchlevel(void);")
  local name = os.getenv("TIDE_GCCJIT")
  if name == nil or name == "" then name = "libgccjit.so.0" end
  local ok, lib = load_kept(name)
  if not ok then return "not found (" .. name .. "; tide.compile needs it, eager ops do not)" end
  local ok2, v = pcall(function()
    return ("%d.%d.%d"):format(lib.gcc_jit_version_major(), lib.gcc_jit_version_minor(), lib.gcc_jit_version_patchlevel())
  end)
  return ok2 and v or "present (version unknown)"
end

-- "platform: device" for every OpenCL device, through the ICD loader directly
-- (the file tide loads: TIDE_OPENCL_LIB or libOpenCL.so.1; no context is made);
-- {} when there is no platform, {}, why when there is no loader
local function opencl_devices()
  pcall(ffi.cdef, [[
  int clGetPlatformIDs(uint32_t n, void **platforms, uint32_t *count);
  int clGetPlatformInfo(void *p, uint32_t what, size_t size, void *value, size_t *ret);
  int clGetDeviceIDs(void *p, uint64_t type, uint32_t n, void **devices, uint32_t *count);
  int clGetDeviceInfo(void *d, uint32_t what, size_t size, void *value, size_t *ret);]])
  local name = os.getenv("TIDE_OPENCL_LIB")
  if name == nil or name == "" then name = "libOpenCL.so.1" end
  local ok, cl = load_kept(name)
  if not ok then return {}, name .. " not found; OpenCL tensors need it, CPU tensors do not" end
  local out = {}
  pcall(function()
    local n = ffi.new("uint32_t[1]")
    if cl.clGetPlatformIDs(0, nil, n) ~= 0 or n[0] == 0 then return end
    local ps = ffi.new("void *[?]", n[0])
    cl.clGetPlatformIDs(n[0], ps, nil)
    local buf = ffi.new("char[256]")
    for i = 0, n[0] - 1 do
      cl.clGetPlatformInfo(ps[i], 0x0902, 256, buf, nil)          -- CL_PLATFORM_NAME
      local pname = ffi.string(buf)
      local nd = ffi.new("uint32_t[1]")
      if cl.clGetDeviceIDs(ps[i], 0xFFFFFFFF, 0, nil, nd) == 0 and nd[0] > 0 then   -- CL_DEVICE_TYPE_ALL
        local ds = ffi.new("void *[?]", nd[0])
        cl.clGetDeviceIDs(ps[i], 0xFFFFFFFF, nd[0], ds, nil)
        for j = 0, nd[0] - 1 do
          cl.clGetDeviceInfo(ds[j], 0x102B, 256, buf, nil)        -- CL_DEVICE_NAME
          out[#out + 1] = pname .. ": " .. ffi.string(buf)
        end
      end
    end
  end)
  return out
end

function M.version_text(host)
  local lines = {}
  local git = host and host.git ~= "" and (" (git " .. host.git .. ")") or ""
  lines[1] = ("tide %s%s"):format(host and host.version or "?", git)
  lines[2] = jit.version
  lines[3] = "libgccjit " .. gccjit_version()
  local devs, why = opencl_devices()
  if #devs == 0 then lines[4] = "OpenCL: none" .. (why and " (" .. why .. ")" or "") end
  for i, d in ipairs(devs) do lines[3 + i] = "OpenCL: " .. d end
  return table.concat(lines, "\n")
end

-- -- Running --------------------------------------------------------------------------------------

-- the traceback up to the chunk (this module's frames dropped)
local function traceback(e)
  if type(e) ~= "string" then e = ("(error object is a %s value)"):format(type(e)) end
  local tb = debug.traceback(e, 2)
  local cut = tb:find("\n%s*%[C%]: in function 'xpcall'")
  return cut and tb:sub(1, cut - 1) or tb
end

local function fail(msg)
  io.stderr:write("tide: ", msg, "\n")
  io.stderr:flush()
  return 1
end

local function load_tide() _G.tide = _G.tide or require "tide" end

-- main(argv) -> exit status
function M.main(argv)
  local ok_host, host = pcall(require, "tide.host")
  if not ok_host then host = nil end
  local i, n = 1, #argv
  local actions, interactive, version = {}, false, false
  while i <= n do
    local a = argv[i]
    if a == "--" then i = i + 1; break end
    if a == "-" or a:sub(1, 1) ~= "-" then break end
    local flag, val = a:match("^(%-[el])(.*)$")
    if flag then
      if val == "" then
        i = i + 1
        val = argv[i]
        if val == nil then return fail(("option '%s' needs an argument\n%s"):format(flag, M.USAGE)) end
      end
      actions[#actions + 1] = { flag, val }
    elseif a == "-i" then interactive = true
    elseif a == "-v" or a == "--version" then version = true
    elseif a == "-h" or a == "--help" then io.write(M.USAGE); return 0
    else return fail(("unknown option '%s'\n%s"):format(a, M.USAGE)) end
    i = i + 1
  end
  local script = argv[i]
  -- arg as luajit: the script at 0, its arguments after, the rest below
  local sidx = script and i or n + 1
  local arg = {}
  for k = 0, n do arg[k - sidx] = argv[k] end
  _G.arg = arg

  if version then
    io.write(M.version_text(host), "\n")
    if #actions == 0 and not script and not interactive then return 0 end
  end
  for _, act in ipairs(actions) do
    local ok, err
    if act[1] == "-e" then
      load_tide()
      local f, e = loadstring(act[2], "=(command line)")
      if not f then return fail(e) end
      ok, err = xpcall(f, traceback)
    else
      ok, err = xpcall(function() _G[act[2]] = require(act[2]) end, traceback)
    end
    if not ok then return fail(err) end
  end
  local stdin_tty = ffi.C.isatty(0) == 1
  if not script and #actions == 0 and not interactive and not version and not stdin_tty then
    script = "-"                                 -- tide < file.lua
  end
  if script then
    local f, e
    if script == "-" then f, e = loadstring(io.read("*a"), "=stdin") else f, e = loadfile(script) end
    if not f then return fail(e) end
    local ok, err = xpcall(f, traceback, unpack(argv, sidx + 1, n))
    if not ok then return fail(err) end
  end
  if interactive or (not script and #actions == 0 and not version) then
    load_tide()
    require("tide.repl").main()
  end
  return 0
end

return M
