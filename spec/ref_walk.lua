-- The walk of a reference file written by a spec/ref/*_reference.py generator
-- (PyTorch's values on fixed inputs): per case, the values against PyTorch's,
-- float64 gradcheck (flag grad), tide.compile equal to eager (or a clear error
-- for data-dependent shapes, flag nocompile), and OpenCL equal to CPU where a
-- device is there. Used by spec/lua/ops_extra_spec.lua and sort_spec.lua:
--   require("ref_walk")(dofile("spec/ref/x_reference.lua"), "title")
local tide = require "tide"
local H = require "helper"

return function(REF, title)
-- busted's describe, it and assert live in the calling spec file's environment
setfenv(1, getfenv(2))

local ENV = setmetatable({ tide = tide, F = tide.nn.functional, nn = tide.nn }, { __index = _G })
local KEYS = { "A", "B", "C", "D" }

local function tensor_of(t)
  local d = tide.tensor(t.data, { dtype = t.dtype })
  return d:reshape(t.shape)
end

-- the case's function of its inputs (in key order) and the inputs
local function case_fn(c)
  local names = {}
  for _, k in ipairs(KEYS) do if c.inputs[k] then names[#names + 1] = k end end
  local src = ("return function(%s) return %s end"):format(table.concat(names, ", "), c.lua)
  local fn = assert(load(src, "=" .. c.name, "t", ENV))()
  local xs = {}
  for i, k in ipairs(names) do xs[i] = tensor_of(c.inputs[k]) end
  return fn, xs
end

local function results(r, ...)
  if type(r) == "table" and not tide.is_tensor(r) then return r end
  return { r, ... }
end

local function same(got, want, tol, what)
  assert(tide.is_tensor(got), what .. ": not a tensor")
  assert.same(want.shape, got:size(), what .. ": shape")
  local dt = got.dtype.name
  if want.dtype == "bool" or want.dtype == "int64" then
    assert.equal(want.dtype, dt, what .. ": dtype")
    local flat = got:reshape(-1):totable()
    assert.same(want.data, flat, what .. ": values")
  else
    assert.equal("float64", dt, what .. ": dtype")
    local flat = got:reshape(-1):totable()
    for i, w in ipairs(want.data) do
      local g = flat[i]
      local ok = (w ~= w and g ~= g) or g == w or math.abs(g - w) <= tol * math.max(1, math.abs(w))
      assert(ok, ("%s: element %d is %.17g, torch %.17g"):format(what, i, g, w))
    end
  end
end

local function flag(c, f) return (" " .. c.flags .. " "):find(" " .. f .. " ", 1, true) ~= nil end

describe(title, function()
  for _, c in ipairs(REF) do
    it(c.name .. ": " .. c.lua, function()
      local fn, xs = case_fn(c)
      local got = results(fn(unpack(xs)))
      assert.equal(#c.outs, #got, "number of results")
      for i, want in ipairs(c.outs) do same(got[i], want, 1e-10, c.name .. " result " .. i) end

      if flag(c, "grad") then
        local gx, floats = {}, {}
        for i, x in ipairs(xs) do
          gx[i] = x
          if x.dtype == tide.float64 then gx[i] = x:clone():requires_grad_(); floats[#floats + 1] = i end
        end
        local function f(...)
          local a = { ... }
          local all, k = {}, 1
          for i = 1, #gx do
            if gx[i].requires_grad then all[i] = a[k]; k = k + 1 else all[i] = gx[i] end
          end
          local r = results(fn(unpack(all)))
          local s = r[1]:double():sum()
          for j = 2, #r do if r[j].dtype.is_floating_point then s = s + r[j]:double():sum() end end
          return r[1].dtype.is_floating_point and r[1] or s
        end
        local ins = {}
        for _, i in ipairs(floats) do ins[#ins + 1] = gx[i] end
        H.gradcheck(f, ins)
      end

      local compiled = tide.compile(fn, { name = c.name })
      if flag(c, "nocompile") then
        H.raises(function() return compiled(unpack(xs)) end, "tide.compile")
      else
        local r = results(compiled(unpack(xs)))
        for i, want in ipairs(c.outs) do same(r[i], want, 1e-10, c.name .. " compiled result " .. i) end
      end

      if H.has_opencl() then
        local dx = {}
        for i, x in ipairs(xs) do dx[i] = x:to("opencl") end
        local r = results(fn(unpack(dx)))
        for i, want in ipairs(c.outs) do same(r[i]:cpu(), want, 1e-9, c.name .. " on OpenCL, result " .. i) end
      end
    end)
  end
end)
end
