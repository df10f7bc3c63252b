-- tide.compile equivalence: walks the op table (td_op_count / td_op_name) and, for
-- every op, compares a compiled function against the same function run eagerly:
-- forward values and the gradients of every input leaf. Each case compiles
--   out = op(...); loss = (out * w):sum(); loss:backward(); return out
-- (w a fixed random tensor the function reads as an upvalue), calls it on two
-- sets of fresh random float32 inputs of the same shapes (the second call must
-- reuse the variant) and compares with eager (relative 1e-5 for floats, exact
-- for int/bool results). Sizes 1, 7 and 1023, broadcasting, 0-dim tensors and
-- non-contiguous operands (transposed, sliced, expanded; taken inside the
-- function or passed in as arguments) are covered; view ops are tested as part
-- of chains, since the compiler folds them into operand geometry. An op of the
-- table with no case here fails the spec, as in gradcheck_spec.lua.
-- The second part checks fused patterns (identities, layers, losses, a whole
-- training step with AdamW, double backward, in-place writes into views).
local tide = require "tide"
local H = require "helper"
local ffi = require "ffi"
local tensor = require "tide.tensor"
local nn, F = tide.nn, tide.nn.functional
local C = tide.C

local CC = require "compile_cases"
local flat, compare, leaf, any, ints, randidx, clone_all, check_case, m, T, CASES =
  CC.flat, CC.compare, CC.leaf, CC.any, CC.ints, CC.randidx, CC.clone_all, CC.check_case, CC.m, CC.T, CC.CASES

-- -- The walk -----------------------------------------------------------------------------------------

describe("tide.compile matches eager over the op table", function()
  it("the comparison rejects a small difference and an off-by-one integer", function()
    local x = tide.randn(7)
    assert.has_error(function() compare(x + 1e-3, x, "perturbed") end)
    assert.has_error(function() compare(x:double(), x, "dtype") end)
    assert.has_error(function() compare(x:view(7, 1), x, "shape") end)
    local i = tide.tensor { 1, 2, 3 }
    assert.has_error(function() compare(i + tide.tensor { 0, 1, 0 }, i, "int") end)
    compare(x * (1 + 1e-7), x, "within tolerance")
  end)

  local seen = {}
  for i = 0, C.td_op_count() - 1 do
    local name = ffi.string(C.td_op_name(i))
    seen[name] = true
    if CASES[name] then
      for _, case in ipairs(CASES[name]) do
        local label = name .. ": " .. case[1]
        it(label, function() check_case(label, case) end)
      end
    else
      it(name .. " has a compile case", function()
        error(("op '%s' is in the op table but has no case in spec/jit/compile_ops_spec.lua: "
          .. "add a case comparing tide.compile with eager"):format(name))
      end)
    end
  end

  it("every case names an op of the table", function()
    for name in pairs(CASES) do assert.is_true(seen[name] == true, "no op named " .. name) end
  end)
end)

-- -- Fused patterns --------------------------------------------------------------------------------------

-- run fn eagerly and compiled on clones of the same inputs; compare every
-- returned tensor and the .grad of every input leaf; returns the compiled results
local function same_as_eager(label, fn, inputs, tol)
  local e_in, c_in = clone_all(inputs), clone_all(inputs)
  local want = { fn(unpack(e_in, 1, #inputs)) }
  local compiled = tide.compile(fn, { name = label })
  local got = { compiled(unpack(c_in, 1, #inputs)) }
  assert.equal(#want, #got)
  for k = 1, #want do compare(got[k], want[k]:detach(), ("%s: result %d"):format(label, k), tol) end
  for k = 1, #inputs do
    if tide.is_tensor(inputs[k]) and inputs[k].requires_grad then
      assert(c_in[k].grad ~= nil, ("%s: input %d has no .grad after the compiled call"):format(label, k))
      compare(c_in[k].grad, e_in[k].grad, ("%s: grad of input %d"):format(label, k), tol)
    end
  end
  assert.equal(1, compiled:variants())
  return got, c_in, compiled
end

describe("tide.compile matches eager on fused patterns", function()
  it("sin(x)^2 + cos(x)^2 is 1 and the gradient of its sum is 0", function()
    local got, c_in = same_as_eager("pythagoras", function(x)
      local y = x:sin() ^ 2 + x:cos() ^ 2
      y:sum():backward()
      return y
    end, { any { 1023 } })
    assert.is_true((got[1] - 1):abs():max():item() <= 1e-6)
    assert.is_true(c_in[1].grad:abs():max():item() <= 1e-6)
  end)

  it("gelu(x @ W + b), exact and tanh forms", function()
    local w1, w2 = tide.randn(7, 5), tide.randn(7, 5)
    same_as_eager("gelu linear", function(x, W, b)
      local h = (x:matmul(W) + b)
      local y1, y2 = h:gelu(), h:gelu { approximate = "tanh" }
      local loss = ((y1 * w1):sum() + (y2 * w2):sum())
      loss:backward()
      return y1, y2
    end, { any { 7, 13 }, any { 13, 5 }, any { 5 } })
  end)

  it("softmax written by hand equals F.softmax", function()
    local w = tide.randn(6, 11)
    same_as_eager("softmax by hand", function(x)
      local e = (x - x:amax(-1, true)):exp()
      local y = e / e:sum(-1, true)
      local loss = (y * w):sum()
      loss:backward()
      return y
    end, { any { 6, 11 } })
    -- the hand-written form and the op agree, both compiled
    local x = tide.randn(6, 11)
    local c = tide.compile(function(t)
      local e = (t - t:amax(-1, true)):exp()
      return e / e:sum(-1, true), F.softmax(t, -1)
    end)
    local a, b = c(x)
    compare(a, b, "hand-written vs F.softmax")
    compare(b, x:softmax(-1), "F.softmax vs eager")
  end)

  it("softmax forward and backward on long rows (the next row prefetched, stores for writing)", function()
    local w = tide.randn(5, 4099)
    local function f(x) local y = F.softmax(x, 2); (y * w):sum():backward(); return y end
    same_as_eager("softmax fwd+bwd, 4099-wide rows", f, { any { 5, 4099 } })
    local text = tide.compile(f):explain(tide.randn(5, 4099):requires_grad_())
    assert.is_truthy(text:find("__builtin_prefetch%(p%d+ %+ v%d+, 1%)"), "a write prefetch in:\n" .. text:sub(1, 2000))
  end)

  it("outputs above TIDE_NT_BYTES (16 MiB): softmax and layer_norm forward and backward, non-temporal stores, e in a row array", function()
    local R, C = 4096, 1024                      -- 16 MiB per output
    local gs, gl, w, b = tide.randn(R, C), tide.randn(R, C), tide.randn(C), tide.randn(C)
    local function sm(x) local y = F.softmax(x, 2); (y * gs):sum():backward(); return y end
    local function ln(x, ww, bb)
      local y = F.layer_norm(x, { C }, ww, bb, 1e-5); (y * gl):sum():backward(); return y
    end
    same_as_eager("softmax fwd+bwd, 16 MiB", sm, { any { R, C } })
    local _, _, c = same_as_eager("layer_norm fwd+bwd, 16 MiB", ln,
      { any { R, C }, w:clone():requires_grad_(), b:clone():requires_grad_() }, { rtol = 1e-4, atol = 1e-5 })
    local smx = tide.compile(function(x) return F.softmax(x, 2) end):explain(tide.randn(R, C))
    assert.is_truthy(smx:find("vmovntps") and smx:find("row%d+%[1024%]"), "NT store and row array in:\n" .. smx:sub(1, 3000))
    local lnx = c:explain(tide.randn(R, C):requires_grad_(), w:clone():requires_grad_(), b:clone():requires_grad_())
    assert.is_truthy(lnx:find("3 passes, column sums of %%%d+, %%%d+%)"), lnx:sub(1, 3000))
  end)

  it("log_softmax, by hand and F.log_softmax", function()
    local w = tide.randn(4, 9)
    same_as_eager("log_softmax", function(x)
      local y1 = x - x:logsumexp(-1, true)
      local y2 = F.log_softmax(x * 3, -1)
      local loss = ((y1 * w):sum() + (y2 * w):sum())
      loss:backward()
      return y1, y2
    end, { any { 4, 9 } })
  end)

  it("row kernels on rows with NaN, infinities and signed zeros (max passes, softmax keeping e)", function()
    local nan, inf = 0 / 0, math.huge
    local pats = { { 1, 2, nan, 3 }, { nan, -1, -2, -3 }, { inf, 1, 2, 3 }, { -inf, -inf, -inf, -inf },
      { inf, inf, 1, -inf }, { -0.0, 0.0, -0.0, -1 }, { 0.0, -0.0, -1, -2 }, { -0.0, -0.0, -0.0, -0.0 },
      { -inf, 5, -inf, 4 }, { 1e-45, -1e-45, 0, 1e-44 }, { 3e38, -3e38, 1, 2 }, { 0.5, -2, 1.5, 0.25 } }
    -- the sign of a zero max/min (1/x < 0 for -0); a tie between +0 and -0
    -- keeps the accumulator, so which one wins depends on the lane order (eager's
    -- and the kernel's differ): those rows (6, 7: mixed zeros) are left out
    local function signbits(t)
      local v, r = t:contiguous():view(-1), {}
      for i = 1, v:size(1) do r[i] = (i == 6 or i == 7) or 1 / v[i]:item() < 0 end
      return r
    end
    for _, W in ipairs({ 4, 37, 1030 }) do   -- a tail only, vector body + tail
      local rows = {}
      for i, p in ipairs(pats) do
        rows[i] = {}
        for j = 1, W do rows[i][j] = p[(j * 7 - 1) % #p + 1] end
      end
      local x = tide.tensor(rows)
      same_as_eager("specials " .. W, function(v)
        return v:softmax(-1), v:log_softmax(-1), v:amax(-1), v:amin(-1), (v:max(-1)), v:logsumexp(-1),
          v:norm(math.huge, -1)
      end, { x })
      local c = tide.compile(function(v) return v:amax(-1), v:amin(-1) end)
      local a, b = c(x)
      assert.are.same(signbits(x:amax(-1)), signbits(a), "amax: signs of zeros as eager")
      assert.are.same(signbits(x:amin(-1)), signbits(b), "amin: signs of zeros as eager")
    end
  end)

  it("row reductions of an unrolled step: NaN, -inf and the extremes in its second vector", function()
    -- vector passes with reductions take two vectors a step, each into its own
    -- accumulators, folded before the lane tree: element 25 (0-based) is in a
    -- step's second vector for 8 and 16 lanes, element 9 for 8 lanes
    local nan, inf = 0 / 0, math.huge
    for _, W in ipairs({ 17, 1023 }) do
      local p = W == 17 and 10 or 26        -- 1-based
      local base = tide.randn(1, W):view(-1):totable()
      local rows = {}
      local function row(set)
        local r = {}
        for j = 1, W do r[j] = base[j] end
        for j, v in pairs(set) do r[j] = v end
        rows[#rows + 1] = r
      end
      row({ [p] = nan })
      row({ [p] = -inf })
      row({ [p] = 100, [p + 1] = -100 })
      row({ [p] = nan, [1] = inf })
      row({ [p] = -inf, [W] = nan })
      row({ [p] = inf, [p - 8] = -inf })
      local allneg = {}
      for j = 1, W do allneg[j] = -inf end
      allneg[p] = 3
      row(allneg)
      local x = tide.tensor(rows)
      local got = same_as_eager("second vector " .. W, function(v)
        return v:softmax(-1), v:log_softmax(-1), v:amax(-1), v:amin(-1), (v:max(-1)), v:logsumexp(-1), v:sum(-1)
      end, { x })
      for k, want in pairs({ [3] = x:amax(-1), [4] = x:amin(-1) }) do   -- max/min: exact
        local g, w = flat(got[k]), flat(want)
        for i = 1, #w do assert(g[i] == w[i] or (g[i] ~= g[i] and w[i] ~= w[i]), ("W %d result %d row %d: %s, eager %s"):format(W, k, i, g[i], w[i])) end
      end
    end
  end)

  it("layer_norm (tide.nn.functional.layer_norm) with weight and bias", function()
    local w = tide.randn(5, 3, 33)
    same_as_eager("layer_norm", function(x, g, b)
      local y = F.layer_norm(x, { 33 }, g, b)
      local loss = (y * w):sum()
      loss:backward()
      return y
    end, { any { 5, 3, 33 }, any { 33 }, any { 33 } }, { rtol = 1e-4, atol = 1e-5 })
  end)

  it("RMS norm written by hand", function()
    local w = tide.randn(7, 64)
    same_as_eager("rms norm", function(x, g)
      local y = x * ((x * x):mean(-1, true) + 1e-6):rsqrt() * g
      local loss = (y * w):sum()
      loss:backward()
      return y
    end, { any { 7, 64 }, any { 64 } }, { rtol = 1e-4, atol = 1e-5 })
  end)

  it("cross_entropy of a linear layer", function()
    same_as_eager("cross entropy", function(x, W, y)
      local loss = F.cross_entropy(x:matmul(W), y)
      loss:backward()
      return loss
    end, { any { 9, 13 }, any { 13, 6 }, randidx({ 9 }, 6) })
  end)

  it("attention: softmax(q k^T / sqrt(d)) v", function()
    local w = tide.randn(2, 5, 8)
    same_as_eager("attention", function(q, k, v)
      local a = (q:matmul(k:transpose(-2, -1)) / math.sqrt(8)):softmax(-1)
      local y = a:matmul(v)
      local loss = (y * w):sum()
      loss:backward()
      return y
    end, { any { 2, 5, 8 }, any { 2, 5, 8 }, any { 2, 5, 8 } }, { rtol = 1e-4, atol = 1e-5 })
  end)

  it("an MLP training step with AdamW: 3 steps match eager parameter by parameter", function()
    local function make() return H.mlp_step(7) end
    local m1, eager_step = make()
    local m2, step = make()
    local cstep = tide.compile(step)
    local p1, p2 = m1:parameters(), m2:parameters()
    for i = 1, #p1 do compare(p2[i]:detach(), p1[i]:detach(), "initial parameter " .. i) end
    for s = 1, 3 do
      local x, y = tide.randn(17, 13), randidx({ 17 }, 5)
      local le, lc = eager_step(x, y), cstep(x, y)
      compare(lc, le:detach(), ("step %d loss"):format(s), { rtol = 1e-5, atol = 1e-6 })
      for i = 1, #p1 do
        compare(p2[i]:detach(), p1[i]:detach(), ("step %d parameter %d"):format(s, i), { rtol = 1e-5, atol = 1e-5 })
        compare(p2[i].grad, p1[i].grad, ("step %d grad of parameter %d"):format(s, i), { rtol = 1e-4, atol = 1e-5 })
      end
    end
    -- the parameters moved (the comparison is not of untouched copies)
    local m0 = make()
    local moved = 0
    for i, p in ipairs(m0:parameters()) do moved = math.max(moved, (p - p2[i]):abs():max():item()) end
    assert.is_true(moved > 1e-3)
    -- updates are graph inputs: at most one more variant (the step count/bias
    -- corrections become kernel arguments), never one per step
    assert.is_true(cstep:variants() <= 2, "variants: " .. cstep:variants())
  end)

  it("double backward: the gradient of a gradient inside the compiled function", function()
    local got, c_in = same_as_eager("double backward", function(x, v)
      local y = (x:sin() * x ^ 3):sum()
      local g = tide.autograd.grad(y, { x }, { create_graph = true })[1]
      local l = (g * v):sum()
      l:backward()
      return g
    end, { any { 7 }, any { 7 } }, { rtol = 1e-4, atol = 1e-5 })
    -- and against the closed form: g = cos x * x^3 + 3 x^2 sin x
    local x = c_in[1]:detach()
    compare(got[1], x:cos() * x ^ 3 + x:sin() * x ^ 2 * 3, "closed form", { rtol = 1e-4, atol = 1e-5 })
  end)

  it("in-place writes into views of a buffer made inside", function()
    local w = tide.randn(3, 4)
    same_as_eager("writes into views", function(x, y)
      local buf = tide.zeros(3, 4)
      buf[{ 1 }] = x * 2
      buf[{ {}, 2 }] = 7
      buf[{ { 2, 3 }, { 3, 4 } }] = y:t()
      buf:narrow(2, 1, 1):add_(1)
      local loss = (buf * w):sum()
      loss:backward()
      return buf
    end, { any { 4 }, any { 2, 2 } })
  end)

  it("in-place writes into an argument and an upvalue are visible after the call", function()
    local ebuf, cbuf = tide.zeros(3, 4), tide.zeros(3, 4)
    local target
    local function fn(x, acc)
      target[{ 2 }] = x:exp()
      target[{ {}, 1 }] = x[{ { 1, 3 } }]
      acc:mul_(0.5):add_(x:sum())
      return target:sum(1)
    end
    local x = tide.randn(4)
    local ea = tide.randn(2, 3)
    local ca = ea:clone()
    target = ebuf
    local want = fn(x, ea)
    local compiled = tide.compile(fn)
    target = cbuf
    local got = compiled(x, ca)
    compare(got, want, "result")
    compare(cbuf, ebuf, "upvalue buffer")
    compare(ca, ea, "argument")
    -- a second call writes again (the effect is not replayed from the first trace)
    local x2 = tide.randn(4)
    want = (function() target = ebuf; return fn(x2, ea) end)()
    target = cbuf
    got = compiled(x2, ca)
    compare(got, want, "second result")
    compare(cbuf, ebuf, "second upvalue buffer")
    compare(ca, ea, "second argument")
    assert.equal(1, compiled:variants())
  end)

  it("chains of in-place updates of an argument run in its memory without losing old versions", function()
    -- each version is read somewhere: after the chain, transposed, and by a later
    -- in-place step, so running the chain in the argument's memory must keep them
    local function fn(p, m, g)
      local old = p * 1
      m:mul_(0.9):add_(g * 0.1)
      p:mul_(0.5)
      local mid = p:t() * 2
      p:add_(m):sub_(g:t():t())
      local mid2 = p + old
      p:div_(3)
      return old, mid, mid2
    end
    for _, n in ipairs({ 1, 7, 33 }) do
      local p, m, g = tide.randn(n, n), tide.randn(n, n), tide.randn(n, n)
      local pc, mc = p:clone(), m:clone()
      local want = { fn(p, m, g) }
      local compiled = tide.compile(fn)
      for call = 1, 2 do
        local got = { compiled(pc, mc, g) }
        if call == 2 then want = { fn(p, m, g) } end
        for i = 1, 3 do compare(got[i], want[i], ("n=%d call %d output %d"):format(n, call, i)) end
        compare(pc, p, ("n=%d call %d argument p"):format(n, call))
        compare(mc, m, ("n=%d call %d argument m"):format(n, call))
      end
    end
  end)

  it("gradients flow through a buffer filled row by row", function()
    local w = tide.randn(3, 5)
    same_as_eager("row-by-row buffer", function(x, h0)
      local h = tide.zeros(3, 5)
      local prev = h0
      for t = 1, 3 do
        prev = (prev * x[t] + 0.5):tanh()
        h[t] = prev
      end
      local loss = (h * w):sum()
      loss:backward()
      return h
    end, { any { 3, 5 }, any { 5 } })
  end)

  it("a non-contiguous broadcast chain mixing dtypes", function()
    local w = tide.randn(5, 3)
    same_as_eager("mixed chain", function(a, b, n)
      local y = (a:t() * b + n:float()):sigmoid() * tide.where(n:gt(0), a:t(), -a:t())
      local loss = (y * w):sum()
      loss:backward()
      return y
    end, { any { 3, 5 }, any { 5, 1 }, ints { 3 } })
  end)
end)
