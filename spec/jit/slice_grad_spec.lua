-- The gradients of slices (jit_autograd.c, "Gradients of slices"): a tensor
-- read through many slices gets their gradients joined by one cat (zeros in
-- the gaps, equal ranges summed, overlaps through slice_scatter), eagerly and
-- while traced, with the values of the slice rule; a matrix used by many
-- products gets its gradient as one matmul over all their rows; and compiled kernels that
-- differ only in where they read a buffer share their code (cg.h, "Buffer
-- bases"), so a loop over x[t] compiles its step kernel once.
local tide = require "tide"
local H = require "helper"

local F64 = { dtype = tide.float64 }

-- the op and backward rows of a profile of fn, by name: calls
local function calls(fn)
  local report = tide.profiler.profile(fn)
  local n = {}
  for _, r in ipairs(report:key_averages()) do n[r.name] = (n[r.name] or 0) + r.calls end
  return n
end

describe("gradients of slices", function()
  it("match the slice rule's values: tiles, gaps, repeats, overlaps, two dims, select", function()
    local cases = {
      function(y) return (y[1] * 2 + y[3]:sin() + y[2] * y[2]):sum() end,                  -- select, tiles dim 1
      function(y) local a, b = unpack(y:split(2, 2)) return (a:exp() + b * 3):sum() end,    -- narrow, tiles dim 2
      function(y) return (y:narrow(2, 2, 1) * 5 + y:narrow(2, 4, 1)):sum() end,             -- gaps
      function(y) return (y[2] * y[2] + y[2]:cos()):sum() end,                              -- one slice twice
      function(y) return (y:narrow(1, 1, 2):tanh():sum() + (y:narrow(1, 2, 2) ^ 2):sum()) end,   -- overlap
      function(y) return y[1]:sum() * 2 + y:narrow(2, 1, 2):exp():sum() + (y * y):sum() end,    -- two dims and the whole
    }
    for i, body in ipairs(cases) do
      local x = H.rand64({ 3, 4 })
      -- through a node (x * 1): leaves take their slices' gradients through the rule
      H.gradcheck(function(a) return body(a * 1) end, { x })
      local y = (x * 1)
      body(y):backward()
      local want = x.grad:clone()
      x.grad = nil
      local f = tide.compile(function(a) local l = body(a * 1); l:backward(); return l end)
      f(x)
      H.close(x.grad, want, 1e-12, "case " .. i .. " compiled")
    end
  end)

  it("second derivatives through joined pieces (create_graph)", function()
    local x = H.rand64({ 4, 3 })
    -- gradcheck's central differences run fn under no_grad: the inner gradient needs grad mode
    H.gradcheck(function(a) return tide.enable_grad(function()
      local y = a * a
      local g = tide.autograd.grad((y[1] * y[2] + y[3]:sin() + y[4]):sum(), y, { create_graph = true })[1]
      return (g * g):sum()
    end) end, { x })
  end)

  it("a tensor read at every step of a loop gets one cat, not a zero tensor per step", function()
    local T = 40
    local x = tide.randn(T, 8, 16, F64):requires_grad_()
    local n = calls(function()
      local xp = x * 2
      local h = tide.zeros(8, 16, F64)
      for t = 1, T do h = (h + xp[t]):tanh() end
      h:sum():backward()
    end)
    assert.equal(T, n.select_backward, "one backward per select")
    assert.is_nil(n.slice_scatter, "no slice_scatter")
    assert.equal(1, n.cat, "one cat of the " .. T .. " pieces")
    -- the values: the same loop on separate leaves
    local xs, h = {}, tide.zeros(8, 16, F64)
    for t = 1, T do xs[t] = (x[t] * 2):detach():requires_grad_(); h = (h + xs[t]):tanh() end
    h:sum():backward()
    for _, t in ipairs { 1, 17, T } do H.close(x.grad[t], xs[t].grad * 2, 1e-12, "step " .. t) end
  end)

  it("more pieces than cat takes at once (64) are joined in rounds", function()
    local x = H.rand64({ 70, 2 })
    local y = x * 3
    local s = y[1] * 0
    for t = 1, 70 do s = s + y[t] * t end
    s:sum():backward()
    local want = {}
    for t = 1, 70 do want[t] = { 3 * t, 3 * t } end
    H.close(x.grad, want, 1e-12)
  end)
end)

describe("gradients of a matrix used by many products", function()
  it("are one matmul over all the products' rows, with the rule's values", function()
    local T = 12
    local W = H.rand64({ 8, 6 })                                  -- (out, in), as a Linear
    local function loop(w, x, transposed)
      local m = transposed and w:t() or w:t():contiguous()        -- x W^T through a view, or a copy
      local h = tide.zeros(4, 6, F64)
      for t = 1, T do h = (x[t] + h:matmul(m):narrow(2, 1, 6) * 0.5):tanh() end
      return h
    end
    for _, transposed in ipairs { false, true } do
      local x = H.rand64({ T, 4, 6 })
      H.gradcheck(function(w, xx) return loop(w * 1, xx, transposed) end, { W, x })
      local n
      n = calls(function() loop(W * 1, x, transposed):sum():backward() end)
      -- T products: T matmuls forward, T - 1 backward for h (the first h needs none), one for W
      assert.equal(T + (T - 1) + 1, n.matmul, "transposed " .. tostring(transposed))
      -- the same value as separate weights per step (no joining)
      W.grad = nil
      loop(W * 1, x, transposed):sum():backward()
      local joined = W.grad:clone()
      local Ws, h = {}, tide.zeros(4, 6, F64)
      for t = 1, T do
        Ws[t] = W:detach():clone():requires_grad_()
        local m = transposed and Ws[t]:t() or Ws[t]:t():contiguous()
        h = (x[t] + h:matmul(m):narrow(2, 1, 6) * 0.5):tanh()
      end
      h:sum():backward()
      local sum = Ws[1].grad
      for t = 2, T do sum = sum + Ws[t].grad end
      H.close(joined, sum, 1e-12)
      assert.is_true(joined:is_contiguous() or transposed == false)
    end
  end)

  it("second derivatives through the joined products (create_graph)", function()
    local W, x = H.rand64({ 3, 3 }), H.rand64({ 5, 2, 3 })
    H.gradcheck(function(w) return tide.enable_grad(function()
      local m = w * 1
      local h = tide.zeros(2, 3, F64)
      for t = 1, 5 do h = (x[t] + h:matmul(m)):tanh() end
      local g = tide.autograd.grad(h:sum(), m, { create_graph = true })[1]
      return (g * g):sum()
    end) end, { W })
  end)
end)

describe("kernels that differ only in their buffers' offsets", function()
  it("share their code: a loop over x[t] compiles one step kernel", function()
    local function loop(T)
      return function(x, w)
        local xp = x:matmul(w)                 -- (T, 4, 8): each step reads its slice of one buffer
        local h = tide.zeros(4, 8)
        for t = 1, T do h = (xp[t] + h:matmul(w:narrow(1, 1, 8))):tanh() * 0.5 end
        return h
      end
    end
    local x, w = tide.randn(12, 4, 8), tide.randn(8, 8)
    local f = tide.compile(loop(12))
    local text = f:explain(x, w)
    local names, n = {}, 0
    for name in text:gmatch("\n(k_[%w_]+):") do
      if not names[name] then names[name] = true; n = n + 1 end
    end
    local steps = select(2, text:gsub("\nk_[%w_]+:", ""))
    assert.is_true(steps >= 12, "a kernel per step\n" .. text:sub(1, 3000))
    assert.is_true(n <= 3, ("%d distinct kernels for %d kernel steps"):format(n, steps))
    H.close(f(x, w), loop(12)(x, w), 1e-5)
  end)
end)
