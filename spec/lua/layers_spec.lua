-- The recurrent and attention layers (tide.nn.rnn, tide.nn.transformer)
-- against PyTorch: spec/ref/layers_reference.lua (written by
-- spec/ref/layers_reference.py with torch 2.x) gives each case's module, its
-- state_dict (names and order must be tide's), literal inputs and PyTorch's
-- outputs in float64. Per case: the values (1e-10), float64 gradcheck in the
-- inputs and parameters (flag grad), tide.compile == eager (all cases in one
-- compiled function: one compiler run), OpenCL == CPU (flag cl); then a PyTorch
-- safetensors file of float32 state_dicts, compiled training steps, and the
-- errors.
local tide = require "tide"
local H = require "helper"
local REF = dofile("spec/ref/layers_reference.lua")
local nn = tide.nn

local ENV = setmetatable({ tide = tide, nn = nn, F = nn.functional, P = nn.utils.rnn }, { __index = _G })
local KEYS = { "A", "B", "C", "D" }

local function tensor_of(t, device)
  local d = tide.tensor(t.data, { dtype = t.dtype })
  return d:reshape(t.shape):to(device or "cpu")
end

local function flag(c, f) return (" " .. c.flags .. " "):find(" " .. f .. " ", 1, true) ~= nil end

-- the results of a call, tensors in order (tables of tensors flattened, nils left out)
local function flatten(...)
  local out = {}
  local function add(v)
    if tide.is_tensor(v) then out[#out + 1] = v
    elseif type(v) == "table" then for _, x in ipairs(v) do add(x) end end
  end
  for i = 1, select("#", ...) do add((select(i, ...))) end
  return out
end

-- a case's module (its state_dict loaded) on the device, its body as fn(m, inputs...) and the inputs
local function setup(c, device)
  local m
  if c.module then
    m = assert(load("return " .. c.module, "=" .. c.name, "t", ENV))()
    local sd, keys = m:state_dict()
    local want = {}
    for i, p in ipairs(c.params) do want[i] = p[1] end
    assert.same(want, keys, c.name .. ": state_dict keys (PyTorch's names and order)")
    local src = {}
    for _, p in ipairs(c.params) do src[p[1]] = tensor_of(p[2]) end
    m:load_state_dict(src)
    if device then m:to(device) end
  end
  local names = {}
  for _, k in ipairs(KEYS) do if c.inputs[k] then names[#names + 1] = k end end
  local params = table.concat(names, ", ")
  local fn = assert(load(("return function(m%s) %s end"):format(params ~= "" and ", " .. params or "", c.body),
    "=" .. c.name, "t", ENV))()
  local xs = {}
  for i, k in ipairs(names) do xs[i] = tensor_of(c.inputs[k], device) end
  return m, fn, xs
end

local function same(got, want, tol, what)
  assert(tide.is_tensor(got), what .. ": not a tensor")
  assert.same(want.shape, got:size(), what .. ": shape")
  assert.equal(want.dtype, got.dtype.name, what .. ": dtype")
  local flat = got:cpu():reshape(-1):totable()
  for i, w in ipairs(want.data) do
    local g = flat[i]
    local ok = (w ~= w and g ~= g) or g == w or math.abs(g - w) <= tol * math.max(1, math.abs(w))
    assert(ok, ("%s: element %d is %.17g, torch %.17g"):format(what, i, g, w))
  end
end

local function check_outs(c, got, tol, what)
  assert.equal(#c.outs, #got, c.name .. ": number of results" .. what)
  for i, want in ipairs(c.outs) do same(got[i], want, tol, c.name .. " result " .. i .. what) end
end

describe("recurrent and attention layers against PyTorch", function()
  for _, c in ipairs(REF) do
    it(c.name, function()
      local m, fn, xs = setup(c)
      check_outs(c, flatten(fn(m, unpack(xs))), 1e-10, "")
      if flag(c, "grad") then
        -- inputs that are float, then the parameters: the module reads them, gradcheck perturbs them
        local ins, k = {}, #xs
        for i, x in ipairs(xs) do
          ins[i] = x:is_floating_point() and x:clone():requires_grad_() or x
        end
        if m then for _, p in ipairs(m:parameters()) do ins[#ins + 1] = p end end
        local wrt = {}
        for _, x in ipairs(ins) do if x.requires_grad then wrt[#wrt + 1] = x end end
        H.gradcheck(function(...)
          local a = { ... }
          local args = {}
          for i = 1, k do args[i] = a[i] end
          local r = flatten(fn(m, unpack(args, 1, k)))
          local f = {}
          for _, t in ipairs(r) do if t:is_floating_point() then f[#f + 1] = t end end
          return unpack(f)
        end, ins)
        assert.is_true(#wrt > 0)
      end
    end)
  end
end)

describe("recurrent and attention layers, compiled", function()
  it("give the values of eager mode: every case in one compiled function", function()
    local cases = {}
    for _, c in ipairs(REF) do
      if c.module and not flag(c, "nocompile") then
        local m, fn, xs = setup(c)
        cases[#cases + 1] = { c = c, m = m, fn = fn, xs = xs }
      end
    end
    local all = tide.compile(function()
      local res = {}
      for i, e in ipairs(cases) do res[i] = flatten(e.fn(e.m, unpack(e.xs))) end
      return res
    end, { name = "layers" })
    local res = tide.no_grad(all)       -- (with grad on, outputs needing grad run eagerly)
    for i, e in ipairs(cases) do check_outs(e.c, res[i], 1e-10, " (compiled)") end
  end)
end)

H.describe_cl("recurrent and attention layers on OpenCL", function()
  for _, c in ipairs(REF) do
    if flag(c, "cl") then it(c.name .. " gives the CPU's values", function()
      local m, fn, xs = setup(c, "opencl")
      local got = flatten(fn(m, unpack(xs)))
      for _, t in ipairs(got) do          -- lengths stay on the CPU, as PyTorch's
        if t:is_floating_point() then assert.equal("opencl", t.device:match("^opencl") and "opencl" or t.device) end
      end
      check_outs(c, got, 1e-9, " (OpenCL)")
    end) end
  end
end)
