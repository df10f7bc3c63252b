--[[
tide.locate -- finds what tide.core loads: libtide.so and the FFI declarations
(the public header, preprocessed at build time), with no environment variables,
from where the Lua modules themselves are:

  checkout         <home>/lua/tide/*.lua     <home>/build/tide_cdef.lua   <home>/build/libtide.so
  installed        <P>/share/lua/5.1/tide/   tide/cdef.lua next to them   <P>/lib/libtide.so
  copied into a    <dir>/tide/*.lua          <dir>/tide/cdef.lua or       <dir>/libtide.so, <dir>/lib/,
  game or a tool                             <dir>/build/tide_cdef.lua    <dir>/build/

Settings first: package.loaded["tide.paths"] = { lib = ..., cdef = ..., handle = ... } set
before require "tide" (a host or a game that keeps the files elsewhere), then
TIDE_LIB / TIDE_BUILD / TIDE_HOME. Inside LÖVE the modules' real directory
comes from love.filesystem; a .love archive is read through love.filesystem
(the declarations), and the library, which the dynamic loader must find as a
file, is looked for next to the archive and in the game's save directory.
When nothing is found the error names every path tried.
--]]
local M = {}

local function readable(p)
  local f = p and io.open(p, "rb")
  if f then f:close() return true end
  return false
end

local function add(list, p) if p then list[#list + 1] = p end end

-- the directory that holds the tide/ module folder, as a file system path (or
-- nil), and whether it is a .love archive (LÖVE: the module's real directory)
local function module_root()
  local src = debug.getinfo(1, "S").source
  local dir = src:match("^@(.*)[/\\]tide[/\\]locate%.lua$")
  if src:match("^@tide[/\\]locate%.lua$") then dir = "." end
  local lfs = rawget(_G, "love") and love.filesystem
  if lfs and lfs.getRealDirectory then
    -- LÖVE's loader names chunks by their path inside the game (@tide/locate.lua)
    local real = lfs.getRealDirectory("tide/locate.lua")
    if real then
      local f = io.open(real, "rb")
      local is_dir = f and (f:read(1) == nil)   -- reading a directory fails
      if f then f:close() end
      return real, not is_dir, lfs
    end
  end
  if dir and dir ~= "." then return dir, false end
  if dir == "." then return ".", false end
  return nil, false
end

-- The candidates, in order: { cdef = path or "love:<path>", lib = path }.
local function candidates(cfg)
  local cdefs, libs = {}, {}
  add(cdefs, cfg.cdef); add(libs, cfg.lib)
  local env_build, env_home = os.getenv("TIDE_BUILD"), os.getenv("TIDE_HOME")
  add(libs, os.getenv("TIDE_LIB"))
  if env_build then add(cdefs, env_build .. "/tide_cdef.lua"); add(libs, env_build .. "/libtide.so") end
  if env_home then add(cdefs, env_home .. "/build/tide_cdef.lua"); add(libs, env_home .. "/build/libtide.so") end
  local root, archive, lfs = module_root()
  if root and not archive then
    add(cdefs, root .. "/tide/cdef.lua")                 -- installed (or an installed layout copied)
    add(cdefs, root .. "/../build/tide_cdef.lua")        -- a checkout: root is <home>/lua
    add(cdefs, root .. "/build/tide_cdef.lua")           -- a checkout's build/ copied next to tide/
    add(libs, root .. "/../build/libtide.so")
    add(libs, root .. "/build/libtide.so")
    add(libs, root .. "/../../../lib/libtide.so")        -- installed: <P>/share/lua/5.1 -> <P>/lib
    add(libs, root .. "/lib/libtide.so")
    add(libs, root .. "/libtide.so")
  end
  if lfs then
    -- inside LÖVE: the declarations may sit in the game (an archive included);
    -- the library must be a real file, next to the .love or in the save dir
    add(cdefs, "love:tide/cdef.lua"); add(cdefs, "love:build/tide_cdef.lua")
    local base, save = lfs.getSourceBaseDirectory and lfs.getSourceBaseDirectory(), lfs.getSaveDirectory()
    for _, d in ipairs { base, save } do
      add(libs, d .. "/libtide.so"); add(libs, d .. "/lib/libtide.so")
    end
  end
  local on_path = package.searchpath and package.searchpath("tide.cdef", package.path)
  add(cdefs, on_path)
  return cdefs, libs
end

local function love_read(p)
  local lfs = rawget(_G, "love") and love.filesystem
  if not (lfs and lfs.getInfo and lfs.getInfo(p, "file")) then return nil end
  return lfs.read(p)
end

-- The declarations' text and the library's path (or the name for the system's
-- loader: a library installed where ld.so looks), or an error naming the paths tried.
function M.find()
  local cfg = package.loaded["tide.paths"]
  if type(cfg) ~= "table" then cfg = {} end
  local cdefs, libs = candidates(cfg)
  local cdef_text, cdef_from
  for _, p in ipairs(cdefs) do
    local lp = p:match("^love:(.*)$")
    if lp then
      cdef_text = love_read(lp)
    elseif readable(p) then
      local f = io.open(p, "rb"); cdef_text = f:read("*a"); f:close()
    end
    if cdef_text then cdef_from = p break end
  end
  local lib
  for _, p in ipairs(libs) do if readable(p) then lib = p break end end
  if cdef_text and lib then return cdef_text, lib, cdef_from end
  local what = not cdef_text and "the FFI declarations (tide_cdef.lua / tide/cdef.lua)" or "libtide.so"
  local tried = not cdef_text and cdefs or libs
  if cdef_text and not lib then return cdef_text, nil, cdef_from, tried end
  error(("tide: cannot find %s; tried: %s. Build tide with 'make', install it with 'make install', or set "
    .. "package.loaded[\"tide.paths\"] = { lib = \".../libtide.so\", cdef = \".../cdef.lua\" } before "
    .. "require \"tide\""):format(what, #tried > 0 and table.concat(tried, ", ") or "(nothing)"), 0)
end

-- Loads the library: a found path, else the system's loader ("tide": libtide.so
-- where ld.so looks), else the error naming every path tried.
function M.load(ffi)
  local cdef_text, lib, cdef_from, tried = M.find()
  local chunk, err = loadstring(cdef_text, "=" .. cdef_from)
  if not chunk then error("tide: " .. cdef_from .. ": " .. err, 0) end
  ffi.cdef(chunk())
  if lib then return ffi.load(lib), lib end
  local ok, C = pcall(ffi.load, "tide")
  if ok then return C, "tide" end
  tried[#tried + 1] = "libtide.so on the system's library path (" .. tostring(C) .. ")"
  error(("tide: cannot find libtide.so; tried: %s. Build tide with 'make', install it with 'make install', "
    .. "or set package.loaded[\"tide.paths\"] = { lib = \".../libtide.so\" } before require \"tide\"")
    :format(table.concat(tried, ", ")), 0)
end

-- The handle shim (tools/tide_handle.c): beside the library that was loaded
-- (build/, or lib/lua/5.1/ under an installed prefix's lib/), then Lua's
-- cpath. Returns its path, or nil and the paths tried.
function M.find_shim(libpath)
  local cfg = package.loaded["tide.paths"]
  local tried = {}
  if type(cfg) == "table" and cfg.handle then add(tried, cfg.handle) end
  local dir = libpath and libpath:match("^(.*)/[^/]+$")
  if dir then
    add(tried, dir .. "/tide_handle.so")
    add(tried, dir .. "/lua/5.1/tide_handle.so")
  end
  for _, p in ipairs(tried) do if readable(p) then return p end end
  local on_cpath = package.searchpath and package.searchpath("tide_handle", package.cpath)
  if on_cpath then return on_cpath end
  add(tried, "tide_handle on package.cpath")
  return nil, tried
end

return M
