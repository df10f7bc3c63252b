--[[
fuzz.engine -- the API fuzzer's loop: builds calls (fuzz.targets), runs them in
batches in forked children (fuzz.forkserver), judges each one (fuzz.check),
keeps one finding per signature with a standalone reproducer (the failing call
alone when that reproduces it, else the shortest prefix of its batch found),
and counts coverage per target.
Child protocol, one line each: "S i" (call i starts), "D i status detail msg"
(call i ended; fields escaped), "X msg" (the harness itself failed).
--]]
local ffi = require "ffi"
local fs = require "fuzz.forkserver"
local check = require "fuzz.check"
local targets = require "fuzz.targets"
local gen = require "fuzz.gen"

local E = {}

local function esc(s) return (tostring(s):gsub("[%c\\ ]", function(c) return ("\\%03d"):format(c:byte()) end)) end
local function unesc(s) return (s:gsub("\\(%d%d%d)", function(d) return string.char(tonumber(d)) end)) end

local function now()
  return require("tide.progress").clock()
end
E.now = now

-- -- Child --------------------------------------------------------------------------------------------

-- Run the calls of one batch in this (forked) process, reporting over the pipe.
local function child_batch(calls, o)
  local tide = require "tide"
  local C = tide.C
  local threads = C.td_get_num_threads()
  local float32 = tide.float32
  for i, call in ipairs(calls) do
    fs.send(("S %d\n"):format(i))
    fs.alarm(o.timeout)
    local status, detail, msg = "ok", "", ""
    local f, perr = loadstring(call.src, "=fuzz")
    if not f then
      status, detail, msg = "generator", "the snippet does not compile", perr
    else
      local ok, err = pcall(f)
      if not ok then
        status, detail = check.classify(err, call.call_line)
        msg = tostring(err)
      end
      f = nil
      collectgarbage()           -- run finalizers now, so a bad free shows at this call
    end
    -- state a call must not leave behind
    local stop = false
    if C.td_is_tracing() ~= 0 then
      status, detail, stop = "state", "tracing is still on after the call returned", true
    else
      C.td_set_grad_enabled(1)
      pcall(tide.set_default_dtype, float32)
      C.td_set_num_threads(threads)
      local ok, v = pcall(function() return (tide.ones(3) + 1):sum():item() end)
      if not ok or v ~= 6 then
        status, detail, stop = "state", "a plain op gives " .. tostring(v) .. " after the call", true
        msg = ok and "" or tostring(v)
      end
    end
    fs.alarm(0)
    fs.send(("D %d %s %s %s\n"):format(i, status, esc(detail or ""), esc(msg or "")))
    if stop then return end
  end
end

-- -- Parent: one batch ------------------------------------------------------------------------------------

local SAN = { "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:", "ThreadSanitizer", "UndefinedBehaviorSanitizer" }

local function read_file(p)
  local f = io.open(p, "rb")
  if not f then return "" end
  local s = f:read("*a")
  f:close()
  return s
end

-- Run calls in one child. Returns results[i] = {status, detail, msg} for the calls
-- that ended, and `dead` = {index, kind, detail} when the child died in a call.
function E.run_batch(calls, o)
  local results, started, harness = {}, 0, nil
  local errp = o.tmp .. "/stderr.txt"
  local ended = fs.run(function() child_batch(calls, o) end, function(line)
    local tag, rest = line:match("^(%u) (.*)$")
    if tag == "S" then started = tonumber(rest)
    elseif tag == "D" then
      local i, st, d, m = rest:match("^(%d+) (%S+) (%S*) ?(.*)$")
      results[tonumber(i)] = { status = st, detail = unesc(d or ""), msg = unesc(m or "") }
    elseif tag == "X" then harness = rest end
  end, { timeout = o.timeout, stderr_path = errp, cwd = o.tmp, mem_mb = o.mem_mb })
  local serr = read_file(errp)
  local dead
  local at = (started > 0 and results[started] == nil) and started or nil
  for _, p in ipairs(SAN) do
    local s = serr:find(p, 1, true)
    if s then
      dead = { index = at or #calls, kind = "sanitizer", detail = serr:sub(math.max(1, s - 200), s + 1500) }
      break
    end
  end
  if not dead then
    if ended.signal then
      local hang = ended.signal == fs.SIGALRM or ended.killed
      dead = { index = at or started, kind = hang and "hang" or "crash",
        detail = hang and ("no answer within %d s"):format(o.timeout) or ("killed by %s"):format(fs.signame[ended.signal] or ended.signal) }
    elseif harness then
      dead = { index = at or started, kind = "harness", detail = harness }
    elseif ended.exit ~= 0 or (at and #calls > 0) then
      dead = { index = at or started, kind = "exit", detail = ("the process exited (code %d) during the call"):format(ended.exit or -1) }
    end
  end
  if dead and dead.index == 0 then dead.index = 1 end
  return results, dead, serr
end

-- -- Parent: the run --------------------------------------------------------------------------------------

local Run = {}
Run.__index = Run

function E.new(o)
  local tide = require "tide"
  local self = setmetatable({ o = o, tide = tide }, Run)
  self.list = targets.enumerate(tide)
  self.by_name = {}
  for _, t in ipairs(self.list) do self.by_name[t.name] = t end
  if o.only then                  -- comma-separated Lua patterns
    local l = {}
    for _, t in ipairs(self.list) do
      for pat in o.only:gmatch("[^,]+") do if t.name:find(pat) then l[#l + 1] = t; break end end
    end
    self.list = l
    if #l == 0 then error("fuzz: no target matches --only " .. o.only, 0) end
  end
  self.g = gen.new(o.seed, { hostile = o.hostile, p_opencl = o.p_opencl, tmp = o.tmp })
  self.cov = {}          -- name -> { calls =, reached = }
  for _, t in ipairs(self.list) do self.cov[t.name] = { calls = 0, reached = 0 } end
  self.findings, self.by_sig, self.known = {}, {}, {}
  self.stats = { calls = 0, batches = 0, ok = 0, err = 0, setup = 0, generator = 0 }
  self.ncall = 0
  return self
end

function Run:next_call(t, valid)
  self.ncall = self.ncall + 1
  local c = targets.build(t, self.g, valid, self.o.seed * 100003 + self.ncall)
  c.id = self.ncall
  return c
end

-- Does this call (after the prefix) still fail the same way? Returns the failure kind or nil.
function Run:replay(prefix, call)
  local calls = {}
  for i = 1, #prefix do calls[i] = prefix[i] end
  calls[#calls + 1] = call
  local res, dead = E.run_batch(calls, self.o)
  if dead and dead.index == #calls then return dead.kind end
  local r = res[#calls]
  if r and check.FAILURES[r.status] then return r.status end
end

-- The shortest prefix (greedy chunk removal, a bounded number of replays) that
-- still makes `call` fail with `kind`.
function Run:minimize(prefix, call, kind)
  if self:replay({}, call) == kind then return {} end
  if #prefix == 0 or self:replay(prefix, call) ~= kind then return nil end
  local p, chunk, tries = prefix, math.max(1, math.floor(#prefix / 2)), 0
  while chunk >= 1 and tries < 16 do
    local removed = false
    local i = 1
    while i <= #p and tries < 16 do
      local q = {}
      for j = 1, #p do if j < i or j >= i + chunk then q[#q + 1] = p[j] end end
      tries = tries + 1
      if self:replay(q, call) == kind then p, removed = q, true else i = i + chunk end
    end
    if not removed then chunk = math.floor(chunk / 2) end
  end
  return p
end

local function reproducer(f)
  local lines = { "-- tide API fuzzer finding: " .. f.kind .. " in " .. f.target,
    "-- " .. (f.detail or ""):gsub("\n", "\n-- "),
    "-- message: " .. tostring(f.msg or ""):gsub("\n", "\n-- "),
    ("-- seed %d, call %d; run: LUA_PATH=\"$PWD/lua/?.lua;$PWD/lua/?/init.lua;;\" luajit this_file.lua"):format(f.seed, f.id) }
  if f.prefix and #f.prefix > 0 then
    lines[#lines + 1] = "-- the calls before it in its batch are needed to reproduce it:"
    for _, c in ipairs(f.prefix) do
      lines[#lines + 1] = ("pcall(loadstring(%q, \"=fuzz\"))"):format(c.src)
    end
    lines[#lines + 1] = "-- the failing call:"
    lines[#lines + 1] = ("assert(loadstring(%q, \"=fuzz\"))()"):format(f.src)
  elseif f.prefix == nil then
    lines[#lines + 1] = "-- (did not reproduce alone or after its batch: flaky; the call was:)"
    lines[#lines + 1] = f.src
  else
    lines[#lines + 1] = f.src
  end
  return table.concat(lines, "\n") .. "\n"
end
E.reproducer = reproducer

function Run:finding(kind, call, detail, msg, prefix)
  local silent = kind == "crash" or kind == "hang" or kind == "sanitizer" or kind == "exit"
  local sig = check.signature(kind, call.target, silent and "" or msg)
  local known = self.o.known and self.o.known(kind, call.target, msg or detail or "", call.src)
  local f = self.by_sig[sig]
  if f then f.count = f.count + 1; return end
  f = { kind = kind, target = call.target, detail = detail, msg = msg, src = call.src, id = call.id, seed = self.o.seed,
    count = 1, sig = sig, known = known }
  self.by_sig[sig] = f
  if known then self.known[#self.known + 1] = f; return end
  self.findings[#self.findings + 1] = f
  -- a standalone reproducer: the call alone, else after the shortest needed part of its batch
  local p = self:minimize(prefix or {}, call, kind)
  f.prefix = p
  local dir = self.o.out .. "/findings"
  fs.mkdir(self.o.out); fs.mkdir(dir)
  f.file = ("%s/%03d-%s-%s.lua"):format(dir, #self.findings, kind, call.target:gsub("[^%w_.]", "_"))
  local h = io.open(f.file, "w")
  if h then h:write(reproducer(f)); h:close() end
  if self.o.verbose ~= false then
    io.stderr:write(("fuzz: FINDING %s in %s: %s\n  %s\n  reproducer: %s\n"):format(kind, call.target,
      detail or "", tostring(msg or ""):sub(1, 300), f.file))
  end
end

-- Run a batch and account for it; returns the calls that did not run (after a death).
function Run:batch(calls)
  local res, dead = E.run_batch(calls, self.o)
  self.stats.batches = self.stats.batches + 1
  local last = dead and dead.index or #calls
  for i = 1, last do
    local c, r = calls[i], res[i]
    local cov = self.cov[c.target]
    if r then
      self.stats.calls = self.stats.calls + 1
      if cov then
        cov.calls = cov.calls + 1
        if r.status ~= "setup" and r.status ~= "generator" then cov.reached = cov.reached + 1 end
      end
      self.stats[r.status] = (self.stats[r.status] or 0) + 1
      if check.FAILURES[r.status] then
        local pre = {}
        for j = 1, i - 1 do pre[j] = calls[j] end
        self:finding(r.status, c, r.detail, r.msg, pre)
      elseif r.status == "generator" then
        self.gen_errors = self.gen_errors or {}
        self.gen_errors[#self.gen_errors + 1] = c.target .. ": " .. r.msg
      end
    elseif dead and i == dead.index then
      self.stats.calls = self.stats.calls + 1
      if cov then cov.calls = cov.calls + 1; cov.reached = cov.reached + 1 end
      self.stats[dead.kind] = (self.stats[dead.kind] or 0) + 1
      local pre = {}
      for j = 1, i - 1 do pre[j] = calls[j] end
      self:finding(dead.kind, c, dead.detail, "", pre)
    end
  end
  -- the calls after a death (or after a state finding, which ends the batch) run again later
  local done = dead and dead.index or 0
  if not dead then for i = 1, #calls do if res[i] then done = i end end end
  local rest = {}
  for i = done + 1, #calls do rest[#rest + 1] = calls[i] end
  return rest
end

-- The whole run: every target once with valid arguments (twice more for those not
-- reached), then random targets with hostile arguments until the budget is spent.
function Run:run()
  local o = self.o
  local t0 = now()
  local deadline = o.seconds and (t0 + o.seconds) or math.huge
  local max_calls = o.calls or math.huge
  -- calls that touch OpenCL run in batches of their own: a child opens the device
  -- and loads each kernel once, so mixing them into every batch would pay that everywhere
  local queues = { cpu = {}, cl = {} }
  local function flush(q, force)
    local pending = queues[q]
    while #pending >= o.batch or (force and #pending > 0) do
      local b = {}
      for i = 1, math.min(o.batch, #pending) do b[i] = pending[i] end
      local n = #b
      local rest = self:batch(b)
      local nxt = {}
      for _, c in ipairs(rest) do nxt[#nxt + 1] = c end
      for i = n + 1, #pending do nxt[#nxt + 1] = pending[i] end
      pending = nxt
      queues[q] = pending
      if now() > deadline then return end
    end
  end
  local function push(c)
    local q = c.src:find('"opencl', 1, true) and "cl" or "cpu"
    local l = queues[q]
    l[#l + 1] = c
    if #l >= o.batch then flush(q, false) end
  end
  -- coverage pass, in a seeded order
  local order = {}
  for i, t in ipairs(self.list) do order[i] = t end
  for i = #order, 2, -1 do local j = self.g:int(1, i); order[i], order[j] = order[j], order[i] end
  -- (a target whose random but valid arguments failed before its call is retried: up to 8 passes)
  for pass = 1, 8 do
    for _, t in ipairs(order) do
      if pass == 1 or self.cov[t.name].reached == 0 then push(self:next_call(t, true)) end
    end
    flush("cpu", true); flush("cl", true)
  end
  self.coverage_time = now() - t0
  -- random pass
  while now() < deadline and self.stats.calls < max_calls do
    push(self:next_call(self.list[self.g:int(1, #self.list)], false))
  end
  flush("cpu", true); flush("cl", true)
  self.elapsed = now() - t0
  return self
end

-- Summary lines; the last one is machine-readable.
function Run:report(out)
  out = out or io.stdout
  local s = self.stats
  local total, reached, unreached = 0, 0, {}
  for _, t in ipairs(self.list) do
    total = total + 1
    if self.cov[t.name].reached > 0 then reached = reached + 1 else unreached[#unreached + 1] = t.name end
  end
  local el = self.elapsed or 0
  out:write(("fuzz: seed %d, %d calls in %d children, %.1f s (%.0f calls/s; coverage pass %.1f s)\n"):format(
    self.o.seed, s.calls, s.batches, el, s.calls / math.max(el, 1e-9), self.coverage_time or 0))
  out:write(("fuzz: %d ok, %d clean errors, %d not reached (argument setup failed)\n"):format(s.ok, s.err, s.setup))
  out:write(("fuzz: targets reached %d/%d%s\n"):format(reached, total,
    #unreached > 0 and (" (not reached: " .. table.concat(unreached, ", ") .. ")") or ""))
  for _, f in ipairs(self.known) do
    out:write(("fuzz: known (tracked elsewhere): %s in %s (%dx): %s\n"):format(f.kind, f.target, f.count,
      tostring(f.msg ~= "" and f.msg or f.detail):gsub("\n.*", ""):sub(1, 200)))
  end
  for _, f in ipairs(self.findings) do
    out:write(("fuzz: FINDING %s in %s (%dx): %s %s\n      reproducer: %s\n"):format(f.kind, f.target, f.count,
      f.detail or "", tostring(f.msg or ""):gsub("\n.*", ""):sub(1, 200), f.file or "?"))
  end
  if self.gen_errors then
    out:write(("fuzz: %d snippets did not compile (a fuzzer bug), e.g. %s\n"):format(#self.gen_errors, self.gen_errors[1]))
  end
  out:write(("fuzz-summary: calls=%d seconds=%.1f execs_per_s=%.0f targets=%d reached=%d findings=%d known=%d generator_errors=%d\n")
    :format(s.calls, el, s.calls / math.max(el, 1e-9), total, reached, #self.findings, #self.known, self.gen_errors and #self.gen_errors or 0))
  -- coverage file: target, calls, reached
  local h = io.open(self.o.out .. "/coverage.txt", "w")
  if h then
    for _, t in ipairs(self.list) do h:write(("%s %d %d\n"):format(t.name, self.cov[t.name].calls, self.cov[t.name].reached)) end
    for name, why in pairs(targets.SKIP) do h:write(("%s skipped %s\n"):format(name, why:gsub("%s", "_"))) end
    h:close()
  end
end

E.Run = Run
return E
