-- Eager OpenCL ops as one-op kernels of the kernel IR (opencl/cl_eager.c):
-- one program per op and dtypes whatever the shapes, full reductions as a
-- tree over work groups, programs on disk for the next process, the float32
-- path of a device without float64, and the errors: a kernel that fails to
-- build, no OpenCL platform (the CPU path unchanged). Skipped without an
-- OpenCL device.
local tide = require "tide"
local H = require "helper"
local ffi = require "ffi"
local C = tide.C

local function stats()
  local s = ffi.new("int64_t[4]")
  C.td_opencl_stats(s)
  return { builds = tonumber(s[0]), loads = tonumber(s[1]), launches = tonumber(s[2]), groups = tonumber(s[3]) }
end

local build = os.getenv("TIDE_BUILD") or "build"
local function q(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
-- run a Lua snippet in a fresh luajit with extra environment; its stdout and exit status
local function run_lua(env, code)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write('package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path\n', code)
  f:close()
  local p = io.popen(("%s TIDE_BUILD=%s luajit %s 2>&1"):format(env, q(build), q(path)))
  local out = p:read("*a")
  local ok = p:close()
  os.remove(path)
  return out, ok
end

H.describe_cl("eager OpenCL ops from the kernel IR", function()
  it("one program serves every shape of an op: a new shape, offset or number builds nothing", function()
    local a = tide.randn(3, 5):to("opencl")
    local _ = (a * 2.5):exp():sum(2)
    local s0 = stats()
    local b = tide.randn(7, 11, 40):to("opencl")
    local r = (b * -1.5):exp():sum(3)
    local s0b = stats()
    local bn = b:narrow(3, 3, 30)                -- rows, not flat: its own program, then shared
    local _ = (bn * 0.5):exp()
    local s1 = stats()
    local rn = (b:narrow(1, 2, 5):narrow(3, 1, 17) * 0.25):exp()
    local s2 = stats()
    assert.equal(0, s2.builds - s1.builds)
    assert.equal(0, s2.loads - s1.loads)
    H.agree(r, (b:cpu() * -1.5):exp():sum(3), 1e-5)
    H.agree(rn, (b:cpu():narrow(1, 2, 5):narrow(3, 1, 17) * 0.25):exp(), 1e-6)
    assert.equal(0, (s0b.builds + s0b.loads) - (s0.builds + s0.loads))
    assert.is_true(s0b.launches - s0.launches >= 3)
  end)

  it("x:sum() of 2^20 values runs as a tree over work groups, as the CPU sums (float64 partials)", function()
    local n = 2 ^ 20
    local x = tide.rand(n) * 2 - 1
    local d = x:to("opencl")
    local s0 = stats()
    local got = d:sum()
    local s1 = stats()
    H.agree(got, x:sum(), 1e-6, "sum")
    assert.is_true(s1.launches - s0.launches >= 2, "launches " .. (s1.launches - s0.launches))
    assert.is_true(s1.groups - s0.groups > s1.launches - s0.launches + 1, "more than one group per launch")
    H.agree(d:mean(), x:mean(), 1e-6, "mean")
    H.agree(d:max(), x:max(), 0, "max")
    H.agree(d:min(), x:min(), 0, "min")
    local y = (tide.rand(n) * 2e-6 + 1 - 1e-6)
    H.agree(y:to("opencl"):prod(), y:prod(), 1e-5, "prod")
    local i = tide.randint(-1000, 1000, { n }, { dtype = "int64" })
    H.agree(i:to("opencl"):sum(), i:sum(), 0, "int64 sum")
    -- a few rows of many elements each, and an odd count (a partial block)
    local m = tide.randn(3, 50001)
    H.agree(m:to("opencl"):sum(2), m:sum(2), 1e-6, "rows")
    H.agree(m:to("opencl"):mean(2, true), m:mean(2, true), 1e-6, "rows keepdim")
  end)

  it("a kernel that fails to build raises the build log and the source", function()
    local src = "kernel void k(global float *o) { o[0] = undefined_thing; }\n"
    assert.is_true(C.td_opencl_build(src) < 0)
    local err = ffi.string(C.td_last_error())
    assert.truthy(err:find("OpenCL kernel build failed", 1, true), err)
    assert.truthy(err:find("--- build log ---", 1, true) and err:find("undefined_thing", 1, true), err)
    assert.truthy(err:find("--- kernel source ---\n" .. src, 1, true), err)
    assert.equal(0, C.td_opencl_build("kernel void k(global float *o) { o[0] = 1.0f; }\n"))
  end)

  it("a second process builds nothing: programs come from the disk cache", function()
    local dir = os.tmpname()
    os.remove(dir)
    local code = [[
      local tide = require "tide"
      local ffi = require "ffi"
      local f = tide.compile(function(x) return (x:sin() * 2):softmax(2), x:sum(1) end)
      local x = tide.randn(5, 9):to("opencl")
      local a, b = f(x)
      local _ = (x + 1):cpu()
      local s = ffi.new("int64_t[4]"); tide.C.td_opencl_stats(s)
      print(("builds=%d loads=%d"):format(tonumber(s[0]), tonumber(s[1])))
    ]]
    local env = "TIDE_CACHE_DIR=" .. q(dir)
    local o1, ok1 = run_lua(env, code)
    local o2, ok2 = run_lua(env, code)
    os.execute("rm -rf " .. q(dir))
    assert(ok1 and ok2, o1 .. o2)
    local b1 = tonumber(o1:match("builds=(%d+)"))
    local b2, l2 = tonumber(o2:match("builds=(%d+)")), tonumber(o2:match("loads=(%d+)"))
    assert.is_true(b1 > 0, o1)
    assert.equal(0, b2, o2)
    assert.is_true(l2 >= b1, o2)
    -- the first build of a process says why it is slow, once; loading from the cache says nothing
    local _, notes = o1:gsub("tide: compiling OpenCL kernels for [^\n]*the first run on a device is slow", "")
    assert.equal(1, notes, o1)
    assert.is_nil(o2:find("compiling OpenCL kernels", 1, true), o2)
  end)

  it("the program cache: a directory path of any length; one that cannot be used warns once and builds in memory", function()
    local base = os.tmpname()
    os.remove(base)
    local long = base .. ("/" .. ("d"):rep(200)):rep(7)        -- 1,400+ characters
    local code = [[
      local tide = require "tide"
      local ffi = require "ffi"
      local x = tide.arange(6):to("opencl")
      print(("sum %g"):format((x * 3):sum():item()), ("mean %g"):format((x + 1):mean():item()))
      local s = ffi.new("int64_t[4]"); tide.C.td_opencl_stats(s)
      print(("builds=%d loads=%d"):format(tonumber(s[0]), tonumber(s[1])))
    ]]
    local o1, ok1 = run_lua("TIDE_CACHE_DIR=" .. q(long), code)
    local o2, ok2 = run_lua("TIDE_CACHE_DIR=" .. q(long), code)
    local file = os.tmpname()                                 -- a regular file: not a directory
    local o3, ok3 = run_lua("TIDE_CACHE_DIR=" .. q(file), code)
    os.execute("rm -rf " .. q(base) .. " " .. q(file))
    assert(ok1 and ok2 and ok3, o1 .. o2 .. o3)
    for _, o in ipairs({ o1, o2, o3 }) do assert.truthy(o:find("sum 45\tmean 3.5", 1, true), o) end
    assert.equal(0, tonumber(o2:match("builds=(%d+)")), o2)
    assert.truthy(tonumber(o2:match("loads=(%d+)")) > 0, o2)
    local _, nwarn = o3:gsub("OpenCL program cache directory", "")
    assert.equal(1, nwarn, o3)
    assert.truthy(o3:lower():find("not a directory", 1, true), o3)
    assert.truthy(tonumber(o3:match("builds=(%d+)")) > 0, o3)
  end)

  it("a device without float64: sums and compiled kernels in float32, float64 tensors refused", function()
    local out, ok = run_lua("TIDE_OPENCL_NO_FP64=1", [[
      local tide = require "tide"
      local x = tide.randn(4, 300)
      local d = x:to("opencl")
      local f = tide.compile(function(v) return v:softmax(2), v:sum() end)
      local a, b = f(d)
      print(("softmax %.3g sum %.3g mean %.3g"):format((a:cpu() - x:softmax(2)):abs():max():item(),
        math.abs(b:item() - x:sum():item()), math.abs(d:mean():item() - x:mean():item())))
      print(pcall(function() return tide.randn(3, { dtype = "float64" }):to("opencl"):sum() end))
    ]])
    assert(ok, out)
    local sm, su, me = out:match("softmax (%S+) sum (%S+) mean (%S+)")
    assert.is_true(tonumber(sm) < 1e-5 and tonumber(su) < 1e-3 and tonumber(me) < 1e-5, out)
    assert.truthy(out:find("no float64", 1, true), out)
  end)

  it("without an OpenCL platform the device is unavailable with a clear error, and the CPU path is unchanged", function()
    local out, ok = run_lua("OCL_ICD_VENDORS=/nonexistent-tide-vendors", [[
      local tide = require "tide"
      print("available", tide.opencl.is_available())
      print(pcall(function() return tide.randn(3):to("opencl") end))
      local f = tide.compile(function(x) return (x:sin() ^ 2 + x:cos() ^ 2):sum() end)
      print(("cpu %.6f"):format(f(tide.randn(100)):item()))
    ]])
    assert(ok, out)
    assert.truthy(out:find("available\tfalse", 1, true), out)
    assert.truthy(out:find("no OpenCL platform found", 1, true), out)
    assert.truthy(out:find("cpu 100.000000", 1, true), out)
  end)
end)
