-- Shared spec helpers: tolerance comparison against expected values,
-- gradcheck on fresh random float64 inputs, and the OpenCL specs' device
-- guard and device-against-CPU comparisons.
local tide = require "tide"
local H = {}

-- max |a - b| over all elements; a, b tensors or nested tables/numbers
function H.maxdiff(a, b)
  if tide.is_tensor(a) then a = a:double():totable() end
  if tide.is_tensor(b) then b = b:double():totable() end
  if type(a) == "number" or type(a) == "boolean" then
    if type(a) == "boolean" then a = a and 1 or 0 end
    if type(b) == "boolean" then b = b and 1 or 0 end
    if a ~= a and b ~= b then return 0 end
    if a == b then return 0 end
    return math.abs(a - b)
  end
  assert(type(b) == "table" and #a == #b, ("shape mismatch: %d vs %s"):format(#a, type(b) == "table" and #b or type(b)))
  local m = 0
  for i = 1, #a do m = math.max(m, H.maxdiff(a[i], b[i])) end
  return m
end

-- assert that tensor `got` equals `want` (tensor or table) within tol
function H.close(got, want, tol, msg)
  tol = tol or 1e-5
  local d = H.maxdiff(got, want)
  if not (d <= tol) then
    error(("%snot close: max diff %g > %g\n got: %s\nwant: %s"):format(msg and (msg .. ": ") or "", d, tol,
      tostring(got), tide.is_tensor(want) and tostring(want) or "(table)"), 2)
  end
end

-- fresh random float64 leaf of the given shape (values in (lo, hi), default (-2, 2))
function H.rand64(shape, lo, hi)
  lo, hi = lo or -2, hi or 2
  return (tide.rand(shape, { dtype = tide.float64 }) * (hi - lo) + lo):detach():requires_grad_()
end

-- gradcheck that fails the spec with the element that differs
function H.gradcheck(fn, inputs, opts)
  local ok, err = pcall(tide.autograd.gradcheck, fn, inputs, opts)
  if not ok then error(err, 2) end
  return true
end

-- assert that f() raises an error containing all the given plain substrings
function H.raises(f, ...)
  local ok, err = pcall(f)
  if ok then error("expected an error, got none", 2) end
  err = tostring(err)
  for _, s in ipairs { ... } do
    if not err:find(s, 1, true) then error(("error %q does not contain %q"):format(err, s), 2) end
  end
  return err
end

-- -- Child processes --------------------------------------------------------------------------

function H.sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- H.child(script[, env[, timeout]]): run a Lua script in a fresh luajit with this
-- tide build and Lua path (a crash there cannot take the spec run down); its
-- output (stdout and stderr) and exit status (a signal shows as 128 + its number)
function H.child(script, env, timeout)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(script)
  f:close()
  local vars = { "LUA_PATH=" .. H.sh_quote(package.path) }
  for k, v in pairs(env or {}) do vars[#vars + 1] = k .. "=" .. H.sh_quote(v) end
  -- a hang is killed (status 137) rather than stopping the suite
  local p = io.popen(table.concat(vars, " ") .. " timeout -s KILL " .. (timeout or 120) .. " luajit " ..
    H.sh_quote(path) .. " 2>&1; echo \"@rc=$?\"")
  local out = p:read("*a")
  p:close()
  os.remove(path)
  local rc = tonumber(out:match("@rc=(%d+)\n?$"))
  return (out:gsub("@rc=%d+\n?$", "")), rc
end

-- H.on_threads(script): script's output run in a child with 1 and with 2
-- threads (TIDE_NUM_THREADS), each required to exit 0; for "the same bits on
-- any thread count" checks
function H.on_threads(script)
  local one, rc1 = H.child(script, { TIDE_NUM_THREADS = "1" })
  local two, rc2 = H.child(script, { TIDE_NUM_THREADS = "2" })
  assert(rc1 == 0, one)
  assert(rc2 == 0, two)
  return one, two
end

-- H.stderr_of(fn, ...): what fn(...) wrote to stderr (Lua's io.stderr and C's
-- fprintf(stderr): file descriptor 2 points at a temporary file meanwhile),
-- then fn's results; an error in fn is re-raised after stderr is restored
local libc
function H.stderr_of(fn, ...)
  if not libc then
    local ffi = require "ffi"
    for _, decl in ipairs {
      "int dup(int oldfd);", "int dup2(int oldfd, int newfd);", "int close(int fd);",
      "int creat(const char *pathname, unsigned int mode);",
    } do pcall(ffi.cdef, decl) end
    libc = ffi.C
  end
  io.stderr:flush()
  local path = os.tmpname()
  local fd = libc.creat(path, 384)
  assert(fd >= 0, "cannot create " .. path)
  local saved = libc.dup(2)
  libc.dup2(fd, 2)
  libc.close(fd)
  local res = { n = 0 }
  local function collect(ok, ...) res.ok, res.n = ok, select("#", ...); for i = 1, res.n do res[i] = select(i, ...) end end
  collect(pcall(fn, ...))
  io.stderr:flush()
  libc.dup2(saved, 2)
  libc.close(saved)
  local f = io.open(path, "rb")
  local text = f:read("*a")
  f:close()
  os.remove(path)
  if not res.ok then error(res[1], 0) end
  return text, unpack(res, 1, res.n)
end

-- -- OpenCL: the device against the CPU ----------------------------------------------------

-- whether the machine has an OpenCL device (asked on first use, so specs that
-- never ask do not load the OpenCL driver)
local has_opencl
function H.has_opencl()
  if has_opencl == nil then has_opencl = tide.opencl.is_available() end
  return has_opencl
end

-- busted's describe(name, fn), or without an OpenCL device a block saying so in one pending test
function H.describe_cl(name, fn)
  local busted = require "busted"
  if H.has_opencl() then return busted.describe(name, fn) end
  busted.describe(name, function() busted.pending("no OpenCL device") end)
end

-- a list of inputs on the device: tensors copied to "opencl" as new leaves with
-- the same requires_grad, other values (Lua numbers) as they are
function H.to_opencl(inputs)
  local r = {}
  for i, x in ipairs(inputs) do
    if tide.is_tensor(x) then
      r[i] = x:detach():to("opencl")
      if x.requires_grad then r[i]:requires_grad_() end
    else r[i] = x end
  end
  return r
end

-- got (on the device) agrees with want (CPU): same dtype and shape, and
-- |got - want| <= atol + rtol |want| elementwise (atol defaults to rtol; NaN
-- matches NaN, inf the same inf); integer and bool results exactly. Errors
-- point `level` frames up.
local function agree(got, want, rtol, msg, atol, level)
  msg, atol = msg or "result", atol or rtol
  if not (tide.is_tensor(got) and got.device:match("^opencl")) then
    error(("%s: result is on %s"):format(msg, tide.is_tensor(got) and got.device or type(got)), level)
  end
  local g = got:cpu()
  if g.dtype ~= want.dtype then
    error(("%s: dtype %s, want %s"):format(msg, tostring(g.dtype), tostring(want.dtype)), level)
  end
  local gs, ws = table.concat(g:size(), ","), table.concat(want:size(), ",")
  if gs ~= ws then error(("%s: shape [%s], want [%s]"):format(msg, gs, ws), level) end
  if g:numel() == 0 then return end
  if not want:is_floating_point() then
    local bad = g:ne(want):sum():item()
    if bad ~= 0 then error(("%s: %d elements differ\n got: %s\nwant: %s"):format(msg, bad, tostring(g), tostring(want)), level) end
    return
  end
  local a = g:double():contiguous():view(g:numel()):totable()
  local b = want:double():contiguous():view(g:numel()):totable()
  for i = 1, #a do
    local x, y = a[i], b[i]
    if not (x == y or (x ~= x and y ~= y) or math.abs(x - y) <= atol + rtol * math.abs(y)) then
      error(("%s: element %d: got %.17g want %.17g (rtol %g, atol %g)"):format(msg, i, x, y, rtol, atol), level)
    end
  end
end

-- assert that the device result got agrees with the CPU result want (see agree above)
function H.agree(got, want, rtol, msg, atol)
  agree(got, want, rtol, msg, atol, 3)
end

-- f(inputs...) on the CPU and f(H.to_opencl(inputs)...) on the device agree;
-- returns the CPU result, the device result and the device inputs
function H.same_opencl(f, inputs, rtol, msg, atol)
  local dev = H.to_opencl(inputs)
  local want = f(unpack(inputs, 1, #inputs))
  local got = f(unpack(dev, 1, #dev))
  agree(got, want, rtol, msg, atol, 3)
  return want, got, dev
end

-- A small MLP (13-32-32-5, GELU and ReLU) and its AdamW training step, seeded:
-- two calls with the same seed give identical models (compiled vs eager specs).
function H.mlp_step(seed)
  local nn, F = tide.nn, tide.nn.functional
  tide.manual_seed(seed)
  local model = nn.Sequential(nn.Linear(13, 32), nn.GELU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 5))
  local opt = tide.optim.AdamW(model:parameters(), { lr = 1e-2, weight_decay = 0.1 })
  local function step(x, y)
    local loss = F.cross_entropy(model(x), y)
    opt:zero_grad(); loss:backward(); opt:step()
    return loss
  end
  return model, step
end

-- true when this process runs with AddressSanitizer (make test-asan preloads it):
-- resident sizes then measure ASan's quarantine of freed memory, not tide
H.asan = (function()
  local f = io.open("/proc/self/maps")
  if not f then return false end
  local maps = f:read("*a")
  f:close()
  return maps:find("libasan", 1, true) ~= nil
end)()

-- f(...) with the eager fast paths off (F.fused = false): the composite path
function H.composite(f, ...)
  local F = tide.nn.functional
  F.fused = false
  local r = { pcall(f, ...) }
  F.fused = true
  if not r[1] then error(r[2], 0) end
  return unpack(r, 2)
end

-- the names of the op events of a profile of fn, and of the backward nodes run
function H.profile_events(fn)
  local rep = tide.profiler.profile(fn)
  local ops, nodes = {}, {}
  for _, e in ipairs(rep.events) do
    if e.kind == "op" then ops[#ops + 1] = e.name elseif e.kind == "backward" then nodes[#nodes + 1] = e.name end
  end
  return ops, nodes
end

-- y = f() and the gradients of (y * v):sum() w.r.t. inputs (v: randn, seed 11)
function H.value_and_grads(f, inputs)
  for _, x in ipairs(inputs) do x.grad = nil end
  local y = f()
  tide.manual_seed(11)
  local v = tide.randn(y:size(), { dtype = y.dtype })
  ;(y * v):sum():backward()
  local gs = {}
  for i, x in ipairs(inputs) do gs[i] = x.grad end
  return y:detach(), gs
end

return H
