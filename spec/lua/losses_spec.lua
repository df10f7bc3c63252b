-- tide.nn.losses: every loss and option against literal values computed with
-- PyTorch 1.13 in float64 (labels there are 0-based: here label + 1), float64
-- gradchecks, and the error messages.
local tide = require "tide"
local H = require "helper"
local L = require "tide.nn.losses"

local f64 = { dtype = tide.float64 }
local function t64(v) return tide.tensor(v, f64) end

-- expected values: torch.nn.functional on the inputs below, in float64
local REF = {
  ce_none = { 3.7573519119313823, 1.9852513002896062, 2.2811191371176087 },
  ce_w_none = { 3.7573519119313823, 2.977876950434409, 1.1405595685588044 },
  ce_ls_none = { 3.584851911931382, 1.9602513002896063, 2.253619137117609 },
  ce_wls_none = { 3.4527195075279513, 2.906114385419929, 1.3927274391264457 },
  ce_mean = 2.6745741164461987,
  ce_w_mean = 2.6252628103081985,
  ce_ls_mean = 2.5995741164461985,
  ce_wls_mean = 2.583853777358109,
  ce_sum = 8.023722349338597,
  ce_w_sum = 7.875788430924596,
  ce_ls_sum = 7.798722349338597,
  ce_wls_sum = 7.751561332074326,
  ce_ign_none = { 3.7573519119313823, 0.0, 2.2811191371176087 },
  ce_ign_wls_none = { 3.3004033053262356, 0.0, 1.5188113744102663 },
  ce_ign_mean = 3.0192355245244955,
  ce_ign_wls_mean = 3.2128097864910012,
  ce_ign_sum = 6.038471049048991,
  ce_ign_wls_sum = 4.819214679736502,
  ce_ign3_mean = 3.0192355245244955,
  ce_ign3_w_mean = 3.265274320326791,
  ce3_none = { { 2.2936891784964635, 1.9307729571044474 }, { 2.554956919641991, 2.505571195389138 } },
  ce3_wls_none = { { 6.27256635559648, 1.8464462669234754 }, { 0.710856690847846, 6.801640427262494 } },
  ce3_mean = 2.3212475626580096,
  ce3_wls_mean = 2.1560703090524544,
  ce3_sum = 9.284990250632038,
  ce3_wls_sum = 15.631509740630296,
  ce1 = 0.20902076654506024,
  ce1_wls_none = 1.829396631817771,
  cep_none = { 1.647351911931382, 2.785251300289606, 2.006119137117609 },
  cep_w_none = { 2.133160272300504, 5.570502600579212, 2.4013989213970106 },
  cep_wls_none = { 2.1584176767039347, 4.832642981774911, 2.4013989213970106 },
  cep_mean = 2.146240783112866,
  cep_w_mean = 3.3683539314255753,
  cep_wls_mean = 3.130819859958619,
  cep_sum = 6.438722349338597,
  cep_w_sum = 10.105061794276725,
  cep_wls_sum = 9.392459579875856,
  P3 = { { { 0.2551938243019894, 0.32275187467651634 }, { 0.2309089210801344, 0.1957589074710366 }, { 0.5138972546178763, 0.48148921785244714 } }, { { 0.19193465526864853, 0.21362929847081846 }, { 0.5217324856683184, 0.26092741437607986 }, { 0.286332859063033, 0.5254432871531017 } } },
  cep3_mean = 1.5800677606968698,
  cep3_ls_none = { { 1.6250953699520017, 1.156484158837938 }, { 1.663779322049189, 1.79471744606614 } },
  ce_ign_wls_grad = { { 0.04998281249364641, -0.4999357397065796, 0.023625757895194156, 0.42632716931773906 }, { 0.0, 0.0, 0.0, 0.0 }, { -0.20895126299828143, 0.13119746612054503, 0.14459099555327212, -0.06683719867553574 } },
  nll_none = { 2.5, 0.1, 1.4, 0.0 },
  nll_w_none = { 2.5, 0.2, 0.7, 0.0 },
  nll_mean = 1.3333333333333333,
  nll_w_mean = 0.9714285714285714,
  nll_sum = 4.0,
  nll_w_sum = 3.4,
  nll_ign0_mean = 1.95,
  mse_none = { { 0.09, 4.0, 0.0899999999999999 }, { 4.0, 0.0024999999999999935, 0.039999999999999994 } },
  l1_none = { { 0.3, 2.0, 0.2999999999999998 }, { 2.0, 0.04999999999999993, 0.19999999999999998 } },
  sl1_none = { { 0.045, 1.5, 0.04499999999999995 }, { 1.5, 0.0012499999999999968, 0.019999999999999997 } },
  sl1b_none = { { 0.09, 1.75, 0.0899999999999999 }, { 1.75, 0.0024999999999999935, 0.039999999999999994 } },
  sl1b0_none = { { 0.3, 2.0, 0.2999999999999998 }, { 2.0, 0.04999999999999993, 0.19999999999999998 } },
  hub_none = { { 0.045, 1.5, 0.04499999999999995 }, { 1.5, 0.0012499999999999968, 0.019999999999999997 } },
  hubd_none = { { 0.045, 0.875, 0.04499999999999995 }, { 0.875, 0.0012499999999999968, 0.019999999999999997 } },
  hubd2_none = { { 0.045, 2.0, 0.04499999999999995 }, { 2.0, 0.0012499999999999968, 0.019999999999999997 } },
  mse_mean = 1.3704166666666666,
  l1_mean = 0.8083333333333332,
  sl1_mean = 0.5185416666666667,
  sl1b_mean = 0.6204166666666667,
  sl1b0_mean = 0.8083333333333332,
  hub_mean = 0.5185416666666667,
  hubd_mean = 0.31020833333333336,
  hubd2_mean = 0.6852083333333333,
  mse_sum = 8.2225,
  l1_sum = 4.85,
  sl1_sum = 3.11125,
  sl1b_sum = 3.7225,
  sl1b0_sum = 4.85,
  hub_sum = 3.11125,
  hubd_sum = 1.86125,
  hubd2_sum = 4.11125,
  bce_none = { { 0.10536051565782628, 0.35667494393873245, 0.05129329438755058 }, { 0.6931471805599453, 0.020202707317519466, 0.5108256237659907 } },
  bce_w_none = { { 0.10536051565782628, 0.7133498878774649, 0.02564664719377529 }, { 0.6931471805599453, 0.04040541463503893, 0.25541281188299536 } },
  bce_mean = 0.2895840442712608,
  bce_w_mean = 0.305553742967841,
  bce_sum = 1.7375042656275648,
  bce_w_sum = 1.833322457807046,
  bce_edge_none = { 100.0, 100.0, 0.0, -0.0, 0.6931471805599453 },
  bcel_none = { { 0.6931471805599453, 0.07888973429254957, 0.048587351573741965 }, { 40.0, 40.0, 0.8231860488854579 } },
  bcel_w_none = { { 0.6931471805599453, 0.15777946858509914, 0.024293675786870982 }, { 40.0, 80.0, 0.41159302444272894 } },
  bcel_pw_none = { { 2.0794415416798357, 0.07888973429254964, 0.048587351573741965 }, { 40.0, 20.0, 0.8231860488854579 } },
  bcel_wpw_none = { { 2.0794415416798357, 0.15777946858509928, 0.024293675786870982 }, { 40.0, 40.0, 0.41159302444272894 } },
  bcel_mean = 13.607301719218617,
  bcel_w_mean = 20.21446889156244,
  bcel_pw_mean = 10.50501744607193,
  bcel_wpw_mean = 13.778851285082423,
  bcel_sum = 81.6438103153117,
  bcel_w_sum = 121.28681334937464,
  bcel_pw_sum = 63.03010467643158,
  bcel_wpw_sum = 82.67310771049453,
  bcel_pw_grad = { { -1.5, 0.07585818002124355, -0.047425873177566635 }, { 1.0, -0.5, 0.268187772168166 } },
  bcel_big = { 200.0, 200.0, 0.0, 0.0 },
  LQ = { { -1.3434055416160293, -1.8434055416160293, -0.5434055416160293 }, { -1.1041306053367284, -0.6041306053367284, -2.1041306053367284 } },
  kl_none = { { -0.05320647416361424, 0.0, 0.2562095922414557 }, { 0.20549171238839153, -0.19554093894579055, 0.17945906105420945 } },
  kll_none = { { 0.041829821187028035, -0.04591795513780162, 0.3942405233623827 }, { 0.35598298894244257, -0.1559920317066823, 0.3690079682933176 } },
  kl_mean = 0.06540215876244197,
  kll_mean = 0.1598585524901145,
  kl_sum = 0.39241295257465186,
  kll_sum = 0.959151314940687,
  kl_batchmean = 0.19620647628732593,
  kll_batchmean = 0.4795756574703435,
}

-- the inputs the values above were computed from
local X = t64({ { 0.2, -1.3, 0.7, 2.1 }, { 1.5, 0.3, -0.8, 0.0 }, { -0.4, 0.9, 1.2, -2.2 } })
local Y = tide.long({ 2, 4, 1 })
local W = t64({ 0.5, 1.0, 2.0, 1.5 })
local YI = tide.long({ 2, -100, 1 })
local X3 = t64({ { { 0.1, -0.5 }, { 1.2, 0.3 }, { -0.7, 0.8 } }, { { 0.4, 2.0 }, { -1.1, 0.6 }, { 0.9, -0.2 } } })
local Y3 = tide.long({ { 3, 1 }, { 2, 3 } })
local W3 = t64({ 1.0, 0.25, 3.0 })
local P = t64({ { 0.1, 0.2, 0.3, 0.4 }, { 0.0, 0.0, 1.0, 0.0 }, { 0.25, 0.25, 0.25, 0.25 } })
local LP = t64({ { -1.2, -0.3, -2.5 }, { -0.1, -3.0, -0.7 }, { -0.9, -1.4, -0.2 }, { -2.2, -0.05, -1.1 } })
local TL = tide.long({ 3, 1, 2, -100 })
local WL = t64({ 2.0, 0.5, 1.0 })
local A = t64({ { 0.5, -1.2, 2.0 }, { 0.1, 0.9, -0.3 } })
local B = t64({ { 0.2, 0.8, 2.3 }, { -1.9, 0.95, -0.1 } })
local Q = t64({ { 0.1, 0.7, 0.95 }, { 0.5, 0.02, 0.6 } })
local R = t64({ { 0.0, 1.0, 1.0 }, { 0.3, 0.0, 1.0 } })
local WB = t64({ 1.0, 2.0, 0.5 })
local Z = t64({ { 0.0, -2.5, 3.0 }, { 40.0, -40.0, 0.7 } })
local RZ = t64({ { 1.0, 0.0, 1.0 }, { 0.0, 1.0, 0.4 } })
local PW = t64({ 3.0, 0.5, 1.0 })
local LQ = t64(REF.LQ)
local PT = t64({ { 0.2, 0.0, 0.8 }, { 0.5, 0.25, 0.25 } })

local REDUCTIONS = { "none", "mean", "sum" }
local TOL = 1e-12

-- check fn(reduction) against REF[prefix .. "_" .. reduction] for each reduction
local function each_reduction(prefix, fn, list)
  for _, r in ipairs(list or REDUCTIONS) do
    local got = fn(r)
    H.close(got, REF[prefix .. "_" .. r], TOL, prefix .. " " .. r)
    if r ~= "none" then assert.equal(0, got:dim()) end
  end
end

describe("cross_entropy with class labels", function()
  it("matches torch for every reduction, with weight and label smoothing", function()
    each_reduction("ce", function(r) return L.cross_entropy(X, Y, { reduction = r }) end)
    each_reduction("ce_w", function(r) return L.cross_entropy(X, Y, { weight = W, reduction = r }) end)
    each_reduction("ce_ls", function(r) return L.cross_entropy(X, Y, { label_smoothing = 0.1, reduction = r }) end)
    each_reduction("ce_wls", function(r)
      return L.cross_entropy(X, Y, { weight = W, label_smoothing = 0.2, reduction = r })
    end)
    H.close(L.cross_entropy(X, Y), REF.ce_mean, TOL, "default reduction is mean")
  end)

  it("skips ignore_index (default -100), dividing the weighted mean by the kept weights", function()
    each_reduction("ce_ign", function(r) return L.cross_entropy(X, YI, { reduction = r }) end)
    each_reduction("ce_ign_wls", function(r)
      return L.cross_entropy(X, YI, { weight = W, label_smoothing = 0.3, reduction = r })
    end)
    -- ignore_index is a 1-based label too
    H.close(L.cross_entropy(X, Y, { ignore_index = 4 }), REF.ce_ign3_mean, TOL)
    H.close(L.cross_entropy(X, Y, { weight = W, ignore_index = 4 }), REF.ce_ign3_w_mean, TOL)
    -- every target ignored: mean is 0/0 as in torch
    local all = L.cross_entropy(X, tide.long({ -100, -100, -100 })):item()
    assert.is_true(all ~= all)
  end)

  it("gives torch's gradient with weight, ignore_index and label smoothing", function()
    local x = X:clone():requires_grad_()
    L.cross_entropy(x, YI, { weight = W, label_smoothing = 0.3 }):backward()
    H.close(x.grad, REF.ce_ign_wls_grad, TOL)
  end)

  it("takes (N, C, d1) inputs and an unbatched (C) input with a 0-dim target", function()
    each_reduction("ce3", function(r) return L.cross_entropy(X3, Y3, { reduction = r }) end)
    each_reduction("ce3_wls", function(r)
      return L.cross_entropy(X3, Y3, { weight = W3, label_smoothing = 0.15, reduction = r })
    end)
    local x1 = t64({ 0.3, -1.0, 2.0 })
    H.close(L.cross_entropy(x1, tide.long(3)), REF.ce1, TOL)
    local none = L.cross_entropy(x1, tide.long(1), { weight = W3, label_smoothing = 0.1, reduction = "none" })
    assert.equal(0, none:dim())
    H.close(none, REF.ce1_wls_none, TOL)
  end)

  it("accepts int32 labels and float32 logits", function()
    local got = L.cross_entropy(X:float(), Y:to("int32"), { weight = W:float() })
    assert.equal(tide.float32, got.dtype)
    H.close(got, REF.ce_w_mean, 1e-6)
  end)

  it("passes gradcheck in float64", function()
    local y3 = tide.long({ { 3, -100 }, { 2, 3 } })
    for _, r in ipairs(REDUCTIONS) do
      H.gradcheck(function(x) return L.cross_entropy(x, Y, { reduction = r, weight = W, label_smoothing = 0.2 }) end,
        { H.rand64({ 3, 4 }) })
      H.gradcheck(function(x) return L.cross_entropy(x, y3, { reduction = r, weight = W3, label_smoothing = 0.1 }) end,
        { H.rand64({ 2, 3, 2 }) })
    end
    H.gradcheck(function(x) return L.cross_entropy(x, tide.long(2)) end, { H.rand64({ 3 }) })
  end)
end)

describe("cross_entropy with class probabilities", function()
  it("matches torch for every reduction, with weight and label smoothing", function()
    each_reduction("cep", function(r) return L.cross_entropy(X, P, { reduction = r }) end)
    each_reduction("cep_w", function(r) return L.cross_entropy(X, P, { weight = W, reduction = r }) end)
    each_reduction("cep_wls", function(r)
      return L.cross_entropy(X, P, { weight = W, label_smoothing = 0.25, reduction = r })
    end)
    -- ignore_index does not apply to probabilities
    H.close(L.cross_entropy(X, P, { ignore_index = 1 }), REF.cep_mean, TOL)
  end)

  it("takes (N, C, d1) inputs; mean divides by N * d1", function()
    local p3 = t64(REF.P3)
    H.close(L.cross_entropy(X3, p3), REF.cep3_mean, TOL)
    H.close(L.cross_entropy(X3, p3, { label_smoothing = 0.1, reduction = "none" }), REF.cep3_ls_none, TOL)
  end)

  it("passes gradcheck in float64 for input and target", function()
    for _, r in ipairs(REDUCTIONS) do
      H.gradcheck(function(x, p) return L.cross_entropy(x, p, { reduction = r, weight = W, label_smoothing = 0.1 }) end,
        { H.rand64({ 3, 4 }), H.rand64({ 3, 4 }, 0, 1) })
    end
  end)
end)

describe("nll_loss", function()
  it("matches torch for every reduction, with weight and ignore_index", function()
    each_reduction("nll", function(r) return L.nll_loss(LP, TL, { reduction = r }) end)
    each_reduction("nll_w", function(r) return L.nll_loss(LP, TL, { weight = WL, reduction = r }) end)
    H.close(L.nll_loss(LP, tide.long({ 3, 1, 2, 1 }), { ignore_index = 1 }), REF.nll_ign0_mean, TOL)
  end)

  it("equals cross_entropy on log_softmax and passes gradcheck", function()
    H.close(L.nll_loss(X:log_softmax(2), YI, { weight = W }), L.cross_entropy(X, YI, { weight = W }), TOL)
    for _, r in ipairs(REDUCTIONS) do
      H.gradcheck(function(x) return L.nll_loss(x, TL, { reduction = r, weight = WL }) end, { H.rand64({ 4, 3 }) })
    end
  end)
end)

describe("regression losses", function()
  it("mse_loss, l1_loss match torch", function()
    each_reduction("mse", function(r) return L.mse_loss(A, B, { reduction = r }) end)
    each_reduction("l1", function(r) return L.l1_loss(A, B, { reduction = r }) end)
    H.close(L.mse_loss(A, B), REF.mse_mean, TOL)
  end)

  it("smooth_l1_loss (beta 1, 0.5 and 0) and huber_loss (delta 1, 0.5, 2.5) match torch", function()
    each_reduction("sl1", function(r) return L.smooth_l1_loss(A, B, { reduction = r }) end)
    each_reduction("sl1b", function(r) return L.smooth_l1_loss(A, B, { beta = 0.5, reduction = r }) end)
    each_reduction("sl1b0", function(r) return L.smooth_l1_loss(A, B, { beta = 0, reduction = r }) end)
    each_reduction("hub", function(r) return L.huber_loss(A, B, { reduction = r }) end)
    each_reduction("hubd", function(r) return L.huber_loss(A, B, { delta = 0.5, reduction = r }) end)
    each_reduction("hubd2", function(r) return L.huber_loss(A, B, { delta = 2.5, reduction = r }) end)
  end)

  it("pass gradcheck in float64 for input and target", function()
    for _, r in ipairs(REDUCTIONS) do
      local o = { reduction = r }
      local a, b = H.rand64({ 3, 4 }), H.rand64({ 3, 4 })
      H.gradcheck(function(x, y) return L.mse_loss(x, y, o) end, { a, b })
      H.gradcheck(function(x, y) return L.l1_loss(x, y, o) end, { a, b })
      H.gradcheck(function(x, y) return L.smooth_l1_loss(x, y, { reduction = r, beta = 0.7 }) end, { a, b })
      H.gradcheck(function(x, y) return L.huber_loss(x, y, { reduction = r, delta = 0.6 }) end, { a, b })
    end
  end)
end)

describe("binary_cross_entropy", function()
  it("matches torch for every reduction, with a broadcast weight", function()
    each_reduction("bce", function(r) return L.binary_cross_entropy(Q, R, { reduction = r }) end)
    each_reduction("bce_w", function(r) return L.binary_cross_entropy(Q, R, { weight = WB, reduction = r }) end)
  end)

  it("clamps the logs at -100 like torch, with finite gradients at 0 and 1", function()
    local q = t64({ 0.0, 1.0, 0.0, 1.0, 0.5 }):requires_grad_()
    local loss = L.binary_cross_entropy(q, t64({ 1.0, 0.0, 0.0, 1.0, 0.2 }), { reduction = "none" })
    H.close(loss, REF.bce_edge_none, TOL)
    loss:sum():backward()
    for _, g in ipairs(q.grad:totable()) do assert.is_true(g == g and math.abs(g) < math.huge) end
  end)

  it("passes gradcheck in float64 for input and target", function()
    for _, r in ipairs(REDUCTIONS) do
      H.gradcheck(function(x, y) return L.binary_cross_entropy(x, y, { reduction = r, weight = WB }) end,
        { H.rand64({ 2, 3 }, 0.05, 0.95), H.rand64({ 2, 3 }, 0, 1) })
    end
  end)
end)

describe("binary_cross_entropy_with_logits", function()
  it("matches torch for every reduction, with weight and pos_weight", function()
    each_reduction("bcel", function(r) return L.binary_cross_entropy_with_logits(Z, RZ, { reduction = r }) end)
    each_reduction("bcel_w", function(r)
      return L.binary_cross_entropy_with_logits(Z, RZ, { weight = WB, reduction = r })
    end)
    each_reduction("bcel_pw", function(r)
      return L.binary_cross_entropy_with_logits(Z, RZ, { pos_weight = PW, reduction = r })
    end)
    each_reduction("bcel_wpw", function(r)
      return L.binary_cross_entropy_with_logits(Z, RZ, { weight = WB, pos_weight = PW, reduction = r })
    end)
  end)

  it("gives torch's gradient, including at logit 0", function()
    local z = Z:clone():requires_grad_()
    L.binary_cross_entropy_with_logits(z, RZ, { pos_weight = PW, reduction = "sum" }):backward()
    H.close(z.grad, REF.bcel_pw_grad, TOL)
  end)

  it("is stable for large logits in float32", function()
    local z = tide.tensor({ 200, -200, 90, -90 }, { dtype = tide.float32 }):requires_grad_()
    local loss = L.binary_cross_entropy_with_logits(z, tide.tensor({ 0, 1, 1, 0 }, { dtype = tide.float32 }), { reduction = "none" })
    H.close(loss, REF.bcel_big, 1e-5)
    loss:sum():backward()
    H.close(z.grad, { 1, -1, 0, 0 }, 1e-6)
  end)

  it("passes gradcheck in float64 for input and target", function()
    for _, r in ipairs(REDUCTIONS) do
      H.gradcheck(function(x, y)
        return L.binary_cross_entropy_with_logits(x, y, { reduction = r, weight = WB, pos_weight = PW })
      end, { H.rand64({ 2, 3 }, -4, 4), H.rand64({ 2, 3 }, 0, 1) })
    end
  end)
end)

describe("kl_div", function()
  local KLR = { "none", "mean", "sum", "batchmean" }
  it("matches torch for every reduction, with probabilities and log_target", function()
    each_reduction("kl", function(r) return L.kl_div(LQ, PT, { reduction = r }) end, KLR)
    local lt = (PT + 0.1):log()
    each_reduction("kll", function(r) return L.kl_div(LQ, lt, { reduction = r, log_target = true }) end, KLR)
    H.close(L.kl_div(LQ, PT), REF.kl_mean, TOL, "default reduction is mean over all elements")
  end)

  it("passes gradcheck in float64 for input and target", function()
    for _, r in ipairs(KLR) do
      H.gradcheck(function(x, y) return L.kl_div(x, y, { reduction = r }) end,
        { H.rand64({ 2, 3 }, -3, 0), H.rand64({ 2, 3 }, 0.1, 1) })
      H.gradcheck(function(x, y) return L.kl_div(x, y, { reduction = r, log_target = true }) end,
        { H.rand64({ 2, 3 }, -3, 0), H.rand64({ 2, 3 }, -3, 0) })
    end
  end)
end)

describe("tide.nn.functional", function()
  it("holds the losses (when the module is present)", function()
    local ok, F = pcall(require, "tide.nn.functional")
    if not ok and tostring(F):find("module 'tide.nn.functional' not found", 1, true) then return end
    assert(ok, F)
    for name, f in pairs(L) do assert.equal(f, F[name], name) end
  end)
end)

describe("loss errors", function()
  it("reject an unknown reduction, naming it", function()
    H.raises(function() L.cross_entropy(X, Y, { reduction = "avg" }) end,
      "cross_entropy: reduction must be 'none', 'mean' or 'sum', got 'avg'")
    H.raises(function() L.mse_loss(A, B, { reduction = "batchmean" }) end, "mse_loss:", "got 'batchmean'")
    H.raises(function() L.kl_div(LQ, PT, { reduction = "avg" }) end,
      "kl_div: reduction must be 'none', 'batchmean', 'mean' or 'sum', got 'avg'")
    for name, f in pairs(L) do
      local x, y = A, B
      if name == "cross_entropy" or name == "nll_loss" then x, y = X, Y end
      if name == "binary_cross_entropy" then x, y = Q, R end
      H.raises(function() f(x, y, { reduction = 1 }) end, name .. ": reduction must be", "got 1")
    end
  end)

  it("reject unknown options and non-table options", function()
    H.raises(function() L.cross_entropy(X, Y, { ignore_idx = 1 }) end, "cross_entropy: unknown option 'ignore_idx'",
      "ignore_index")
    H.raises(function() L.mse_loss(A, B, "sum") end, "bad argument #3 to 'mse_loss' (options table expected, got string)")
  end)

  it("reject mismatched shapes, naming both", function()
    for _, name in ipairs { "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
      "binary_cross_entropy_with_logits", "kl_div" } do
      H.raises(function() L[name](Q, R:t()) end, name .. ": target shape [3,2] does not match input shape [2,3]")
    end
    H.raises(function() L.cross_entropy(X, P:narrow(2, 1, 3)) end,
      "cross_entropy: target shape [3,3] does not match input shape [3,4]")
    H.raises(function() L.cross_entropy(X, tide.long({ 1, 2 })) end,
      "cross_entropy: expected target of shape [3] for input of shape [3,4], got [2]")
    H.raises(function() L.nll_loss(X3, Y) end, "nll_loss: expected target of shape [2,2] for input of shape [2,3,2], got [3]")
  end)

  it("name a class label out of range and the class count", function()
    H.raises(function() L.cross_entropy(X, tide.long({ 1, 5, 2 })) end,
      "cross_entropy: target 5 is out of range for 4 classes (labels are 1-based)")
    H.raises(function() L.cross_entropy(X, tide.long({ 1, 0, 2 })) end, "cross_entropy: target 0 is out of range for 4 classes")
    H.raises(function() L.nll_loss(LP, tide.long({ 1, -100, 2, -1 })) end, "nll_loss: target -1 is out of range for 3 classes")
    H.raises(function() L.cross_entropy(X, tide.long({ 1, -100, 2 }), { ignore_index = 1 }) end, "target -100 is out of range")
  end)

  it("check dtypes, weights and numeric options", function()
    H.raises(function() L.cross_entropy(tide.long({ { 1, 2 } }), tide.long({ 1 })) end,
      "cross_entropy: input must be a floating-point tensor, got int64")
    H.raises(function() L.nll_loss(LP, TL:double()) end, "nll_loss: target must be an integer tensor of class labels, got float64")
    H.raises(function() L.cross_entropy(X, Y, { weight = W3 }) end,
      "cross_entropy: weight must be a 1-D tensor with one entry per class (4), got shape [3]")
    H.raises(function() L.cross_entropy(X, P, { weight = W3 }) end,
      "cross_entropy: weight must be a 1-D tensor with one entry per class (4), got shape [3]")
    H.raises(function() L.nll_loss(LP, TL, { weight = { 1, 2, 3 } }) end, "nll_loss: option weight must be a Tensor, got table")
    H.raises(function() L.cross_entropy(X, Y, { label_smoothing = 1.5 }) end,
      "cross_entropy: label_smoothing must be a number between 0 and 1, got 1.5")
    H.raises(function() L.cross_entropy(X, Y, { ignore_index = 0.5 }) end, "ignore_index must be an integer, got 0.5")
    H.raises(function() L.cross_entropy(t64(1), tide.long(1)) end, "cross_entropy: input must have a class dim")
    H.raises(function() L.smooth_l1_loss(A, B, { beta = -1 }) end, "smooth_l1_loss: beta must be a non-negative number, got -1")
    H.raises(function() L.huber_loss(A, B, { delta = 0 }) end, "huber_loss: delta must be a positive number, got 0")
    H.raises(function() L.binary_cross_entropy(A, R) end, "binary_cross_entropy: input values must be between 0 and 1, got -1.2")
    H.raises(function() L.binary_cross_entropy(Q, R, { weight = t64({ 1, 2 }) }) end,
      "binary_cross_entropy: weight of shape [2] cannot be broadcast to the input shape [2,3]")
    H.raises(function() L.binary_cross_entropy_with_logits(Z, RZ, { pos_weight = t64({ { 1 }, { 2 }, { 3 } }) }) end,
      "pos_weight of shape [3,1] cannot be broadcast to the input shape [2,3]")
    H.raises(function() L.kl_div(LQ, PT, { log_target = "yes" }) end, "kl_div: log_target must be a boolean, got 'yes'")
    H.raises(function() L.mse_loss(nil, B) end, "bad argument #1 to 'mse_loss' (Tensor expected, got nil)")
    H.raises(function() L.cross_entropy(X, 3) end, "bad argument #2 to 'cross_entropy' (Tensor expected, got number)")
  end)

  it("are raised at the caller's line", function()
    local src = debug.getinfo(1, "S").short_src
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(function() local l = L.mse_loss(A, B:t()) end)
    assert.is_false(ok)
    assert.equal(src .. ":" .. line .. ":", err:sub(1, #src + #tostring(line) + 2))
  end)
end)
