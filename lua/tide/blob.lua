--[[
tide.blob -- tensors over memory that tide does not own, and tensors from C:
tide.from_blob wraps a pointer without a copy (td_from_blob), tide.from_ptr
takes a td_tensor* a C host hands to Lua.

An owner (a Lua value: the ffi array, a LÖVE ByteData) stays reachable for as
long as any tensor or view over its memory lives: it sits in a table under an
id, the C release function td_blob_note records that id when the storage
dies, and the ids are swept at each collection cycle (a sentinel proxy that
re-arms itself while owners remain) and at each from_blob. A Lua function is
never a release callback: C may drop the last reference inside code LuaJIT
compiled, where calling back into Lua is fatal ("bad callback").
--]]
local core = require "tide.core"
local ffi, C = core.ffi, core.C
local raise, wrap, own = core.raise, core.wrap, core.own
local args = require "tide.args"

local M = {}

local owners, next_id = {}, 0
local ids = ffi.new("int64_t[64]")
local voidp, release_t = ffi.typeof("void *"), ffi.typeof("td_blob_release")

local function sweep()
  while true do
    local n = C.td_blob_released(ids, 64)
    for i = 0, n - 1 do owners[tonumber(ids[i])] = nil end
    if n < 64 then return end
  end
end

local armed = false
local function arm()
  armed = true
  getmetatable(newproxy(true)).__gc = function()
    armed = false
    sweep()
    if next(owners) ~= nil then arm() end
  end
end

M.live_owners = function() sweep(); local n = 0; for _ in pairs(owners) do n = n + 1 end return n end

local function pointer(p, fname)
  local tp = type(p)
  if tp == "userdata" then
    -- only a light userdata is an address (a full one's payload is not the data)
    if getmetatable(p) ~= nil then args.argerr(1, fname, "pointer (cdata or light userdata)", p) end
    return ffi.cast(voidp, p)
  end
  if tp ~= "cdata" or core.is_tensor(p) then args.argerr(1, fname, "pointer (cdata or light userdata)", p) end
  return ffi.cast(voidp, p)
end

--- tide.from_blob(ptr, size[, opts]) -> Tensor
--- A CPU tensor over the memory at ptr (cdata or light userdata), no copy; opts: dtype, strides (elements), owner (kept alive meanwhile) or release (C function) and ctx.
function M.from_blob(ptr, size, opts)
  local fname = "from_blob"
  local p = pointer(ptr, fname)
  local s = args.shape_at(2, fname, size)
  opts = args.opts(fname, opts, "dtype strides owner release ctx", 3)
  local dt = core.dtype_id(opts.dtype, fname) or require("tide").get_default_dtype().id
  local nd = #s
  local sz = ffi.new("int64_t[?]", math.max(nd, 1))
  for i = 1, nd do sz[i - 1] = s[i] end
  local st = nil
  if opts.strides ~= nil then
    local t = opts.strides
    if type(t) ~= "table" or #t ~= nd then
      raise(("%s: strides must be a table of %d numbers (one per dim), got %s"):format(fname, nd,
        type(t) == "table" and #t .. " numbers" or type(t)))
    end
    st = ffi.new("int64_t[?]", math.max(nd, 1))
    for i = 1, nd do
      local v = args.int(t[i], 3, fname, "stride")
      if v < 0 then raise(("%s: stride %d of dim %d is negative"):format(fname, v, i)) end
      st[i - 1] = v
    end
  end
  if opts.owner ~= nil and opts.release ~= nil then
    raise(fname .. ": give owner or release, not both")
  end
  sweep()
  local rel, ctx, id = nil, nil, nil
  if opts.owner ~= nil then
    next_id = next_id + 1
    id = next_id
    rel, ctx = C.td_blob_note, ffi.cast(voidp, id)
  elseif opts.release ~= nil then
    if type(opts.release) ~= "cdata" then
      raise(("%s: release must be a C function pointer (cdata), got %s"):format(fname, type(opts.release)))
    end
    rel = ffi.cast(release_t, opts.release)
    ctx = opts.ctx ~= nil and pointer(opts.ctx, fname) or nil
  end
  local t = C.td_from_blob(p, nd, sz, st, dt, rel, ctx)
  if t == nil then raise(core.last_error()) end
  if id then
    owners[id] = opts.owner
    if not armed then arm() end
  end
  return wrap(t)
end

local tensor_ptr = ffi.typeof("td_tensor *")

--- tide.from_ptr(p) -> Tensor
--- A td_tensor* from C (a td_tensor * cdata, or a light userdata a C host pushed) as a Tensor with a reference of its own.
function M.from_ptr(p)
  -- (a cdata of another type is refused: reading a random address as a tensor crashes)
  -- a light userdata has no environment; a full one (newproxy(), a handle) has one and
  -- casts to the address of its own block, which is no tensor
  if type(p) == "userdata" and getmetatable(p) == nil and debug.getfenv(p) == nil then p = ffi.cast(tensor_ptr, p)
  elseif not (type(p) == "cdata" and ffi.istype(tensor_ptr, p)) then
    args.argerr(1, "from_ptr", "td_tensor pointer", p)
  end
  if p == nil then raise("from_ptr: the pointer is NULL") end
  return own(p)
end

return M
