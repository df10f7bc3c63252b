-- Autograd engine: backward with and without a gradient argument, .grad
-- accumulation, retain_graph, grad-mode scopes, detach, requires_grad rules,
-- autograd.grad (leaf and non-leaf inputs, higher order, Hessian-vector
-- products), in-place operations and version counters, error messages, and a
-- long chain that must neither overflow the stack nor leak.
local tide = require "tide"
local H = require "helper"

local F64 = { dtype = "float64" }
local function leaf(t) return tide.tensor(t, F64):requires_grad_() end
local function grad(...) return tide.autograd.grad(...) end

describe("backward", function()
  it("on a scalar fills .grad of every leaf", function()
    local x, w = leaf { 1.5, -2, 3 }, leaf { 0.5, 4, -1 }
    local loss = (x * x * w):sum()
    assert.is_nil(x.grad)
    loss:backward()
    H.close(x.grad, { 1.5, -16, -6 }, 1e-12)        -- 2 x w
    H.close(w.grad, { 2.25, 4, 9 }, 1e-12)          -- x^2
    assert.equal("float64", x.grad.dtype.name)
    assert.is_false(x.grad.requires_grad)
  end)

  it("on a non-scalar takes the gradient argument", function()
    local x = leaf { 1.5, -2, 3 }
    local y = x * x * x
    H.raises(function() y:backward() end, "grad can be implicitly created only for scalar outputs", "[3]")
    y:backward(tide.tensor({ 1, 0.5, -1 }, F64))
    H.close(x.grad, { 6.75, 6, -27 }, 1e-12)        -- 3 x^2 g
    local z = leaf { { 1, 2 }, { 3, 4 } }
    H.raises(function() (z * 2):backward(tide.ones(2, F64)) end,
      "backward: grad of shape [2] does not match output of shape [2,2]")
  end)

  it("reduces gradients over broadcast dims and keeps the leaf's shape and dtype", function()
    local x = leaf { { 1 }, { 2 }, { 3 } }          -- (3,1)
    local b = tide.tensor({ 1, 2, 3, 4 }, { dtype = "float32" }):requires_grad_()
    local y = (x * b):sum()                          -- (3,4), float64
    y:backward()
    assert.same({ 3, 1 }, x.grad:size())
    H.close(x.grad, { { 10 }, { 10 }, { 10 } }, 1e-12)
    assert.same({ 4 }, b.grad:size())
    assert.equal("float32", b.grad.dtype.name)
    H.close(b.grad, { 6, 6, 6, 6 }, 1e-6)
  end)

  it("accumulates into .grad over two backward calls; .grad = nil resets it", function()
    local x = leaf { 1, -2, 0.5 }
    ;(x * 2):sum():backward()
    ;(x * x):sum():backward()
    H.close(x.grad, { 4, -2, 3 }, 1e-12)             -- 2 + 2x
    x.grad = nil
    assert.is_nil(x.grad)
    ;(x * 3):sum():backward()
    H.close(x.grad, { 3, 3, 3 }, 1e-12)
  end)

  it("sums the contributions of a tensor used several times", function()
    local x = leaf { 2, -1 }
    local y = x * x + x:sin() * x + x
    y:sum():backward()
    local v = x:detach():totable()
    local want = {}
    for i = 1, 2 do want[i] = 2 * v[i] + math.cos(v[i]) * v[i] + math.sin(v[i]) + 1 end
    H.close(x.grad, want, 1e-12)
  end)

  it("retain_graph allows a second backward; without it the second one names retain_graph", function()
    local x = leaf { 0.5, 1, 2 }
    local y = (x:sin() * x):sum()
    y:backward { retain_graph = true }
    y:backward()
    local v, want = x:detach():totable(), {}
    for i = 1, 3 do want[i] = 2 * (math.cos(v[i]) * v[i] + math.sin(v[i])) end
    H.close(x.grad, want, 1e-12)
    H.raises(function() y:backward() end, "retain_graph")
    local z = (x:exp() * 2):sum()
    z:backward()
    H.raises(function() z:backward() end, "backward through the graph a second time", "retain_graph=true")
  end)

  it("through a tensor that does not require grad is an error", function()
    local x = tide.tensor({ 1, 2 }, F64)
    H.raises(function() (x * 2):sum():backward() end, "does not require grad")
    local y = leaf { 1, 2 }
    H.raises(function() y:detach():sum():backward() end, "does not require grad")
  end)

  it("on a leaf itself seeds its own .grad", function()
    local x = leaf { 3 }
    x:backward(tide.tensor({ 2 }, F64))
    H.close(x.grad, { 2 }, 0)
  end)
end)

describe("grad mode", function()
  it("no_grad and enable_grad scopes nest, return values, and restore the mode after an error", function()
    local x = leaf { 1, 2 }
    assert.is_true(tide.is_grad_enabled())
    local a, b = tide.no_grad(function()
      assert.is_false(tide.is_grad_enabled())
      local y = x * 2
      local z = tide.enable_grad(function() return x * 3 end)
      assert.is_false(tide.is_grad_enabled())
      return y, z
    end)
    assert.is_false(a.requires_grad)
    assert.is_nil(a.grad_fn)
    assert.is_true(b.requires_grad)
    assert.is_true(tide.is_grad_enabled())
    local err = H.raises(function() tide.no_grad(function() error("boom inside") end) end, "boom inside")
    assert.truthy(err:find("autograd_spec.lua:%d+:"), err)
    assert.is_true(tide.is_grad_enabled())
    tide.no_grad(function()
      H.raises(function() tide.enable_grad(function() error("inner") end) end, "inner")
      assert.is_false(tide.is_grad_enabled())
    end)
    assert.is_true(tide.is_grad_enabled())
    -- a C error inside the scope restores the mode as well
    H.raises(function() tide.no_grad(function() return tide.randn(2) + tide.randn(3) end) end, "cannot be broadcast")
    assert.is_true(tide.is_grad_enabled())
  end)

  it("set_grad_enabled returns the previous mode", function()
    assert.is_true(tide.set_grad_enabled(false))
    local y = leaf { 1 } * 2
    assert.is_false(tide.set_grad_enabled(true))
    assert.is_false(y.requires_grad)
  end)
end)

describe("tensor autograd state", function()
  it("detach shares data and the version counter but has no history", function()
    local x = leaf { 1, 2, 3 }
    local y = x * 2
    local d = y:detach()
    assert.is_false(d.requires_grad)
    assert.is_true(d.is_leaf)
    assert.is_nil(d.grad_fn)
    assert.is_false(y.is_leaf)
    assert.is_string(y.grad_fn)
    local v = y._version
    d:add_(1)                                        -- writes y's memory
    assert.same({ 3, 5, 7 }, y:detach():totable())
    assert.equal(v + 1, y._version)
    local n = d:requires_grad_()                     -- a new leaf
    assert.is_true(n.requires_grad and n.is_leaf)
  end)

  it("requires_grad_ and requires_grad on integer tensors and non-leaves", function()
    H.raises(function() tide.long { 1, 2 }:requires_grad_() end,
      "requires_grad_: only floating point tensors can require gradients, got int64")
    H.raises(function() local t = tide.tensor({ 1 }, { dtype = "int32" }); t.requires_grad = true end,
      "only floating point tensors can require gradients, got int32")
    H.raises(function() tide.zeros(3, { dtype = "uint8", requires_grad = true }) end, "got uint8")
    H.raises(function() tide.tensor { true }:requires_grad_() end, "got bool")
    local x = tide.zeros(2, F64)
    assert.is_false(x.requires_grad)
    x.requires_grad = true
    assert.is_true(x.requires_grad)
    x:requires_grad_(false)
    assert.is_false(x.requires_grad)
    local y = leaf { 1 } * 2
    H.raises(function() y:requires_grad_(false) end, "only change requires_grad of leaf tensors")
    -- integer results of float inputs never require grad, also when written in place
    assert.is_false((leaf { 1.5 }):gt(1).requires_grad)
    assert.is_false((leaf { 1.5 }):long().requires_grad)
    local i = tide.zeros(2, { dtype = "int64" })
    i:copy_(leaf { 1.5, -2.5 })
    assert.is_false(i.requires_grad)
    assert.is_nil(i.grad_fn)
    assert.same({ 1, -2 }, i:totable())
    -- a float32 destination takes the history of a float64 source; the gradient comes back as float64
    local s = leaf { 1.5, -2.5 }
    local f = tide.zeros(2)
    f:copy_(s * 3)
    assert.is_true(f.requires_grad)
    ;(f * f):sum():backward()
    assert.equal("float64", s.grad.dtype.name)
    H.close(s.grad, { 27, -45 }, 1e-5)              -- 2 (3 s) 3
  end)

  it("retain_grad keeps the gradient of a non-leaf", function()
    local x = leaf { 1, 2 }
    local y = x * 3
    local z = y * y
    y:retain_grad()
    z:sum():backward()
    H.close(y.grad, { 6, 12 }, 1e-12)               -- 2 y
    H.close(x.grad, { 18, 36 }, 1e-12)
    local w = x * 5
    ;(w * 2):sum():backward()
    assert.is_nil(w.grad)                            -- not retained
    H.raises(function() tide.tensor({ 1 }, F64):retain_grad() end, "does not require grad")
  end)
end)

describe("autograd.grad", function()
  it("differentiates with respect to leaf and non-leaf inputs without touching .grad", function()
    local x = leaf { 0.5, -1, 2 }
    local z = x * x
    local w = z:sin():sum()
    local g = grad(w, { x, z })
    local v = x:detach():totable()
    local gz, gx = {}, {}
    for i = 1, 3 do gz[i] = math.cos(v[i] ^ 2); gx[i] = gz[i] * 2 * v[i] end
    H.close(g[1], gx, 1e-12)
    H.close(g[2], gz, 1e-12)
    assert.is_nil(x.grad)
    assert.is_false(g[1].requires_grad)
  end)

  it("runs only the part of the graph between the outputs and the inputs", function()
    local x = leaf { 0.5, 1, 2 }
    local y = x * x                                  -- mul saves x, freed by the backward below
    y:sum():backward()
    local z = y:sin() + y * y
    local g = grad(z:sum(), y)[1]                    -- must not run mul's rule again
    local v = y:detach():totable()
    H.close(g, { math.cos(v[1]) + 2 * v[1], math.cos(v[2]) + 2 * v[2], math.cos(v[3]) + 2 * v[3] }, 1e-12)
    H.close(grad(y:sum(), y)[1], { 1, 1, 1 }, 0)     -- an output that is its own input
    H.raises(function() grad(z:sum(), x) end, "retain_graph")   -- needs saved values freed above
  end)

  it("takes grad_outputs for non-scalar outputs and several outputs at once", function()
    local x = leaf { 1, 2 }
    local a, b = x * 3, x * x
    local g = grad({ a, b }, { x }, { grad_outputs = { tide.tensor({ 1, -1 }, F64), tide.tensor({ 0.5, 2 }, F64) } })
    H.close(g[1], { 3 + 1, -3 + 8 }, 1e-12)
  end)

  it("unused inputs error unless allow_unused; inputs must require grad", function()
    local x, u = leaf { 1 }, leaf { 2 }
    local y = (x * 2):sum()
    H.raises(function() grad(y, { x, u }, { retain_graph = true }) end, "input 2 was not used", "allow_unused")
    local g = grad(y, { x, u }, { allow_unused = true })
    H.close(g[1], { 2 }, 0)
    assert.is_nil(g[2])
    H.raises(function() grad((x * 2):sum(), { tide.tensor({ 1 }, F64) }) end, "input 1 does not require grad")
  end)

  it("higher order: d2/dx2 x^3 = 6x, d3/dx3 x^3 = 6, d2/dx2 sin = -sin", function()
    local x = H.rand64({ 7 }, -2, 2)
    local g1 = grad((x ^ 3):sum(), x, { create_graph = true })[1]
    assert.is_true(g1.requires_grad)
    local v, w1, w2, ws = x:detach():totable(), {}, {}, {}
    for i = 1, 7 do w1[i] = 3 * v[i] ^ 2; w2[i] = 6 * v[i]; ws[i] = -math.sin(v[i]) end
    H.close(g1, w1, 1e-12)
    local g2 = grad(g1:sum(), x, { create_graph = true })[1]
    H.close(g2, w2, 1e-12)
    local g3 = grad(g2:sum(), x)[1]
    H.close(g3, { 6, 6, 6, 6, 6, 6, 6 }, 1e-12)
    local s1 = grad(x:sin():sum(), x, { create_graph = true })[1]
    H.close(grad(s1:sum(), x)[1], ws, 1e-12)
    -- the same through backward(create_graph): .grad itself has history
    local y = leaf { 0.5, 1.5 }
    ;(y ^ 3):sum():backward { create_graph = true }
    assert.is_true(y.grad.requires_grad)
    local gy = y.grad
    y.grad = nil
    gy:sum():backward()
    H.close(y.grad, { 3, 9 }, 1e-12)
  end)

  it("Hessian-vector product of a coupled function matches finite differences", function()
    -- f(x) = sum(exp(x)) * sum(x^2) + sum(sin(x) * x:flip-like coupling through matmul)
    local A = tide.randn({ 5, 5 }, F64)
    local function f(x) return x:exp():sum() * (x * x):sum() + (x:tanh():matmul(A):matmul(x:sin())) end
    local function gradf(x, create)
      return grad(f(x), x, { create_graph = create })[1]
    end
    local x = H.rand64({ 5 }, -1, 1)
    local v = tide.randn({ 5 }, F64)
    local g = gradf(x, true)
    local hv = grad((g * v):sum(), x)[1]
    local h = 1e-5
    local xp = (x:detach() + v * h):requires_grad_()
    local xm = (x:detach() - v * h):requires_grad_()
    local fd = (gradf(xp) - gradf(xm)) / (2 * h)
    H.close(hv, fd, 1e-6)
  end)
end)

describe("in-place operations and autograd", function()
  it("modifying a tensor saved for backward is detected", function()
    local x = leaf { 0.5, 1, 2 }
    local y = x * 1
    local z = y:sin()                                -- saves y
    y:add_(1)
    H.raises(function() z:sum():backward() end, "modified by an in-place operation")
    local t = x * 1
    t:exp_()                                         -- saves its output ...
    H.raises(function() t:mul_(3); t:sum():backward() end, "modified by an in-place operation", "exp")  -- ... as PyTorch
    local e = x:exp()                                -- saves its output
    local s = e * 1
    e:mul_(2)
    H.raises(function() s:sum():backward() end, "modified by an in-place operation", "exp")
    local a, b = leaf { 1, 2 }, leaf { 3, 4 }
    local p = a * b                                  -- saves a and b
    tide.no_grad(function() b:add_(1) end)
    H.raises(function() p:sum():backward() end, "modified by an in-place operation")
  end)

  it("in place on a leaf that requires grad is an error, allowed under no_grad", function()
    local x = leaf { 1, 2 }
    H.raises(function() x:add_(1) end, "add_: a leaf tensor that requires grad is used in an in-place operation")
    H.raises(function() x:zero_() end, "a leaf tensor that requires grad")
    local v = x._version
    tide.no_grad(function() x:mul_(2) end)
    assert.same({ 2, 4 }, x:detach():totable())
    assert.equal(v + 1, x._version)
  end)

  it("in place on a non-leaf records the op: y = x*2; y:add_(1) gives 2", function()
    local x = leaf { 1, 2, 3 }
    local y = x * 2
    y:add_(1)
    y:sum():backward()
    H.close(x.grad, { 2, 2, 2 }, 0)
    assert.same({ 3, 5, 7 }, y:detach():totable())
  end)

  it("in-place forms whose rule reads the old value (sin_, mul_, clamp_, pow_) differentiate correctly", function()
    local cases = {
      { "sin_", function(x) local y = x * 1; y:sin_(); return y end },
      { "mul_ then exp_", function(x) local y = x * 1; y:mul_(3); y:exp_(); return y end },
      { "mul_ by itself", function(x) local y = x * 2; y:mul_(y); return y end },
      { "mul_ by another", function(x, w) local y = x * 2; y:mul_(w); return y end },
      { "clamp_", function(x) local y = x * 2; y:clamp_(-1, 1); return y end },
      { "pow_", function(x, w) local y = x:abs() + 0.5; y:pow_(w); return y end },
      { "div_ then sub_", function(x, w) local y = x * 1; y:div_(w:abs() + 1); y:sub_(w); return y end },
      { "copy_ into a fresh tensor", function(x) local y = tide.zeros(7, F64); y:copy_(x:t()); return y end },
      { "masked_fill_", function(x) local y = x * 1; y:masked_fill_(x:detach():gt(0), 0.5); return y end },
    }
    for _, c in ipairs(cases) do
      local x = H.rand64({ 7 }, -2, 2)
      -- away from the clamp bounds and 0
      x = (x:detach():sign() * (x:detach():abs() * 0.5 + 0.1)):requires_grad_()
      local ok, err = pcall(H.gradcheck, c[2], { x, H.rand64({ 7 }, 0.5, 1.5) })
      assert(ok, c[1] .. ": " .. tostring(err))
    end
  end)

  it("writing into a view rewrites the base's history (PyTorch's CopySlices)", function()
    local x = leaf { 1, 2 }
    -- buf[2] = x[1] * 5 and a column view written with copy_: gradients reach x through buf
    local buf = tide.zeros(3, F64)
    buf[2] = x[1] * 5
    buf:view(3, 1)[{ { 3, 3 } }]:copy_(x:sum():view(1, 1))
    assert.is_true(buf.requires_grad)
    ;(buf * tide.tensor({ 10, 100, 1000 }, F64)):sum():backward()
    H.close(x.grad, { 500 + 1000, 1000 }, 0)   -- d/dx1 (100*5*x1 + 1000*(x1+x2)), d/dx2 1000*(x1+x2)
    -- the base keeps its history outside the written region
    x.grad = nil
    local y = x * 2
    y[1]:mul_(3)                               -- y = {6 x1, 2 x2}
    y:sum():backward()
    H.close(x.grad, { 6, 2 }, 0)
    -- against finite differences, with a strided region and a base that has history
    H.gradcheck(function(a, b)
      local t = a * 1.5
      t[{ {}, { 1, 3, 2 } }] = b:tanh()
      return t:exp()
    end, { H.rand64 { 3, 4 }, H.rand64 { 3, 2 } })
    -- a fresh tensor is not a view: it takes the history
    x.grad = nil
    local whole = tide.zeros(2, F64)
    whole:copy_(x * 5)
    whole:sum():backward()
    H.close(x.grad, { 5, 5 }, 0)
    -- a view of a leaf that requires grad is refused, as in PyTorch
    H.raises(function() x[1] = 3 end, "a view of a leaf tensor that requires grad is used in an in-place operation")
  end)
end)

describe("long chains", function()
  it("10000 ops backward without stack overflow, and the graph is freed after", function()
    collectgarbage(); collectgarbage()
    local live0 = tide.live_bytes()
    do
      local x = leaf { 0.5, -1.5 }
      local y = x
      for _ = 1, 5000 do y = (y * 1.0001) + 0.25 end   -- 10000 ops
      y:backward(tide.ones(2, F64))
      local d = 1.0001 ^ 5000
      H.close(x.grad, { d, d }, 1e-9)
      local z = x
      for _ = 1, 10000 do z = z:sin() end            -- a chain that is never run backward
      z, y = nil, nil
    end
    collectgarbage(); collectgarbage()
    assert(tide.live_bytes() - live0 < 4096, ("%d bytes still live"):format(tide.live_bytes() - live0))
  end)
end)

describe("max/min gradients with ties", function()
  it("max(dim) sends the gradient to the returned index, amax shares it among ties", function()
    local x = tide.tensor({ { 1, 3, 3 }, { 2, 2, 0 } }, { dtype = "float64", requires_grad = true })
    local v, i = x:max(2)
    H.close(i, { 2, 1 })
    v:sum():backward()
    H.close(x.grad, { { 0, 1, 0 }, { 1, 0, 0 } })
    x.grad = nil
    x:amax(2):sum():backward()
    H.close(x.grad, { { 0, 0.5, 0.5 }, { 0.5, 0.5, 0 } })
    x.grad = nil
    local m = x:min(1, true)                   -- keepdim: indices {1, 2, 2}
    m:sum():backward()
    H.close(x.grad, { { 1, 0, 0 }, { 0, 1, 1 } })
  end)
end)

describe("inference_mode", function()
  it("records nothing, like no_grad, and restores the mode after", function()
    local w = tide.randn(3, { requires_grad = true })
    local y = tide.inference_mode(function() return (w * 2):exp() end)
    assert.is_false(y.requires_grad)
    assert.is_nil(y.grad_fn)
    assert.is_true(tide.is_grad_enabled())
  end)
end)

describe("one-pass eager derivatives", function()
  -- gelu's backward runs as one kernel when no graph of the gradient is
  -- recorded; with create_graph it runs the rule's ops. Both must agree.
  for _, dt in ipairs { "float32", "float64" } do
    for _, form in ipairs { "none", "tanh" } do
      it(("gelu (%s form, %s) equals the rule's ops"):format(form, dt), function()
        local x = (tide.randn(1023, 7, { dtype = dt }) * 3):requires_grad_()
        local g = tide.randn(1023, 7, { dtype = dt })
        local fast = tide.autograd.grad({ x:gelu { approximate = form } }, { x }, { grad_outputs = { g } })[1]
        local ops = tide.autograd.grad({ x:gelu { approximate = form } }, { x },
                                       { grad_outputs = { g }, create_graph = true })[1]
        assert.is_true(ops.requires_grad)
        H.close(fast, ops:detach(), dt == "float32" and 2e-6 or 1e-14)
        -- a non-contiguous gradient takes the rule's ops
        local gt = tide.randn(7, 1023, { dtype = dt }):t()
        local a = tide.autograd.grad({ x:gelu { approximate = form } }, { x }, { grad_outputs = { gt } })[1]
        local b = tide.autograd.grad({ x:gelu { approximate = form } }, { x }, { grad_outputs = { gt:contiguous() } })[1]
        H.close(a, b, dt == "float32" and 2e-6 or 1e-14)
      end)
    end
  end
end)

describe("tide.autograd.detect_anomaly", function()
  local A = tide.autograd
  local function line() return debug.getinfo(2, "l").currentline end
  -- fn must fail in anomaly mode with an error holding every string
  local function anomaly(fn, ...)
    local ok, err = pcall(A.detect_anomaly, fn)
    assert.is_false(ok, "expected an error")
    for _, s in ipairs { ... } do
      assert.truthy(tostring(err):find(s, 1, true), ("error %q lacks %q"):format(tostring(err), s))
    end
  end

  it("a NaN or inf from a derivative rule names the rule, the op and the user's line that called it", function()
    local x = tide.tensor({ 1, 0, 2 }, { dtype = tide.float64 }):requires_grad_()
    local at
    local ok, err = pcall(A.detect_anomaly, function()
      at = line(); local y = x:sqrt()
      local s = (y * 2):sum()
      s:backward()
    end)
    assert.is_false(ok)
    for _, want in ipairs { "backward: sqrt_backward returned inf values in the gradient of argument 1 of sqrt",
                            "the forward sqrt was called at spec/jit/autograd_spec.lua:" .. at } do
      assert.truthy(tostring(err):find(want, 1, true), tostring(err))
    end
    assert.is_false(A.is_anomaly_enabled())
    -- outside the mode the same backward runs and the inf lands in .grad
    x.grad = nil
    local s = (x:sqrt() * 2):sum()
    s:backward()
    assert.equal(math.huge, x.grad[2]:item())
  end)

  it("finds NaN through layers: the line is the user's call, not tide's", function()
    local lin = tide.nn.Linear(3, 2, { dtype = tide.float64 })
    local x = H.rand64({ 4, 3 }, 1, 2):requires_grad_()
    local at
    local ok, err = pcall(A.detect_anomaly, function()
      local h = lin(x) - 10                        -- negative: sqrt gives NaN values and NaN gradients
      at = line(); local r = h:sqrt()
      r:sum():backward()
    end)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("sqrt_backward returned nan values", 1, true), tostring(err))
    assert.truthy(tostring(err):find("autograd_spec.lua:" .. at, 1, true), tostring(err))
  end)

  it("lets finite backward passes through and restores the JIT and the mode", function()
    local x = H.rand64({ 5 }, 0.5, 1):requires_grad_()
    local was = jit.status()
    local v = A.detect_anomaly(function(k) local s = (x:log() * k):sum(); s:backward(); return s:item() end, 3)
    H.close(x.grad, 3 / x:detach(), 1e-12)
    assert.is_number(v)
    assert.equal(was, jit.status())
    A.set_detect_anomaly(true)
    assert.is_true(A.is_anomaly_enabled())
    A.set_detect_anomaly(false)
    assert.is_false(A.is_anomaly_enabled())
  end)

  it("compiled functions run eagerly in the mode, so their ops are checked too", function()
    local step = tide.compile(function(x) local y = x:sqrt(); y:sum():backward(); return y end)
    local x = tide.tensor({ 4, 0 }, { dtype = tide.float64 }):requires_grad_()
    anomaly(function() return step(x) end, "sqrt_backward returned inf values")
  end)
end)
