-- Hooks (issue: interactive and embedded use): tensor hooks, module forward
-- pre-hooks, forward hooks and full backward hooks with their removal, and
-- parametrizations (register_parametrization, orthogonal), against autograd's
-- own gradients.
local tide = require "tide"
local H = require "helper"
local nn = tide.nn
local f64 = { dtype = tide.float64 }

describe("tensor hooks", function()
  it("a leaf's hook sees its gradient summed over its uses, once, and may replace it", function()
    local x = H.rand64({ 3 }):requires_grad_()
    local calls, seen = 0, nil
    local h = x:register_hook(function(g) calls = calls + 1; seen = g:clone(); return g * 2 end)
    local y = (x * 3):sum() + (x * x):sum()           -- two uses of x
    y:backward()
    local want = x:detach() * 2 + 3
    assert.equal(1, calls)
    H.close(seen, want, 1e-12)
    H.close(x.grad, want * 2, 1e-12)
    h:remove()
    x.grad = nil
    local y2 = (x * 3):sum()
    y2:backward()
    H.close(x.grad, { 3, 3, 3 }, 0)
    assert.equal(1, calls)
  end)

  it("a non-leaf's hook changes what flows to its producers; hooks chain in order", function()
    local a = H.rand64({ 2 }):requires_grad_()
    local b = a * 2
    local order = {}
    b:register_hook(function(g) order[#order + 1] = 1; return g * 10 end)
    b:register_hook(function(g) order[#order + 1] = 2; H.close(g, { 10, 10 }, 0) end)   -- nil keeps it
    b:sum():backward()
    assert.same({ 1, 2 }, order)
    H.close(a.grad, { 20, 20 }, 0)
  end)

  it("run for tide.autograd.grad too", function()
    local x = H.rand64({ 4 }):requires_grad_()
    x:register_hook(function(g) return g + 1 end)
    local g = tide.autograd.grad((x * 5):sum(), x)[1]
    H.close(g, { 6, 6, 6, 6 }, 0)
  end)

  it("a hook's error is the backward's error, and the engine stays usable", function()
    local x = H.rand64({ 2 }):requires_grad_()
    local h = x:register_hook(function() error("hook says no") end)
    H.raises(function() (x * 2):sum():backward() end, "hook says no")
    h:remove()
    local s = (x * 2):sum()
    s:backward()
    H.close(x.grad, { 2, 2 }, 0)
    local w = H.rand64({ 2 }):requires_grad_()
    w:register_hook(function(g) return g:view(1, 2) end)
    H.raises(function() (w * 2):sum():backward() end, "a hook returned a gradient of shape [1,2] for a tensor of shape [2]")
    local v = H.rand64({ 2 }):requires_grad_()
    v:register_hook(function() return 3 end)
    H.raises(function() (v * 2):sum():backward() end, "a tensor hook returned number (a Tensor or nil expected)")
  end)

  it("need a tensor that requires grad and a function", function()
    H.raises(function() tide.ones(2):register_hook(function() end) end, "does not require grad")
    H.raises(function() tide.ones(2):requires_grad_():register_hook(3) end, "bad argument #2 to 'register_hook' (function expected")
  end)

  it("die with their tensor: a new tensor at the same address has none", function()
    local fired = false
    local x = tide.randn(3):requires_grad_()
    x:register_hook(function() fired = true end)
    local addr = tostring(require("ffi").cast("void *", x.p))
    x:free()
    for _ = 1, 4 do
      local y = tide.randn(3):requires_grad_()
      local s = (y * 2):sum()
      s:backward()
      if tostring(require("ffi").cast("void *", y.p)) == addr then break end
    end
    assert.is_false(fired)
  end)

  it("run while tide.compile traces: their effect on the gradient is compiled", function()
    local w = H.rand64({ 3 }):requires_grad_()
    w:register_hook(function(g) return g * 3 end)
    local step = tide.compile(function(x) local l = (w * x):sum(); l:backward(); return l end)
    local x = H.rand64({ 3 })
    step(x)
    H.close(w.grad, x * 3, 1e-12)
    w.grad = nil
    step(x)
    H.close(w.grad, x * 3, 1e-12)
  end)
end)

describe("module hooks", function()
  it("forward pre-hooks change the input, forward hooks the output; removal restores", function()
    local lin = nn.Linear(3, 2, f64)
    local x = H.rand64({ 4, 3 })
    local plain = lin(x)
    local calls = {}
    local hp = lin:register_forward_pre_hook(function(m, inp)
      calls[#calls + 1] = "pre"; assert.equal(lin, m); return inp[1] * 2
    end)
    local hf = lin:register_forward_hook(function(m, inp, out)
      calls[#calls + 1] = "fwd"; H.close(inp[1], x * 2, 0); return out + 1
    end)
    H.close(lin(x), lin:forward(x * 2) + 1, 1e-12)
    assert.same({ "pre", "fwd" }, calls)
    hp:remove(); hf:remove()
    H.close(lin(x), plain, 0)
    assert.is_nil(rawget(lin, "_hooks"))
  end)

  it("full backward hooks get grad_input and grad_output as autograd computes them, and may replace grad_input", function()
    local bl = nn.Bilinear(3, 4, 2, f64)
    local a, b = H.rand64({ 5, 3 }):requires_grad_(), H.rand64({ 5, 4 }):requires_grad_()
    local want_a, want_b = unpack(tide.autograd.grad((bl(a, b) * 3):sum(), { a, b }))
    local got
    local h = bl:register_full_backward_hook(function(m, gi, go)
      got = { gi[1]:clone(), gi[2]:clone(), go[1]:clone() }
      return { gi[1] * 0, gi[2] }
    end)
    local s = (bl(a, b) * 3):sum()
    s:backward()
    H.close(got[1], want_a, 1e-12)
    H.close(got[2], want_b, 1e-12)
    H.close(got[3], tide.full({ 5, 2 }, 3, f64), 0)
    H.close(a.grad, tide.zeros(5, 3, f64), 0)                  -- replaced
    H.close(b.grad, want_b, 1e-12)
    h:remove()
  end)

  it("a full backward hook fires when no input requires grad (grad_input empty)", function()
    local lin = nn.Linear(3, 2, f64)
    local fired
    lin:register_full_backward_hook(function(m, gi, go) fired = { #gi, go[1]:size() } end)
    local s = lin(H.rand64({ 4, 3 }):detach()):sum()
    s:backward()
    assert.same({ 0, { 4, 2 } }, fired)
  end)

  it("run as eager code inside tide.compile (traced)", function()
    local lin = nn.Linear(3, 2, f64)
    lin:register_forward_hook(function(m, inp, out) return out:relu() end)
    local f = tide.compile(function(x) return lin(x) * 2 end)
    local x = H.rand64({ 4, 3 })
    H.close(f(x), lin(x) * 2, 1e-12)
  end)

  it("reject what is not a function", function()
    H.raises(function() nn.Linear(2, 2):register_forward_hook(1) end, "bad argument #1 to 'register_forward_hook'")
  end)
end)

describe("parametrizations", function()
  it("register_parametrization computes the weight from original, chains, and keeps PyTorch's keys", function()
    local Symmetric = nn.Module:extend("Symmetric")
    function Symmetric:forward(X) return (X + X:t()) * 0.5 end
    local Scale = nn.Module:extend("Scale")
    function Scale:forward(X) return X * 2 end
    local lin = nn.Linear(3, 3, f64)
    local w0 = lin.weight:detach():clone()
    nn.utils.register_parametrization(lin, "weight", Symmetric())
    H.close(lin.weight, (w0 + w0:t()) * 0.5, 1e-15)
    assert.same({ "bias", "parametrizations.weight.original" }, select(2, lin:state_dict()))
    assert.is_true(nn.utils.is_parametrized(lin, "weight"))
    nn.utils.register_parametrization(lin, "weight", Scale())
    H.close(lin.weight, w0 + w0:t(), 1e-15)
    -- gradients reach the original through both
    local x = H.rand64({ 2, 3 })
    local s = lin(x):sum()
    s:backward()
    local orig = lin.parametrizations:get("weight").original
    H.gradcheck(function(o) return ((o + o:t()) * 0.5 * 2):matmul(x:t()):sum() end, { orig:detach():clone():requires_grad_() })
    assert.is_not_nil(orig.grad)
    H.raises(function() nn.utils.register_parametrization(lin, "nope", Scale()) end, "has no parameter 'nope'")
    local Flat = nn.Module:extend("Flat")
    function Flat:forward(X) return X:reshape(-1) end
    H.raises(function() nn.utils.register_parametrization(nn.Linear(2, 2), "weight", Flat()) end,
      "changes weight from float32 [2,2] to float32 [4]")
  end)

  it("matrix_exp: rotations from skew matrices, and its gradient", function()
    local t = 0.7
    local A = tide.tensor({ { 0, -t }, { t, 0 } }, f64)
    H.close(nn.utils.matrix_exp(A), { { math.cos(t), -math.sin(t) }, { math.sin(t), math.cos(t) } }, 1e-15)
    local B = H.rand64({ 5, 5 }) * 6
    B = B - B:t()                                             -- skew, norm ~ 15: scaling and squaring
    local E = nn.utils.matrix_exp(B)
    H.close(E:matmul(E:t()), tide.eye(5, f64), 1e-13)
    H.close(nn.utils.matrix_exp(B * 0.5):matmul(nn.utils.matrix_exp(B * 0.5)), E, 1e-13)
    H.gradcheck(nn.utils.matrix_exp, { H.rand64({ 3, 3 }):requires_grad_() })
  end)

  it("orthogonal keeps the weight orthogonal through training, for square, tall and wide weights", function()
    for _, shp in ipairs { { 5, 5 }, { 6, 3 }, { 3, 6 } } do
      tide.manual_seed(4)
      local lin = nn.Linear(shp[2], shp[1], f64)
      nn.utils.orthogonal(lin)
      assert.same({ "bias", "parametrizations.weight.original", "parametrizations.weight.0.base" },
        select(2, lin:state_dict()))
      local opt = tide.optim.SGD(lin:parameters(), { lr = 0.1 })
      local x = H.rand64({ 4, shp[2] })
      local W0 = lin.weight:detach():clone()
      for _ = 1, 3 do
        opt:zero_grad()
        local loss = lin(x):pow(2):sum()
        loss:backward()
        opt:step()
      end
      lin(x)
      local W = lin.weight
      local n = math.min(shp[1], shp[2])
      local G = shp[1] >= shp[2] and W:t():matmul(W) or W:matmul(W:t())
      H.close(G, tide.eye(n, f64), 1e-12, table.concat(shp, "x"))
      assert.is_true((W - W0):abs():max():item() > 1e-3, "training moved the weight")
    end
    H.raises(function() nn.utils.orthogonal(nn.Linear(2, 2), { orthogonal_map = "cayley" }) end, "'cayley' is not available")
  end)
end)
