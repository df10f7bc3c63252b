-- The caching allocator (runtime/rt_storage.c): blocks of a dead tensor are
-- kept for reuse, and a request no cached block of up to twice its size can
-- serve takes the front of a larger cached block (a split) instead of fresh
-- pages. Each case runs in a child process, so the cache starts empty.
local H = require "spec.helper"

local PRELUDE = [[
local tide = require "tide"
local function cached() return tide.memory_stats().cpu.cached end
local MiB = 2 ^ 20
]]

describe("the caching allocator", function()
  it("serves small requests from the front of a larger cached block", function()
    local out, rc = H.child(PRELUDE .. [[
tide.empty_cache()
local big = tide.empty(16 * MiB)                -- 64 MiB of float32
big:fill_(1); big:free()
local c0 = cached()
assert(c0 >= 64 * MiB, "the 64 MiB block was cached: " .. c0)
-- 6 MiB results: no cached block of 6-12 MiB, so each is cut from the big one
local parts = {}
for i = 1, 8 do
  parts[i] = tide.full({ 1536 * 1024 }, i)      -- 6 MiB each
end
local c1 = cached()
io.write(("cached %d -> %d\n"):format(c0, c1))
assert(c1 < c0 - 40 * MiB, "the pieces came from the cached block, not fresh pages")
-- the pieces do not overlap: each keeps its own values
for i = 1, 8 do
  local mn, mx = parts[i]:min():item(), parts[i]:max():item()
  assert(mn == i and mx == i, ("piece %d holds %g..%g"):format(i, mn, mx))
end
for i = 1, 8 do parts[i]:free() end
assert(cached() >= c0 - 1 * MiB, "the pieces went back to the cache")
-- a freed piece serves its own size again
local again = tide.full({ 1536 * 1024 }, 9)
assert(again:sum():item() == 9 * 1536 * 1024)
again:free()
tide.empty_cache()
assert(cached() == 0, "empty_cache returns every piece")
-- after the pieces are gone, a large block is fresh and whole again
local whole = tide.full({ 16 * MiB }, 3)
assert(whole:sum():item() == 3 * 16 * MiB)
print("ok")
]])
    assert.equal(0, rc, out)
    assert.truthy(out:find("ok", 1, true), out)
  end)

  it("splits pieces again and releases a block with its last piece (threads)", function()
    -- two threads' kernels allocate and free pieces of one block; under the
    -- sanitizer pass a double free or a leaked block fails the child
    local out, rc = H.child(PRELUDE .. [[
tide.empty_cache()
local big = tide.empty(64 * MiB)                -- 256 MiB
big:fill_(0); big:free()
for round = 1, 20 do
  local xs = {}
  for i = 1, 6 do
    local n = (round * 7 + i * 13) % 5 + 1       -- 1-5 MiB of float32
    xs[i] = tide.randn(n * MiB / 4):mul(2)      -- results of 2-thread kernels
  end
  for i = 1, 6, 2 do xs[i]:free() end
  local s = 0
  for i = 2, 6, 2 do s = s + xs[i]:abs():sum():item() end
  assert(s > 0)
end
collectgarbage(); collectgarbage()
tide.empty_cache()
assert(cached() == 0)
print("ok")
]], { TIDE_NUM_THREADS = "2" })
    assert.equal(0, rc, out)
    assert.truthy(out:find("ok", 1, true), out)
  end)

  it("keeps nothing with TIDE_CACHE_LIMIT=0", function()
    local out, rc = H.child(PRELUDE .. [[
local x = tide.full({ 4 * MiB }, 2)
assert(x:sum():item() == 8 * MiB)
x:free()
assert(cached() == 0, "cached " .. cached())
print("ok")
]], { TIDE_CACHE_LIMIT = "0" })
    assert.equal(0, rc, out)
    assert.truthy(out:find("ok", 1, true), out)
  end)

  it("asks for huge pages for blocks of 4 to 64 MiB with TIDE_HUGEPAGES=1 (by default never)", function()
    -- the advice shows as "hg" in the VmFlags of the mapping that holds the
    -- data (/proc/self/smaps), whether or not the kernel has huge pages to give
    local prog = PRELUDE .. [[
local ffi = require "ffi"
local function advised(t)
  local p = tonumber(ffi.cast("uintptr_t", require("tide.tensor").fields(t).ptr))
  local f = assert(io.open("/proc/self/smaps"))
  local inside
  for line in f:lines() do
    local a, b = line:match("^(%x+)%-(%x+) ")
    if a then inside = p >= tonumber(a, 16) and p < tonumber(b, 16)
    elseif inside and line:match("^VmFlags:") then f:close(); return line:find(" hg", 1, true) ~= nil end
  end
  f:close()
  error("no mapping holds the tensor")
end
local big, small = tide.ones(2 * MiB), tide.ones(MiB / 8)     -- 8 MiB and 512 KiB
assert(big:sum():item() == 2 * MiB and small:sum():item() == MiB / 8)
io.write(("%s %s\n"):format(tostring(advised(big)), tostring(advised(small))))
]]
    local on, rc1 = H.child(prog, { TIDE_HUGEPAGES = "1" })
    local off, rc2 = H.child(prog, {})
    assert(rc1 == 0 and rc2 == 0, on .. off)
    assert.equal("true false\n", on)
    assert.equal("false false\n", off)
  end)
end)
