-- The tensor ops and functional forms of the breadth issue against PyTorch's
-- values (spec/ref/ops_reference.lua, written by spec/ref/ops_reference.py with
-- torch 2.x on fixed inputs), then per case: float64 gradcheck (flag grad),
-- tide.compile equal to eager (or a clear error for data-dependent shapes, flag
-- nocompile), and OpenCL equal to CPU where a device is there.
local tide = require "tide"
local H = require "helper"
local REF = dofile("spec/ref/ops_reference.lua")

require("ref_walk")(REF, "tensor ops against PyTorch")

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
