--[[
tide.core -- the FFI binding: loads libtide and its declarations (the public
header, preprocessed at build time), turns C errors into Lua errors, wraps
new tensor handles for the GC and paces the collector by C-side live bytes.
Every other module reaches C through this one.
--]]
local ffi = require "ffi"

local M = {}

-- The declarations and the library: found from where these modules are (a
-- checkout, an installed prefix, a game's folder), see tide.locate.
local locate = require "tide.locate"

-- OpenBLAS picks its kernels when it is loaded (with libtide, just below), from
-- a CPU table: Debian's 0.3.21 does not know AMD's Zen 4/5 and falls back to
-- its AVX2 kernels on CPUs with AVX-512, where its SkylakeX kernels run GEMM
-- up to ~1.9x faster. Unless the user chose (OPENBLAS_CORETYPE), ask for those
-- when /proc/cpuinfo shows the AVX-512 subsets they use.
local function openblas_coretype()
  if os.getenv("OPENBLAS_CORETYPE") then return end
  local f = io.open("/proc/cpuinfo", "r")
  local flags = f and f:read("*a"):match("\nflags%s*:([^\n]*)")
  if f then f:close() end
  if not flags then return end
  for _, need in ipairs { "avx512f", "avx512bw", "avx512dq", "avx512vl" } do
    if not flags:find(" " .. need .. " ", 1, true) and not flags:find(" " .. need .. "$") then return end
  end
  ffi.cdef "int setenv(const char *name, const char *value, int overwrite);"
  ffi.C.setenv("OPENBLAS_CORETYPE", "SkylakeX", 0)
end
openblas_coretype()
local C, libpath = locate.load(ffi)
M.libpath = libpath

-- When the Lua state closes (at exit), wait for the OpenCL queue before the
-- process's exit handlers run: a driver (PoCL) still compiling or running a
-- kernel while its own globals are destroyed crashes the exit.
M._cl_sentinel = newproxy(true)
getmetatable(M._cl_sentinel).__gc = function() C.td_opencl_finish() end
M.C, M.ffi = C, ffi

-- dtypes: objects that print by name; tensors store the enum value
local dtypes, by_id = {}, {}
local dtype_mt = { __tostring = function(d) return "tide." .. d.name end }
for id = 0, 5 do
  local name = ffi.string(C.td_dtype_name(id))
  local d = setmetatable({ name = name, id = id, is_floating_point = id >= 4, itemsize = C.td_dtype_size(id) }, dtype_mt)
  dtypes[name], by_id[id] = d, d
end
dtypes.float, dtypes.double, dtypes.long, dtypes.int = dtypes.float32, dtypes.float64, dtypes.int64, dtypes.int32
dtypes.byte = dtypes.uint8
M.dtypes, M.dtype_of = dtypes, by_id

function M.dtype_id(d, where)
  if d == nil then return nil end
  if type(d) == "table" and d.id then return d.id end
  if type(d) == "string" and dtypes[d] then return dtypes[d].id end
  M.raise(("%s: unknown dtype '%s'"):format(where or "dtype", tostring(d)))
end

-- op ids by lower-case name, from the op table in C
local OP = {}
for i = 0, C.td_op_count() - 1 do OP[ffi.string(C.td_op_name(i))] = i end
M.OP = OP

function M.last_error() return ffi.string(C.td_last_error()) end

-- Errors point at the user's line: the first stack frame outside lua/tide/.
-- Walking the stack (instead of a fixed error level) stays right through tail
-- calls and helpers, which shift fixed levels. A C frame (pcall(tide.zeros, -1))
-- ends the walk as well; the message then has no position, as in Lua itself (a
-- tide function that pcalls and rethrows, like no_grad(fn), gives such a message
-- the position of its own caller: M.rethrow). With no user frame at all (a
-- coroutine of tide's own) the message has no position rather than tide's.
local tide_dir = debug.getinfo(1, "S").source:match("^(@.*[/\\])core%.lua$") or "@lua/tide/"
M.tide_dir = tide_dir
function M.raise(msg)
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if info == nil then level = 0; break end
    if info.source:sub(1, #tide_dir) ~= tide_dir then break end
    level = level + 1
  end
  error(msg, level)
end
local raise = M.raise

-- Rethrow an error caught by tide's own pcall (no_grad(fn), a compiled call): as
-- it is when it has a position, else at the user's line (the error was raised
-- where the walk met that pcall, or after a tail call in the user's function).
function M.rethrow(msg)
  if type(msg) == "string" and not msg:match("^[^\n]-:%d+: ") then raise(msg) end
  error(msg, 0)
end

-- Raise the C error at the user's line.
function M.fail() raise(M.last_error()) end

function M.check(rc)
  if rc ~= 0 then raise(M.last_error()) end
  return rc
end

-- GC pacing: Lua does not see C memory, so when the C live bytes have grown to
-- twice what survived the last full collection (and at least 64 MiB) we
-- collect. A loop of temporaries then stays within ~2x its steady state.
-- What survives is at most the least live seen since: when live bytes fall
-- (the incremental collector, x:free(), a collection the program asked for),
-- the threshold follows them down, so a large working set that is gone no
-- longer lets the next loop grow to twice its size.
local live_bytes = C.td_live_bytes
local MIN_GC = 64 * 2 ^ 20
local next_gc = MIN_GC
local collecting = C.td_collecting
local function pace()
  local live = tonumber(live_bytes())
  if live > next_gc then
    collecting(1)   -- the blocks freed now may have been dead since they were made (runtime/rt_storage.c)
    collectgarbage("collect")
    collecting(0)
    live = tonumber(live_bytes())
    next_gc = math.max(2 * live, MIN_GC)
  elseif 2 * live < next_gc and next_gc > MIN_GC then
    next_gc = math.max(2 * live, MIN_GC)
  end
end
M.pace = pace

-- Every tensor handle carries a finalizer, and LuaJIT keeps pending ones in a
-- hash table: with the default step multiplier (200) hundreds of thousands of
-- dead handles pile up between cycles, and releasing them walks long chains
-- of cold memory. Collecting twice as eagerly keeps that set small; it cut
-- the cost of one small op from Lua by about a third (bench/RESULTS.md).
-- TIDE_GC_STEPMUL overrides it (0 leaves the host's setting alone).
local stepmul = tonumber(os.getenv("TIDE_GC_STEPMUL") or "400")
if stepmul and stepmul > 0 then collectgarbage("setstepmul", stepmul) end

-- A Lua tensor is a handle owning one reference, of one of two kinds with one
-- layout (a td_tensor pointer) and one metatable's methods:
--  * a full userdata made by the handle shim (tools/tide_handle.c, a small Lua
--    C module beside libtide), released by its C __gc: LuaJIT finalizes
--    userdata several times more cheaply than cdata, so one small op costs
--    much less (bench/RESULTS.md);
--  * without the shim (not found, or TIDE_HANDLES=ffi), a td_handle cdata, a
--    one-pointer struct given ffi.gc(h, td_handle_free) (a C finalizer: a Lua
--    __gc calling C costs ~3x more). A struct, not a bare pointer: the FFI
--    treats x + 1 and x[i] on a pointer as pointer arithmetic.
-- x.p reads the pointer either way (a field of the struct; the metatable's
-- __index for the userdata), and M.ptr(x) reads it without a lookup.
-- 0-dim tensors (scalars: a loss, x:sum(), x[i] of a vector) are always
-- cdata: Lua 5.1 compares a userdata only with another userdata, and a cdata
-- compares with anything through its metatable, so `loss < best` and
-- `x:sum() > 0` keep working.
local Handle, HP = ffi.typeof("td_handle"), ffi.typeof("td_handle *")
M.Handle = Handle
local handle_free, gc, cast = C.td_handle_free, ffi.gc, ffi.cast
local new_ud        -- the shim's constructor, once M.use_handles has loaded it
local UMT = {}      -- the userdata handles' metatable (a fresh table until then: matches nothing)

local FIELDS = ffi.typeof("td_tensor_fields *")

function M.ptr(x) return cast(HP, x).p end

-- A new reference from C becomes a handle; NULL raises the C error.
function M.wrap(p)
  if p == nil then raise(M.last_error()) end
  pace()
  if new_ud and cast(FIELDS, p).ndim ~= 0 then return new_ud(tonumber(cast("uintptr_t", p))) end
  return gc(Handle(p), handle_free)
end

-- A borrowed pointer (not yet retained) becomes an owned handle.
function M.own(p)
  if p == nil then return nil end
  C.td_retain(p)
  if new_ud and cast(FIELDS, p).ndim ~= 0 then return new_ud(tonumber(cast("uintptr_t", p))) end
  return gc(Handle(p), handle_free)
end

-- Called once the Tensor metatable is complete (init.lua): userdata handles
-- through the shim when it loads, with a copy of mt (plus the shim's __gc);
-- returns "userdata" or "ffi" and, for "ffi", why.
function M.use_handles(mt)
  local mode = os.getenv("TIDE_HANDLES")
  if mode == "ffi" then return "ffi", "TIDE_HANDLES=ffi" end
  local path, tried = locate.find_shim(M.libpath)
  if not path then return "ffi", "tide_handle.so not found (tried " .. table.concat(tried, ", ") .. ")" end
  local open, err = package.loadlib(path, "luaopen_tide_handle")
  if not open then return "ffi", "tide_handle.so did not load: " .. tostring(err) end
  local umt = {}
  for k, v in pairs(mt) do umt[k] = v end
  local ok, new = pcall(function() return open()(umt, tonumber(cast("uintptr_t", C.td_release))) end)
  if not ok then return "ffi", "tide_handle.so: " .. tostring(new) end
  UMT, new_ud = umt, new
  M.handle_mt = umt
  return "userdata"
end

local istype = ffi.istype
-- true while tide.compile traces a function: tensors have no values yet, so
-- checks that read values (label ranges, ...) are left to the kernels
function M.tracing() return C.td_is_tracing() ~= 0 end

function M.is_tensor(x) return getmetatable(x) == UMT or (type(x) == "cdata" and istype(Handle, x)) end

return M
