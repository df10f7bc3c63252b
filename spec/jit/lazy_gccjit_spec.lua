-- A small runtime to ship: libtide.so does not link libgccjit (jit/cg_gccjit_dl.h
-- loads it when the first kernel is compiled), so a host without it runs
-- eagerly. Children of this spec hide it with TIDE_GCCJIT=/nonexistent (the
-- file tide.compile would dlopen) and no disk cache: eager suites pass,
-- libgccjit is never mapped, tide.compile raises the clear error (or runs
-- eagerly when asked to), and with the library present it is mapped only
-- once something is compiled.
local build = os.getenv("TIDE_BUILD") or "build"

local function sh(cmd)
  local p = io.popen("(" .. cmd .. ") 2>&1; echo \"__rc=$?\"")
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("__rc=(%d+)%s*$"))
  return (out:gsub("__rc=%d+%s*$", "")), rc
end

local function child(env, code)
  local f = os.tmpname()
  local h = io.open(f, "w"); h:write(code); h:close()
  local out, rc = sh(("env TIDE_CACHE_DIR= %s luajit %s"):format(env, f))
  os.remove(f)
  return out, rc
end

local PRELUDE = [[
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local tide = require "tide"
local function mapped()
  local f = io.open("/proc/self/maps"); local m = f:read("*a"); f:close()
  return m:find("libgccjit", 1, true) ~= nil
end
]]

describe("libgccjit loaded lazily", function()
  it("is not among libtide.so's NEEDED libraries", function()
    local out = sh("readelf -d " .. build .. "/libtide.so")
    local needed = {}
    for lib in out:gmatch("%(NEEDED%)%s+Shared library: %[([^%]]+)%]") do needed[#needed + 1] = lib end
    assert.is_true(#needed >= 4, out)
    local allowed = { ["libc.so.6"] = true, ["libm.so.6"] = true, ["libmvec.so.1"] = true,
      ["libopenblas.so.0"] = true, ["ld-linux-x86-64.so.2"] = true,
      -- the OpenCL half (lazy ICD loader and CLBlast) is not done yet
      ["libOpenCL.so.1"] = true, ["libclblast.so.1"] = true,
      -- make test-asan's build
      ["libasan.so.8"] = true, ["libubsan.so.1"] = true }
    for _, lib in ipairs(needed) do assert.is_true(allowed[lib], lib .. " is NEEDED") end
  end)

  it("runs eagerly without it and tide.compile says what is missing", function()
    local out, rc = child("TIDE_GCCJIT=/nonexistent", PRELUDE .. [[
local nn, F = tide.nn, tide.nn.functional
tide.manual_seed(1)
local model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
local opt = tide.optim.Adam(model:parameters(), { lr = 1e-2 })
local x, y = tide.randn(16, 4), tide.randint(1, 4, { 16 })
local first
for i = 1, 20 do
  opt:zero_grad()
  local loss = F.cross_entropy(model(x), y)
  loss:backward(); opt:step()
  first = first or loss:item()
  if i == 20 then io.write("loss ", first, " ", loss:item(), "\n") end
end
io.write("mapped ", tostring(mapped()), "\n")
local step = tide.compile(function(a) return (a:sin() * 2 + 1):sum() end)
local ok, err = pcall(step, tide.randn(33, 7))
io.write("compile ", tostring(ok), " ", tostring(err), "\n")
local eager = tide.compile(function(a) return (a:sin() * 2 + 1):sum() end, { fallback = "eager" })
local a = tide.randn(33, 7)
io.write("fallback ", tostring((eager(a) - (a:sin() * 2 + 1):sum()):abs():item() < 1e-4), "\n")
io.write("mapped ", tostring(mapped()), "\n")
]])
    assert.are.equal(0, rc, out)
    local l0, l1 = out:match("loss (%S+) (%S+)")
    assert.is_true(tonumber(l1) < tonumber(l0), out)
    assert.matches("compile false [^\n]*tide%.compile: /nonexistent not found %(apt install libgccjit0%); "
      .. "eager ops still work", out)
    assert.matches("fallback true", out)
    assert.is_nil(out:find("mapped true", 1, true), out)
  end)

  it("runs eager spec suites without it", function()
    local out, rc = sh("TIDE_GCCJIT=/nonexistent TIDE_CACHE_DIR= sh scripts/run-tests.sh "
      .. "spec/runtime/elementwise_spec.lua spec/lua/nn_spec.lua spec/lua/optim_spec.lua spec/lua/view_spec.lua "
      .. "spec/jit/autograd_spec.lua spec/lua/losses_spec.lua")
    assert.are.equal(0, rc, out)
    local passed, failed = out:match("(%d+) passed, (%d+) failed")
    assert.is_true(tonumber(passed) > 200 and tonumber(failed) == 0, out)
  end)

  it("maps it only when a kernel is compiled", function()
    local out, rc = child("", PRELUDE .. [[
local x = tide.randn(8, 8, { requires_grad = true })
local y = (x:matmul(x) + 1):relu():sum(); y:backward()
io.write("eager ", tostring(mapped()), "\n")
local f = tide.compile(function(a) return (a:exp() + 1):sum() end)
f(tide.randn(19, 3))
io.write("compiled ", tostring(mapped()), "\n")
]])
    assert.are.equal(0, rc, out)
    assert.matches("eager false\ncompiled true", out)
  end)
end)
