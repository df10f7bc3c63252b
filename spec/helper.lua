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

return H
