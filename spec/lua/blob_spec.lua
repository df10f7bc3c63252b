-- tide.from_blob and tide.from_ptr: tensors over memory tide does not own
-- (no copy, writes go both ways, strides), owners kept alive exactly as long
-- as a tensor or view over their memory lives, C release functions called
-- once, and the errors.
local tide = require "tide"
local ffi = require "ffi"
local blob = require "tide.blob"
local H = require "helper"

local function collect() for _ = 1, 4 do collectgarbage() end end

describe("tide.from_blob", function()
  it("shares the memory: no copy, writes go both ways", function()
    local buf = ffi.new("float[6]", { 1, 2, 3, 4, 5, 6 })
    local t = tide.from_blob(buf, { 2, 3 }, { owner = buf })
    assert.are.equal(tide.float32, t.dtype)
    H.close(t, { { 1, 2, 3 }, { 4, 5, 6 } })
    buf[4] = 50
    assert.are.equal(50, t[2][2]:item())
    t:mul_(2)
    assert.are.equal(12, buf[5])
    assert.are.equal(100, buf[4])
  end)

  it("takes strides in elements, a dtype and a light userdata", function()
    local buf = ffi.new("double[6]", { 1, 2, 3, 4, 5, 6 })
    local t = tide.from_blob(ffi.cast("void *", buf), { 3, 2 }, { dtype = tide.float64, strides = { 1, 3 }, owner = buf })
    assert.is_false(t:is_contiguous())
    H.close(t, { { 1, 4 }, { 2, 5 }, { 3, 6 } })
    local ints = ffi.new("int32_t[3]", { 7, 8, 9 })
    -- a light userdata, as a C host or LÖVE's ImageData:getPointer() gives
    local lud = ffi.cast("void *", ints)
    local t2 = tide.from_blob(lud, 3, { dtype = tide.int32, owner = ints })
    assert.are.same({ 7, 8, 9 }, t2:totable())
  end)

  it("keeps the owner alive while any tensor or view over it lives", function()
    local weak = setmetatable({}, { __mode = "v" })
    collect()
    local base0 = blob.live_owners()
    local t
    do
      local b = ffi.new("double[4]", { 1, 2, 3, 4 })
      weak[1] = b
      t = tide.from_blob(b, { 4 }, { dtype = tide.float64, owner = b })
    end
    collect()
    assert.is_not_nil(weak[1])
    assert.are.equal(10, t:sum():item())
    local v = t:view(2, 2)
    t = nil
    collect()
    assert.is_not_nil(weak[1], "the view keeps the owner")
    assert.are.equal(4, v[2][2]:item())
    v = nil
    collect()
    assert.is_nil(weak[1], "the owner is released after the last view")
    assert.are.equal(base0, blob.live_owners())
  end)

  it("calls a C release function once, when the last tensor dies", function()
    local dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir)
    local src = dir .. "/rel.c"
    local f = io.open(src, "w")
    f:write("int calls; void *seen; void rel(void *data, void *ctx) { calls++; seen = data; (void)ctx; }\n")
    f:close()
    assert.is_truthy(os.execute(("cc -shared -fPIC -o %s/librel.so %s"):format(dir, src)))
    ffi.cdef "int calls; void rel(void *data, void *ctx); void *seen;"
    local lib = ffi.load(dir .. "/librel.so")
    local buf = ffi.new("float[4]")
    local t = tide.from_blob(buf, { 4 }, { release = lib.rel })
    local v = t[2]
    t = nil
    collect()
    assert.are.equal(0, lib.calls)
    v = nil
    collect()
    assert.are.equal(1, lib.calls)
    assert.is_true(lib.seen == ffi.cast("void *", buf))
    os.execute("rm -rf " .. dir)
  end)

  it("errors name the argument", function()
    local buf = ffi.new("float[4]")
    local function err(...)
      local ok, e = pcall(tide.from_blob, ...)
      assert.is_false(ok)
      return e
    end
    assert.matches("bad argument #1 to 'from_blob' %(pointer", err({}, { 2 }))
    assert.matches("stride %-1 of dim 1 is negative", err(buf, { 2 }, { strides = { -1 } }))
    assert.matches("strides must be a table of 2 numbers", err(buf, { 2, 2 }, { strides = { 1 } }))
    assert.matches("not aligned for float32", err(ffi.cast("char *", buf) + 1, { 2 }))
    assert.matches("owner or release, not both", err(buf, { 2 }, { owner = buf, release = tide.C.td_blob_note }))
    assert.matches("unknown option 'stride'", err(buf, { 2 }, { stride = { 1 } }))
  end)
end)

describe("tide.from_ptr", function()
  it("takes a td_tensor* with a reference of its own", function()
    local x = tide.arange(6):float()
    local p = x.p
    local y = tide.from_ptr(p)
    assert.are.equal(15, y:sum():item())
    y:add_(1)
    assert.are.equal(21, x:sum():item())
    x = nil
    collect()
    assert.are.equal(21, y:sum():item())
    assert.matches("td_tensor pointer expected", select(2, pcall(tide.from_ptr, 3)))
    -- a cdata of another type would be read as a tensor at a random address: refused
    assert.matches("td_tensor pointer expected", select(2, pcall(tide.from_ptr, ffi.new("int[2]"))))
    -- a full userdata without a metatable is no pointer (the API fuzzer's SIGSEGV)
    assert.matches("td_tensor pointer expected", select(2, pcall(tide.from_ptr, newproxy())))
    assert.matches("NULL", select(2, pcall(tide.from_ptr, ffi.cast("td_tensor *", nil))))
  end)
end)
