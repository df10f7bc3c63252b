-- The API fuzzer's seeded run (spec/fuzz/run.lua, FUZZING.md): every op-table row
-- and every public function of tide.*, tide.nn.* and tide.nn.functional is called
-- (with valid arguments first, then with random, boundary and hostile ones) in
-- forked children, and nothing crashes, hangs or raises an error that points
-- into tide's own files. The coverage is checked here against tide's tables as
-- this process sees them, so a function added later is part of the check.
local tide = require "tide"
local ffi = require "ffi"

local root = debug.getinfo(1, "S").source:match("^@(.*)/spec/fuzz/api_fuzz_spec%.lua$") or "."
local out_dir = root .. "/build/fuzz-spec"

local function run(args)
  local p = io.popen(("luajit %s/spec/fuzz/run.lua --out %s %s 2>&1"):format(root, out_dir, args))
  local out = p:read("*a")
  p:close()
  return out
end

local function summary(out)
  local s = {}
  local line = out:match("fuzz%-summary: ([^\n]*)")
  assert(line, "no summary line in the fuzzer's output:\n" .. out)
  for k, v in line:gmatch("(%S+)=(%S+)") do s[k] = tonumber(v) end
  return s
end

describe("API fuzzer", function()
  it("catches a crash, a hang and errors that point into tide, with reproducers", function()
    local out = run("--selftest")
    -- (under ASan the SIGSEGV is ASan's report: a sanitizer finding)
    assert(out:find("selftest: crash selftest.segv", 1, true) or out:find("selftest: sanitizer selftest.segv", 1, true), out)
    assert(out:find("selftest: hang selftest.hang", 1, true), out)
    assert(out:find("selftest: position selftest.internal", 1, true), out)
    assert(out:find("selftest: internal selftest.raw", 1, true), out)
    assert(out:find("selftest: ok=1", 1, true), out)
    local repro = out:match("selftest: %a+ selftest%.segv (%S+)")
    local f = assert(io.open(repro, "r"), "no reproducer file " .. tostring(repro))
    assert(f:read("*a"):find('require("ffi").cast("int *", 8)[0] = 1', 1, true))
    f:close()
  end)

  it("a seeded run reaches every target and finds nothing", function()
    -- 4000 calls (about 20-40 s here); the cap keeps a loaded machine within a minute
    local out = run("--seed 1 --calls 4000 --seconds 45")
    local s = summary(out)
    print(("\n  API fuzzer: %d calls in %.1f s (%d/s), %d/%d targets reached"):format(s.calls, s.seconds,
      s.execs_per_s, s.reached, s.targets))
    assert(s.generator_errors == 0, "the fuzzer made snippets that do not compile:\n" .. out)
    assert(s.findings == 0, "the fuzzer found something:\n" .. out)
    assert(s.reached == s.targets, "targets not reached:\n" .. out)
    assert(s.calls >= s.targets, out)
  end)

  it("covered every op-table row and every public tide.*, tide.nn.* and F.* function", function()
    local cov, skipped = {}, {}
    local f = assert(io.open(out_dir .. "/coverage.txt", "r"), "no coverage file: run the seeded run first")
    for line in f:lines() do
      local name, a, b = line:match("^(%S+) (%S+) (%S+)$")
      if a == "skipped" then skipped[name] = b else cov[name] = tonumber(b) end
    end
    f:close()
    local want = {}
    for i = 0, tide.C.td_op_count() - 1 do want[#want + 1] = "op." .. ffi.string(tide.C.td_op_name(i)) end
    local function public(k) return type(k) == "string" and k:sub(1, 1) ~= "_" end
    for k, v in pairs(tide) do if public(k) and type(v) == "function" then want[#want + 1] = "tide." .. k end end
    for k, v in pairs(tide.nn) do
      if public(k) and (type(v) == "function" or (type(v) == "table" and rawget(v, "__is_class"))) then
        want[#want + 1] = "nn." .. k
      end
    end
    for k, v in pairs(tide.nn.functional) do if public(k) and type(v) == "function" then want[#want + 1] = "F." .. k end end
    local missing = {}
    for _, name in ipairs(want) do
      if skipped[name] then
        assert(#skipped[name] > 0, name .. " is skipped without a reason")
      elseif not cov[name] or cov[name] < 1 then
        missing[#missing + 1] = name
      end
    end
    table.sort(missing)
    assert(#missing == 0, "not called: " .. table.concat(missing, ", "))
    assert(#want > 300, "too few functions enumerated: " .. #want)
  end)
end)
