-- Fused eager row functions (issue 16; jit/jit_fused.c, runtime/rt_norm.c):
-- F.layer_norm, F.rms_norm, F.cross_entropy and the backward of softmax and
-- log_softmax run as one kernel each, forward and backward. They agree with
-- the composite forms (F.fused = false), pass gradcheck in float64 to the
-- second order (a graph of the gradient takes the composite formula), run no
-- other op, and under tide.compile the composite is traced as before.
local tide = require "tide"
local H = require "helper"
local F = tide.nn.functional
local A = tide.autograd

local composite = H.composite   -- f() with the composite forms

local events = H.profile_events   -- the ops (names) and backward nodes a profile of fn ran

-- forward and gradients of loss(f(inputs)) with the fused and the composite forms
local function both_ways(f, inputs, seed)
  local function run()
    for _, x in ipairs(inputs) do x.grad = nil end
    tide.manual_seed(seed or 1)
    local y = f(unpack(inputs))
    local v = tide.randn(y:size(), { dtype = y.dtype })
    ;(y * v):sum():backward()
    local gs = {}
    for i, x in ipairs(inputs) do gs[i] = x.grad end
    return y:detach(), gs
  end
  local yf, gf = run()
  local yc, gc = composite(run)
  return yf, gf, yc, gc
end

local TOL = { float32 = 3e-5, float64 = 1e-11 }

describe("fused layer_norm and rms_norm", function()
  for _, dt in ipairs { tide.float32, tide.float64 } do
    for _, case in ipairs {
      { shape = { 7, 33 }, ns = { 33 }, w = true, b = true },
      { shape = { 3, 4, 5 }, ns = { 4, 5 }, w = true, b = false },
      { shape = { 6, 70 }, ns = { 70 }, w = false, b = true },
      { shape = { 2, 1 }, ns = { 1 }, w = false, b = false },
      -- blocks of 40 rows: float rows' dw/db terms pass through float sums of 16 rows
      { shape = { 2560, 37 }, ns = { 37 }, w = true, b = true },
      { shape = { 2600, 19 }, ns = { 19 }, w = false, b = true },
    } do
      local what = ("%s %s over %s%s%s"):format(dt.name, table.concat(case.shape, "x"), table.concat(case.ns, "x"),
        case.w and " +weight" or "", case.b and " +bias" or "")
      it("layer_norm " .. what .. ": the composite's values and gradients", function()
        tide.manual_seed(2)
        local x = (tide.randn(case.shape, { dtype = dt }) * 3 + 1):requires_grad_()
        local w = case.w and tide.randn(case.ns, { dtype = dt }):requires_grad_() or nil
        local b = case.b and tide.randn(case.ns, { dtype = dt }):requires_grad_() or nil
        local ins = { x, w, b }
        local list = { x }
        if w then list[#list + 1] = w end
        if b then list[#list + 1] = b end
        local yf, gf, yc, gc = both_ways(function() return F.layer_norm(x, case.ns, w, b) end, list)
        H.close(yf, yc, TOL[dt.name], "y")
        for i = 1, #list do H.close(gf[i], gc[i], TOL[dt.name] * 10, "gradient " .. i) end
        local _ = ins
      end)
      it("rms_norm " .. what .. ": the composite's values and gradients", function()
        tide.manual_seed(3)
        local x = (tide.randn(case.shape, { dtype = dt }) * 3 + 1):requires_grad_()
        local w = case.w and tide.randn(case.ns, { dtype = dt }):requires_grad_() or nil
        local list = { x, w }
        local yf, gf, yc, gc = both_ways(function() return F.rms_norm(x, case.ns, w) end, list)
        H.close(yf, yc, TOL[dt.name], "y")
        for i = 1, #list do H.close(gf[i], gc[i], TOL[dt.name] * 10, "gradient " .. i) end
      end)
    end
  end

  it("one kernel forward, one backward node, no other op", function()
    local x = tide.randn(16, 32):requires_grad_()
    local w, b = tide.randn(32):requires_grad_(), tide.randn(32):requires_grad_()
    local g = tide.randn(16, 32)
    local ops, nodes = events(function() F.layer_norm(x, 32, w, b):backward(g) end)
    local n = 0
    for _, o in ipairs(ops) do if o ~= "sum" and o ~= "view" and o ~= "expand" then n = n + 1 end end
    assert.same({ "layer_norm" }, (function() local r = {}; for _, o in ipairs(ops) do
      if o == "layer_norm" or (o ~= "sum" and o ~= "view" and o ~= "expand") then r[#r + 1] = o end end; return r end)())
    assert.equal(1, n)
    assert.truthy(table.concat(nodes, " "):find("layer_norm_backward", 1, true))
    ops = events(function() F.rms_norm(x, 32, w):backward(g) end)
    assert.truthy(table.concat(ops, " "):find("rms_norm", 1, true))
    for _, o in ipairs(ops) do assert.is_not.equal("mean", o) end
  end)

  it("gradcheck in float64, first and second order", function()
    local x = H.rand64({ 3, 5 })
    local w, b = H.rand64({ 5 }), H.rand64({ 5 })
    H.gradcheck(function(a, ww, bb) return F.layer_norm(a, 5, ww, bb) end, { x, w, b })
    H.gradcheck(function(a, ww) return F.rms_norm(a, 5, ww) end, { x, w })
    tide.manual_seed(4)
    local v = tide.randn(3, 5, { dtype = tide.float64 })
    local function grads(f)
      return function(...)
        local ins = { ... }
        return A.enable_grad(function()
          return unpack(A.grad({ (f(unpack(ins)) * v):sum() }, ins, { create_graph = true }))
        end)
      end
    end
    H.gradcheck(grads(function(a, ww, bb) return F.layer_norm(a, 5, ww, bb) end), { x, w, b })
    H.gradcheck(grads(function(a, ww) return F.rms_norm(a, 5, ww) end), { x, w })
  end)

  it("float rows: sums in float lanes, a row redone in double when they would cancel or overflow", function()
    -- runtime/rt_norm.c sums x - x[0] and its square in float lanes; a row
    -- whose first value is a few deviations off its mean (the sums nearly
    -- cancel) or whose squares pass float's range is summed again in double
    tide.manual_seed(12)
    local x = tide.randn(8, 1000) * 2 + 5
    local row = x[1]:double()
    local m, sd = row:mean():item(), row:std():item()
    for r, off in ipairs { 0.5, 2.5, 3.2, 4, 50, 3000 } do x[{ r + 1, 1 }] = m + off * sd end
    x[{ 8, 1 }] = 3e19; x[{ 8, 2 }] = -2e19                -- squares past float's range
    for _, f in ipairs { function(t) return F.layer_norm(t, 1000) end, function(t) return F.rms_norm(t, 1000) end } do
      local got, want = f(x):double(), f(x:double())     -- float64: the same float values' formula
      assert.is_true(want:isfinite():all():item())
      H.close(got, want, 2e-5)
    end
  end)

  it("the one-pass variance on rows far from 0 and with an outlying first value", function()
    -- the forward sums x - x[0] and its square in one pass: rows whose mean is
    -- far from 0, or whose first value (the shift) is far from their mean,
    -- must still give the two-pass variance of the composite
    tide.manual_seed(11)
    local x = tide.randn(6, 300, { dtype = tide.float64 }) * 0.5 + 1e6
    x[{ 2, 1 }] = 1e6 + 200          -- 400 deviations above its row's others
    x[{ 3, 1 }] = -1e6               -- a row whose shift is 2e6 off its mean
    H.close(F.layer_norm(x, 300), composite(F.layer_norm, x, 300), 1e-9)
    local x32 = (tide.randn(6, 1024) * 3 + 1000):float()
    x32[{ 4, 1 }] = 5000
    local ref = composite(F.layer_norm, x32:double(), 1024)
    H.close(F.layer_norm(x32, 1024):double(), ref, 2e-4)
  end)

  it("a non-contiguous input, and the saved input modified in place", function()
    local x0 = tide.randn(9, 6, { dtype = tide.float64 })
    local x = x0:t():requires_grad_()
    H.close(F.layer_norm(x, 9), composite(F.layer_norm, x, 9), 1e-12)
    local y = tide.randn(4, 8):requires_grad_()
    local z = y * 1
    local out = F.layer_norm(z, 8)
    tide.no_grad(function() z:add_(1) end)
    H.raises(function() out:sum():backward() end, "layer_norm_backward", "modified by an in-place operation")
  end)

  it("errors name the function and the shapes", function()
    H.raises(function() F.layer_norm(tide.randn(3, 4), 4, tide.randn(5)) end,
      "layer_norm: weight of shape [5] does not match the 4 normalized elements of input [3,4]")
    local core = require "tide.core"
    H.raises(function() core.wrap(core.C.td_layer_norm(nil, 1, nil, nil, 1e-5)) end, "layer_norm")
    H.raises(function() core.wrap(core.C.td_layer_norm(tide.randn(3, 4).p, 3, nil, nil, 1e-5)) end,
      "layer_norm: 3 normalized dims for an input of shape [3,4]")
    H.raises(function()
      core.wrap(core.C.td_cross_entropy(tide.randn(2, 3).p, tide.tensor({ 0, 3 }):long().p, nil, -100, 1, 0))
    end, "cross_entropy: target 3 is out of range for 3 classes")
  end)
end)

describe("fused cross_entropy", function()
  for _, dt in ipairs { tide.float32, tide.float64 } do
    for _, o in ipairs {
      {}, { reduction = "sum" }, { reduction = "none" }, { ignore_index = 3 }, { label_smoothing = 0.2 },
      { weight = true, ignore_index = 2, label_smoothing = 0.1 }, { weight = true, reduction = "none" },
    } do
      local desc = {}
      for k, v in pairs(o) do desc[#desc + 1] = k .. "=" .. tostring(v) end
      table.sort(desc)
      it(("%s %s: the composite's loss and gradient"):format(dt.name, table.concat(desc, " ")), function()
        tide.manual_seed(5)
        local x = (tide.randn(13, 7, { dtype = dt }) * 2):requires_grad_()
        local t = tide.tensor({ 1, 2, 3, 4, 5, 6, 7, 3, 3, 2, 1, 7, 3 }):long()
        local opts = {}
        for k, v in pairs(o) do opts[k] = v end
        if opts.weight then opts.weight = tide.rand(7, { dtype = dt }) + 0.5 end
        local yf, gf, yc, gc = both_ways(function() return F.cross_entropy(x, t, opts) end, { x })
        H.close(yf, yc, TOL[dt.name] * 10, "loss")
        H.close(gf[1], gc[1], TOL[dt.name] * 10, "gradient")
      end)
    end
  end

  it("one kernel forward and backward", function()
    local x = tide.randn(8, 10):requires_grad_()
    local t = tide.randint(1, 11, { 8 })
    local ops, nodes = events(function() F.cross_entropy(x, t):backward() end)
    for _, op in ipairs(ops) do assert.is_not.equal("log_softmax", op) end
    assert.truthy(table.concat(ops, " "):find("cross_entropy", 1, true))
    assert.same({ "cross_entropy_backward" }, nodes)
  end)

  it("gradcheck in float64, first and second order", function()
    local t = tide.tensor({ 2, 1, 3, 3 }):long()
    local w = tide.tensor({ 0.5, 2, 1 }, { dtype = tide.float64 })
    for _, o in ipairs { {}, { reduction = "none", weight = w, label_smoothing = 0.3 }, { ignore_index = 1 } } do
      local x = H.rand64({ 4, 3 })
      H.gradcheck(function(a) return F.cross_entropy(a, t, o) end, { x })
      tide.manual_seed(6)
      local v = tide.randn(o.reduction == "none" and { 4 } or {}, { dtype = tide.float64 })
      H.gradcheck(function(a)
        return A.enable_grad(function()
          return A.grad({ (F.cross_entropy(a, t, o) * v):sum() }, { a }, { create_graph = true })[1]
        end)
      end, { x })
    end
  end)

  it("labels out of range fail as before; weights that need a gradient take the composite", function()
    H.raises(function() F.cross_entropy(tide.randn(2, 3), tide.tensor({ 1, 4 }):long()) end,
      "target 4 is out of range for 3 classes")
    local w = tide.ones(3):requires_grad_()
    local x = tide.randn(4, 3):requires_grad_()
    local l = F.cross_entropy(x, tide.tensor({ 1, 2, 3, 1 }):long(), { weight = w })
    l:backward()
    assert.truthy(w.grad)
  end)
end)

describe("fused softmax and log_softmax backward", function()
  for _, dt in ipairs { tide.float32, tide.float64 } do
    for _, dim in ipairs { -1, 2, 1 } do
      for _, name in ipairs { "softmax", "log_softmax" } do
        it(("%s %s over dim %d: the composite's gradient, no op in the backward"):format(dt.name, name, dim), function()
          tide.manual_seed(7)
          local x = tide.randn(5, 300, 3, { dtype = dt }):requires_grad_()
          local g = tide.randn(5, 300, 3, { dtype = dt })
          local ops = events(function() x[name](x, dim):backward(g) end)
          local n = 0
          for _, o in ipairs(ops) do if o ~= name then n = n + 1 end end
          assert.equal(0, n)
          local fused = x.grad
          local comp = A.grad({ x[name](x, dim) }, { x }, { grad_outputs = { g }, create_graph = true })[1]
          H.close(fused, comp, TOL[dt.name], name)
        end)
      end
    end
  end
end)

describe("under tide.compile", function()
  it("the composite forms are traced (and fused by the compiler)", function()
    local x = tide.randn(8, 16)
    local w, b = tide.randn(16), tide.randn(16)
    local t = tide.randint(1, 17, { 8 })
    local f = tide.compile(function(a, ww, bb, tt)
      return F.layer_norm(a, 16, ww, bb) + F.rms_norm(a, 16, ww), F.cross_entropy(a, tt)
    end)
    local y1, l1 = f(x, w, b, t)
    H.close(y1, F.layer_norm(x, 16, w, b) + F.rms_norm(x, 16, w), 1e-5)
    H.close(l1, F.cross_entropy(x, t), 1e-5)
  end)
end)

describe("fused row kernels over edge values", function()
  -- rows with infinities, NaN, huge and denormal values, zeros: the fused
  -- results match the composite's (NaN where it has NaN, else within tolerance)
  local function edge_rows(dt)
    local big = dt == tide.float32 and 1e18 or 1e150   -- squares still finite: the composite does not overflow
    return tide.tensor({
      { 0, -0.0, 1e-40, -1e-40, 1, 2 },
      { 1 / 0, 1, 2, 3, 4, 5 },
      { -1 / 0, 1, 2, 3, 4, 5 },
      { 0 / 0, 1, 2, 3, 4, 5 },
      { big, -big, 1, 2, 3, 4 },
      { -1 / 0, -1 / 0, -1 / 0, -1 / 0, -1 / 0, -1 / 0 },
      { 7, 7, 7, 7, 7, 7 },
    }, { dtype = dt })
  end
  local function match(a, b, tol, what)
    local x, y = a:double():totable(), b:double():totable()
    for i = 1, #x do for j = 1, #x[i] do
      local u, v = x[i][j], y[i][j]
      local ok = (u ~= u and v ~= v) or u == v or math.abs(u - v) <= tol * math.max(1, math.abs(v))
      assert(ok, ("%s: [%d][%d] fused %.17g, composite %.17g"):format(what, i, j, u, v))
    end end
  end
  for _, dt in ipairs { tide.float32, tide.float64 } do
    it(dt.name .. ": layer_norm, rms_norm, softmax and log_softmax backward, cross_entropy", function()
      local x0 = edge_rows(dt)
      local g = tide.ones(7, 6, { dtype = dt })
      for _, f in ipairs {
        function(x) return F.layer_norm(x, 6) end, function(x) return F.rms_norm(x, 6) end,
        function(x) return x:softmax(-1) end, function(x) return x:log_softmax(-1) end,
      } do
        local xf, xc = x0:clone():requires_grad_(), x0:clone():requires_grad_()
        local yf = f(xf); yf:backward(g)
        local yc = composite(f, xc); composite(function() yc:backward(g) end)
        match(yf:detach(), yc:detach(), TOL[dt.name], "forward")
        match(xf.grad, xc.grad, TOL[dt.name] * 10, "backward")
      end
      local t = tide.tensor({ 1, 2, 3, 4, 5, 6, 1 }):long()
      for _, o in ipairs { { reduction = "none" }, { reduction = "none", label_smoothing = 0.1 } } do
        local xf, xc = x0:clone():requires_grad_(), x0:clone():requires_grad_()
        local lf = F.cross_entropy(xf, t, o); lf:backward(tide.ones(7, { dtype = dt }))
        local lc = composite(F.cross_entropy, xc, t, o); composite(function() lc:backward(tide.ones(7, { dtype = dt })) end)
        match(lf:detach():view(7, 1), lc:detach():view(7, 1), TOL[dt.name], "cross_entropy")
        match(xf.grad, xc.grad, TOL[dt.name] * 10, "cross_entropy backward")
      end
    end)
  end
end)
