-- tide.compile on the OpenCL device: every case of the op-table walk
-- (spec/compile_cases.lua: every op, its dtypes, broadcasting, views, 0-dim
-- tensors) runs eagerly on the device and compiled there (kernels printed as
-- OpenCL C from the kernel IR, matmul through CLBlast), forward and gradients,
-- each against the CPU's eager results: floats within |diff| <= 1e-5 |want| +
-- 1e-5 max(1, max|want|) (the CPU specs' tolerance; the device's builtins are
-- within a few ulp of glibc's), integers and bools exactly. Then the training
-- patterns: softmax, layer_norm and cross-entropy forward and backward, an MLP
-- step and a GPT step. Skipped without an OpenCL device.
local tide = require "tide"
local H = require "helper"
local ffi = require "ffi"
local C = tide.C
local CC = require "compile_cases"

H.describe_cl("tide.compile on OpenCL matches CPU eager over the op table", function()
  for i = 0, C.td_op_count() - 1 do
    local name = ffi.string(C.td_op_name(i))
    for _, case in ipairs(CC.CASES[name] or {}) do
      local label = name .. ": " .. case[1]
      it(label, function() CC.check_case(label, case, "opencl") end)
    end
    if not CC.CASES[name] then it(name .. " has a case", function() error("no compile case for " .. name) end) end
  end
end)

-- -- Training patterns ----------------------------------------------------------------------------

local nn, F = tide.nn, tide.nn.functional

-- fn compiled on device copies of inputs against fn eagerly on the CPU: every
-- returned tensor and every input leaf's .grad; returns the compiled function
local function same_as_cpu(label, fn, inputs, tol)
  local e_in = CC.clone_all(inputs)
  local want = { fn(unpack(e_in, 1, #inputs)) }
  local d_in = CC.to_device(inputs, "opencl")
  local compiled = tide.compile(fn, { name = label })
  local got = { compiled(unpack(d_in, 1, #inputs)) }
  assert.equal(#want, #got)
  for k = 1, #want do
    assert.equal("opencl:0", got[k].device)
    CC.compare(got[k]:cpu(), want[k]:detach(), ("%s: result %d"):format(label, k), tol)
  end
  for k = 1, #inputs do
    if tide.is_tensor(inputs[k]) and inputs[k].requires_grad then
      assert(d_in[k].grad ~= nil, ("%s: input %d has no .grad"):format(label, k))
      CC.compare(d_in[k].grad:cpu(), e_in[k].grad, ("%s: grad of input %d"):format(label, k), tol)
    end
  end
  return compiled
end

-- A small GPT: token and position embeddings, one pre-LayerNorm block (causal
-- attention, GELU MLP), a head; cross-entropy and AdamW with clipping, seeded.
-- qkv has no bias: the keys' part of its gradient is 0 in exact arithmetic
-- (softmax ignores a constant added to every logit of a row), so both runs
-- would give rounding noise there, which Adam scales up to lr-sized steps.
local function gpt_step(seed, V, T, D)
  tide.manual_seed(seed)
  local tok, pos = nn.Embedding(V, D), nn.Embedding(T, D)
  local ln1, ln2, lnf = nn.LayerNorm(D), nn.LayerNorm(D), nn.LayerNorm(D)
  local qkv, proj, fc, out, head = nn.Linear(D, 3 * D, { bias = false }), nn.Linear(D, D), nn.Linear(D, 4 * D), nn.Linear(4 * D, D),
    nn.Linear(D, V)
  local model = nn.ModuleList { tok, pos, ln1, ln2, lnf, qkv, proj, fc, out, head }
  local opt = tide.optim.AdamW(model:parameters(), { lr = 3e-3, weight_decay = 0.1 })
  local function forward(idx)
    local B = idx:size(1)
    local x = tok(idx) + pos(tide.arange(1, T + 1, { device = idx.device }))
    local h = qkv(ln1(x)):split(D, 3)
    local function heads(t) return t:reshape(B, T, 2, D / 2):transpose(2, 3) end
    local y = F.scaled_dot_product_attention(heads(h[1]), heads(h[2]), heads(h[3]), { is_causal = true })
    x = x + proj(y:transpose(2, 3):reshape(B, T, D))
    x = x + out(F.gelu(fc(ln2(x))))
    return head(lnf(x))
  end
  local function step(idx, tgt)
    local loss = F.cross_entropy(forward(idx):view(-1, V), tgt:view(-1))
    opt:zero_grad(); loss:backward()
    nn.utils.clip_grad_norm_(model:parameters(), 1.0)
    opt:step()
    return loss
  end
  return model, step
end

H.describe_cl("training steps compiled on OpenCL match CPU eager", function()
  it("softmax, log_softmax, layer_norm and cross-entropy, forward and backward", function()
    local w1, w2, w3 = tide.randn(6, 33), tide.randn(6, 33), tide.randn(6, 33)
    local g, b = CC.leaf(tide.randn(33)), CC.leaf(tide.randn(33))
    local y = tide.randint(1, 34, { 6 }, { dtype = "int64" })
    same_as_cpu("normalizers", function(x, gg, bb, t, a, c, d)
      local s, l, n = F.softmax(x, 2), F.log_softmax(x * 3, 2), F.layer_norm(x, { 33 }, gg, bb, 1e-5)
      local loss = (s * a):sum() + (l * c):sum() + (n * d):sum() + F.cross_entropy(x, t)
      loss:backward()
      return s, l, n, loss
    end, { CC.any { 6, 33 }, g, b, y, w1, w2, w3 }, { rtol = 2e-5, atol = 2e-5 })
  end)

  it("an MLP step with AdamW: 3 steps match CPU eager parameter by parameter", function()
    local m1, eager_step = H.mlp_step(7)
    local m2, step = H.mlp_step(7)
    m2:to("opencl")
    local cstep = tide.compile(step)
    local p1, p2 = m1:parameters(), m2:parameters()
    for s = 1, 3 do
      local x, y = tide.randn(17, 13), CC.randidx({ 17 }, 5)
      local le, lc = eager_step(x, y), cstep(x:to("opencl"), y:to("opencl"))
      assert.equal("opencl:0", lc.device)
      CC.compare(lc:cpu(), le:detach(), ("step %d loss"):format(s), { rtol = 1e-5, atol = 1e-6 })
      for i = 1, #p1 do
        CC.compare(p2[i]:detach():cpu(), p1[i]:detach(), ("step %d parameter %d"):format(s, i), { rtol = 1e-5, atol = 1e-5 })
      end
    end
    assert.is_true(cstep:variants() <= 2, "variants: " .. cstep:variants())
  end)

  it("a GPT step (embeddings, layer_norm, causal attention, GELU, cross-entropy, clipping, AdamW): 2 steps", function()
    local V, T, D, B = 11, 8, 16, 3
    local m1, eager_step = gpt_step(3, V, T, D)
    local m2, step = gpt_step(3, V, T, D)
    m2:to("opencl")
    local cstep = tide.compile(step)
    local p1, p2 = m1:parameters(), m2:parameters()
    for s = 1, 2 do
      local idx, tgt = CC.randidx({ B, T }, V), CC.randidx({ B, T }, V)
      local le, lc = eager_step(idx, tgt), cstep(idx:to("opencl"), tgt:to("opencl"))
      CC.compare(lc:cpu(), le:detach(), ("step %d loss"):format(s), { rtol = 1e-5, atol = 1e-6 })
      -- the gradients agree to rounding (atol: a float32 sum of a few dozen
      -- products in another order, e.g. the CPU's short matmuls on tide's tile,
      -- unfused under the -O1 sanitizer build); the parameters less tightly: Adam
      -- divides by |g|, so an element whose gradient is rounding noise around 0
      -- moves by a noisy fraction of lr (3e-3) in either run
      for i = 1, #p1 do
        CC.compare(p2[i].grad:cpu(), p1[i].grad, ("step %d grad of parameter %d"):format(s, i), { rtol = 1e-4, atol = 3e-6 })
        CC.compare(p2[i]:detach():cpu(), p1[i]:detach(), ("step %d parameter %d"):format(s, i), { rtol = 1e-4, atol = 2e-4 })
      end
    end
  end)
end)
