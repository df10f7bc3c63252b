-- tide.profiler and tide.memory_stats (issue: interactive and embedded use):
-- the events ops, backward nodes, compiled kernels, compiles and ranges leave,
-- their nesting (self <= total), the table, the Chrome trace as strict JSON,
-- and the per-device memory counters.
local tide = require "tide"
local H = require "helper"
local P = tide.profiler

local function find(events, pred)
  local r = {}
  for _, e in ipairs(events) do if pred(e) then r[#r + 1] = e end end
  return r
end

describe("tide.profiler", function()
  it("records ops, backward nodes and ranges, nested, and returns fn's results", function()
    local x = tide.randn(64, 32, { requires_grad = true })
    local w = tide.randn(32, 16, { requires_grad = true })
    local rep, a, b = P.profile(function(k)
      P.record_function("forward", function()
        local y = x:matmul(w):relu():sum()
        y:backward()
      end)
      return k, "two"
    end, nil, 41)
    assert.equal(41, a); assert.equal("two", b)
    local ev = rep.events
    assert.equal(1, #find(ev, function(e) return e.kind == "range" and e.name == "forward" end))
    local mm = find(ev, function(e) return e.kind == "op" and e.name == "matmul" end)
    assert.is_true(#mm >= 3)                            -- forward + two in matmul's backward
    assert.equal("[64,32] [32,16]", mm[1].shapes)
    local nodes = find(ev, function(e) return e.kind == "backward" end)
    local names = {}
    for _, e in ipairs(nodes) do names[e.name] = true end
    assert.is_true(names.matmul_backward and names.relu_backward and names.sum_backward)
    for _, e in ipairs(ev) do
      assert.is_true(e.self_us <= e.time_us + 1e-9 and e.self_us >= 0, e.name)
      assert.is_true(e.time_us >= 0)
    end
    -- the range holds everything: its total is at least the sum of its children's
    local range = find(ev, function(e) return e.kind == "range" end)[1]
    local kids = 0
    for _, e in ipairs(ev) do if e.depth == range.depth + 1 then kids = kids + e.time_us end end
    assert.is_true(kids <= range.time_us + 1e-6)
    -- matmul_backward's ops are its children: its self time excludes them
    local mb = find(nodes, function(e) return e.name == "matmul_backward" end)[1]
    assert.is_true(mb.self_us < mb.time_us)
  end)

  it("counts the bytes ops allocate", function()
    local x = tide.randn(256, 1024)
    local rep = P.profile(function() return x * 2 end)
    local mul = find(rep.events, function(e) return e.name == "mul" end)[1]
    assert.is_true(mul.self_bytes >= 256 * 1024 * 4, tostring(mul.self_bytes))
  end)

  it("shows compiled kernels, compiles and recompiles (with the reason) as events of their own", function()
    local f = tide.compile(function(x) return (x:sin() * 2 + 1):sum(1) end, { name = "prof_f" })
    local rep = P.profile(function()
      f(tide.randn(8, 16))
      f(tide.randn(8, 16))
      f(tide.randn(8, 16, { dtype = tide.float64 }))
    end)
    local comp = find(rep.events, function(e) return e.kind == "compile" end)
    assert.equal(2, #comp)
    assert.equal("compile prof_f", comp[1].name)
    assert.truthy(comp[2].name:find("^recompile prof_f %(.*dtype"), comp[2].name)
    assert.is_true(#find(rep.events, function(e) return e.kind == "kernel" and e.name:find("^k_") end) >= 3)
    assert.is_true(#find(rep.events, function(e) return e.kind == "trace" and e.name == "sin" end) == 3)
  end)

  it("prints a table sorted as asked, limited, by kind", function()
    local x = tide.randn(128, 128)
    local rep = P.profile(function() for _ = 1, 5 do local _ = x:matmul(x):add(1):exp() end end)
    local text = rep:table { sort_by = "calls", limit = 2, print = false }
    local lines = {}
    for l in text:gmatch("[^\n]+") do lines[#lines + 1] = l end
    assert.truthy(lines[2]:find("Name", 1, true) and lines[2]:find("Self %", 1, true))
    assert.equal(2 + 3 + 2, #lines)                     -- rulers and header, 2 rows, ruler and total
    local rows = rep:key_averages()
    table.sort(rows, function(a, b) return a.self_us > b.self_us end)
    local by_self = rep:table { limit = 1, print = false }
    assert.truthy(by_self:find(rows[1].name, 1, true))
    local only = rep:table { kind = "backward", print = false }
    assert.falsy(only:find("matmul", 1, true))
    H.raises(function() rep:table { sort_by = "speed" } end, "table: sort_by must be one of")
    H.raises(function() rep:table { limt = 3 } end, "table: unknown option 'limt'")
  end)

  it("exports a Chrome trace that parses as strict JSON", function()
    local rep = P.profile(function() P.record_function("step", function() local _ = tide.ones(3) + 1 end) end)
    local path = os.tmpname()
    rep:export_chrome_trace(path)
    local f = assert(io.open(path))
    local text = f:read("*a"); f:close(); os.remove(path)
    local doc = require("tide.serialize").json_decode(text)
    local evs = doc.map.traceEvents                       -- objects decode to { keys =, map = }
    assert.is_true(#evs == #rep.events and #evs >= 2)
    local names = {}
    for _, o in ipairs(evs) do
      local e = o.map
      assert.equal("X", e.ph); assert.is_number(e.ts); assert.is_number(e.dur)
      names[e.name] = e.cat
    end
    assert.equal("range", names.step)
    assert.equal("op", names.add)
  end)

  it("reports errors of fn and never stays on", function()
    H.raises(function() P.profile(function() error("boom") end) end, "boom")
    local rep = P.profile(function() end)
    assert.equal(0, #rep.events)
    H.raises(function() P.profile(function() P.profile(function() end) end) end, "already running")
    H.raises(function() P.profile(3) end, "bad argument #1 to 'profile'")
    assert.equal(0, tide.C.td_profiler_enable(0))
  end)
end)

describe("tide.memory_stats", function()
  it("counts live and peak storage bytes per device and allocations", function()
    collectgarbage(); collectgarbage()
    tide.reset_peak_memory_stats()
    local m0 = tide.memory_stats()
    assert.equal(m0.cpu.live, m0.cpu.peak)
    local big = tide.empty(1024, 1024)                  -- 4 MiB
    local m1 = tide.memory_stats()
    assert.equal(m0.cpu.live + 4 * 2 ^ 20, m1.cpu.live)
    assert.equal(m1.cpu.live, m1.cpu.peak)
    assert.equal(m0.cpu.allocs + 1, m1.cpu.allocs)
    big:free()
    local m2 = tide.memory_stats()
    assert.equal(m0.cpu.live, m2.cpu.live)
    assert.equal(m1.cpu.peak, m2.cpu.peak)              -- the peak stays until reset
    assert.is_true(m2.cpu.cached >= 4 * 2 ^ 20)         -- the block went to the caching allocator
    assert.is_true(m2.host_total >= m2.cpu.live)
    if H.has_opencl() then
      local d0 = tide.memory_stats().opencl.live
      local t = tide.empty(1000, { device = "opencl" })
      assert.equal(d0 + 4000, tide.memory_stats().opencl.live)
      t:free()
      assert.equal(d0, tide.memory_stats().opencl.live)
    end
  end)
end)
