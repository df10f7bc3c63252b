-- Shared spec helpers: tolerance comparison against expected values and
-- gradcheck on fresh random float64 inputs.
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

return H
