-- weight_norm and spectral_norm (tide.nn.utils): the reparametrized weight is
-- recomputed before every forward, the new parameters carry the gradient, and
-- state_dict names match PyTorch's.
local tide = require "tide"
local H = require "helper"
local nn = tide.nn

local function linear()
  local l = nn.Linear(3, 2, { dtype = "float64" })
  tide.no_grad(function()
    l.weight:copy_(tide.tensor({ { 1, -2, 2 }, { 0.5, 0.5, -0.5 } }, { dtype = "float64" }))
    l.bias:copy_(tide.tensor({ 0.1, -0.2 }, { dtype = "float64" }))
  end)
  return l
end

describe("weight_norm", function()
  it("splits weight into g (row norms) and v, recomputed every forward, as torch", function()
    local m = nn.utils.weight_norm(linear())
    local sd, keys = m:state_dict()
    table.sort(keys)
    assert.are.same({ "bias", "weight_g", "weight_v" }, keys)
    H.close(m.weight_g:view(-1), { 3, 0.8660254037844386 }, 1e-12)
    local x = tide.tensor({ { 1, 2, 3 }, { -1, 0.5, 2 } }, { dtype = "float64" })
    tide.no_grad(function() m.weight_g:mul_(2) end)
    H.close(m(x), { { 6.1, -0.2 }, { 4.1, -2.7 } }, 1e-12)      -- torch's output after doubling g
  end)

  it("passes gradcheck for g and v through the module", function()
    local m = nn.utils.weight_norm(linear(), { dim = 2 })
    local x = H.rand64 { 4, 3 }
    H.gradcheck(function() return m(x) end, { m.weight_g, m.weight_v })
  end)

  it("names a missing parameter", function()
    H.raises(function() nn.utils.weight_norm(nn.ReLU()) end, "weight_norm: module ReLU has no parameter 'weight'")
  end)
end)

describe("spectral_norm", function()
  it("divides the weight by its largest singular value", function()
    local l = nn.Linear(2, 2, { dtype = "float64" })
    tide.no_grad(function() l.weight:copy_(tide.tensor({ { 3, 0 }, { 0, 1 } }, { dtype = "float64" })) end)
    local m = nn.utils.spectral_norm(l)
    local sd, keys = m:state_dict()
    table.sort(keys)
    assert.are.same({ "bias", "weight_orig", "weight_u", "weight_v" }, keys)
    m(tide.zeros(1, 2, { dtype = "float64" }))
    H.close(m.weight, { { 1, 0 }, { 0, 1 / 3 } }, 1e-6)
  end)

  it("keeps its power-iteration vectors fixed in eval mode and passes gradcheck for weight_orig", function()
    tide.manual_seed(5)
    local m = nn.utils.spectral_norm(nn.Linear(4, 3, { dtype = "float64" }))
    m:eval()
    local u = m.weight_u:clone()
    local x = H.rand64 { 2, 4 }
    H.gradcheck(function() return m(x) end, { m.weight_orig })
    H.close(m.weight_u, u, 0)
  end)
end)
