-- tide.progress: plain log lines off a terminal, one redrawn line on a terminal,
-- rate/ETA from the clock, smoothed running values.
local tide = require "tide"
local H = require "helper"

local function sink()
  local s = { buf = {} }
  function s:write(...) for _, v in ipairs { ... } do self.buf[#self.buf + 1] = v end end
  function s:flush() end
  function s:text() return table.concat(self.buf) end
  return s
end

local function fake_clock()
  local t = 100
  return function() return t end, function(dt) t = t + dt end
end

describe("progress bar", function()
  it("prints plain lines every `every` steps and once at the end when not a terminal", function()
    local out, clock, advance = sink(), fake_clock()
    local bar = tide.progress.bar(10, { desc = "epoch 1", out = out, tty = false, every = 4, clock = clock, smoothing = 0.5 })
    for i = 1, 10 do advance(0.5); bar:update(1, { loss = 10 - i }) end
    bar:close()
    local lines = {}
    for l in out:text():gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.are.equal(3, #lines)                         -- at 4, 8 and 10
    assert.are.equal("epoch 1 4/10 [00:02<00:03, 2.00 it/s] loss=6.875", lines[1])     -- 9, 8.5, 7.75, 6.875
    assert.is_truthy(lines[3]:find("10/10 [00:05<00:00, 2.00 it/s]", 1, true))
    assert.is_nil(out:text():find("\r", 1, true))
  end)

  it("redraws one line on a terminal and ends it on close", function()
    local out, clock, advance = sink(), fake_clock()
    local bar = tide.progress.bar(4, { out = out, tty = true, clock = clock, width = 8 })
    for _ = 1, 4 do advance(1); bar:update() end
    bar:close(); bar:close()
    local text = out:text()
    local _, redraws = text:gsub("\r", "")
    assert.are.equal(5, redraws)                        -- 4 updates + the final line
    assert.is_truthy(text:find("100% |########| 4/4 [00:04<00:00, 1.00 it/s]\n", 1, true))
    assert.is_truthy(text:find(" 50% |####    | 2/4", 1, true))
  end)

  it("counts without a total, and rejects a bad total", function()
    local out, clock, advance = sink(), fake_clock()
    local bar = tide.progress.bar(nil, { out = out, tty = false, every = 2, clock = clock })
    advance(2); bar:update(2)
    assert.are.equal("2 [00:02, 1.00 it/s]\n", out:text())
    H.raises(function() tide.progress.bar(-1) end, "bad argument #1 to 'bar' (non-negative number or nil expected, got -1)")
  end)
end)
