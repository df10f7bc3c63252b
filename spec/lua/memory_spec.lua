-- Memory: Lua's GC cannot see C memory, so the Lua layer paces the collector by
-- the runtime's live bytes. Loops of temporaries must stay bounded without the
-- user calling collectgarbage, and x:free() releases at once.
local tide = require "tide"
local H = require "helper"

local MiB = 2 ^ 20

local function rss()
  local f = assert(io.open("/proc/self/statm"))
  local line = f:read("*l")
  f:close()
  return tonumber(line:match("^%d+%s+(%d+)")) * 4096
end

describe("memory", function()
  it("a 100k-iteration loop of temporaries stays bounded with a flat resident size", function()
    collectgarbage()                 -- setup only: start from what earlier specs left
    local base = tide.live_bytes()
    local x = tide.randn(1000)
    local peak, rss10k = 0, nil
    for i = 1, 100000 do
      local y = (x * 2 + 1):exp()
      if i % 50 == 0 then
        local big = tide.zeros(2 ^ 20)            -- 4 MiB, written so its pages are resident
        big:add_(y[1])
      end
      local live = tide.live_bytes()
      if live > peak then peak = live end
      if i == 10000 then rss10k = rss() end
    end
    local grown = peak - base
    -- the pacer collects at max(64 MiB, 2x what survived the last collection)
    assert.is_true(grown < 64 * MiB + 2 * base + 16 * MiB,
      ("live bytes grew by %.1f MiB over a base of %.1f MiB"):format(grown / MiB, base / MiB))
    local drift = rss() - rss10k
    if not H.asan then
      assert.is_true(drift < 24 * MiB, ("resident size grew by %.1f MiB from 10k to 100k iterations"):format(drift / MiB))
    end
  end)
  if H.asan then pending("the resident-size drift is not checked under ASan (its quarantine keeps freed memory)") end

  it("a large working set that is gone does not raise the collection threshold for later loops", function()
    -- 160 MiB live when the pacer collects: its threshold becomes 320 MiB
    local big = {}
    for i = 1, 40 do big[i] = tide.zeros(2 ^ 20) end
    for _ = 1, 100 do local _ = tide.zeros(2 ^ 20) end
    for i = 1, 40 do big[i]:free() end
    big = nil
    collectgarbage()
    local base = tide.live_bytes()
    -- big temporaries and little Lua garbage: only the pacer collects here
    local peak = 0
    for _ = 1, 600 do
      local y = tide.zeros(2 ^ 18)                  -- 1 MiB
      local live = tide.live_bytes()
      if live > peak then peak = live end
    end
    assert.is_true(peak - base < 64 * MiB + 2 * base + 16 * MiB,
      ("live bytes grew by %.1f MiB over a base of %.1f MiB"):format((peak - base) / MiB, base / MiB))
  end)

  it("autograd temporaries are released with their graphs", function()
    collectgarbage()
    local base = tide.live_bytes()
    local w = tide.randn(1000, { requires_grad = true })
    local x = tide.randn(1000)
    local peak = 0
    for _ = 1, 20000 do
      local y = (x * w + 1):exp() * w
      local live = tide.live_bytes()
      if live > peak then peak = live end
      assert(y.requires_grad)
    end
    assert.is_true(peak - base < 64 * MiB + 2 * base + 16 * MiB,
      ("live bytes grew by %.1f MiB"):format((peak - base) / MiB))
  end)

  it("x:free() releases the storage immediately", function()
    local x = tide.zeros(4 * 2 ^ 20)               -- 16 MiB
    local before = tide.live_bytes()
    x:free()
    local dropped = before - tide.live_bytes()
    assert.is_true(dropped >= 16 * MiB, ("live bytes dropped by %d"):format(dropped))
    x:free()                                       -- twice is harmless
    x = nil
    collectgarbage()                               -- and the finalizer does not release again
    collectgarbage()
    assert.is_true(tide.live_bytes() >= 0)
    assert.same({ 2, 2 }, tide.full({ 2 }, 2):totable())
  end)

  it("freeing a view keeps the base's storage", function()
    local x = tide.ones(1 * 2 ^ 20)
    local v = x:view(1024, 1024)
    local before = tide.live_bytes()
    v:free()
    assert.is_true(before - tide.live_bytes() < 4096)
    assert.equal(1, x[-1]:item())
  end)

  it("using a freed tensor is an error, not a crash", function()
    local x = tide.ones(3)
    x:free()
    H.raises(function() local _ = x:numel() end, "used after free()")
    H.raises(function() local _ = x.shape end, "used after free()")
    H.raises(function() local _ = x[1] end, "used after free()")
    H.raises(function() local _ = tide.exp(x) end, "used after free()")
    H.raises(function() local _ = x + 1 end, "add")
    H.raises(function() local _ = tide.ones(3) * x end, "mul")
    assert.equal("tensor(<freed>)", tostring(x))
  end)
end)
