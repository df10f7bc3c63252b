-- Tensor handles (core.lua, tools/tide_handle.c): userdata made by the handle
-- shim by default, cdata with ffi.gc as the fallback. Both free themselves,
-- x.p and x:free() work on both, 0-dim tensors are cdata so that comparisons
-- with numbers work, and a process without the shim (or TIDE_HANDLES=ffi)
-- gets the cdata handles and says why.
local tide = require "tide"
local core = require "tide.core"
local ffi = require "ffi"

local function sh(cmd)
  local p = io.popen("(" .. cmd .. ") 2>&1; echo \"__rc=$?\"")
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("__rc=(%d+)%s*$"))
  return (out:gsub("__rc=%d+%s*$", "")), rc
end

local function collect() for _ = 1, 3 do collectgarbage() end end

describe("tensor handles", function()
  it("are userdata from the shim, 0-dim tensors cdata", function()
    assert.are.equal("userdata", core.handles, tostring(core.handles_why))
    local x = tide.ones(2, 3)
    assert.are.equal("userdata", type(x))
    assert.are.equal("cdata", type(x:sum()))
    assert.are.equal("cdata", type(x[1][1]))
    assert.is_true(tide.is_tensor(x) and tide.is_tensor(x:sum()))
    assert.is_false(tide.is_tensor(newproxy(true)) or tide.is_tensor(io.stdout) or tide.is_tensor({}))
    -- the pointer reads the same through x.p and core.ptr
    assert.is_true(x.p == core.ptr(x) and x.p ~= nil)
    assert.is_true(x:sum() > 5.5 and x:sum() <= 6 and 7 > x:sum())
    -- userdata against userdata compares through the metatable
    assert.is_true(tide.ones(1) < tide.ones(1) * 2)
  end)

  it("free themselves when collected, and x:free() releases at once", function()
    collect()
    local base = tide.live_bytes()
    do
      local keep = {}
      for i = 1, 100 do keep[i] = tide.ones(64, 64) + i end
    end
    assert.is_true(tide.live_bytes() > base + 100 * 64 * 64 * 4)
    collect()
    assert.is_true(tide.live_bytes() <= base + 4096, ("%d bytes left"):format(tide.live_bytes() - base))
    local y = tide.ones(256, 256) * 2
    local before = tide.live_bytes()
    y:free()
    assert.is_true(tide.live_bytes() <= before - 256 * 256 * 4)
    local ok, err = pcall(function() return y + 1 end)
    assert.is_false(ok)
    assert.matches("freed tensor", err)
    ok, err = pcall(function() return y.shape end)
    assert.matches("used after free", err)
    y = nil
    collect()                         -- the freed handle's __gc releases nothing twice
  end)

  it("work with autograd, views and the optimizers as before", function()
    local w = tide.randn(4, 3, { requires_grad = true })
    local x = tide.randn(5, 4)
    local loss = (x:matmul(w):tanh() ^ 2):mean()
    loss:backward()
    assert.are.equal("userdata", type(w.grad))
    assert.are.same({ 4, 3 }, w.grad:size())
    local v = w:view(12)
    w = nil
    collect()
    assert.are.equal(12, v:size(1))
    local opt = tide.optim.SGD({ v:detach():requires_grad_() }, { lr = 0.1 })
    assert.is_truthy(opt)
  end)

  it("fall back to cdata handles: TIDE_HANDLES=ffi, or no shim beside the library", function()
    local script = [[
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local dir = os.getenv("SHIMLESS")
if dir then package.cpath = ""; package.loaded["tide.paths"] = { lib = dir .. "/libtide.so", cdef = dir .. "/tide_cdef.lua" } end
local tide = require "tide"
local core = require "tide.core"
local x = tide.ones(3) + 1
io.write(core.handles, " ", type(x), " ", tostring(x:sum():item()), " ", tostring(core.handles_why), "\n")
]]
    local f = os.tmpname()
    local h = io.open(f, "w"); h:write(script); h:close()
    local out = sh("TIDE_HANDLES=ffi luajit " .. f)
    assert.matches("^ffi cdata 6 TIDE_HANDLES=ffi\n", out)
    local build = os.getenv("TIDE_BUILD") or "build"
    local dir = os.tmpname(); os.remove(dir)
    assert.is_truthy(os.execute(("mkdir -p %s && cp %s/libtide.so %s/tide_cdef.lua %s/"):format(dir, build, build, dir)))
    out = sh(("SHIMLESS=%s luajit %s"):format(dir, f))
    sh("rm -rf " .. dir)
    os.remove(f)
    assert.matches("^ffi cdata 6 tide_handle%.so not found %(tried [^\n]*" .. dir:gsub("%p", "%%%0") .. "/tide_handle%.so", out)
  end)
end)
