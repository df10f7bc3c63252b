-- Sliding windows: im2col / col2im (torch.nn.functional.unfold / fold) against
-- values from PyTorch, their adjointness on random inputs, and bad arguments.
-- (Gradients: spec/jit/gradcheck_spec.lua, ops unfold and fold.)
local tide = require "tide"
local H = require "helper"

describe("im2col and col2im", function()
  it("match torch's unfold on a 3x3 plane with a 2x2 kernel", function()
    local x = tide.arange(1, 10):view(1, 1, 3, 3):double()
    H.close(tide.im2col(x, 2), { { { 1, 2, 4, 5 }, { 2, 3, 5, 6 }, { 4, 5, 7, 8 }, { 5, 6, 8, 9 } } }, 0)
  end)

  it("match torch with stride, padding and dilation, and fold back", function()
    local x = tide.arange(1, 2 * 2 * 5 * 4 + 1):view(2, 2, 5, 4):double()
    local opts = { stride = { 2, 1 }, padding = { 1, 0 }, dilation = { 1, 2 } }
    local c = tide.im2col(x, { 3, 2 }, opts)
    assert.are.same({ 2, 12, 6 }, c:size())
    H.close(c:sum(), 4536, 0)
    H.close(c[{ 2, 8 }], { 0, 0, 67, 68, 75, 76 }, 0)
    local y = tide.col2im(c, { 5, 4 }, { 3, 2 }, opts)
    H.close(y[{ 2, 2 }], { { 61, 62, 63, 64 }, { 130, 132, 134, 136 }, { 69, 70, 71, 72 },
      { 146, 148, 150, 152 }, { 77, 78, 79, 80 } }, 0)
  end)

  it("are adjoint: <im2col(x), c> = <x, col2im(c)> on random float32 inputs", function()
    local x = tide.randn(3, 4, 7, 6)
    local opts = { stride = 2, padding = 1, dilation = { 2, 1 } }
    local cx = tide.im2col(x, 3, opts)
    local c = tide.randn(cx:size())
    local lhs = (cx:double() * c:double()):sum():item()
    local rhs = (x:double() * tide.col2im(c, { 7, 6 }, 3, opts):double()):sum():item()
    assert.is_true(math.abs(lhs - rhs) < 1e-3 * (1 + math.abs(lhs)), ("%g vs %g"):format(lhs, rhs))
  end)

  it("convolve: im2col + matmul equals a direct loop", function()
    local x, w = tide.randn(1, 2, 5, 5, { dtype = "float64" }), tide.randn(3, 2, 3, 3, { dtype = "float64" })
    local out = w:view(3, 18):matmul(tide.im2col(x, 3, { padding = 1 })):view(1, 3, 5, 5)
    local xp, wt = x:totable()[1], w:totable()
    for o = 1, 3 do for i = 1, 5 do for j = 1, 5 do
      local s = 0
      for c = 1, 2 do for a = 1, 3 do for b = 1, 3 do
        local r, q = i + a - 2, j + b - 2
        if r >= 1 and r <= 5 and q >= 1 and q <= 5 then s = s + xp[c][r][q] * wt[o][c][a][b] end
      end end end
      H.close(out[{ 1, o, i, j }], s, 1e-12)
    end end end
  end)

  it("reject bad shapes and parameters with the values", function()
    H.raises(function() tide.im2col(tide.zeros(3, 4, 5), 2) end, "unfold: expected a 4-D input (N, C, H, W), got [3,4,5]")
    H.raises(function() tide.im2col(tide.zeros(1, 1, 2, 2), 3) end, "does not fit the padded 2x2 input")
    H.raises(function() tide.im2col(tide.zeros(1, 1, 4, 4), 2, { stride = 0 }) end, "im2col: stride must be >= 1")
    H.raises(function() tide.col2im(tide.zeros(1, 5, 4), { 3, 3 }, 2) end, "fold: input [1,5,4] does not match a 2x2 kernel")
  end)
end)
