-- The CTC kernel (issue 17; jit/jit_ctc.c, runtime/rt_ctc.c): F.ctc_loss on
-- CPU tensors outside tide.compile runs alpha forward and beta + the gradient
-- backward in C. It agrees with the Lua composite (F.fused = false) in values
-- and gradients, float32 and float64, on repeated labels, empty targets,
-- short inputs, impossible alignments, concatenated and unbatched targets; its
-- bits do not depend on the thread count; it passes gradcheck in float64 to
-- the second order (create_graph composes the recursions from ops).
local tide = require "tide"
local H = require "helper"
local F = tide.nn.functional
local A = tide.autograd

local events = H.profile_events   -- the ops (names) and backward nodes a profile of fn ran

local CASES = {
  { name = "padded, mean", T = 7, N = 3, C = 5, tg = { { 2, 4, 3 }, { 5, 2, 2 }, { 3, 3, 4 } }, il = { 7, 7, 7 },
    tl = { 3, 3, 3 } },
  { name = "repeated labels, input_lengths < T, none", T = 8, N = 3, C = 4, tg = { { 2, 2, 3 }, { 4, 4, 4 }, { 2, 3, 2 } },
    il = { 8, 7, 5 }, tl = { 3, 3, 2 }, opts = { reduction = "none" } },
  { name = "empty targets and an empty input, sum", T = 5, N = 3, C = 3, tg = { { 2, 3 }, { 2, 2 }, { 3, 2 } },
    il = { 5, 5, 0 }, tl = { 0, 2, 0 }, opts = { reduction = "sum" } },
  { name = "impossible alignments, zero_infinity", T = 6, N = 3, C = 4, tg = { { 3, 3, 3 }, { 2, 4, 1 }, { 2, 2, 4 } },
    il = { 3, 6, 2 }, tl = { 3, 3, 2 }, opts = { zero_infinity = true, blank = 1 } },
  { name = "concatenated targets, blank = 3", T = 6, N = 3, C = 4, tg = { 1, 2, 4, 4, 1 }, il = { 6, 5, 6 },
    tl = { 2, 0, 3 }, opts = { blank = 3, reduction = "none" } },
  { name = "unbatched", T = 6, C = 4, tg = { 2, 4, 2 }, il = { 6 }, tl = { 3 }, opts = { reduction = "none" } },
}

-- the case's log_probs (a leaf) and its call
local function setup(c, dt)
  tide.manual_seed(7)
  local shape = c.N and { c.T, c.N, c.C } or { c.T, c.C }
  local lp = tide.randn(shape, { dtype = dt }):log_softmax(-1):detach():requires_grad_()
  local tg = tide.long(c.tg)
  return lp, function(x) return F.ctc_loss(x, tg, c.il, c.tl, c.opts) end
end

local TOL = { float32 = { 2e-5, 2e-6 }, float64 = { 1e-12, 1e-13 } }   -- relative: values, gradients

describe("the CTC kernel", function()
  for _, dt in ipairs { tide.float32, tide.float64 } do
    for _, c in ipairs(CASES) do
      it(dt.name .. " " .. c.name .. ": the composite's values and gradients", function()
        local lp, f = setup(c, dt)
        local y, g = H.value_and_grads(function() return f(lp) end, { lp })
        local yc, gc = H.composite(H.value_and_grads, function() return f(lp) end, { lp })
        assert.equal(tostring(yc.shape), tostring(y.shape))
        local tol = TOL[dt.name]
        H.close(y, yc, tol[1] * (1 + yc:abs():max():item()), c.name .. " value")
        H.close(g[1], gc[1], tol[2] * (1 + gc[1]:abs():max():item()), c.name .. " gradient")
      end)
    end
  end

  it("impossible alignments without zero_infinity: inf, and no gradient from them", function()
    local c = CASES[4]
    local lp, f = setup(c, tide.float64)
    local opts = { reduction = "none" }
    local tg = tide.long(c.tg)
    local y = F.ctc_loss(lp, tg, c.il, c.tl, opts)
    local yc = H.composite(F.ctc_loss, lp, tg, c.il, c.tl, opts)
    assert.same({ math.huge, math.huge }, { y[1]:item(), y[3]:item() })
    assert.same({ math.huge, math.huge }, { yc[1]:item(), yc[3]:item() })
    H.close(y[2], yc[2], 1e-12)
    y:sum():backward()
    local g = lp.grad
    lp.grad = nil
    H.composite(function() F.ctc_loss(lp, tg, c.il, c.tl, opts):sum():backward() end)
    H.close(g, lp.grad, 1e-13)
    assert.equal(0, g:select(2, 1):abs():max():item())
  end)

  it("a row that underflows in linear space (the only path through a label e^-900 below the best) takes the log-space recursion", function()
    -- labels 2 2 in 3 frames: the one path is 2, blank, 2; at frame 2 the blank is e^-900 less likely than the 2s
    for _, dt in ipairs { tide.float32, tide.float64 } do
      tide.manual_seed(9)
      local x = tide.randn(3, 2, 3, { dtype = tide.float64 })
      x[2][1][1] = -900
      local lp = x:log_softmax(3):to(dt):detach():requires_grad_()
      local tg = tide.long { { 2, 2 }, { 2, 3 } }
      local function f(a) return F.ctc_loss(a, tg, { 3, 3 }, { 2, 2 }, { reduction = "none" }) end
      local y, g = H.value_and_grads(function() return f(lp) end, { lp })
      local yc, gc = H.composite(H.value_and_grads, function() return f(lp) end, { lp })
      assert.truthy(y[1]:item() > 800 and y[1]:item() < math.huge, tostring(y))
      local tol = TOL[dt.name]
      H.close(y, yc, tol[1] * (1 + yc:abs():max():item()), "value")
      H.close(g[1], gc[1], tol[2] * (1 + gc[1]:abs():max():item()), "gradient")
    end
  end)

  it("one op forward, one backward node", function()
    local lp, f = setup(CASES[1], tide.float32)
    local ops, nodes = events(function() f(lp):backward() end)
    assert.truthy(table.concat(ops, " "):find("ctc_loss", 1, true))
    assert.truthy(#ops < 12, table.concat(ops, " "))
    assert.truthy(table.concat(nodes, " "):find("ctc_loss_backward", 1, true))
  end)

  it("the same bits on 1 and 2 threads", function()
    local script = [[
      local tide = require "tide"
      local F = tide.nn.functional
      tide.manual_seed(3)
      for _, dt in ipairs { tide.float32, tide.float64 } do
        local lp = tide.randn(30, 24, 12, { dtype = dt }):log_softmax(3):detach():requires_grad_()
        local tg = tide.randint(1, 13, { 24, 9 })
        local il, tl = tide.randint(20, 31, { 24 }), tide.randint(0, 10, { 24 })
        local y = F.ctc_loss(lp, tg, il, tl, { reduction = "none", blank = 5 })
        y:sum():backward()
        local t = {}
        for _, v in ipairs(y:double():totable()) do t[#t + 1] = ("%a"):format(v) end
        for _, v in ipairs(lp.grad:double():reshape(-1):totable()) do t[#t + 1] = ("%a"):format(v) end
        print(("%d %d %s"):format(tide.get_num_threads(), #t, tostring(lp.grad:abs():sum():item() > 0)))
        print(table.concat(t, " "))
      end
    ]]
    local out1, out2 = H.on_threads(script)
    assert.truthy(out1:find("^1 %d+ true\n"), out1:sub(1, 200))
    assert.truthy(out2:find("^2 %d+ true\n"), out2:sub(1, 200))
    local a, b = out1:gsub("%f[^\n%z]%d (%d+ true)", "%1"), out2:gsub("%f[^\n%z]%d (%d+ true)", "%1")
    local at = 1
    while at <= #a and a:byte(at) == b:byte(at) do at = at + 1 end
    assert.truthy(a == b, ("the outputs differ from character %d: %q vs %q"):format(at, a:sub(at, at + 40), b:sub(at, at + 40)))
  end)

  it("gradcheck in float64, first and second order", function()
    local tg = tide.long { { 2, 2 }, { 3, 1 } }
    local function f(x) return F.ctc_loss(x, tg, { 4, 3 }, { 2, 1 }, { reduction = "sum" }) end
    local x = H.rand64({ 4, 2, 3 }, -2, 0)
    H.gradcheck(f, { x })
    tide.manual_seed(4)
    local function grads(a)
      return A.enable_grad(function() return unpack(A.grad({ f(a) }, { a }, { create_graph = true })) end)
    end
    H.gradcheck(grads, { x })
    -- the second order agrees with the composite's
    local v = tide.randn(4, 2, 3, { dtype = tide.float64 })
    local function hv()
      x.grad = nil
      local g = grads(x)
      ;(g * v):sum():backward()
      return g:detach(), x.grad
    end
    local g1, h1 = hv()
    local g2, h2 = H.composite(hv)
    H.close(g1, g2, 1e-13)
    H.close(h1, h2, 1e-12)
  end)

  it("errors of the C entry name the function and the values", function()
    local core = require "tide.core"
    local lp = tide.randn(4, 2, 3):log_softmax(3)
    local function call(t, il, tl, blank) return core.wrap(core.C.td_ctc_loss(lp.p, t.p, il.p, tl.p, blank, 1, 0)) end
    H.raises(function() call(tide.long { { 1, 2 }, { 0, 0 } }, tide.long { 4, 4 }, tide.int { 2, 1 }, 0) end,
      "ctc_loss: argument 4 has dtype int32, expected int64")
    H.raises(function() call(tide.long { { 1, 2 }, { 0, 0 } }, tide.long { 4 }, tide.long { 2, 1 }, 0) end,
      "ctc_loss: input_lengths must be (N) = (2), got [1]")
    H.raises(function() call(tide.long { 1, 2 }, tide.long { 4, 4 }, tide.long { 2, 1 }, 0) end,
      "ctc_loss: concatenated targets hold 2 labels, target_lengths sum to 3")
    H.raises(function() call(tide.long { { 1, 2 }, { 0, 0 } }, tide.long { 4, 4 }, tide.long { 2, 1 }, 3) end,
      "ctc_loss: blank 3 is out of range for 3 classes")
    H.raises(function() call(tide.long { { 1, 3 }, { 0, 0 } }, tide.long { 4, 4 }, tide.long { 2, 1 }, 0) end,
      "ctc_loss: target label 3 is out of range for 3 classes (0-based)")
    H.raises(function() F.ctc_loss(lp, tide.long { 2, 3, 4 }, { 4, 4 }, { 2, 1 }) end,
      "ctc_loss: target label 4 is out of range for 3 classes (labels are 1-based)")
  end)
end)
