-- F.conv3d on rt_convmk.c's register tiles (td_conv3d, jit/jit_conv.c: float32,
-- x86-64-v4): values and gradients equal the composite's (depth taps gathered
-- into a grouped conv2d; F.fused = false) across strides (mixed per dim: the
-- 3-D stride phases), padding, dilation, groups, 1x1x1 and kd = 1 kernels,
-- channel counts past one 8-row block and past the dW tiles' widths; an
-- infinity reaches only what its windows reach; empty tensors; the same bits
-- on 1 and 2 threads; td_conv3d's errors.
local tide = require "tide"
local H = require "helper"
local F = tide.nn.functional
local core = require "tide.core"

local composite, run = H.composite, H.value_and_grads
local v4 = tide.config().eager_isa == "x86-64-v4"
local TOL = 2e-4

local function agree(f, inputs, tol, what)
  local yf, gf = run(f, inputs)
  local yc, gc = composite(run, f, inputs)
  assert.same(yc:size(), yf:size())
  H.close(yf, yc, tol, what .. ": y")
  for i = 1, #inputs do H.close(gf[i], gc[i], tol * 10, what .. ": gradient " .. i) end
end

describe("fused conv3d", function()
  local cases = {
    -- name, N, C, D, H, W, O, kd, kh, kw, opts
    { "3x3x3 padding 1", 2, 3, 5, 6, 7, 4, 3, 3, 3, { padding = 1 } },
    { "stride 2", 1, 3, 7, 8, 9, 5, 3, 3, 3, { stride = 2, padding = 1 } },
    { "stride {2, 1, 3}, padding {1, 0, 2}", 2, 3, 7, 6, 11, 5, 3, 2, 3, { stride = { 2, 1, 3 }, padding = { 1, 0, 2 } } },
    { "dilation {2, 1, 2}, groups 2", 2, 4, 6, 7, 8, 6, 2, 3, 2, { dilation = { 2, 1, 2 }, padding = { 1, 1, 0 }, groups = 2 } },
    { "stride 3, dilation 2", 1, 2, 9, 7, 8, 3, 3, 3, 3, { stride = 3, padding = 1, dilation = 2 } },
    { "1x1x1, 20 inputs", 2, 20, 4, 5, 6, 12, 1, 1, 1, {} },
    { "kd = 1, stride 2", 1, 5, 3, 9, 10, 12, 1, 3, 3, { padding = 1, stride = 2 } },
    { "depth-only kernel 3x1x1", 2, 4, 6, 3, 5, 5, 3, 1, 1, { padding = { 1, 0, 0 } } },
    -- past one 8-row block (dX rows: 9 inputs) and the dW tiles of 16, 32 and 64 columns
    { "9 inputs, 20 outputs", 1, 9, 4, 5, 6, 20, 3, 3, 3, { padding = 1 } },
    { "12 inputs, 40 outputs, 3 images", 3, 12, 4, 5, 5, 40, 3, 3, 3, { padding = { 0, 1, 1 } } },
    { "72 outputs, groups 3, stride {1, 2, 1}", 2, 6, 5, 8, 7, 72, 2, 3, 3, { groups = 3, stride = { 1, 2, 1 }, padding = 1 } },
    { "rows of 60 (a dW tile of one row)", 1, 3, 3, 3, 60, 10, 2, 3, 3, { padding = { 0, 1, 1 } } },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. ": the composite's values and gradients", function()
      local name, N, C, D, Hh, W, O, kd, kh, kw, opts = unpack(c)
      local g = opts.groups or 1
      tide.manual_seed(9)
      local x = tide.randn(N, C, D, Hh, W):requires_grad_()
      local w = (tide.randn(O, C / g, kd, kh, kw) * 0.3):requires_grad_()
      local b = tide.randn(O):requires_grad_()
      agree(function() return F.conv3d(x, w, b, opts) end, { x, w, b }, TOL, name)
      agree(function() return F.conv3d(x, w, nil, opts) end, { x, w }, TOL, name .. ", no bias")
    end)
  end

  it("takes the tiles (no create_graph; F.fused = false differentiates twice)", function()
    if not v4 then return pending("eager_isa is " .. tide.config().eager_isa) end
    local x = tide.randn(1, 2, 3, 4, 5):requires_grad_()
    local w = tide.randn(3, 2, 2, 2, 2):requires_grad_()
    H.raises(function()
      return tide.autograd.grad(F.conv3d(x, w):sum(), { x }, { create_graph = true })
    end, "conv3d_backward: create_graph", "fused = false")
    local gx = composite(function()
      return tide.autograd.grad((F.conv3d(x, w) ^ 2):sum(), { x }, { create_graph = true })[1]
    end)
    assert.is_true(gx.requires_grad)
  end)

  it("TIDE_ISA=v3 and TIDE_CONV_BLAS=1 keep the composite (second derivatives work)", function()
    local prog = [[
      local tide = require "tide"
      local F = tide.nn.functional
      local x = tide.randn(1, 2, 3, 4, 5):requires_grad_()
      local w = tide.randn(3, 2, 2, 2, 2):requires_grad_()
      local gx = tide.autograd.grad((F.conv3d(x, w) ^ 2):sum(), { x }, { create_graph = true })[1]
      io.write(tide.config().eager_isa, " ", tostring(gx.requires_grad))
    ]]
    for _, env in ipairs { { TIDE_ISA = "v3" }, { TIDE_CONV_BLAS = "1" } } do
      local out, rc = H.child(prog, env)
      assert(rc == 0 and out:find("true", 1, true), out)
      if env.TIDE_ISA then assert.truthy(out:find("x86-64-v3", 1, true), out) end
    end
  end)

  it("an infinity reaches only the outputs and gradients whose windows hold it", function()
    -- dropped columns (past each row, and the rows past OH of each depth slice)
    -- read the next row and slice: they must not leak into what is kept
    for _, at in ipairs { { 1, 2, 3, 4, 7 }, { 2, 1, 1, 1, 1 }, { 2, 3, 5, 6, 4 }, { 1, 1, 5, 1, 7 } } do
      for _, o in ipairs { { padding = 1 }, { stride = { 2, 1, 2 }, padding = { 1, 0, 1 } } } do
        tide.manual_seed(4)
        local xv = tide.randn(2, 3, 5, 6, 7)
        xv[at[1]][at[2]][at[3]][at[4]][at[5]] = 1 / 0
        local x = xv:requires_grad_()
        local w = (tide.randn(5, 3, 3, 3, 3) * 0.3):requires_grad_()
        local b = tide.randn(5):requires_grad_()
        local f = function() return F.conv3d(x, w, b, o) end
        local yf, gf = run(f, { x, w, b })
        local yc, gc = composite(run, f, { x, w, b })
        for i, pair in ipairs { { yf, yc }, { gf[1], gc[1] }, { gf[2], gc[2] }, { gf[3], gc[3] } } do
          local u, v = pair[1]:flatten():totable(), pair[2]:flatten():totable()
          assert.equal(#v, #u)
          for k = 1, #v do
            local a, e = u[k], v[k]
            local ok = (a ~= a and e ~= e) or a == e or math.abs(a - e) <= 1e-3 * math.max(1, math.abs(e))
            assert(ok, ("infinity at {%s}, result %d, element %d: %s vs the composite's %s"):format(
              table.concat(at, ","), i, k, a, e))
          end
        end
      end
    end
  end)

  it("no images, no input channels or no output channels: the composite's values, no crash", function()
    for _, c in ipairs { { 0, 3, 4 }, { 2, 0, 4 }, { 2, 3, 0 } } do
      local N, C, O = unpack(c)
      tide.manual_seed(5)
      local x = tide.randn(N, C, 4, 5, 6):requires_grad_()
      local w = tide.randn(O, C, 3, 3, 3):requires_grad_()
      local b = tide.randn(O):requires_grad_()
      for _, o in ipairs { { padding = 1 }, { stride = 2 } } do
        agree(function() return F.conv3d(x, w, b, o) end, { x, w, b }, 1e-5, ("N %d, C %d, O %d"):format(N, C, O))
      end
    end
  end)

  it("the same bits on 1 and 2 threads", function()
    local prog = [[
      local tide = require "tide"
      local F = tide.nn.functional
      tide.manual_seed(3)
      local x = tide.randn(5, 12, 6, 9, 10):requires_grad_()
      local w = (tide.randn(20, 12, 3, 3, 3) * 0.2):requires_grad_()
      local b = tide.randn(20):requires_grad_()
      local out = {}
      for _, o in ipairs { { padding = 1 }, { stride = { 2, 1, 2 }, padding = { 0, 1, 1 } } } do
        x.grad, w.grad, b.grad = nil, nil, nil
        local y = F.conv3d(x, w, b, o)
        y:backward(tide.randn(unpack(y:size())))
        for _, t in ipairs { y, x.grad, w.grad, b.grad } do
          for _, v in ipairs(t:flatten():totable()) do out[#out + 1] = ("%.9g"):format(v) end
        end
      end
      io.write(table.concat(out, " "))
    ]]
    local a, c = H.on_threads(prog)
    assert.is_true(#a > 10000)
    assert.is_true(a == c, "1 and 2 threads gave different results")
  end)

  it("td_conv3d: bad shapes, dtypes and geometries are clear errors", function()
    if not v4 then return pending("eager_isa is " .. tide.config().eager_isa) end
    local p = core.ffi.new("int64_t[9]")
    local function call(x, w, b, pv, g)
      for i = 1, 9 do p[i - 1] = pv[i] end
      return core.wrap(core.C.td_conv3d(x.p, w.p, b and b.p, p, g))
    end
    local one = { 1, 1, 1, 0, 0, 0, 1, 1, 1 }
    local x, w = tide.randn(1, 2, 3, 4, 5), tide.randn(3, 2, 2, 2, 2)
    H.raises(function() return call(x, w, nil, one, 3) end, "conv3d: input [1,2,3,4,5], weight [3,2,2,2,2] and 3 groups do not fit")
    H.raises(function() return call(tide.randn(2, 3, 4, 5), w, nil, one, 1) end, "conv3d: input [2,3,4,5]")
    H.raises(function() return call(x, w, tide.randn(4), one, 1) end, "bias [4]")
    H.raises(function() return call(x, tide.randn(3, 2, 4, 2, 2), nil, one, 1) end,
      "conv3d: the depth 4 kernel (dilated 4) does not fit the padded depth 3")
    H.raises(function() return call(x, w, nil, { 0, 1, 1, 0, 0, 0, 1, 1, 1 }, 1) end, "conv3d: depth kernel 2, stride 0")
    H.raises(function() return call(x, w, nil, { 1, 1, 1, 0, -1, 0, 1, 1, 1 }, 1) end, "conv3d: kernel")
    H.raises(function() return call(x:double(), w:double(), nil, one, 1) end, "conv3d: the eager kernel takes float32, got float64")
    H.raises(function() return call(x, w:double(), nil, one, 1) end, "conv3d")
  end)
end)
