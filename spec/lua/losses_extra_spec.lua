-- The losses of tide.nn.losses_extra (ctc_loss, triplet_margin_loss, ...) against
-- PyTorch's values and input gradients (spec/ref/losses_reference.lua, written by
-- spec/ref/losses_reference.py with torch 2.x), then per case: float64 gradcheck,
-- tide.compile equal to eager (or its clear error, flag nocompile) and OpenCL
-- equal to CPU; the nn modules; the errors.
local tide = require "tide"
local H = require "helper"
local R = require "ref_cases"
local REF = dofile("spec/ref/losses_reference.lua")
local F, nn = tide.nn.functional, tide.nn

describe("losses against PyTorch", function()
  for _, c in ipairs(REF) do
    it(c.name .. ": " .. c.lua, function()
      local fn, xs, names = R.case_fn(c)
      local got = fn(unpack(xs))
      local tol = R.flag(c, "f32") and 1e-6 or 1e-10
      R.same(got, c.outs[1], tol, c.name)

      local keys = R.grad_keys(c)
      if #keys > 0 then
        local pos = {}
        for i, k in ipairs(names) do pos[k] = i end
        -- the gradient of the summed loss against torch's
        local gx = {}
        for i, x in ipairs(xs) do gx[i] = x end
        for _, k in ipairs(keys) do gx[pos[k]] = xs[pos[k]]:clone():requires_grad_() end
        fn(unpack(gx)):sum():backward()
        for _, k in ipairs(keys) do R.same(gx[pos[k]].grad, c.grads[k], 1e-9, c.name .. " gradient of " .. k) end
        -- and the float64 gradcheck
        local function f(...)
          local a, all = { ... }, {}
          for i = 1, #xs do all[i] = xs[i] end
          for j, k in ipairs(keys) do all[pos[k]] = a[j] end
          return fn(unpack(all))
        end
        local ins = {}
        for j, k in ipairs(keys) do ins[j] = xs[pos[k]]:clone():requires_grad_() end
        H.gradcheck(f, ins)
      end

      local compiled = tide.compile(fn, { name = c.name })
      if R.flag(c, "nocompile") then
        H.raises(function() return compiled(unpack(xs)) end, "tide.compile")
      else
        R.same(compiled(unpack(xs)), c.outs[1], tol, c.name .. " compiled")
      end

      if H.has_opencl() then
        local dx = {}
        for i, x in ipairs(xs) do dx[i] = x:to("opencl") end
        R.same(fn(unpack(dx)):cpu(), c.outs[1], math.max(tol, 1e-9), c.name .. " on OpenCL")
      end
    end)
  end
end)

describe("loss modules", function()
  it("call the functional loss with their options, tensor options as buffers", function()
    local x, y = tide.randn(4, 3, { dtype = tide.float64 }), tide.long { 1, 3, 2, 3 }
    local w = tide.tensor({ 0.5, 1, 2 }, { dtype = tide.float64 })
    local m = nn.MultiMarginLoss({ p = 2, weight = w, reduction = "sum" })
    H.close(m(x, y), F.multi_margin_loss(x, y, { p = 2, weight = w, reduction = "sum" }), 0)
    assert.is_not_nil(m:state_dict().weight)
    local lp = tide.randn(5, 2, 4, { dtype = tide.float64 }):log_softmax(3)
    local t = tide.long { { 2, 3 }, { 4, 4 } }
    H.close(nn.CTCLoss({ reduction = "none" })(lp, t, { 5, 5 }, { 2, 2 }),
      F.ctc_loss(lp, t, { 5, 5 }, { 2, 2 }, { reduction = "none" }), 0)
    local a, b, c = tide.randn(3, 4), tide.randn(3, 4), tide.randn(3, 4)
    H.close(nn.TripletMarginLoss({ margin = 0.5, swap = true })(a, b, c),
      F.triplet_margin_loss(a, b, c, { margin = 0.5, swap = true }), 0)
    H.close(nn.CrossEntropyLoss({ label_smoothing = 0.1 })(a, tide.long { 1, 2, 4 }),
      F.cross_entropy(a, tide.long { 1, 2, 4 }, { label_smoothing = 0.1 }), 0)
    H.close(nn.GaussianNLLLoss()(a, b, c:abs()), F.gaussian_nll_loss(a, b, c:abs()), 0)
    assert.matches("margin=0.5", tostring(nn.TripletMarginLoss({ margin = 0.5 })), 1, true)
  end)

  it("reject unknown options and extra arguments", function()
    H.raises(function() return nn.CTCLoss({ blnk = 2 }) end, "CTCLoss", "blnk")
    H.raises(function() return nn.MSELoss()(tide.ones(2), tide.ones(2), tide.ones(2)) end,
      "MSELoss: forward takes 2 arguments, got 3")
  end)
end)

describe("loss errors name the loss and the values", function()
  local lp = tide.randn(4, 2, 3):log_softmax(3)
  it("ctc_loss", function()
    H.raises(function() return F.ctc_loss(tide.randn(4, 2, 3, 1), tide.long { { 2 } }, { 4 }, { 1 }) end,
      "ctc_loss: log_probs must be (T, N, C) or (T, C), got [4,2,3,1]")
    H.raises(function() return F.ctc_loss(lp, tide.long { { 2, 3 }, { 2, 2 } }, { 5, 4 }, { 2, 2 }) end,
      "ctc_loss: input_lengths[1] = 5 is outside 0..4 (T)")
    H.raises(function() return F.ctc_loss(lp, tide.long { { 2, 3 }, { 2, 2 } }, { 4, 4 }, { 2, 3 }) end,
      "ctc_loss: target_lengths[2] = 3 is outside 0..2 (the targets' length)")
    H.raises(function() return F.ctc_loss(lp, tide.long { { 2, 4 }, { 2, 2 } }, { 4, 4 }, { 2, 2 }) end,
      "ctc_loss: target label 4 is out of range for 3 classes")
    H.raises(function() return F.ctc_loss(lp, tide.long { { 2, 3 }, { 2, 2 } }, { 4 }, { 2, 2 }) end,
      "ctc_loss: 1 input_lengths for a batch of 2")
    H.raises(function() return F.ctc_loss(lp, tide.long { 2, 3, 2 }, { 4, 4 }, { 2, 2 }) end,
      "ctc_loss: concatenated targets hold 3 labels, target_lengths sum to 4")
    H.raises(function() return F.ctc_loss(lp, tide.long { { 2, 3 } }, { 4, 4 }, { 2, 2 }, { blank = 4 }) end,
      "ctc_loss: blank 4 is out of range for 3 classes")
    H.raises(function() return F.ctc_loss(lp, tide.tensor { { 2, 3 } }, { 4, 4 }, { 2, 2 }) end,
      "ctc_loss: targets must be an integer tensor")
    H.raises(function() return F.ctc_loss(lp, tide.long { { 2, 3 }, { 2, 2 } }, { 4, 4 }, { 2, 2 }, { reduction = "avg" }) end,
      "ctc_loss: reduction must be 'none', 'mean' or 'sum', got 'avg'")
  end)
  it("the others", function()
    local a = tide.randn(3, 4)
    H.raises(function() return F.triplet_margin_loss(a, a, tide.randn(4)) end,
      "triplet_margin_loss: anchor [3,4], positive [3,4] and negative [4] must have the same number of dims")
    H.raises(function() return F.cosine_embedding_loss(a, a, tide.ones(3, 1)) end,
      "cosine_embedding_loss: expected input1 and input2 of one shape (N, D) or (D) and target (N) or (), got [3,4], [3,4] and [3,1]")
    H.raises(function() return F.margin_ranking_loss(a, a, tide.ones(3)) end,
      "margin_ranking_loss: input1 [3,4], input2 [3,4] and target [3] must have the same number of dims")
    H.raises(function() return F.gaussian_nll_loss(a, a, tide.ones(2, 4)) end,
      "gaussian_nll_loss: var of shape [2,4] does not fit input [3,4]")
    H.raises(function() return F.gaussian_nll_loss(a, a, -tide.ones(3, 4)) end,
      "gaussian_nll_loss: var has a negative entry (-1)")
    H.raises(function() return F.multi_margin_loss(a, tide.long { 1, 5, 2 }) end,
      "multi_margin_loss: target label 5 is out of range for 4 classes")
    H.raises(function() return F.multi_margin_loss(a, tide.long { 1, 2, 2 }, { p = 3 }) end,
      "multi_margin_loss: p must be 1 or 2, got 3")
    H.raises(function() return F.multi_margin_loss(a, tide.long { 1, 2 }) end,
      "multi_margin_loss: expected input (N, C) or (C) and target (N) or (), got [3,4] and [2]")
    H.raises(function() return F.multi_margin_loss(a, tide.long { 1, 2, 2 }, { weight = tide.ones(3) }) end,
      "multi_margin_loss: weight must be a 1-D tensor with one entry per class (4), got [3]")
    H.raises(function() return F.poisson_nll_loss(a, tide.ones(4)) end,
      "poisson_nll_loss: target shape [4] does not match input shape [3,4]")
    H.raises(function() return F.poisson_nll_loss(a, a, { full = 1 }) end, "poisson_nll_loss: full must be a boolean, got 1")
    H.raises(function() return F.multilabel_soft_margin_loss(a, tide.ones(3)) end,
      "multilabel_soft_margin_loss: target shape [3] does not match input shape [3,4]")
  end)
end)
