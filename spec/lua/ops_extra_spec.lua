-- The tensor ops and functional forms of the breadth issue against PyTorch's
-- values (spec/ref/ops_reference.lua, written by spec/ref/ops_reference.py with
-- torch 2.x on fixed inputs), then per case: float64 gradcheck (flag grad),
-- tide.compile equal to eager (or a clear error for data-dependent shapes, flag
-- nocompile), and OpenCL equal to CPU where a device is there.
local tide = require "tide"
local H = require "helper"
local REF = dofile("spec/ref/ops_reference.lua")

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

describe("tensor ops against PyTorch", function()
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

describe("tensor op errors", function()
  local F = tide.nn.functional
  it("name the op and the values", function()
    H.raises(function() return tide.einsum("ij,jk", tide.ones(2, 3), tide.ones(4, 2)) end, "einsum: 'ij,jk': label 'j' has size 4")
    H.raises(function() return tide.einsum("ij->k", tide.ones(2, 3)) end, "output label 'k' is in no operand")
    H.raises(function() return tide.einsum("ijk", tide.ones(2, 3)) end, "term 'ijk' has 3 labels for an operand with 2 dims")
    H.raises(function() return tide.einsum("i1", tide.ones(2, 3)) end, "invalid character '1'")
    H.raises(function() return tide.einsum("ij,jk", tide.ones(2, 3)) end, "2 operand terms for 1 operands")
    H.raises(function() return F.pad(tide.ones(1, 3), { 3, 0 }, { mode = "reflect" }) end,
      "pad: reflect padding (3, 0) must be smaller than dim 2's size 3")
    H.raises(function() return F.pad(tide.ones(3), { 1 }) end, "bad argument #2 to 'pad'")
    H.raises(function() return F.pad(tide.ones(3), { 1, 1 }, { mode = "wrap" }) end, "pad: mode must be")
    H.raises(function() return F.interpolate(tide.ones(1, 1, 4), { size = 3, mode = "bilinear" }) end,
      "mode 'bilinear' takes 2 spatial dims, the input has 1")
    H.raises(function() return F.interpolate(tide.ones(1, 1, 4, 4), { size = 3, scale_factor = 2 }) end,
      "give exactly one of size and scale_factor")
    H.raises(function() return tide.ones(2, 3):roll({ 1, 2 }, 1) end, "roll: 2 shifts for 1 dims")
    H.raises(function() return tide.ones(3):tril() end, "tril: expected a tensor with at least 2 dims")
    H.raises(function() return tide.ones(2, 3):diagonal(0, 1, 1) end, "diagonal: dim1 and dim2 are the same dim (1)")
    H.raises(function() return tide.cross(tide.ones(2, 2), tide.ones(2, 2)) end, "cross: no dim of size 3")
    H.raises(function() return tide.ones(2):flip({ 1, 1 }) end, "flip: dim 1 appears multiple times")
    H.raises(function() return tide.ones(2, 3)["repeat"](tide.ones(2, 3), 2) end, "repeat: 1 repeat counts for a tensor with 2 dims")
    H.raises(function() return F.pixel_shuffle(tide.ones(1, 3, 2, 2), 2) end, "pixel_shuffle: channels of [1,3,2,2] are not divisible by 2^2")
    H.raises(function() return tide.meshgrid({ tide.ones(2, 2) }) end, "meshgrid: tensor 1 is not 1-D")
  end)

  it("repeat is also x['repeat'] and edge cases keep PyTorch's meaning", function()
    local x = tide.arange(3)
    H.close(x["repeat"](x, 2), { 0, 1, 2, 0, 1, 2 }, 0)
    assert.same({ 0 }, tide.zeros(2, 3):diagonal(4):size())
    assert.is_true(tide.zeros(0, 3):all():item())
    assert.is_false(tide.zeros(0, 3):any():item())
    local inf = tide.tensor({ math.huge, -math.huge }, { dtype = tide.float64 })
    assert.same({ math.huge, -math.huge }, tide.logaddexp(inf, inf):totable())
    assert.same({ -math.huge, math.huge }, tide.logaddexp(-inf, -inf):totable())
  end)
end)
