-- Streaming stores (runtime/rt_isa.h): an eager result of 16 MiB or more whose
-- block the caching allocator knows is cold (a cached block the collector freed
-- long after it was made) is written past the caches. The values must be the
-- very ones a plain store writes, in every instruction-set variant, for every
-- kind of kernel that streams, and for an output that starts off a vector
-- boundary. Each case runs in a child process (a fresh cache).
local H = require "spec.helper"
local tide = require "tide"

local PROGRAM = [[
local tide = require "tide"
local C = require("tide.core").C
local F = tide.nn.functional
local function streamed() return tide.memory_stats().streamed end
local function same(a, b) return (a:eq(b):all():item()) == true end

-- leave one cached block of `bytes` that the collector freed, made long ago:
-- the next result of that size lands in it, cold
local function make_cold(bytes, dtype)
  collectgarbage(); collectgarbage(); tide.empty_cache()   -- the earlier cases' blocks gone
  local n = bytes / (dtype == tide.float64 and 8 or 4)
  local a = tide.empty(n, { dtype = dtype })
  local keep = { tide.empty(n, { dtype = dtype }), tide.empty(n, { dtype = dtype }), tide.empty(n, { dtype = dtype }) }
  a = nil
  C.td_collecting(1); collectgarbage(); collectgarbage(); C.td_collecting(0)
  return keep
end

local MiB = 2 ^ 20
local function check(name, bytes, dtype, f)
  local keep = make_cold(bytes, dtype)
  local s0 = streamed()
  local y1 = f()                     -- into the cold block: streamed
  assert(streamed() == s0 + 1, name .. ": the result was not streamed")
  local y2 = f()                     -- fresh pages: plain stores
  assert(streamed() == s0 + 1, name .. ": a fresh block was streamed")
  assert(same(y1, y2), name .. ": streamed and plain results differ")
  local _ = keep
  io.write(name, " ok\n")
end

tide.manual_seed(7)
for _, dt in ipairs(os.getenv("STREAM_F32_ONLY") and { tide.float32 } or { tide.float32, tide.float64 }) do
  local es = dt == tide.float64 and 8 or 4
  local n = 16 * MiB / es
  local x, z = tide.randn(n, { dtype = dt }), tide.randn(n, { dtype = dt })
  check("sin " .. dt.name, 16 * MiB, dt, function() return x:sin() end)
  check("mul " .. dt.name, 16 * MiB, dt, function() return x * z end)
  local m, row = x:view(n / 1024, 1024), z:narrow(1, 1, 1024)
  check("add of a row " .. dt.name, 16 * MiB, dt, function() return m + row end)
  local mask = x:gt(0)
  check("where " .. dt.name, 16 * MiB, dt, function() return tide.where(mask, x, z) end)
  local K = 16384 / es                -- rows of 16 KiB
  local xs = x:view(n / K, K)
  check("softmax " .. dt.name, 16 * MiB, dt, function() return xs:softmax(-1) end)
  check("log_softmax " .. dt.name, 16 * MiB, dt, function() return xs:log_softmax(-1) end)
  local w, b = tide.randn(1024, { dtype = dt }), tide.randn(1024, { dtype = dt })
  check("layer_norm " .. dt.name, 16 * MiB, dt, function() return F.layer_norm(m, { 1024 }, w, b) end)
  check("layer_norm, no affine " .. dt.name, 16 * MiB, dt, function() return F.layer_norm(m, { 1024 }) end)
  check("rms_norm " .. dt.name, 16 * MiB, dt, function() return F.rms_norm(m, { 1024 }, w) end)
end
-- a bool result of 16 MiB
local xb = tide.randn(16 * MiB)
check("gt (bool)", 16 * MiB, tide.float32, function() return xb:gt(0.5) end)
-- an in-place write into a cold block, starting 3 floats past a vector boundary
do
  local n = 8 * MiB
  local keep = make_cold(32 * MiB, tide.float32)
  local a = tide.randn(n)               -- its block is the cold one
  local b = a:clone()
  local s0 = streamed()
  a:narrow(1, 4, n - 9):mul_(3)
  assert(streamed() == s0 + 1, "the in-place write was not streamed")
  b:narrow(1, 4, n - 9):mul_(3)
  assert(same(a, b), "streamed in-place write differs")
  local _ = keep
  io.write("in-place at an offset ok\n")
end
]]

describe("streaming stores", function()
  local function run(env)
    local out, rc = H.child(PROGRAM, env)
    assert.equal(0, rc, out)
    assert.truthy(out:find("in-place at an offset ok", 1, true), out)
    return out
  end

  it("write the plain stores' values, into cold blocks only (2 threads)", function()
    local out = run { TIDE_NUM_THREADS = "2" }
    assert.truthy(out:find("layer_norm float64 ok", 1, true), out)
  end)

  for _, isa in ipairs { "base", "v3" } do
    it("the same in the " .. isa .. " variant (float32)", function()
      if isa == "v3" and tide.config().eager_isa == "x86-64" then
        pending("this CPU has no x86-64-v3")
        return
      end
      run { TIDE_NUM_THREADS = "1", TIDE_ISA = isa, STREAM_F32_ONLY = "1" }
    end)
  end

  it("are off with TIDE_STREAM=0", function()
    local out, rc = H.child([[
local tide = require "tide"
local C = require("tide.core").C
local a = tide.empty(4 * 2 ^ 20)
local keep = { tide.empty(4 * 2 ^ 20), tide.empty(4 * 2 ^ 20), tide.empty(4 * 2 ^ 20) }
a = nil
C.td_collecting(1); collectgarbage(); collectgarbage(); C.td_collecting(0)
local y = tide.randn(4 * 2 ^ 20) * 2
assert(y:sum():item() == y:sum():item())
io.write("streamed ", tide.memory_stats().streamed, "\n")
]], { TIDE_STREAM = "0" })
    assert.equal(0, rc, out)
    assert.truthy(out:find("streamed 0", 1, true), out)
  end)
end)
