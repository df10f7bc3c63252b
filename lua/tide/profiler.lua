--[[
tide.profiler -- where the time goes, as PyTorch 1.9's torch.profiler:
  local report, ... = tide.profiler.profile(fn, opts, ...)   -- runs fn(...); its results follow the report
  report:table{ sort_by = "self_time", limit = 10 }          -- prints (and returns) the table
  report:export_chrome_trace("trace.json")                    -- trace-event JSON: Perfetto, chrome://tracing
  tide.profiler.record_function(name, fn, ...)               -- a named range around fn(...)
Events come from C (runtime/rt_prof.c): every op through the dispatcher,
every backward node, every step of a compiled plan (kernels by name, eager
steps by op), every compile and recompile (named with its reason), and the
ranges of record_function. Self time is an event's time minus its children's
(ops a backward node or a composite op runs). Bytes are storage bytes
allocated inside an event. Times are wall clock on the host: an OpenCL op is
timed as the host sees it (its launches are queued, not waited for). Each
launch on the OpenCL queue is also a "device" event (a child of its op or
kernel step) whose device_us is the time the device ran it, read from the
queue's profiling info when the profile ends.
--]]
local core = require "tide.core"
local args = require "tide.args"
local ffi, C = core.ffi, core.C

local P = {}

local KIND = { [0] = "op", "backward", "kernel", "compile", "range", "trace", "device" }

local Report = {}
Report.__index = Report

local function pack(...) return { n = select("#", ...), ... } end

-- the C events, copied out, with self time and self bytes from the nesting
local function collect()
  local n, ev = tonumber(C.td_profiler_count()), C.td_profiler_events()
  local list, t00 = {}, nil
  for i = 0, n - 1 do
    local e = ev[i]
    local t0, t1 = tonumber(e.t0), tonumber(e.t1)
    if t1 == 0 then t1 = t0 end                  -- still open when the profile ended
    t00 = t00 and math.min(t00, t0) or t0
    list[#list + 1] = { name = ffi.string(e.name), kind = KIND[e.kind] or "?", depth = e.depth, tid = e.tid,
      device = e.device == 1 and "opencl" or "cpu", shapes = ffi.string(e.shapes), t0 = t0, t1 = t1,
      bytes = tonumber(e.bytes), device_us = tonumber(e.dev_ns) / 1e3, child_time = 0, child_bytes = 0 }
  end
  -- parents: per thread, the innermost open event one level up (events are in begin order)
  local stacks = {}
  for _, e in ipairs(list) do
    local st = stacks[e.tid] or {}
    stacks[e.tid] = st
    while #st > 0 and (st[#st].depth >= e.depth or st[#st].t1 < e.t0) do st[#st] = nil end
    local parent = st[#st]
    if parent then
      parent.child_time = parent.child_time + (e.t1 - e.t0)
      parent.child_bytes = parent.child_bytes + e.bytes
    end
    st[#st + 1] = e
  end
  for _, e in ipairs(list) do
    e.start_us = (e.t0 - (t00 or 0)) / 1e3
    e.time_us = (e.t1 - e.t0) / 1e3
    e.self_us = math.max(0, e.time_us - e.child_time / 1e3)
    e.self_bytes = math.max(0, e.bytes - e.child_bytes)
  end
  return list
end

-- profile(fn, {record_shapes=false}, ...) -> report, fn's results
--- tide.profiler.profile(fn[, {record_shapes = false}], ...) -> report, fn's results
--- Runs fn(...) with the profiler on; report:table{sort_by, limit}, report:export_chrome_trace(path).
function P.profile(fn, opts, ...)
  if type(fn) ~= "function" then args.argerr(1, "profile", "function", fn) end
  opts = args.opts("profile", opts, "record_shapes", 2)
  local prev = C.td_profiler_enable(1)
  if prev ~= 0 then C.td_profiler_enable(prev); core.raise("profile: a profile is already running") end
  local t0 = os.clock()
  local r = pack(pcall(fn, ...))
  C.td_profiler_enable(0)
  local report = setmetatable({ events = collect(), record_shapes = opts.record_shapes and true or false,
    cpu_time = os.clock() - t0 }, Report)
  if not r[1] then core.rethrow(r[2]) end
  return report, unpack(r, 2, r.n)
end

-- record_function(name, fn, ...): fn(...) as a named range of the profile
--- tide.profiler.record_function(name, fn, ...) -> fn's results
--- Runs fn(...) as a named range of the running profile.
function P.record_function(name, fn, ...)
  if type(name) ~= "string" then args.argerr(1, "record_function", "string", name) end
  if type(fn) ~= "function" then args.argerr(2, "record_function", "function", fn) end
  local ev = C.td_profiler_push(name)
  local r = pack(pcall(fn, ...))
  C.td_profiler_pop(ev)
  if not r[1] then core.rethrow(r[2]) end
  return unpack(r, 2, r.n)
end

-- Rows aggregated by (kind, name) (and input shapes with record_shapes):
-- calls, total and self time (us), self bytes
function Report:key_averages()
  local rows, by = {}, {}
  for _, e in ipairs(self.events) do
    local key = e.kind .. "\0" .. e.name .. (self.record_shapes and "\0" .. e.shapes or "")
    local r = by[key]
    if not r then
      r = { name = e.name, kind = e.kind, shapes = self.record_shapes and e.shapes or nil, calls = 0,
            total_us = 0, self_us = 0, bytes = 0, device_us = 0 }
      by[key] = r; rows[#rows + 1] = r
    end
    r.calls = r.calls + 1
    r.total_us = r.total_us + e.time_us
    r.self_us = r.self_us + e.self_us
    r.bytes = r.bytes + e.self_bytes
    r.device_us = r.device_us + e.device_us
  end
  return rows
end

local function fmt_time(us)
  if us >= 1e6 then return ("%.3fs"):format(us / 1e6) end
  if us >= 1e3 then return ("%.3fms"):format(us / 1e3) end
  return ("%.3fus"):format(us)
end
local function fmt_bytes(b)
  if b >= 2 ^ 30 then return ("%.2f GB"):format(b / 2 ^ 30) end
  if b >= 2 ^ 20 then return ("%.2f MB"):format(b / 2 ^ 20) end
  if b >= 2 ^ 10 then return ("%.2f KB"):format(b / 2 ^ 10) end
  return ("%d B"):format(b)
end

local SORT = { self_time = "self_us", total_time = "total_us", calls = "calls", bytes = "bytes", name = "name",
               device_time = "device_us" }

-- table{sort_by="self_time"|"total_time"|"calls"|"bytes"|"name"|"device_time", limit=, kind=} -> the text
-- (also printed); a Device column (the device's time of OpenCL launches) when there are any
function Report:table(opts)
  opts = args.opts("table", opts, "sort_by limit kind print", 1)
  local field = SORT[opts.sort_by or "self_time"]
  if not field then
    core.raise(("table: sort_by must be one of self_time, total_time, calls, bytes, name, device_time; got %s")
      :format(tostring(opts.sort_by)))
  end
  local rows = self:key_averages()
  if opts.kind then
    local keep = {}
    for _, r in ipairs(rows) do if r.kind == opts.kind then keep[#keep + 1] = r end end
    rows = keep
  end
  table.sort(rows, function(a, b)
    if a[field] ~= b[field] then
      if field == "name" then return a.name < b.name end
      return a[field] > b[field]
    end
    return a.name < b.name
  end)
  -- self times of all events sum to the profiled time (each nanosecond once)
  local self_total = 0
  for _, e in ipairs(self.events) do self_total = self_total + e.self_us end
  if opts.limit ~= nil and (not args.is_int(opts.limit) or opts.limit < 0) then
    core.raise(("table: limit must be a non-negative integer, got %s"):format(tostring(opts.limit)))
  end
  local limit = math.min(opts.limit or #rows, #rows)
  local namew = 24
  for i = 1, limit do namew = math.max(namew, #rows[i].name + (rows[i].shapes and #rows[i].shapes + 1 or 0)) end
  namew = math.min(namew, 60)
  local dev = false
  for _, r in ipairs(rows) do dev = dev or r.device_us > 0 end
  local head = ("%-" .. namew .. "s  %-8s  %7s  %12s  %7s  %12s  %12s  %10s"):format("Name", "Kind", "Calls",
    "Self", "Self %", "Total", "Avg", "Self bytes") .. (dev and ("  %12s"):format("Device") or "")
  local lines = { ("-"):rep(#head), head, ("-"):rep(#head) }
  for i = 1, limit do
    local r = rows[i]
    local name = r.shapes and r.shapes ~= "" and r.name .. " " .. r.shapes or r.name
    if #name > namew then name = name:sub(1, namew - 3) .. "..." end
    lines[#lines + 1] = ("%-" .. namew .. "s  %-8s  %7d  %12s  %6.2f%%  %12s  %12s  %10s"):format(name, r.kind,
      r.calls, fmt_time(r.self_us), self_total > 0 and 100 * r.self_us / self_total or 0, fmt_time(r.total_us),
      fmt_time(r.total_us / r.calls), fmt_bytes(r.bytes)) .. (dev and ("  %12s"):format(fmt_time(r.device_us)) or "")
  end
  lines[#lines + 1] = ("-"):rep(#head)
  lines[#lines + 1] = ("Self time total: %s over %d events"):format(fmt_time(self_total), #self.events)
  local text = table.concat(lines, "\n")
  if opts.print ~= false then print(text) end
  return text
end

-- export_chrome_trace(path): the events as Chrome trace-event JSON (complete
-- "X" events in microseconds), written atomically
function Report:export_chrome_trace(path)
  if type(path) ~= "string" then args.argerr(1, "export_chrome_trace", "string path", path) end
  local ser = require "tide.serialize"
  local q = ser.json_string
  local parts = { '{"displayTimeUnit":"ms","traceEvents":[' }
  for i, e in ipairs(self.events) do
    parts[#parts + 1] = ('%s{"name":%s,"cat":%s,"ph":"X","ts":%.3f,"dur":%.3f,"pid":1,"tid":%d,'
      .. '"args":{"shapes":%s,"bytes":%d,"device":%s,"device_us":%.3f}}'):format(i > 1 and "," or "", q(e.name),
      q(e.kind), e.start_us, e.time_us, e.tid, q(e.shapes), e.bytes, q(e.device), e.device_us)
  end
  parts[#parts + 1] = "]}\n"
  ser.write_atomic("export_chrome_trace", path, { table.concat(parts) })
  return path
end

return P
