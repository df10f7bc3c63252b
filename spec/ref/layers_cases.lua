-- Loads the cases of spec/ref/layers_reference.lua (written by
-- spec/ref/layers_reference.py) for spec/lua/layers_spec.lua and
-- spec/opencl/layers_spec.lua: a case's module with PyTorch's state_dict
-- loaded, its body as a function and its inputs.
local tide = require "tide"
local nn = tide.nn

local M = { REF = dofile("spec/ref/layers_reference.lua") }
local ENV = setmetatable({ tide = tide, nn = nn, F = nn.functional, P = nn.utils.rnn }, { __index = _G })
local KEYS = { "A", "B", "C", "D" }

-- a literal {shape, dtype, data} as a tensor (float ones converted to dtype if given)
function M.tensor_of(t, device, dtype)
  local d = tide.tensor(t.data, { dtype = t.dtype }):reshape(t.shape)
  if dtype and d:is_floating_point() then d = d:to(dtype) end
  return d:to(device or "cpu")
end

function M.flag(c, f) return (" " .. c.flags .. " "):find(" " .. f .. " ", 1, true) ~= nil end

-- the results of a call, tensors in order (tables of tensors flattened, nils left out)
function M.flatten(...)
  local out = {}
  local function add(v)
    if tide.is_tensor(v) then out[#out + 1] = v
    elseif type(v) == "table" then for _, x in ipairs(v) do add(x) end end
  end
  for i = 1, select("#", ...) do add((select(i, ...))) end
  return out
end

-- m, fn, xs: the case's module (nil for a function case) with its state_dict loaded, on
-- device in dtype (default: the CPU, float64), its body as fn(m, inputs...), the inputs;
-- keys: the module's state_dict keys and want: PyTorch's, in order
function M.setup(c, device, dtype)
  local m, keys, want
  if c.module then
    m = assert(load("return " .. c.module, "=" .. c.name, "t", ENV))()
    local _
    _, keys = m:state_dict()
    want = {}
    local src = {}
    for i, p in ipairs(c.params) do want[i] = p[1]; src[p[1]] = M.tensor_of(p[2]) end
    m:load_state_dict(src)
    if dtype then m:to(dtype) end
    if device then m:to(device) end
  end
  local names = {}
  for _, k in ipairs(KEYS) do if c.inputs[k] then names[#names + 1] = k end end
  local params = table.concat(names, ", ")
  local fn = assert(load(("return function(m%s) %s end"):format(params ~= "" and ", " .. params or "", c.body),
    "=" .. c.name, "t", ENV))()
  local xs = {}
  for i, k in ipairs(names) do xs[i] = M.tensor_of(c.inputs[k], device, dtype) end
  return m, fn, xs, keys, want
end

return M
