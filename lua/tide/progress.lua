--[[
tide.progress -- progress reporting for training loops: on a terminal, one
line redrawn in place with the count, rate, ETA and running values (loss);
otherwise plain log lines every `every` steps and at the end, so logs stay
readable when output goes to a file or CI.

  local bar = tide.progress.bar(#loader, { desc = "epoch 1" })
  for x, y in loader:batches() do ...; bar:update(1, { loss = loss:item() }) end
  bar:close()
--]]
local ffi = require "ffi"
local core = require "tide.core"
local args = require "tide.args"
local raise = core.raise

pcall(ffi.cdef, "int isatty(int fd);")

local P = {}

local function is_tty()
  local ok, r = pcall(function() return ffi.C.isatty(1) == 1 end)
  return ok and r and os.getenv("TERM") ~= "dumb"
end

local function fmt_time(s)
  if s ~= s or s == math.huge then return "?" end
  s = math.floor(s + 0.5)
  if s >= 3600 then return ("%d:%02d:%02d"):format(s / 3600, (s / 60) % 60, s % 60) end
  return ("%02d:%02d"):format(s / 60, s % 60)
end

-- monotonic clock in seconds
local ts
pcall(ffi.cdef, "typedef struct tide_timespec { long tv_sec; long tv_nsec; } tide_timespec; int clock_gettime(int, tide_timespec *);")
local function clock()
  ts = ts or ffi.new("tide_timespec")
  ffi.C.clock_gettime(1, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
--- tide.progress.clock() -> number
--- A monotonic clock in seconds.
P.clock = clock

local Bar = {}
Bar.__index = Bar

-- bar(total, {desc=, out=io.stdout, tty=auto, every=max(1, total/10), width=24, smoothing=0.1})
-- Running values passed to update are averaged with exponential smoothing.
--- tide.progress.bar(total[, {desc, out, tty, every, width, smoothing}]) -> bar
--- A progress bar: bar:update(k, {loss = v}) adds k steps and running values, bar:close() ends it.
function P.bar(total, opts)
  opts = args.opts("bar", opts, "desc out tty every width smoothing clock", 2)
  if total ~= nil and (type(total) ~= "number" or total < 0) then
    raise(("bad argument #1 to 'bar' (non-negative number or nil expected, got %s)"):format(tostring(total)))
  end
  for _, k in ipairs { "every", "width" } do
    local v = opts[k]
    if v ~= nil and (not args.is_int(v) or v < 1) then raise(("bar: %s must be a positive integer, got %s"):format(k, tostring(v))) end
  end
  if opts.smoothing ~= nil and type(opts.smoothing) ~= "number" then
    raise(("bar: smoothing must be a number, got %s"):format(args.typename(opts.smoothing)))
  end
  if opts.desc ~= nil and type(opts.desc) ~= "string" then raise(("bar: desc must be a string, got %s"):format(args.typename(opts.desc))) end
  if opts.clock ~= nil then args.callable(opts.clock, 2, "bar") end
  if opts.out ~= nil and (type(opts.out) ~= "table" and type(opts.out) ~= "userdata" or not opts.out.write) then
    raise(("bar: out must be a file (with :write), got %s"):format(args.typename(opts.out)))
  end
  local tty = opts.tty
  if tty == nil then tty = is_tty() end
  return setmetatable({ total = total, n = 0, desc = opts.desc, out = opts.out or io.stdout, tty = tty,
    every = opts.every or math.max(1, math.floor((total or 10) / 10)), width = opts.width or 24,
    smoothing = opts.smoothing or 0.1, values = {}, keys = {}, start = (opts.clock or clock)(),
    clock = opts.clock or clock, last_print = -1 }, Bar)
end

function Bar:update(k, values)
  if k ~= nil and (type(k) ~= "number" or k ~= k) then args.argerr(2, "update", "number of steps", k) end
  if values ~= nil and (type(values) ~= "table" or args.typename(values) ~= "table") then
    args.argerr(3, "update", "table of named values", values)
  end
  for name, v in pairs(values or {}) do
    if type(v) ~= "number" then raise(("update: value '%s' must be a number, got %s"):format(tostring(name), args.typename(v))) end
  end
  self.n = self.n + (k or 1)
  for name, v in pairs(values or {}) do
    if self.values[name] == nil then self.keys[#self.keys + 1] = name; table.sort(self.keys); self.values[name] = v
    else self.values[name] = self.values[name] + self.smoothing * (v - self.values[name]) end
  end
  if self.tty or self.n - math.max(self.last_print, 0) >= self.every or (self.total and self.n >= self.total) then
    self:render(false)
  end
end

function Bar:line()
  local el = self.clock() - self.start
  local rate = el > 0 and self.n / el or 0
  local parts = {}
  if self.desc then parts[#parts + 1] = self.desc end
  if self.total and self.total > 0 then
    local f = math.min(self.n / self.total, 1)
    if self.tty then
      local full = math.floor(f * self.width)
      parts[#parts + 1] = ("%3d%% |%s%s|"):format(math.floor(f * 100), ("#"):rep(full), (" "):rep(self.width - full))
    end
    parts[#parts + 1] = ("%d/%d"):format(self.n, self.total)
    local eta = rate > 0 and (self.total - self.n) / rate or math.huge
    parts[#parts + 1] = ("[%s<%s, %.2f it/s]"):format(fmt_time(el), fmt_time(eta), rate)
  else
    parts[#parts + 1] = ("%d [%s, %.2f it/s]"):format(self.n, fmt_time(el), rate)
  end
  for _, name in ipairs(self.keys) do parts[#parts + 1] = ("%s=%.4g"):format(name, self.values[name]) end
  return table.concat(parts, " ")
end

function Bar:render(final)
  self.last_print = self.n
  if self.tty then self.out:write("\r\27[K", self:line(), final and "\n" or "")
  else self.out:write(self:line(), "\n") end
  self.out:flush()
end

-- Print the final state (once) and end the terminal line.
function Bar:close()
  if self.closed then return end
  self.closed = true
  if self.tty or self.last_print ~= self.n then self:render(true) end
end

return P
