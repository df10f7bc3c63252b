-- Eager convolution, pooling and batch norm without windows in memory (issue 16;
-- jit/jit_conv.c, runtime/rt_convgemm.c, rt_norm.c): values and gradients agree
-- with the composite forms (im2col + matmul, windows + a reduction; F.fused =
-- false) across strides, padding, dilation, groups, 1x1 kernels, several tiles
-- and several images per GEMM; gradcheck in float64 to the second order; no
-- unfold or matmul runs.
local tide = require "tide"
local H = require "helper"
local F = tide.nn.functional
local A = tide.autograd

local composite, run = H.composite, H.value_and_grads

local function agree(f, inputs, tol, what)
  local yf, gf = run(f, inputs)
  local yc, gc = composite(run, f, inputs)
  H.close(yf, yc, tol, what .. ": y")
  for i = 1, #inputs do H.close(gf[i], gc[i], tol * 10, what .. ": gradient " .. i) end
end

local TOL = { float32 = 2e-4, float64 = 1e-10 }

describe("fused conv2d", function()
  local cases = {
    { "3x3 padding 1", 2, 3, 9, 8, 4, 3, 3, { padding = 1 } },
    { "stride 2, padding (1, 2)", 2, 3, 9, 10, 5, 3, 3, { stride = 2, padding = { 1, 2 } } },
    { "dilation 2, 2x3 kernel", 1, 2, 11, 9, 3, 2, 3, { dilation = 2, padding = 1 } },
    { "groups 2", 2, 4, 7, 7, 6, 3, 3, { groups = 2, padding = 1 } },
    { "1x1", 3, 5, 6, 7, 4, 1, 1, {} },
    { "32 channels (dX by the flipped convolution)", 1, 32, 6, 6, 8, 3, 3, { padding = 1 } },
    { "several tiles", 1, 30, 33, 32, 4, 3, 3, { padding = 1 } },
    { "several images per GEMM", 19, 2, 5, 5, 3, 3, 3, { padding = 1 } },
    { "padding larger than the kernel's reach", 2, 2, 4, 4, 3, 2, 2, { padding = 2 } },
    -- float32 stride 1 runs on rt_convmk.c's register tiles: output channels past
    -- one 8-row block, and past one 16/32-column dW tile (its three shapes)
    { "40 output channels, 64 inputs", 2, 64, 9, 11, 40, 3, 3, { padding = 1 } },
    { "20 output channels, rows of 60", 1, 5, 5, 60, 20, 3, 3, { padding = { 0, 1 } } },
    { "72 output channels, groups 3, dilation (2, 1)", 2, 6, 8, 7, 72, 3, 2, { groups = 3, dilation = { 2, 1 }, padding = 2 } },
    -- strides: the input split into stride phases (rt_convmk.c)
    { "stride (3, 2), 40 output channels", 2, 5, 13, 12, 40, 3, 3, { stride = { 3, 2 }, padding = 1 } },
    { "stride 2, dilation 2, 5x4 kernel", 1, 3, 15, 14, 9, 5, 4, { stride = 2, dilation = 2, padding = { 2, 3 } } },
    -- float32 3x3 stride 1 with 8+ channels a group and 32+ output columns: Winograd's forward
    { "Winograd forward, odd sizes", 2, 16, 33, 35, 24, 3, 3, { padding = 1 } },
    { "Winograd forward, padding 0 and 2, groups 2", 3, 32, 21, 36, 16, 3, 3, { padding = { 0, 2 }, groups = 2 } },
  }
  for _, dt in ipairs { tide.float32, tide.float64 } do
    for _, c in ipairs(cases) do
      it(("%s %s: the composite's values and gradients"):format(dt.name, c[1]), function()
        local name, N, Cin, Hh, W, O, kh, kw, opts = unpack(c)
        local g = opts.groups or 1
        tide.manual_seed(9)
        local x = tide.randn(N, Cin, Hh, W, { dtype = dt }):requires_grad_()
        local w = (tide.randn(O, Cin / g, kh, kw, { dtype = dt }) * 0.3):requires_grad_()
        local b = tide.randn(O, { dtype = dt }):requires_grad_()
        agree(function() return F.conv2d(x, w, b, opts) end, { x, w, b }, TOL[dt.name], name)
        agree(function() return F.conv2d(x, w, nil, opts) end, { x, w }, TOL[dt.name], name .. ", no bias")
      end)
    end
  end

  it("an infinity reaches only the outputs and gradients whose windows hold it", function()
    -- rt_convmk.c computes dropped columns past each row's end, which read the
    -- next row: they must not leak into what is kept
    for _, at in ipairs { { 1, 2, 3, 7 }, { 2, 1, 1, 1 }, { 2, 3, 6, 4 } } do
      tide.manual_seed(4)
      local xv = tide.randn(2, 3, 6, 7)
      xv[at[1]][at[2]][at[3]][at[4]] = 1 / 0
      local x = xv:requires_grad_()
      local w = (tide.randn(5, 3, 3, 3) * 0.3):requires_grad_()
      local b = tide.randn(5):requires_grad_()
      local f = function() return F.conv2d(x, w, b, { padding = 1 }) end
      local yf, gf = run(f, { x, w, b })
      local yc, gc = composite(run, f, { x, w, b })
      for i, pair in ipairs { { yf, yc }, { gf[1], gc[1] }, { gf[2], gc[2] }, { gf[3], gc[3] } } do
        local u, v = pair[1]:flatten():totable(), pair[2]:flatten():totable()
        for k = 1, #v do
          local a, c = u[k], v[k]
          local ok = (a ~= a and c ~= c) or a == c or math.abs(a - c) <= 1e-3 * math.max(1, math.abs(c))
          assert(ok, ("infinity at {%s}, result %d, element %d: %s vs the composite's %s"):format(
            table.concat(at, ","), i, k, a, c))
        end
      end
    end
  end)

  it("TIDE_CONV_BLAS=1 (im2col + OpenBLAS) and the register tiles agree", function()
    local prog = [[
      local tide = require "tide"
      local F = tide.nn.functional
      tide.manual_seed(3)
      local x = tide.randn(3, 12, 9, 10):requires_grad_()
      local w = (tide.randn(20, 12, 3, 3) * 0.2):requires_grad_()
      local b = tide.randn(20):requires_grad_()
      local out = {}
      for _, o in ipairs { { padding = 1 }, { stride = 2, padding = { 0, 1 } } } do
        x.grad, w.grad, b.grad = nil, nil, nil
        local y = F.conv2d(x, w, b, o)
        y:backward(tide.randn(unpack(y:size())))
        for _, t in ipairs { y, x.grad, w.grad, b.grad } do
          for _, v in ipairs(t:flatten():totable()) do out[#out + 1] = ("%.9g"):format(v) end
        end
      end
      io.write(table.concat(out, " "))
    ]]
    local a, ra = H.child(prog, { TIDE_CONV_BLAS = "1" })
    local c, rc = H.child(prog, {})
    assert(ra == 0 and rc == 0, a .. c)
    local va, vc = {}, {}
    for v in a:gmatch("%S+") do va[#va + 1] = tonumber(v) end
    for v in c:gmatch("%S+") do vc[#vc + 1] = tonumber(v) end
    assert.equal(#va, #vc)
    assert.is_true(#va > 1000)
    assert.is_true(a ~= c, "both runs printed the same digits: TIDE_CONV_BLAS chose no other path")
    for i = 1, #va do
      assert(math.abs(va[i] - vc[i]) <= 2e-3 * math.max(1, math.abs(va[i])), ("value %d: %s vs %s"):format(i, va[i], vc[i]))
    end
  end)

  it("the forward's padded copy, made image by image by the threads: same bits on 1, 2 and 3 threads", function()
    -- rt_convmk.c has each thread pad the (image, group) blocks it computes
    -- into a buffer of its own when there are at least as many as threads (a
    -- block two ranges share is padded by both); fewer: one shared copy
    local prog = [[
      local tide = require "tide"
      local F = tide.nn.functional
      tide.manual_seed(5)
      local out = {}
      -- 64 x 64 images: two work items each, so a range can start inside one
      for _, c in ipairs { { 1, 1 }, { 3, 1 }, { 3, 3 }, { 5, 2 }, { 2, 1 } } do
        local N, G = c[1], c[2]
        local x = tide.randn(N, 6 * G, 64, 62)
        local w = tide.randn(16 * G, 6, 3, 3) * 0.2
        local xs = tide.randn(N, 6 * G, 62, 64):transpose(3, 4)        -- strided rows
        for _, xi in ipairs { x, xs } do
          local y = F.conv2d(xi, w, tide.randn(16 * G), { padding = 1, groups = G })
          local p = require("ffi").cast("const uint32_t *", require("tide.tensor").fields(y).ptr)
          for i = 0, y:numel() - 1 do out[#out + 1] = ("%08x"):format(p[i]) end
        end
      end
      io.write(table.concat(out, " "))
    ]]
    local r = {}
    for _, t in ipairs { "1", "2", "3" } do
      local o, rc = H.child(prog, { TIDE_NUM_THREADS = t })
      assert(rc == 0, o)
      r[#r + 1] = o
    end
    assert.is_true(#r[1] > 100000)
    assert.equal(r[1], r[2], "2 threads differ from 1")
    assert.equal(r[1], r[3], "3 threads differ from 1")
    -- and the values are the composite's
    tide.manual_seed(6)
    local x, w, b = tide.randn(3, 9, 12, 13), tide.randn(24, 3, 3, 3) * 0.2, tide.randn(24)
    local f = function() return F.conv2d(x, w, b, { padding = 1, groups = 3 }) end
    H.close(f(), composite(f), 2e-4, "groups 3, 3 images")
  end)

  it("Winograd's forward: the direct tiles' values, NaN and infinities where their windows reach, same bits on any thread count", function()
    local prog = [[
      local tide = require "tide"
      local F = tide.nn.functional
      tide.manual_seed(8)
      local out = {}
      local function put(y)
        local p = require("ffi").cast("const uint32_t *", require("tide.tensor").fields(y:contiguous()).ptr)
        for i = 0, y:numel() - 1 do out[#out + 1] = ("%08x"):format(p[i]) end
      end
      for _, c in ipairs { { 2, 16, 32, 32, 24, 1, 1 }, { 3, 8, 31, 41, 8, 0, 1 }, { 2, 32, 20, 64, 40, 2, 2 } } do
        local N, C, H, W, O, pad, G = unpack(c)
        local x, w, b = tide.randn(N, C, H, W), tide.randn(O, C / G, 3, 3) * 0.2, tide.randn(O)
        put(F.conv2d(x, w, b, { padding = pad, groups = G }))
        put(F.conv2d(x, w, nil, { padding = pad, groups = G }))
        -- dX: a forward convolution of dY with the flipped weights; conv_transpose2d's forward is one
        local xg = x:clone():requires_grad_()
        F.conv2d(xg, w, b, { padding = pad, groups = G }):backward(tide.randn(N, O, H + 2 * pad - 2, W + 2 * pad - 2))
        put(xg.grad)
        put(F.conv_transpose2d(tide.randn(N, O, H, W), w, tide.randn(C), { padding = 1, groups = G }))
      end
      io.write(table.concat(out, " "))
    ]]
    local r = {}
    for _, env in ipairs { { TIDE_NUM_THREADS = "1" }, { TIDE_NUM_THREADS = "2" }, { TIDE_NUM_THREADS = "3" },
                           { TIDE_NUM_THREADS = "2", TIDE_CONV_WINOGRAD = "0" } } do
      local o, rc = H.child(prog, env)
      assert(rc == 0, o)
      r[#r + 1] = o
    end
    assert.equal(r[1], r[2], "2 threads differ from 1")
    assert.equal(r[1], r[3], "3 threads differ from 1")
    local ffi = require "ffi"
    local u = ffi.new("uint32_t[1]")
    local function floats(words)
      local t = {}
      for wd in words:gmatch("%x+") do u[0] = tonumber(wd, 16); t[#t + 1] = ffi.cast("float *", u)[0] end
      return t
    end
    local a, d = floats(r[1]), floats(r[4])
    assert.equal(#a, #d)
    if tide.config().eager_isa == "x86-64-v4" then
      assert.is_true(r[1] ~= r[4], "TIDE_CONV_WINOGRAD=0 changed no bits: Winograd's path did not run")
    end
    for i = 1, #a do
      assert(math.abs(a[i] - d[i]) <= 2e-4 * math.max(1, math.abs(d[i])), ("value %d: %.9g vs the direct %.9g"):format(i, a[i], d[i]))
    end
    -- an infinity, a NaN or a huge value in x or w: the direct tiles' results
    tide.manual_seed(9)
    local x, w = tide.randn(2, 16, 32, 34), tide.randn(16, 16, 3, 3) * 0.2
    for _, case in ipairs { { "x", 1 / 0 }, { "x", 0 / 0 }, { "x", 3e30 }, { "w", -1 / 0 } } do
      local xx, ww = x:clone(), w:clone()
      if case[1] == "x" then xx[{ 2, 5, 10, 7 }] = case[2] else ww[{ 3, 4, 2, 2 }] = case[2] end
      local f = function() return F.conv2d(xx, ww, nil, { padding = 1 }) end
      local yf, yc = f():flatten():totable(), composite(f):flatten():totable()
      for i = 1, #yc do
        local p, q = yf[i], yc[i]
        assert((p ~= p and q ~= q) or p == q or math.abs(p - q) <= 1e-3 * math.max(1, math.abs(q)),
          ("%s holds %s: output %d is %s, the composite's %s"):format(case[1], case[2], i, p, q))
      end
    end
  end)

  it("no images, no input channels or no output channels: the composite's values, no crash", function()
    for _, c in ipairs { { 0, 3, 4 }, { 2, 0, 4 }, { 2, 3, 0 } } do
      local N, Cin, O = unpack(c)
      tide.manual_seed(5)
      local x = tide.randn(N, Cin, 5, 6):requires_grad_()
      local w = tide.randn(O, Cin, 3, 3):requires_grad_()
      local b = tide.randn(O):requires_grad_()
      for _, o in ipairs { { padding = 1 }, { stride = 2 } } do
        agree(function() return F.conv2d(x, w, b, o) end, { x, w, b }, 1e-5, ("N %d, C %d, O %d"):format(N, Cin, O))
      end
    end
  end)

  it("a stride past the input (2^32: one output position) gives that position's window, no crash", function()
    -- the tiles split the padded input into stride phases: 2^64 of them once crashed (API fuzzer)
    local function same(a, b) return a:size()[1] == b:size()[1] and a:eq(b):all():item() end
    for _, dt in ipairs { tide.float32, tide.float64 } do
      tide.manual_seed(6)
      local x = tide.randn(2, 4, 5, 6, 7, { dtype = dt }):requires_grad_()
      local w = tide.randn(3, 4, 2, 3, 2, { dtype = dt }):requires_grad_()
      local x2, w2 = x:detach():clone():requires_grad_(), w:detach():clone():requires_grad_()
      local y = F.conv3d(x, w, nil, { stride = 2 ^ 32 })
      local y2 = F.conv3d(x2, w2, nil, { stride = 7 })              -- one output position too
      assert.same({ 2, 3, 1, 1, 1 }, y:size())
      y:sum():backward(); y2:sum():backward()
      for _, p in ipairs { { y, y2 }, { x.grad, x2.grad }, { w.grad, w2.grad } } do
        assert.is_true(same(p[1], p[2]), dt.name)
      end
      local x4, w4 = x:detach()[{ {}, {}, 1 }], w:detach()[{ {}, {}, 1 }]
      assert.is_true(same(F.conv2d(x4, w4, nil, { stride = { 2 ^ 32, 1 } }), F.conv2d(x4, w4, nil, { stride = { 9, 1 } })))
      local x1 = x4[{ {}, {}, { 1, 1 }, { 1, 1 } }]
      assert.is_true(same(F.conv_transpose2d(x1, w4:transpose(1, 2), nil, { stride = 2 ^ 32 }),
        F.conv_transpose2d(x1, w4:transpose(1, 2), nil, { stride = 3 })))
    end
  end)

  it("conv1d and a non-contiguous input", function()
    local x = tide.randn(2, 3, 17, { dtype = tide.float64 }):requires_grad_()
    local w = tide.randn(4, 3, 5, { dtype = tide.float64 }):requires_grad_()
    agree(function() return F.conv1d(x, w, nil, { padding = 2, stride = 2 }) end, { x, w }, 1e-10, "conv1d")
    local xt = tide.randn(2, 3, 6, 5, { dtype = tide.float64 }):transpose(3, 4)
    local w2 = tide.randn(2, 3, 3, 3, { dtype = tide.float64 })
    H.close(F.conv2d(xt, w2), composite(F.conv2d, xt, w2), 1e-10)
  end)

  it("runs no unfold, matmul or fold", function()
    local x = tide.randn(2, 4, 8, 8):requires_grad_()
    local w = tide.randn(5, 4, 3, 3):requires_grad_()
    local rep = tide.profiler.profile(function() F.conv2d(x, w, nil, { padding = 1 }):backward(tide.randn(2, 5, 8, 8)) end)
    for _, e in ipairs(rep.events) do
      assert(e.name ~= "unfold" and e.name ~= "matmul" and e.name ~= "fold", e.name)
    end
  end)

  it("gradcheck in float64, first and second order", function()
    local x, w, b = H.rand64({ 2, 2, 5, 4 }), H.rand64({ 3, 2, 3, 2 }), H.rand64({ 3 })
    local opts = { padding = 1, stride = { 2, 1 } }
    H.gradcheck(function(a, ww, bb) return F.conv2d(a, ww, bb, opts) end, { x, w, b })
    tide.manual_seed(12)
    local v = tide.randn(F.conv2d(x, w, b, opts):size(), { dtype = tide.float64 })
    H.gradcheck(function(a, ww, bb)
      return A.enable_grad(function()
        return unpack(A.grad({ (F.conv2d(a, ww, bb, opts) * v):sum() }, { a, ww, bb }, { create_graph = true }))
      end)
    end, { x, w, b })
  end)
end)

describe("fused pooling", function()
  for _, dt in ipairs { tide.float32, tide.float64 } do
    for _, c in ipairs {
      { 2, {} }, { 3, { stride = 2, padding = 1 } }, { { 2, 3 }, { stride = { 1, 2 } } }, { 3, { dilation = 2, padding = 1 } },
    } do
      it(("%s kernel %s: max and average as the composites, indices too"):format(dt.name,
        type(c[1]) == "table" and table.concat(c[1], "x") or c[1]), function()
        tide.manual_seed(13)
        local x = tide.randn(2, 3, 9, 10, { dtype = dt }):requires_grad_()
        local o = {}
        for k, v in pairs(c[2]) do o[k] = v end
        agree(function() return F.max_pool2d(x, c[1], o) end, { x }, TOL[dt.name], "max_pool2d")
        if not o.dilation then
          agree(function() return F.avg_pool2d(x, c[1], o) end, { x }, TOL[dt.name], "avg_pool2d")
        end
        o.return_indices = true
        local _, i1 = F.max_pool2d(x, c[1], o)
        local _, i2 = composite(F.max_pool2d, x, c[1], o)
        assert.same(i2:totable(), i1:totable())
      end)
    end
  end

  it("gradcheck in float64, first and second order", function()
    local x = H.rand64({ 1, 2, 6, 5 })
    for _, f in ipairs { F.max_pool2d, F.avg_pool2d } do
      H.gradcheck(function(a) return f(a, 3, { stride = 2, padding = 1 }) end, { x })
      H.gradcheck(function(a)
        return A.enable_grad(function()
          local y = f(a, 3, { stride = 2, padding = 1 })
          return A.grad({ (y * y):sum() }, { a }, { create_graph = true })[1]
        end)
      end, { x })
    end
  end)
end)

describe("fused batch_norm in training", function()
  for _, dt in ipairs { tide.float32, tide.float64 } do
    it(dt.name .. ": the composite's values, gradients and running statistics", function()
      tide.manual_seed(14)
      local x = (tide.randn(6, 3, 5, 4, { dtype = dt }) * 2 + 1):requires_grad_()
      local w, b = tide.randn(3, { dtype = dt }):requires_grad_(), tide.randn(3, { dtype = dt }):requires_grad_()
      agree(function() return F.batch_norm(x, nil, nil, w, b, { training = true }) end, { x, w, b }, TOL[dt.name], "bn")
      local rm1, rv1 = tide.zeros(3, { dtype = dt }), tide.ones(3, { dtype = dt })
      local rm2, rv2 = rm1:clone(), rv1:clone()
      F.batch_norm(x, rm1, rv1, w, b, { training = true, momentum = 0.3 })
      composite(function() return F.batch_norm(x, rm2, rv2, w, b, { training = true, momentum = 0.3 }) end)
      H.close(rm1, rm2, TOL[dt.name]); H.close(rv1, rv2, TOL[dt.name])
      agree(function() return F.batch_norm(x:view(6, 3, 20), nil, nil, nil, nil, { training = true }) end, { x },
        TOL[dt.name], "bn, 3-D, no affine")
    end)
  end

  it("gradcheck in float64, first and second order", function()
    local x, w, b = H.rand64({ 4, 2, 3 }), H.rand64({ 2 }), H.rand64({ 2 })
    local function f(a, ww, bb) return F.batch_norm(a, nil, nil, ww, bb, { training = true }) end
    H.gradcheck(f, { x, w, b })
    tide.manual_seed(15)
    local v = tide.randn(4, 2, 3, { dtype = tide.float64 })
    H.gradcheck(function(a, ww, bb)
      return A.enable_grad(function()
        return unpack(A.grad({ (f(a, ww, bb) * v):sum() }, { a, ww, bb }, { create_graph = true }))
      end)
    end, { x, w, b })
  end)
end)

describe("fused pooling and batch_norm over edge values", function()
  it("NaN, infinities, signed zeros and denormals give the composites' values and positions", function()
    local x = tide.tensor({ { {
      { 0 / 0, 1, -1 / 0, 2 }, { 1 / 0, -0.0, 0, 1e-40 }, { 3, 3, -2, -2 }, { -1 / 0, -1 / 0, 5, 0 / 0 } } } },
      { dtype = tide.float64 })
    for _, o in ipairs { {}, { stride = 1 } } do
      local o2 = { stride = o.stride, padding = o.padding, return_indices = true }
      local y1, i1 = F.max_pool2d(x, 2, o2)
      local y2, i2 = composite(F.max_pool2d, x, 2, o2)
      local a, b = y1:totable(), y2:totable()
      assert.same(i2:totable(), i1:totable())
      for r = 1, #a[1][1] do for c = 1, #a[1][1][r] do
        local u, v = a[1][1][r][c], b[1][1][r][c]
        assert((u ~= u and v ~= v) or u == v, ("max_pool2d [%d][%d]: %s vs %s"):format(r, c, u, v))
      end end
      local s1, s2 = F.avg_pool2d(x, 2, o):totable(), composite(F.avg_pool2d, x, 2, o):totable()
      for r = 1, #s1[1][1] do for c = 1, #s1[1][1][r] do
        local u, v = s1[1][1][r][c], s2[1][1][r][c]
        assert((u ~= u and v ~= v) or u == v, ("avg_pool2d [%d][%d]: %s vs %s"):format(r, c, u, v))
      end end
    end
    -- with padding the composite shifts x by its minimum (-inf here: all NaN);
    -- the fused kernel skips the padding: a loop over each window is the reference
    local y, ix = F.max_pool2d(x, 2, { stride = 1, padding = 1, return_indices = true })
    local xv, yv, iv = x:totable()[1][1], y:totable()[1][1], ix:totable()[1][1]
    for oh = 1, 5 do for ow = 1, 5 do
      local best, bi
      for ki = 1, 2 do for kj = 1, 2 do
        local ih, iw = oh - 2 + ki, ow - 2 + kj
        if ih >= 1 and ih <= 4 and iw >= 1 and iw <= 4 then
          local v = xv[ih][iw]
          if not bi or v > best or (v ~= v and best == best) then best, bi = v, (ih - 1) * 4 + iw end   -- PyTorch's plane index
        end
      end end
      assert((best ~= best and yv[oh][ow] ~= yv[oh][ow]) or best == yv[oh][ow], ("[%d][%d]"):format(oh, ow))
      assert.equal(bi, iv[oh][ow])
    end end
  end)
end)
