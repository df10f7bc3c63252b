--[[
spec/fuzz/run.lua -- the API fuzzer's command line (make fuzz; the seeded run of
spec/fuzz/api_fuzz_spec.lua). Loads tide once, then forks a child per batch of
calls. Prints a summary whose last line is
  fuzz-summary: calls=N seconds=S execs_per_s=E targets=T reached=R findings=F known=K generator_errors=G
writes reproducers to <out>/findings/ and per-target counts to <out>/coverage.txt,
and exits 1 when it found something.
  luajit spec/fuzz/run.lua [--seconds S | --calls N] [--seed N] [--batch N] [--timeout S]
    [--out DIR] [--only PATTERN] [--opencl P] [--hostile P] [--mem MB] [--list] [--selftest]
Environment: FUZZ_SECONDS, FUZZ_SEED, FUZZ_CALLS, FUZZ_OUT (the same, for make fuzz).
--]]
local function dirname(p) return p:match("^(.*)/[^/]*$") or "." end
local here = debug.getinfo(1, "S").source:match("^@(.*)$")
local root = io.popen("cd '" .. dirname(here) .. "/../..' && pwd"):read("*l")
package.path = ("%s/lua/?.lua;%s/lua/?/init.lua;%s/spec/?.lua;"):format(root, root, root) .. package.path

local o = { seed = tonumber(os.getenv("FUZZ_SEED") or "1"), batch = 40, timeout = 30,
  out = os.getenv("FUZZ_OUT") or (root .. "/build/fuzz-api"), hostile = 0.15, p_opencl = nil,
  seconds = tonumber(os.getenv("FUZZ_SECONDS") or ""), calls = tonumber(os.getenv("FUZZ_CALLS") or "") }
local list, selftest = false, false
local i = 1
while i <= #arg do
  local a, v = arg[i], arg[i + 1]
  if a == "--seconds" then o.seconds = tonumber(v); i = i + 1
  elseif a == "--calls" then o.calls = tonumber(v); i = i + 1
  elseif a == "--seed" then o.seed = tonumber(v); i = i + 1
  elseif a == "--batch" then o.batch = tonumber(v); i = i + 1
  elseif a == "--timeout" then o.timeout = tonumber(v); i = i + 1
  elseif a == "--out" then o.out = v; i = i + 1
  elseif a == "--only" then o.only = v; i = i + 1
  elseif a == "--opencl" then o.p_opencl = tonumber(v); i = i + 1
  elseif a == "--hostile" then o.hostile = tonumber(v); i = i + 1
  elseif a == "--mem" then o.mem_mb = tonumber(v); i = i + 1
  elseif a == "--list" then list = true
  elseif a == "--selftest" then selftest = true
  else io.stderr:write("run.lua: unknown argument " .. a .. "\n"); os.exit(2) end
  i = i + 1
end
if not o.seconds and not o.calls then o.seconds = 60 end
if o.out:sub(1, 1) ~= "/" then o.out = root .. "/" .. o.out end

local fs = require "fuzz.forkserver"
-- sanitizers (a build with them, loaded through LD_PRELOAD): stop at the first report
fs.setenv("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1", false)
-- 2 GiB of address space per child beyond what it inherits: a hostile size (2^31
-- and up) fails to allocate instead of filling gigabytes for longer than the
-- timeout (an OpenCL child adds about 500 MiB)
if o.mem_mb == nil then o.mem_mb = 2048 end

fs.mkdir(root .. "/build"); fs.mkdir(o.out)
-- findings of an earlier run in the same directory would read as this run's
for f in io.popen("ls '" .. o.out .. "/findings' 2>/dev/null"):lines() do
  if f:match("%.lua$") then os.remove(o.out .. "/findings/" .. f) end
end
o.tmp = o.out .. "/tmp"
fs.mkdir(o.tmp)

-- load everything once in the parent (children inherit it); nothing here may
-- start threads or open the OpenCL device: a forked child would inherit them dead
local tide = require "tide"
-- every module of lua/tide/ that tide loads on first use (tide.nn, tide.profiler, ...)
for f in io.popen("ls '" .. root .. "/lua/tide'"):lines() do
  local m = f:match("^([%w_]+)%.lua$")
  if m then local _ = tide[m] end
end
local _ = tide.nn
require "tide.compile"; require "tide.serialize"
local engine = require "fuzz.engine"
o.known = require("fuzz.known").match

-- OpenCL: probed in a child (PoCL must not start in the parent)
if o.p_opencl == nil or o.p_opencl > 0 then
  local avail = false
  fs.run(function()
    fs.send(tide.opencl.is_available() and "D yes\n" or "D no\n")
  end, function(line) avail = line == "D yes" end, { timeout = 60, cwd = o.tmp })
  if not avail then o.p_opencl = 0 elseif o.p_opencl == nil then o.p_opencl = 0.04 end
end

local run = engine.new(o)
if list then
  for _, t in ipairs(run.list) do print(t.name) end
  os.exit(0)
end
if selftest then
  -- the fuzzer must catch what it claims to: a crash, a hang, an internal error
  local calls = {
    { target = "selftest.segv", src = 'require("ffi").cast("int *", 8)[0] = 1', call_line = 1 },
    { target = "selftest.hang", src = "local x = 0\nwhile true do x = x + 1 end", call_line = 1 },
    { target = "selftest.internal", src = 'local t = require "tide"\nreturn t.nn.functional.linear(t.randn(2), {})', call_line = 2 },
    { target = "selftest.raw", src = 'error("lua/tide/x.lua:1: attempt to index local \'o\' (a nil value)")', call_line = 1 },
    { target = "selftest.ok", src = 'local t = require "tide"\nprint(t.randn(2) + 1)', call_line = 2 },
  }
  o.timeout = 2
  for k, c in ipairs(calls) do c.id = k; run.cov[c.target] = { calls = 0, reached = 0 } end
  local pending = calls
  while #pending > 0 do pending = run:batch(pending) end
  for _, f in ipairs(run.findings) do print(("selftest: %s %s %s"):format(f.kind, f.target, f.file or "")) end
  print(("selftest: ok=%d"):format(run.stats.ok))
  os.exit(0)
end

run:run()
run:report()
os.exit(#run.findings > 0 and 1 or 0)
