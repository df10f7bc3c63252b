-- The fused conv_transpose2d's bias and backward (jit/jit_conv.c td_conv_transpose2d,
-- rt_convmk.c): the bias added in the dX-by-phases epilogue (no add op), dx, dw and
-- db from one RT_CONVT_BWD job that reads the incoming gradient through its strides
-- (a sum's expanded gradient, a transposed one) and sums db in its padding pass;
-- values equal the composite's (matmul + fold, F.fused = false) and the im2col +
-- OpenBLAS path's (TIDE_CONV_BLAS=1) across odd sizes, strides 1, 2 (both column
-- phases stored together), 3 and mixed, output_padding, dilation, groups, channel
-- counts past one 8-row block, bias with and without grad, no bias, empty inputs;
-- the same bits on 1 and 2 threads.
local tide = require "tide"
local H = require "helper"
local F = tide.nn.functional
local core = require "tide.core"

local composite = H.composite
local TOL = { float32 = 2e-4, float64 = 1e-10 }

-- y and the gradients of (x, w, b) for the incoming gradient gy(y) (gy: a function of y's size)
local function run(f, inputs, gy)
  for _, t in ipairs(inputs) do t.grad = nil end
  local y = f()
  gy(y)
  local gs = {}
  for i, t in ipairs(inputs) do gs[i] = t.grad end
  return y:detach(), gs
end

local function agree(f, inputs, gy, tol, what)
  local yf, gf = run(f, inputs, gy)
  local yc, gc = composite(run, f, inputs, gy)
  assert.same(yc:size(), yf:size())
  H.close(yf, yc, tol, what .. ": y")
  for i, t in ipairs(inputs) do
    if gc[i] == nil then assert.is_nil(gf[i], what .. ": gradient " .. i .. " where the composite has none")
    elseif t.requires_grad then H.close(gf[i], gc[i], tol * 10, what .. ": gradient " .. i)
    else assert.is_nil(gf[i], what .. ": a gradient for an input without grad") end
  end
end

-- incoming gradients: random (contiguous), a sum's (expanded, strides 0), a transposed one
local function g_rand(y) tide.manual_seed(11); y:backward(tide.randn(y:size(), { dtype = y.dtype })) end
local function g_sum(y) y:sum():backward() end
local function g_transposed(y)
  local s = y:size()
  tide.manual_seed(12)
  y:backward(tide.randn(s[1], s[2], s[4], s[3], { dtype = y.dtype }):transpose(3, 4))
end

describe("fused conv_transpose2d: bias and backward", function()
  local cases = {
    -- name, N, Cin, H, W, Cout, kh, kw, opts
    { "4x4 stride 2 padding 1, odd plane", 2, 5, 7, 9, 6, 4, 4, { stride = 2, padding = 1 } },
    { "3x3 stride 2, output_padding 1", 2, 4, 5, 6, 3, 3, 3, { stride = 2, padding = 1, output_padding = 1 } },
    { "stride {2, 1}, {1, 2}", 1, 3, 6, 5, 4, 3, 2, { stride = { 2, 1 }, padding = { 1, 0 } } },
    { "stride {1, 2}, dilation 2", 2, 3, 5, 7, 5, 2, 3, { stride = { 1, 2 }, dilation = 2, output_padding = { 0, 1 } } },
    { "stride 3, kernel 5, padding 2", 1, 4, 4, 5, 3, 5, 5, { stride = 3, padding = 2, output_padding = 2 } },
    { "groups 2, stride 2, kernel 1 (a phase with no taps)", 2, 6, 4, 5, 4, 1, 1, { stride = 2, groups = 2 } },
    { "20 outputs, 40 inputs (row blocks, dW tiles)", 2, 40, 6, 7, 20, 4, 4, { stride = 2, padding = 1 } },
    { "stride 1, 33 outputs", 1, 9, 6, 5, 33, 3, 3, { padding = 1 } },
  }
  for _, c in ipairs(cases) do
    for gname, gy in pairs { random = g_rand, sum = g_sum, transposed = g_transposed } do
      it(c[1] .. ", " .. gname .. " gradient", function()
        local name, N, Cin, Hh, W, Cout, kh, kw, opts = unpack(c)
        local g = opts.groups or 1
        tide.manual_seed(5)
        local x = tide.randn(N, Cin, Hh, W):requires_grad_()
        local w = (tide.randn(Cin, Cout / g, kh, kw) * 0.3):requires_grad_()
        local b = tide.randn(Cout):requires_grad_()
        agree(function() return F.conv_transpose2d(x, w, b, opts) end, { x, w, b }, gy, TOL.float32, name)
        -- a bias without grad, no bias, the bias alone wanting grad, x alone
        b:requires_grad_(false)
        agree(function() return F.conv_transpose2d(x, w, b, opts) end, { x, w, b }, gy, TOL.float32, name .. ", b no grad")
        agree(function() return F.conv_transpose2d(x, w, nil, opts) end, { x, w }, gy, TOL.float32, name .. ", no bias")
        b:requires_grad_(); x:requires_grad_(false); w:requires_grad_(false)
        agree(function() return F.conv_transpose2d(x, w, b, opts) end, { x, w, b }, gy, TOL.float32, name .. ", b alone")
        x:requires_grad_(); b:requires_grad_(false)
        agree(function() return F.conv_transpose2d(x, w, b, opts) end, { x, w, b }, gy, TOL.float32, name .. ", x alone")
      end)
    end
  end

  it("float64 (the OpenBLAS path) with bias and an expanded gradient", function()
    tide.manual_seed(6)
    local x = tide.randn(2, 3, 5, 4, { dtype = tide.float64 }):requires_grad_()
    local w = tide.randn(3, 4, 3, 3, { dtype = tide.float64 }):requires_grad_()
    local b = tide.randn(4, { dtype = tide.float64 }):requires_grad_()
    for _, gy in ipairs { g_sum, g_transposed } do
      agree(function() return F.conv_transpose2d(x, w, b, { stride = 2, padding = 1, output_padding = 1 }) end,
        { x, w, b }, gy, TOL.float64, "float64")
    end
  end)

  it("adds the bias and sums its gradient inside the kernels (no add or sum op)", function()
    local x = tide.randn(2, 4, 5, 5):requires_grad_()
    local w = tide.randn(4, 3, 4, 4):requires_grad_()
    local b = tide.randn(3):requires_grad_()
    local list = H.profile_events(function()
      F.conv_transpose2d(x, w, b, { stride = 2, padding = 1 }):backward(tide.randn(2, 3, 10, 10))
    end)
    local ops = {}
    for _, name in ipairs(list) do ops[name] = true end
    assert(ops.conv_transpose2d, "the fused op ran")
    for _, name in ipairs { "add", "sum", "contiguous", "unfold", "fold", "matmul" } do
      assert(not ops[name], name .. " ran")
    end
    assert.is_not_nil(b.grad)
  end)

  it("no images, no input channels or no output channels: the composite's values", function()
    for _, c in ipairs { { 0, 3, 4 }, { 2, 0, 4 }, { 2, 3, 0 } } do
      local N, Cin, Cout = unpack(c)
      tide.manual_seed(7)
      local x = tide.randn(N, Cin, 4, 5):requires_grad_()
      local w = tide.randn(Cin, Cout, 3, 3):requires_grad_()
      local b = tide.randn(Cout):requires_grad_()
      for _, gy in ipairs { g_rand, g_sum } do
        agree(function() return F.conv_transpose2d(x, w, b, { stride = 2 }) end, { x, w, b }, gy, 1e-5,
          ("N %d, Cin %d, Cout %d"):format(N, Cin, Cout))
      end
    end
  end)

  it("td_conv_transpose2d on an empty input: y is the bias, db the gradient's sums, dx and dw zero", function()
    local p = core.ffi.new("int64_t[8]", { 2, 2, 0, 0, 1, 1, 5, 6 })
    local x = tide.randn(2, 0, 3, 3):requires_grad_()
    local w = tide.randn(0, 3, 1, 2):requires_grad_()
    local b = tide.tensor({ 1, 2, 3 }):requires_grad_()
    local y = core.wrap(core.C.td_conv_transpose2d(x.p, w.p, b.p, p, 1))
    assert.same({ 2, 3, 5, 6 }, y:size())
    H.close(y, b:detach():view(1, 3, 1, 1):expand(2, 3, 5, 6), 0, "y")
    tide.manual_seed(8)
    local gy = tide.randn(2, 3, 5, 6)
    y:backward(gy)
    H.close(b.grad, gy:sum({ 1, 3, 4 }), 1e-5, "db")
    assert.same({ 2, 0, 3, 3 }, x.grad:size())
    assert.same({ 0, 3, 1, 2 }, w.grad:size())
    H.raises(function() return core.wrap(core.C.td_conv_transpose2d(x.p, w.p, tide.randn(4).p, p, 1)) end,
      "conv_transpose2d: input [2,0,3,3], weight [0,3,1,2], bias [4], 1 groups and output plane 5x6 do not fit")
  end)

  local prog = [[
    local tide = require "tide"
    local F = tide.nn.functional
    tide.manual_seed(3)
    local x = tide.randn(3, 12, 9, 7):requires_grad_()
    local w = (tide.randn(12, 10, 4, 3) * 0.2):requires_grad_()
    local b = tide.randn(10):requires_grad_()
    local out = {}
    for _, o in ipairs { { stride = 2, padding = 1, output_padding = 1 }, { stride = { 3, 2 }, dilation = { 1, 2 } },
                         { padding = 1 } } do
      for k = 1, 2 do
        x.grad, w.grad, b.grad = nil, nil, nil
        local y = F.conv_transpose2d(x, w, b, o)
        if k == 1 then y:backward(tide.randn(unpack(y:size()))) else y:sum():backward() end
        for _, t in ipairs { y, x.grad, w.grad, b.grad } do
          for _, v in ipairs(t:flatten():totable()) do out[#out + 1] = ("%.9g"):format(v) end
        end
      end
    end
    io.write(table.concat(out, " "))
  ]]

  it("TIDE_CONV_BLAS=1 (im2col + OpenBLAS) and the register tiles agree", function()
    local a, ra = H.child(prog, { TIDE_CONV_BLAS = "1" })
    local c, rc = H.child(prog, {})
    assert(ra == 0 and rc == 0, a .. c)
    local va, vc = {}, {}
    for v in a:gmatch("%S+") do va[#va + 1] = tonumber(v) end
    for v in c:gmatch("%S+") do vc[#vc + 1] = tonumber(v) end
    assert.equal(#va, #vc)
    assert.is_true(#va > 10000)
    if tide.config().eager_isa == "x86-64-v4" and not os.getenv("TIDE_CONV_BLAS") then
      assert.is_true(a ~= c, "both runs printed the same digits: TIDE_CONV_BLAS chose no other path")
    end
    for i = 1, #va do
      assert(math.abs(va[i] - vc[i]) <= 2e-3 * math.max(1, math.abs(va[i])), ("value %d: %s vs %s"):format(i, va[i], vc[i]))
    end
  end)

  it("the same bits on 1 and 2 threads", function()
    local a, c = H.on_threads(prog)
    assert.is_true(#a > 10000)
    assert.is_true(a == c, "1 and 2 threads gave different results")
  end)
end)
