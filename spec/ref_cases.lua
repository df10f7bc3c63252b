-- The shared walk over generated PyTorch reference cases (spec/ref/*_reference.lua,
-- each { name, lua, flags, inputs = {A=...}, outs = {...}[, grads = {A=...}] }):
-- a case's function and inputs, and the comparison of results with torch's.
local tide = require "tide"
local assert = require "luassert"
local R = {}

R.KEYS = { "A", "B", "C", "D" }
local ENV = setmetatable({ tide = tide, F = tide.nn.functional, nn = tide.nn }, { __index = _G })

function R.tensor_of(t)
  return tide.tensor(t.data, { dtype = t.dtype }):reshape(t.shape)
end

-- the case's function of its inputs (in key order), the inputs and their keys
function R.case_fn(c)
  local names = {}
  for _, k in ipairs(R.KEYS) do if c.inputs[k] then names[#names + 1] = k end end
  local src = ("return function(%s) return %s end"):format(table.concat(names, ", "), c.lua)
  local fn = assert(load(src, "=" .. c.name, "t", ENV))()
  local xs = {}
  for i, k in ipairs(names) do xs[i] = R.tensor_of(c.inputs[k]) end
  return fn, xs, names
end

function R.results(r, ...)
  if type(r) == "table" and not tide.is_tensor(r) then return r end
  return { r, ... }
end

-- got (a tensor) equals want (a reference tensor) within tol, relative above 1
function R.same(got, want, tol, what)
  assert(tide.is_tensor(got), what .. ": not a tensor")
  assert.same(want.shape, got:size(), what .. ": shape")
  local dt = got.dtype.name
  local flat = got:reshape(-1):totable()
  if want.dtype == "bool" or want.dtype == "int64" then
    assert.equal(want.dtype, dt, what .. ": dtype")
    assert.same(want.data, flat, what .. ": values")
    return
  end
  assert.equal(want.dtype, dt, what .. ": dtype")
  for i, w in ipairs(want.data) do
    local g = flat[i]
    local ok = (w ~= w and g ~= g) or g == w or math.abs(g - w) <= tol * math.max(1, math.abs(w))
    assert(ok, ("%s: element %d is %.17g, torch %.17g"):format(what, i, g, w))
  end
end

function R.flag(c, f) return (" " .. c.flags .. " "):find(" " .. f .. " ", 1, true) ~= nil end

-- the input keys to differentiate: flag grad (every float64 input) or grad:AB
function R.grad_keys(c)
  for f in c.flags:gmatch("%S+") do
    if f == "grad" then
      local ks = {}
      for _, k in ipairs(R.KEYS) do
        if c.inputs[k] and c.inputs[k].dtype == "float64" then ks[#ks + 1] = k end
      end
      return ks
    end
    local keys = f:match("^grad:(%u+)$")
    if keys then
      local ks = {}
      for k in keys:gmatch("%u") do ks[#ks + 1] = k end
      return ks
    end
  end
  return {}
end

return R
