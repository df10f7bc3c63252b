-- NAdam, RAdam, Adadelta, Adamax, LBFGS and the PolynomialLR, CyclicLR and
-- ReduceLROnPlateau schedulers against PyTorch 2's values (spec/ref/optim_extra_reference.lua,
-- written by spec/ref/optim_extra_reference.py): float64 trajectories, lr sequences,
-- state_dict round trips and the errors.
local tide = require "tide"
local H = require "helper"

local REF = dofile("spec/ref/optim_extra_reference.lua")
local S = tide.optim.lr_scheduler
local f64 = { dtype = tide.float64 }
local c = tide.tensor({ 0.5, -1.5, 2.0 }, f64)

-- the parameters and loss of spec/lua/optim_spec.lua
local function params()
  return tide.tensor({ 1.0, -2.0, 0.5 }, { dtype = tide.float64, requires_grad = true }),
    tide.tensor({ { 0.3, -0.7 }, { 1.2, 0.4 } }, { dtype = tide.float64, requires_grad = true })
end
local function loss(w, v) return (w * w * c):sum() + (v ^ 3):sum() * 0.25 end
local function backward(w, v) loss(w, v):backward() end

-- Rosenbrock in w plus a quartic bowl in v (the generator's loss_lbfgs)
local function loss_lbfgs(w, v)
  local a, b = w:narrow(1, 2, 2), w:narrow(1, 1, 2)
  return ((a - b * b) ^ 2 * 100 + (-b + 1) ^ 2):sum() + ((v - 0.5) ^ 4 + v * v * 0.3):sum()
end

local function check(w, v, want, tol, what)
  H.close(w, want[1], tol, what .. " w")
  H.close(v:view(-1), want[2], tol, what .. " v")
end

local function describe_opts(o)
  local ks = {}
  for k, v in pairs(o) do ks[#ks + 1] = k .. "=" .. (type(v) == "table" and ("{" .. v[1] .. "," .. v[2] .. "}") or tostring(v)) end
  table.sort(ks)
  return table.concat(ks, " ")
end

describe("NAdam, RAdam, Adadelta, Adamax match PyTorch's trajectories", function()
  for _, case in ipairs(REF.optimizers) do
    it(case.name .. " " .. describe_opts(case.opts), function()
      local w, v = params()
      local opt = tide.optim[case.name]({ w, v }, case.opts)
      for i, want in ipairs(case.traj) do
        opt:zero_grad(); backward(w, v); opt:step()
        check(w, v, want, 1e-12, ("step %d"):format(i))
      end
    end)
  end

  it("param groups keep their own hyperparameters", function()
    local w, v = params()
    local opt = tide.optim.NAdam({ { params = { w } }, { params = { v }, lr = 0.01, betas = { 0.5, 0.9 } } }, { lr = 0.1 })
    assert.same({ 0.9, 0.999 }, opt.param_groups[1].betas)
    assert.equal(4e-3, opt.param_groups[2].momentum_decay)
    for i, want in ipairs(REF.groups) do
      opt:zero_grad(); backward(w, v); opt:step()
      check(w, v, want, 1e-12, "step " .. i)
    end
  end)

  it("state_dict round trips continue identically", function()
    for _, case in ipairs {
      { "NAdam", { lr = 0.05, decoupled_weight_decay = true, weight_decay = 0.1 } },
      { "RAdam", { lr = 0.05, betas = { 0.8, 0.9 } } },     -- crosses rho_t > 5 after the load
      { "Adadelta", { rho = 0.8 } }, { "Adamax", { lr = 0.1 } },
    } do
      local name, opts = case[1], case[2]
      local w1, v1 = params()
      local o1 = tide.optim[name]({ w1, v1 }, opts)
      for _ = 1, 2 do o1:zero_grad(); backward(w1, v1); o1:step() end
      local sd = o1:state_dict()
      local w2, v2 = w1:detach():clone():requires_grad_(), v1:detach():clone():requires_grad_()
      local o2 = tide.optim[name]({ w2, v2 }, { lr = 123 })
      o2:load_state_dict(sd)
      assert.equal(opts.lr or o1.defaults.lr, o2.param_groups[1].lr)
      for _ = 1, 4 do
        o1:zero_grad(); backward(w1, v1); o1:step()
        o2:zero_grad(); backward(w2, v2); o2:step()
      end
      H.close(w2, w1, 0, name); H.close(v2, v1, 0, name)
      assert.equal(6, o2.state[w2].step)
    end
    local w, v = params()
    local o = tide.optim.NAdam({ w, v })
    backward(w, v); o:step()
    assert.is_true(math.abs(o:state_dict().state[1].mu_product - 0.9 * (1 - 0.5 * 0.96 ^ 0.004)) < 1e-16)
  end)

  it("inside tide.compile give the eager steps", function()
    for _, name in ipairs { "NAdam", "RAdam", "Adadelta", "Adamax" } do
      local function run(compiled)
        tide.manual_seed(1)
        local w = tide.randn(5, 3):requires_grad_()
        local x = tide.randn(8, 5)
        local opt = tide.optim[name]({ w }, { lr = 0.05, weight_decay = 0.1 })
        local function step(a)
          local l = a:matmul(w):tanh():sum()
          opt:zero_grad(); l:backward(); opt:step()
          return l
        end
        local f = compiled and tide.compile(step) or step
        for _ = 1, 7 do f(x) end         -- RAdam's rectified branch starts at step 6 here
        return w
      end
      H.close(run(true), run(false), 1e-5, name)
    end
  end)

  it("reject bad hyperparameters, naming the value", function()
    local w = tide.zeros(2, { requires_grad = true })
    H.raises(function() tide.optim.NAdam({ w }, { momentum_decay = -1 }) end, "NAdam: invalid momentum_decay value: -1")
    H.raises(function() tide.optim.NAdam({ w }, { betas = { 0.9, 1 } }) end, "NAdam: invalid beta parameter at index 2: 1")
    H.raises(function() tide.optim.RAdam({ w }, { eps = -1 }) end, "RAdam: invalid epsilon value: -1")
    H.raises(function() tide.optim.RAdam({ w }, { decoupled = true }) end, "RAdam: unknown option 'decoupled'")
    H.raises(function() tide.optim.Adadelta({ w }, { rho = 1.5 }) end, "Adadelta: invalid rho value: 1.5 (must be in [0, 1])")
    H.raises(function() tide.optim.Adamax({ w }, { weight_decay = -0.1 }) end, "Adamax: invalid weight_decay value: -0.1")
    H.raises(function() tide.optim.Adamax({ w, 3 }) end, "bad argument #1 to 'Adamax' (parameter 2 is a number")
  end)
end)

describe("LBFGS", function()
  for _, case in ipairs(REF.lbfgs) do
    it("matches PyTorch " .. describe_opts(case.opts), function()
      local w, v = params()
      local opt = tide.optim.LBFGS({ w, v }, case.opts)
      local sign = case.opts.maximize and -1 or 1
      local function closure()
        opt:zero_grad()
        local l = loss_lbfgs(w, v) * sign
        l:backward()
        return l
      end
      for i, want in ipairs(case.steps) do
        local l = opt:step(closure)
        assert.is_true(math.abs(l:item() - want.loss) <= 1e-12 * math.max(1, math.abs(want.loss)),
          ("step %d loss %.17g vs %.17g"):format(i, l:item(), want.loss))
        check(w, v, want.p, 1e-11, "step " .. i)
        local st = opt.state[w]
        assert.equal(want.func_evals, st.func_evals)
        assert.equal(want.n_iter, st.n_iter)
      end
    end)
  end

  it("state_dict round trip continues identically (history, direction, step)", function()
    local function run(opt, w, v, n)
      for _ = 1, n do
        opt:step(function() opt:zero_grad(); local l = loss_lbfgs(w, v); l:backward(); return l end)
      end
    end
    local o = { lr = 1, max_iter = 4, history_size = 3, line_search_fn = "strong_wolfe" }
    local w1, v1 = params()
    local o1 = tide.optim.LBFGS({ w1, v1 }, o)
    run(o1, w1, v1, 2)
    local sd = o1:state_dict()
    assert.equal(3, #sd.state[1].old_dirs)
    assert.same({ 7 }, sd.state[1].d:size())
    local w2, v2 = w1:detach():clone():requires_grad_(), v1:detach():clone():requires_grad_()
    local o2 = tide.optim.LBFGS({ w2, v2 }, { lr = 0.1 })
    o2:load_state_dict(sd)
    assert.equal("strong_wolfe", o2.param_groups[1].line_search_fn)
    run(o1, w1, v1, 2); run(o2, w2, v2, 2)
    H.close(w2, w1, 0); H.close(v2, v1, 0)
  end)

  it("needs a closure, one parameter group, and runs outside tide.compile", function()
    local w, v = params()
    local opt = tide.optim.LBFGS({ w, v })
    H.raises(function() opt:step() end, "LBFGS: step needs a closure that re-evaluates the model and returns the loss")
    H.raises(function() opt:step(1) end, "bad argument #1 to 'step' (function expected, got number)")
    H.raises(function() opt:step(function() return "x" end) end, "LBFGS: the closure must return the loss", "got string")
    H.raises(function() tide.optim.LBFGS({ { params = { w } }, { params = { v } } }) end,
      "LBFGS: doesn't support per-parameter options (parameter groups)")
    H.raises(function() tide.optim.LBFGS({ w }, { line_search_fn = "armijo" }) end,
      "LBFGS: line_search_fn must be nil or 'strong_wolfe', got 'armijo'")
    H.raises(function() tide.optim.LBFGS({ w }, { max_iter = 0 }) end, "LBFGS: max_iter must be a positive integer, got 0")
    H.raises(function() tide.optim.LBFGS({ w }, { history = 5 }) end, "LBFGS: unknown option 'history'")
    assert.equal(25, opt.param_groups[1].max_eval)
    assert.equal(12, tide.optim.LBFGS({ w }, { max_iter = 10 }).param_groups[1].max_eval)
    local x = tide.tensor({ 1.0, 2.0 }, { requires_grad = true })
    local o2 = tide.optim.LBFGS({ x }, { max_iter = 3 })
    local step = tide.compile(function(y)
      return o2:step(function() o2:zero_grad(); local l = ((x - y) ^ 2):sum(); l:backward(); return l end)
    end)
    H.raises(function() step(tide.zeros(2)) end, "LBFGS: step cannot run inside tide.compile",
      "line search and stopping tests read the loss and gradients")
  end)
end)

-- lrs returned by get_last_lr() (and momentum or beta1) before each of n optimizer/scheduler steps
local function sched_lrs(make, n, opt_cls, momentum)
  local p = tide.zeros(2, { requires_grad = true })
  local opt = (opt_cls or tide.optim.SGD)({ p }, { lr = 0.1, momentum = momentum })
  local s = make(opt)
  local lrs, moms = {}, {}
  for i = 1, n or 25 do
    lrs[i] = s:get_last_lr()[1]
    local g = opt.param_groups[1]
    moms[i] = g.betas and g.betas[1] or g.momentum
    opt:step(); s:step()
  end
  return lrs, moms, s, opt
end

describe("PolynomialLR, CyclicLR, ReduceLROnPlateau match PyTorch's lr sequences", function()
  local R = REF.schedulers
  it("PolynomialLR", function()
    H.close(sched_lrs(function(o) return S.PolynomialLR(o) end), R.poly_default, 1e-15)
    H.close(sched_lrs(function(o) return S.PolynomialLR(o, { total_iters = 8, power = 0.9 }) end), R.poly, 1e-15)
    -- step(epoch): the closed form
    local p = tide.zeros(1, { requires_grad = true })
    local s = S.PolynomialLR(tide.optim.SGD({ p }, { lr = 0.1 }), { total_iters = 8, power = 0.9 })
    s:step(5)
    H.close(s:get_last_lr(), { R.poly[6] }, 1e-15)
  end)

  it("CyclicLR triangular cycles SGD's momentum", function()
    local lrs, moms = sched_lrs(function(o) return S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, step_size_up = 4 }) end,
      25, nil, 0.9)
    H.close(lrs, R.cyclic_tri, 1e-15)
    H.close(moms, R.cyclic_tri_momentum, 1e-15)
  end)

  it("CyclicLR triangular2, exp_range (Adam's beta1) and scale_fn", function()
    H.close(sched_lrs(function(o)
      return S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, step_size_up = 3, step_size_down = 5, mode = "triangular2",
        cycle_momentum = false })
    end, 30), R.cyclic_tri2, 1e-15)
    local lrs, moms = sched_lrs(function(o)
      return S.CyclicLR(o, { base_lr = 0.001, max_lr = 0.01, step_size_up = 2, step_size_down = 3, mode = "exp_range",
        gamma = 0.9, base_momentum = 0.85, max_momentum = 0.95 })
    end, 25, tide.optim.Adam)
    H.close(lrs, R.cyclic_exp, 1e-15)
    H.close(moms, R.cyclic_exp_beta1, 1e-15)
    H.close(sched_lrs(function(o)
      return S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.05, step_size_up = 3, scale_fn = function(x) return 0.5 ^ x end,
        scale_mode = "iterations", cycle_momentum = false })
    end), R.cyclic_fn, 1e-15)
    H.close(sched_lrs(function(o)
      return S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.05, step_size_up = 2, scale_fn = function(x) return 1 / x end,
        cycle_momentum = false })
    end), R.cyclic_fn_cycle, 1e-15)
  end)

  for _, key in ipairs { "plateau_min", "plateau_default", "plateau_max_abs", "plateau_eps" } do
    it("ReduceLROnPlateau " .. key, function()
      local case = R[key]
      local p, q = tide.zeros(2, { requires_grad = true }), tide.zeros(1, { requires_grad = true })
      local groups = { { params = { p } } }
      if case.groups == 2 then groups[2] = { params = { q }, lr = 0.02 } end
      local opt = tide.optim.SGD(groups, { lr = 0.1 })
      local s = S.ReduceLROnPlateau(opt, case.opts)
      for i, m in ipairs(R.plateau_metrics) do
        opt:step()
        s:step(i % 2 == 0 and tide.tensor(m, f64) or m)     -- a number or a one-element tensor
        H.close(s:get_last_lr(), case.lrs[i], 1e-15, ("step %d"):format(i))
        assert.equal(opt.param_groups[1].lr, s:get_last_lr()[1])
      end
    end)
  end

  it("state_dict round trips continue the sequences identically", function()
    local makers = {
      function(o) return S.PolynomialLR(o, { total_iters = 15, power = 2 }) end,
      function(o) return S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, step_size_up = 3, mode = "triangular2" }) end,
      function(o) return S.CyclicLR(o, { base_lr = 0.01, max_lr = 0.1, step_size_up = 3, scale_fn = function(x) return 0.9 ^ x end }) end,
    }
    for k, mk in ipairs(makers) do
      local p = tide.zeros(2, { requires_grad = true })
      local opt = tide.optim.SGD({ p }, { lr = 0.1, momentum = 0.9 })
      local s = mk(opt)
      for _ = 1, 7 do opt:step(); s:step() end
      local osd, ssd = opt:state_dict(), s:state_dict()
      assert.is_nil(ssd._scale_fn_custom)
      local want, wantm = {}, {}
      for i = 1, 10 do opt:step(); s:step(); want[i] = s:get_last_lr()[1]; wantm[i] = opt.param_groups[1].momentum end
      local p2 = tide.zeros(2, { requires_grad = true })
      local opt2 = tide.optim.SGD({ p2 }, { lr = 0.1, momentum = 0.9 })
      local s2 = mk(opt2)
      opt2:load_state_dict(osd); s2:load_state_dict(ssd)
      local got, gotm = {}, {}
      for i = 1, 10 do opt2:step(); s2:step(); got[i] = s2:get_last_lr()[1]; gotm[i] = opt2.param_groups[1].momentum end
      H.close(got, want, 0, "scheduler " .. k)
      H.close(gotm, wantm, 0, "scheduler " .. k)
    end
    -- ReduceLROnPlateau: best, counters and the reduced lr, through a file
    local p = tide.zeros(1, { requires_grad = true })
    local opt = tide.optim.SGD({ p }, { lr = 0.1 })
    local s = S.ReduceLROnPlateau(opt, { patience = 1, cooldown = 2 })
    for _, m in ipairs { 1, 0.5, 0.6, 0.7, 0.8 } do s:step(m) end
    local path = os.tmpname()
    tide.save({ s = s:state_dict(), o = opt:state_dict() }, path)
    local saved = tide.load(path)
    os.remove(path)
    local opt2 = tide.optim.SGD({ tide.zeros(1, { requires_grad = true }) }, { lr = 0.1 })
    local s2 = S.ReduceLROnPlateau(opt2)
    opt2:load_state_dict(saved.o); s2:load_state_dict(saved.s)
    assert.equal(0.5, s2.best)
    for _, m in ipairs { 0.9, 0.9, 0.9, 0.9, 0.4, 0.9, 0.9 } do
      s:step(m); s2:step(m)
      assert.equal(s:get_last_lr()[1], s2:get_last_lr()[1])
    end
    assert.is_true(s2:get_last_lr()[1] < 0.1 * 0.1 * 0.1 + 1e-12)
  end)

  it("errors name the bad option", function()
    local p = tide.zeros(1, { requires_grad = true })
    local opt = tide.optim.SGD({ p }, { lr = 0.1 })
    H.raises(function() S.PolynomialLR(opt, { total_iters = 0 }) end, "PolynomialLR: total_iters must be a positive integer, got 0")
    H.raises(function() S.PolynomialLR(opt, { pow = 2 }) end, "PolynomialLR: unknown option 'pow'")
    H.raises(function() S.CyclicLR(opt, { max_lr = 1 }) end, "bad argument #2 to 'CyclicLR' (option 'base_lr' is required)")
    H.raises(function() S.CyclicLR(opt, { base_lr = 0.1, max_lr = 1, mode = "sine" }) end,
      "CyclicLR: mode must be 'triangular', 'triangular2' or 'exp_range' (or give scale_fn), got 'sine'")
    H.raises(function() S.CyclicLR(opt, { base_lr = 0.1, max_lr = { 1, 2 } }) end, "CyclicLR: expected 1 values for max_lr, got 2")
    H.raises(function() S.CyclicLR(tide.optim.Adagrad({ p }), { base_lr = 0.1, max_lr = 1 }) end, "optimizer must support momentum")
    H.raises(function() S.CyclicLR(opt, { base_lr = 0.1, max_lr = 1, scale_fn = function() end }):step() end,
      "CyclicLR: scale_fn returned a nil for 1, expected a number")
    H.raises(function() S.CyclicLR(opt, { base_lr = 0.1, max_lr = 1, step_size_up = 1.5 }) end,
      "CyclicLR: step_size_up must be a positive integer, got 1.5")
    H.raises(function() S.ReduceLROnPlateau(opt, { factor = 1 }) end, "ReduceLROnPlateau: factor should be < 1.0, got 1")
    H.raises(function() S.ReduceLROnPlateau(opt, { mode = "least" }) end, "ReduceLROnPlateau: mode must be 'min' or 'max', got 'least'")
    H.raises(function() S.ReduceLROnPlateau(opt, { threshold_mode = "x" }) end, "threshold_mode must be 'rel' or 'abs', got 'x'")
    H.raises(function() S.ReduceLROnPlateau(opt, { min_lr = { 0.1, 0.2 } }) end, "ReduceLROnPlateau: expected 1 min_lrs, got 2")
    H.raises(function() S.ReduceLROnPlateau(opt, { patience = -1 }) end, "patience must be a non-negative integer, got -1")
    H.raises(function() S.ReduceLROnPlateau(opt):step("x") end, "bad argument #1 to 'step' (metric (number or one-element Tensor)")
    H.raises(function() S.ReduceLROnPlateau(opt, { patiense = 1 }) end, "ReduceLROnPlateau: unknown option 'patiense'")
  end)
end)
