-- The device runtime (opencl/cl_mem.c, cl_rng.c): the caching allocator
-- (buffers reused by size class, tide.empty_cache, emptied and retried on a
-- full device, "out of device memory" naming the op and the bytes), a queue
-- the host waits on only when it reads values, device times in the profiler,
-- and random tensors drawn on the device equal to the CPU's for the same seed.
-- Skipped without an OpenCL device.
local tide = require "tide"
local H = require "helper"

local function mstats() collectgarbage(); collectgarbage(); return tide.opencl.memory_stats() end

H.describe_cl("the device allocator", function()
  it("a freed buffer goes to the cache and the next tensor of its size class reuses it", function()
    local n = 300000                               -- 1.2 MB: class 1.25 MiB
    local a = tide.zeros(n, { device = "opencl" })
    a = nil
    local s0 = mstats()
    assert.is_true(s0.cached >= 4 * n, "cached " .. s0.cached)
    assert.equal(s0.cached, tide.memory_stats().opencl.cached)
    local b = tide.ones(n + 1000, { device = "opencl" })  -- same class
    local s1 = tide.opencl.memory_stats()
    assert.equal(s0.created, s1.created)
    assert.equal(s0.reused + 1, s1.reused)
    assert.equal(n + 1000, b:sum():item())          -- the reused buffer holds the new values
    b = nil
    collectgarbage(); collectgarbage()
    assert.is_true(tide.opencl.memory_stats().cached > 0)
    tide.empty_cache()
    assert.equal(0, tide.opencl.memory_stats().cached)
    assert.equal(0, tide.memory_stats().opencl.cached)
  end)

  it("a training loop's temporaries come from the cache after its first step", function()
    local x, w = tide.randn(64, 32, { device = "opencl" }), tide.randn(32, 16, { device = "opencl" })
    local function step() return ((x:matmul(w)):relu() * 2 + 1):sum(2):mean():item() end
    step(); collectgarbage(); collectgarbage()
    local s0 = tide.opencl.memory_stats()
    for _ = 1, 5 do step(); collectgarbage() end
    local s1 = tide.opencl.memory_stats()
    assert.equal(s0.created, s1.created)
    assert.is_true(s1.reused - s0.reused >= 20, "reused " .. (s1.reused - s0.reused))
  end)

  it("a full device empties the cache and retries; past it, 'out of device memory' with the op and the bytes", function()
    local MiB = 2 ^ 20
    collectgarbage(); collectgarbage()
    tide.empty_cache()
    -- 64 MiB above what this process holds now (earlier spec files may keep tensors alive)
    local prev = tide.opencl.set_memory_limit(tide.opencl.memory_stats().held + 64 * MiB)
    local ok, err = pcall(function()
      local a = tide.empty(10 * MiB, { dtype = tide.float32, device = "opencl" })   -- 40 MiB
      a = nil
      local s0 = mstats()
      assert.is_true(s0.cached >= 40 * MiB)
      -- 48 MiB of another class: only fits once the 40 cached are released
      local b = tide.zeros(12 * MiB, { device = "opencl" })
      local s1 = tide.opencl.memory_stats()
      assert.equal(s0.oom_flushes + 1, s1.oom_flushes)
      assert.equal(0, s1.cached)
      -- an op whose result does not fit: the op is named, then the process goes on
      local e = select(2, pcall(function() return b + 1 end))
      assert.truthy(tostring(e):find("add: out of device memory: 50331648 bytes (48.00 MiB) asked on ", 1, true), e)
      assert.truthy(tostring(e):find("in use of ", 1, true), e)
      local e2 = select(2, pcall(tide.ones, 20 * MiB, { device = "opencl" }))
      assert.truthy(tostring(e2):find("ones: out of device memory: 83886080 bytes", 1, true), e2)
      assert.equal(12 * MiB, b:sum():item() + 12 * MiB)
    end)
    tide.opencl.set_memory_limit(prev)
    collectgarbage(); collectgarbage()
    assert(ok, err)
    -- larger than the largest buffer the device allows: an error, not a crash
    local e3 = select(2, pcall(tide.empty, 2 ^ 40, { dtype = tide.uint8, device = "opencl" }))
    assert.truthy(tostring(e3):find("empty: out of device memory: 1099511627776 bytes", 1, true), e3)
    assert.truthy(tostring(e3):find("the largest buffer the device allows is", 1, true), e3)
    assert.equal(6, (tide.ones(3, { device = "opencl" }) * 2):sum():item())
  end)

  it("a CPU device whose host cannot hold a buffer: 'out of device memory', not PoCL's abort", function()
    -- PoCL allocates a buffer's host memory at its first use and asserts when
    -- that fails (API fuzzer, seed 2121): tide asks the host for the bytes first
    if not tide.opencl.device_name():find("pthread", 1, true) or H.asan then return end   -- PoCL's CPU device; ASan needs the address space
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write('local tide = require "tide"\n' ..
      'local ok, e = pcall(tide.full, 2 ^ 31, 0, { device = "opencl" })\n' ..
      'io.write(ok and "made it" or tostring(e))\n')
    f:close()
    local p = io.popen(("ulimit -v 6000000; LUA_PATH=%s timeout -s KILL 120 luajit %s 2>&1; echo \"@rc=$?\""):format(
      H.sh_quote(package.path), H.sh_quote(path)))
    local out = p:read("*a")
    p:close()
    os.remove(path)
    assert.truthy(out:find("@rc=0", 1, true), out)
    assert.truthy(out:find("full: out of device memory: 8589934592 bytes", 1, true), out)
    assert.truthy(out:find("the host cannot hold it", 1, true), out)
  end)
end)

H.describe_cl("the device queue", function()
  it("ops, uploads and creation do not wait for the device; reading a value does, once", function()
    local c = tide.randn(1000)
    local s0 = tide.opencl.memory_stats()
    local d = c:to("opencl")
    local y = d
    for _ = 1, 30 do y = (y * 1.001 + 0.5):sin() end
    local z = tide.rand(1000, { device = "opencl" }) + y:softmax(1) + tide.zeros(1000, { device = "opencl" })
    local s1 = tide.opencl.memory_stats()
    assert.equal(s0.syncs, s1.syncs)
    local v = z:sum():item()
    assert.equal(s1.syncs + 1, tide.opencl.memory_stats().syncs)
    assert.is_true(v == v)
    local _ = y:cpu()
    assert.equal(s1.syncs + 2, tide.opencl.memory_stats().syncs)
  end)

  it("an upload copies the host's values when it is made: writing the CPU tensor after does not change it", function()
    for _, n in ipairs({ 7, 100000 }) do
      local c = tide.arange(n):float()
      local d = c:to("opencl")
      c:fill_(-1)
      H.agree(d, tide.arange(n):float(), 0, "n = " .. n)
      local nc = tide.arange(2 * n):float():view(n, 2):t()      -- not contiguous: a private copy is uploaded
      local dn = nc:to("opencl")
      nc:fill_(-1)
      H.agree(dn, tide.arange(2 * n):float():view(n, 2):t():contiguous(), 0, "strided n = " .. n)
    end
  end)
end)

H.describe_cl("device times in the profiler", function()
  it("every launch is a device event with the device's time, under its op", function()
    local x = tide.randn(256, 256, { device = "opencl" })
    local _ = x:sum():item()
    local report = tide.profiler.profile(function()
      local y = (x * 2):exp():softmax(2)
      local m = x:matmul(x)
      return y:sum():item() + m:sum():item()
    end)
    local dev, ops = {}, {}
    for _, e in ipairs(report.events) do
      if e.kind == "device" then dev[#dev + 1] = e end
      if e.kind == "op" then ops[e.name] = true end
    end
    assert.is_true(#dev >= 6, "device events " .. #dev)
    for _, e in ipairs(dev) do
      assert.is_true(e.device_us > 0, e.name .. " has no device time")
      assert.equal("opencl", e.device)
      assert.is_true(e.depth > 0, e.name .. " is under an op")
    end
    assert.truthy(ops.softmax and ops.matmul)
    local text = report:table { print = false, sort_by = "device_time" }
    assert.truthy(text:find("Device", 1, true), text)
    local rows = report:key_averages()
    local gemm = false
    for _, r in ipairs(rows) do gemm = gemm or (r.kind == "device" and r.name:find("gemm") ~= nil and r.device_us > 0) end
    assert.is_true(gemm, "CLBlast's gemm is timed")
  end)
end)

H.describe_cl("random numbers on the device", function()
  local function both(f)
    tide.manual_seed(1234); local want = f("cpu")
    tide.manual_seed(1234); local got = f("opencl")
    return got, want
  end

  it("rand, randn and randint equal the CPU's for the same seed, with no host round trip", function()
    for _, dt in ipairs({ tide.float32, tide.float64 }) do
      for _, n in ipairs({ 1, 5, 1003, 65536 }) do
        local got, want = both(function(d) return tide.rand(n, { dtype = dt, device = d }) end)
        H.agree(got, want, 0, ("rand %s n=%d"):format(dt, n))
        local s0 = tide.opencl.memory_stats().syncs
        got, want = both(function(d) return tide.randn(n, { dtype = dt, device = d }) end)
        assert.equal(s0, tide.opencl.memory_stats().syncs)       -- made there: nothing waited for
        -- OpenCL's log/sin/cos vs glibc's: an ulp at most
        H.agree(got, want, dt == tide.float64 and 1e-14 or 2e-7, ("randn %s n=%d"):format(dt, n), 1e-14)
        assert.is_true(want:std():item() > 0.5 or n < 10)
      end
    end
    for _, dt in ipairs({ tide.int64, tide.int32, tide.uint8, tide.float32, tide.bool }) do
      local lo, hi = dt == tide.uint8 and 3 or -70, dt == tide.bool and 2 or 200
      if dt == tide.bool then lo = 0 end
      local got, want = both(function(d) return tide.randint(lo, hi, { 33, 9 }, { dtype = dt, device = d }) end)
      H.agree(got, want, 0, "randint " .. tostring(dt))
    end
    local got, want = both(function(d) return tide.randint(-2 ^ 40, 2 ^ 40, { 99 }, { dtype = tide.int64, device = d }) end)
    H.agree(got, want, 0, "randint wide")
  end)

  it("the device draws from the CPU's stream: what follows is the same on either", function()
    tide.manual_seed(5); local _ = tide.randn(10, { device = "opencl" }); local a = tide.rand(6)
    tide.manual_seed(5); local _ = tide.randn(10); local b = tide.rand(6)
    assert.equal(0, (a - b):abs():max():item())
    local got, want
    got = select(1, (function() tide.manual_seed(9); return tide.rand_like(tide.zeros(4, 3, { device = "opencl" })) end)())
    tide.manual_seed(9); want = tide.rand(4, 3)
    H.agree(got, want, 0, "rand_like")
  end)

  it("no host allocation: the values are made on the device", function()
    local _ = tide.rand(10, { device = "opencl" })
    collectgarbage()
    local m0 = tide.memory_stats().cpu.allocs
    local x = tide.randn(100000, { device = "opencl" })
    local y = tide.rand(100000, { device = "opencl" })
    local z = tide.zeros(100000, { device = "opencl" })
    assert.equal(m0, tide.memory_stats().cpu.allocs)
    assert.equal("opencl:0", x.device); assert.equal("opencl:0", y.device); assert.equal("opencl:0", z.device)
  end)

  it("without float64 on the device, randn computes in float and stays close", function()
    local out, rc = H.child([[
      local tide = require "tide"
      tide.manual_seed(77); local a = tide.randn(5000, { device = "opencl" })
      tide.manual_seed(77); local b = tide.randn(5000)
      tide.manual_seed(77); local r = tide.rand(5000, { device = "opencl" })
      tide.manual_seed(77); local rc = tide.rand(5000)
      print(("diff %.3g rdiff %.3g"):format((a:cpu() - b):abs():max():item(), (r:cpu() - rc):abs():max():item()))
      print(pcall(tide.rand, 3, { dtype = tide.float64, device = "opencl" }))
    ]], { TIDE_OPENCL_NO_FP64 = "1", TIDE_BUILD = os.getenv("TIDE_BUILD") or "build" })
    assert.equal(0, rc, out)
    local d, rd = out:match("diff (%S+) rdiff (%S+)")
    assert.is_true(tonumber(d) < 1e-4, out)
    assert.equal(0, tonumber(rd), out)
    assert.truthy(out:find("rand: the OpenCL device has no float64", 1, true), out)
  end)
end)

H.describe_cl("CLBlast SGEMM parameters (bench/clblast_tune.lua's sweep)", function()
  local ffi = require "ffi"
  local C = tide.C
  it("td_opencl_gemm_params takes a full Xgemm set and names what CLBlast refuses", function()
    assert.is_true(C.td_opencl_gemm_params("KWG=32 BOGUS") < 0)
    assert.truthy(ffi.string(C.td_last_error()):find("'BOGUS' is not NAME=number", 1, true))
    assert.is_true(C.td_opencl_gemm_params("KWG=32") < 0)
    assert.truthy(ffi.string(C.td_last_error()):find("CLBlast refused Xgemm parameters \"KWG=32\"", 1, true))
  end)

  it("the tuning file's line for this device is applied before the first product, and products stay right", function()
    local name = tide.opencl.device_name()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    -- CLBlast's own defaults for a device it does not know (TOOLCHAIN.md section 4): the same program
    f:write("Some Other Device\tKWG=1\t1.0\n", name, "\tGEMMK=0 KREG=1 KWG=32 KWI=2 MDIMA=16 MDIMC=16 MWG=64 ",
            "NDIMB=8 NDIMC=8 NWG=64 SA=0 SB=0 STRM=0 STRN=0 VWM=4 VWN=4\t0.1\n")
    f:close()
    local code = [[
      local tide = require "tide"
      tide.manual_seed(1)
      local a, b = tide.randn(640, 600), tide.randn(600, 700)
      local before = tide.C.td_opencl_gemm_tuned()
      local d = a:to("opencl"):matmul(b:to("opencl"))
      local rel = (d:cpu() - a:matmul(b)):abs():max():item() / a:matmul(b):abs():max():item()
      print(("tuned %d -> %d rel %.3g"):format(before, tide.C.td_opencl_gemm_tuned(), rel))
    ]]
    local env = { TIDE_BUILD = os.getenv("TIDE_BUILD") or "build" }
    env.TIDE_CLBLAST_TUNING = path
    local out, rc = H.child(code, env)
    f = assert(io.open(path, "w")); f:write(name, "\tKWG=32\t1.0\n"); f:close()
    local out2, rc2 = H.child(code, env)
    os.remove(path)
    assert.equal(0, rc, out)
    assert.truthy(out:find("tuned 0 -> 1 rel", 1, true), out)
    assert.is_true(tonumber(out:match("rel (%S+)")) < 1e-5, out)
    assert.equal(0, rc2, out2)                    -- a refused line warns and is ignored
    assert.truthy(out2:find("tuned 0 -> 0 rel", 1, true), out2)
    assert.truthy(out2:find("CLBlast refused Xgemm parameters", 1, true), out2)
  end)
end)
