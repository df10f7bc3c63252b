--[[
harness.lua -- the loader fuzz targets: load one file through tide's real
loader and check the outcome. Used two ways:
* by lua_driver.c (libFuzzer), which calls run(target, path) per input; any
  Lua error out of run is a finding and the driver aborts;
* from the command line, replaying files (a corpus) in this one process:
    luajit spec/fuzz/loaders/harness.lua <target> <file or dir>...
  prints "<target>: N inputs, N loaded, N clean errors" and exits 0, or
  prints the finding and exits 1. A crash kills the process: run it as a child.
Targets: safetensors (tide.load, mapped and read), npy (tide.load_npy), idx
(tide.data.read_idx).
An outcome is clean when the load succeeds and the result is sound (every
byte of every tensor readable, no more data than the file holds, bool bytes
0/1, the mapped and the read load equal), or when it raises a tide error: a
string that names the loader ("load: <path>: ...") and points at the
caller's line, never into lua/tide/ (which is where a Lua runtime error such
as "attempt to index a nil value" would point).
--]]
local home = ...
if type(home) ~= "string" or not home:find("/") and home ~= "." then
  home = (arg and arg[0] or ""):match("^(.*)/spec/fuzz/loaders/harness%.lua$") or "."
end
package.path = home .. "/lua/?.lua;" .. home .. "/lua/?/init.lua;" .. package.path

local tide = require "tide"
local data = require "tide.data"
local ffi = require "ffi"
local fields = require("tide.tensor").fields

local M = {}

local function finding(fmt, ...) error("FINDING: " .. fmt:format(...), 0) end

-- -- Soundness of a result ------------------------------------------------------------------

-- every byte of a tensor (this reads a mapped tensor's pages: a bad mapping faults here)
local function tensor_bytes(t)
  local c = t:contiguous()
  local fl = fields(c)
  local n = tonumber(fl.nelem) * c.dtype.itemsize
  if n > 0 and fl.ptr == nil then finding("a loaded tensor of %d bytes has no data", n) end
  return n > 0 and ffi.string(fl.ptr, n) or "", c
end

local function check_tensor(t, file_size)
  if t.device_type ~= 0 then finding("a loaded tensor is not on the CPU") end
  -- a loaded tensor is contiguous: its strides are the products of the later dims
  -- (a size 0 or 1 counting as 1; a dim of size 1 may have any stride), computed
  -- here in doubles; C's int64 ones differ only when they wrapped
  local size, stride, s = t:size(), t:stride(), 1
  for i = #size, 1, -1 do
    if size[i] ~= 1 and stride[i] ~= s then
      finding("a loaded tensor of shape [%s] has strides [%s], not [%s...]", table.concat(size, ","),
        table.concat(stride, ","), ("%.0f"):format(s))
    end
    s = s * math.max(size[i], 1)
  end
  local b = tensor_bytes(t)
  if file_size and #b > file_size then
    finding("a loaded tensor holds %d bytes, more than the file's %d", #b, file_size)
  end
  if t.dtype == tide.bool and b:find("[^%z\1]") then finding("a loaded bool tensor has bytes other than 0/1") end
  return b
end

-- walk a loaded value; tensors are checked, everything else must be plain Lua data
local function check_value(v, file_size, depth)
  if depth > 200 then finding("a loaded value nests deeper than 200") end
  if tide.is_tensor(v) then check_tensor(v, file_size); return end
  local tv = type(v)
  if tv == "table" then
    if getmetatable(v) ~= nil then finding("a loaded table has a metatable") end
    for k, x in pairs(v) do
      if type(k) ~= "string" and type(k) ~= "number" then finding("a loaded table has a %s key", type(k)) end
      check_value(x, file_size, depth + 1)
    end
  elseif tv ~= "string" and tv ~= "number" and tv ~= "boolean" then
    finding("a loaded value is a %s", tv)
  end
end

-- the mapped and the read load of one file must agree
local function same(a, b, depth)
  if tide.is_tensor(a) or tide.is_tensor(b) then
    return tide.is_tensor(a) and tide.is_tensor(b) and a.dtype == b.dtype
      and table.concat(a:size(), ",") == table.concat(b:size(), ",") and tensor_bytes(a) == tensor_bytes(b)
  end
  if type(a) ~= type(b) then return false end
  if type(a) == "number" and a ~= a then return b ~= b end
  if type(a) ~= "table" then return a == b end
  for k, x in pairs(a) do if not same(x, b[k], depth + 1) then return false end end
  for k in pairs(b) do if a[k] == nil then return false end end
  return true
end

-- -- Errors ----------------------------------------------------------------------------------------

-- A clean error: "[<chunk>:<line>: ]<op>: ..." where the position, if any, is
-- outside lua/tide/. (Only the leading position counts: Lua puts a runtime
-- error's there, and the rest may echo the file's own bytes, which the fuzzer
-- soon learns to fill with "lua/tide/serialize.lua:12: ".)
local function check_error(op, err)
  if type(err) ~= "string" then finding("%s raised a %s, not a message", op, type(err)) end
  local pos, rest = err:match("^([^\n:]+:%d+): (.*)$")
  if not pos then rest = err end
  if pos and pos:find("lua/tide/", 1, true) then finding("%s raised an error inside tide: %s", op, err) end
  if rest:sub(1, #op + 2) ~= op .. ": " then finding("%s raised an error that does not name it: %s", op, err) end
end

-- -- Targets -------------------------------------------------------------------------------------

local function file_size(path)
  local f = assert(io.open(path, "rb"))
  local n = f:seek("end")
  f:close()
  return n
end

local targets = {
  safetensors = { op = "load", run = function(path)
    local n = file_size(path)
    local v, meta = tide.load(path)
    check_value(v, n, 0)
    for k, x in pairs(meta) do
      if type(k) ~= "string" or type(x) ~= "string" then finding("load: metadata is not a string -> string map") end
    end
    local v2 = tide.load(path, { mmap = false })
    if not same(v, v2, 0) then finding("load: the mapped and the read load of one file differ") end
  end },
  npy = { op = "load_npy", run = function(path)
    local t = tide.load_npy(path)
    if not tide.is_tensor(t) then finding("load_npy returned a %s", type(t)) end
    check_tensor(t, file_size(path))
  end },
  idx = { op = "read_idx", run = function(path)
    local t = data.read_idx(path)
    if not tide.is_tensor(t) then finding("read_idx returned a %s", type(t)) end
    local f = assert(io.open(path, "rb"))
    local head = f:read(4 + 4 * 8) or ""
    f:close()
    check_tensor(t, nil)             -- a gzip file may hold more than its size
    if head:sub(1, 2) == "\0\0" then -- a plain file: the header's shape is the tensor's
      local nd = head:byte(4)
      local shape = {}
      for d = 1, nd do
        local a, b, c, e = head:byte(4 * d + 1, 4 * d + 4)
        shape[d] = ((a * 256 + b) * 256 + c) * 256 + e
      end
      if table.concat(shape, ",") ~= table.concat(t:size(), ",") then
        finding("read_idx: the header says [%s] but the tensor is [%s]", table.concat(shape, ","), table.concat(t:size(), ","))
      end
    end
  end },
}

-- run(target, path): true when loaded, false on a clean error; raises on a finding
function M.run(name, path)
  local tg = targets[name]
  if not tg then error("harness: unknown target " .. tostring(name), 0) end
  local ok, err = pcall(tg.run, path)
  if ok then return true end
  if type(err) == "string" and err:sub(1, 9) == "FINDING: " then error(err, 0) end
  check_error(tg.op, err)
  return false
end
M.targets = targets

-- -- Command line: replay ---------------------------------------------------------------------------

local function replay(name, paths)
  local files = {}
  for _, p in ipairs(paths) do
    local ls = io.popen(("find %q -maxdepth 1 -type f | sort"):format(p))
    for f in ls:lines() do files[#files + 1] = f end
    ls:close()
  end
  local loaded, clean = 0, 0
  for _, f in ipairs(files) do
    local ok, r = pcall(M.run, name, f)
    if not ok then io.stderr:write(("%s: %s\n  input: %s\n"):format(name, tostring(r), f)); os.exit(1) end
    if r then loaded = loaded + 1 else clean = clean + 1 end
    if #files > 64 then collectgarbage() end
  end
  print(("%s: %d inputs, %d loaded, %d clean errors"):format(name, #files, loaded, clean))
end

if arg and arg[0] and arg[0]:match("harness%.lua$") and select("#", ...) == #arg then
  local name = arg[1]
  if not targets[name] or #arg < 2 then
    io.stderr:write("usage: luajit spec/fuzz/loaders/harness.lua safetensors|npy|idx <file or dir>...\n")
    os.exit(2)
  end
  replay(name, { select(2, unpack(arg)) })
  collectgarbage(); collectgarbage()   -- the last inputs' tensors freed before the leak check at exit
  os.exit(0, true)
end

return M
