-- tide.nn: Module, containers, layers, init and state_dict; expected values are
-- PyTorch 1.13 outputs computed offline and pasted as literals.
local tide = require "tide"
local H = require "spec.helper"
local nn = tide.nn
local F = nn.functional
local f64 = { dtype = tide.float64 }

local function t64(v) return tide.tensor(v, f64) end
local function leaf(v) return tide.tensor(v, { dtype = tide.float64, requires_grad = true }) end

local X = { { 0.5, -1.0, 2.0 }, { 1.5, 0.25, -0.75 } }
local V = { -2.0, -0.5, 0.0, 0.75, 3.0 }

describe("nn.functional", function()
  it("linear and bilinear match PyTorch", function()
    local w, b = t64 { { 0.1, -0.2, 0.3 }, { 0.4, 0.5, -0.6 } }, t64 { 0.05, -0.1 }
    H.close(F.linear(t64(X), w, b), { { 0.9, -1.6 }, { -0.075, 1.075 } }, 1e-12)
    H.close(F.linear(t64(X), w), { { 0.85, -1.5 }, { -0.125, 1.175 } }, 1e-12)
    local W = tide.arange(0, 12, f64):view(2, 2, 3) / 10 - 0.5
    H.close(F.bilinear(t64 { { 1.0, -2.0 }, { 0.5, 0.25 } }, t64(X), W, t64 { 0.1, 0.2 }),
      { { -0.35, -1.15 }, { -0.29375, 0.25625 } }, 1e-12)
    H.raises(function() F.linear(t64(X), t64 { { 1, 2 } }) end, "linear:", "[2,3]", "[1,2]")
  end)

  it("layer_norm and rms_norm match PyTorch", function()
    H.close(F.layer_norm(t64(X), 3, t64 { 1.5, -0.5, 2.0 }, t64 { 0.1, 0.0, -0.1 }),
      { { 0.1, 0.6123704, 2.3494816 }, { 2.0012394, 0.0452676, -2.4539155 } }, 1e-6)
    H.close(F.layer_norm(t64(X), { 2, 3 }),
      { { 0.0766962, -1.303835, 1.4572273 }, { 0.9970503, -0.1533923, -1.0737464 } }, 1e-6)
    H.close(F.rms_norm(t64(X), 3, t64 { 1.0, 2.0, 0.5 }, 1e-6),
      { { 0.3779644, -1.5118575, 0.7559287 }, { 1.532261, 0.5107537, -0.3830652 } }, 1e-6)
    H.raises(function() F.layer_norm(t64(X), 4) end, "layer_norm", "[*, 4]", "[2,3]")
  end)

  it("activations match PyTorch", function()
    local v = t64(V)
    H.close(F.relu(v), { 0.0, 0.0, 0.0, 0.75, 3.0 }, 1e-12)
    H.close(F.leaky_relu(v, 0.2), { -0.4, -0.1, 0.0, 0.75, 3.0 }, 1e-12)
    H.close(F.leaky_relu(v), { -0.02, -0.005, 0.0, 0.75, 3.0 }, 1e-12)
    H.close(F.gelu(v), { -0.0455003, -0.1542688, 0.0, 0.5800295, 2.9959503 }, 1e-6)
    H.close(F.gelu(v, { approximate = "tanh" }), { -0.0454023, -0.154286, 0.0, 0.5799606, 2.9963626 }, 1e-6)
    H.close(F.silu(v), { -0.2384058, -0.1887703, 0.0, 0.509384, 2.8577224 }, 1e-6)
    H.close(F.tanh(v), { -0.9640276, -0.4621172, 0.0, 0.635149, 0.9950548 }, 1e-6)
    H.close(F.sigmoid(v), { 0.1192029, 0.3775407, 0.5, 0.6791787, 0.9525741 }, 1e-6)
    -- dim 2 here is PyTorch's dim=1
    H.close(F.softmax(t64(X), 2), { { 0.1752904, 0.0391126, 0.785597 }, { 0.7184403, 0.2058366, 0.0757231 } }, 1e-6)
    H.close(F.log_softmax(t64(X), 1),
      { { -1.3132617, -1.5019291, -0.0619676 }, { -0.3132617, -0.2519291, -2.8119676 } }, 1e-6)
  end)

  it("embedding uses 1-based indices and padding_idx blocks the gradient", function()
    local w = leaf { { 1, 2 }, { 3, 4 }, { 5, 6 } }
    local e = F.embedding(tide.long { { 1, 3 }, { 2, 2 } }, w, { padding_idx = 2 })
    H.close(e, { { { 1, 2 }, { 5, 6 } }, { { 3, 4 }, { 3, 4 } } }, 0)
    e:sum():backward()
    H.close(w.grad, { { 1, 1 }, { 0, 0 }, { 1, 1 } }, 0)
    H.raises(function() F.embedding(tide.long { 1 }, w, { padding_idx = 4 }) end, "padding_idx 4", "3 embeddings")
    local err = H.raises(function() F.embedding(tide.long { 4 }, w) end, "embedding: index 4 is out of range for 3 embeddings")
    assert.is_truthy(err:find("nn_spec.lua", 1, true))
    H.raises(function() F.embedding(tide.long { 0 }, w) end, "index 0 is out of range", "1-based")
    H.raises(function() F.embedding(tide.tensor { 1.5 }, w) end, "embedding: indices must be an integer tensor")
  end)

  it("dropout zeroes about p and scales by 1/(1-p); identity when not training", function()
    tide.manual_seed(3)
    local x = tide.ones(20000)
    local y = F.dropout(x, 0.25)
    local zeros = y:eq(0):sum():item()
    assert.is_true(math.abs(zeros / 20000 - 0.25) < 0.02)
    H.close(y:max(), 1 / 0.75, 1e-6)
    assert.are.equal(F.dropout(x, 0.25, false), x)
    H.close(F.dropout(x, 1), tide.zeros(20000), 0)
    H.raises(function() F.dropout(x, 1.5) end, "between 0 and 1", "1.5")
    -- training-mode gradient: the same mask (seeded) scales the kept elements by 1/(1-p)
    local a = H.rand64 { 4, 5 }
    H.gradcheck(function(t) tide.manual_seed(9); return F.dropout(t, 0.4) end, { a })
    tide.manual_seed(9)
    local d = F.dropout(a, 0.4)
    d:sum():backward()
    H.close(a.grad, d:ne(0):double() / 0.6, 1e-12)
  end)

  it("gradcheck of every layer function in float64", function()
    tide.manual_seed(1)
    local x, w, b = H.rand64 { 2, 3 }, H.rand64 { 4, 3 }, H.rand64 { 4 }
    H.gradcheck(F.linear, { x, w, b })
    H.gradcheck(F.linear, { H.rand64 { 2, 2, 3 }, w, b })
    H.gradcheck(F.linear, { H.rand64 { 3 }, w, b })
    H.gradcheck(F.linear, { H.rand64 { 2, 2, 3 }, w })
    local x1, x2, W, bb = H.rand64 { 2, 2 }, H.rand64 { 2, 3 }, H.rand64 { 4, 2, 3 }, H.rand64 { 4 }
    H.gradcheck(F.bilinear, { x1, x2, W, bb })
    local g, bt = H.rand64 { 3 }, H.rand64 { 3 }
    H.gradcheck(function(a, gg, bb2) return F.layer_norm(a, 3, gg, bb2) end, { x, g, bt })
    H.gradcheck(function(a, gg) return F.rms_norm(a, 3, gg) end, { x, g })
    local emb = H.rand64 { 5, 3 }
    H.gradcheck(function(e) return F.embedding(tide.long { { 1, 5 }, { 2, 1 } }, e) end, { emb })
    for _, f in ipairs { F.relu, F.tanh, F.sigmoid, F.silu, F.gelu,
      function(a) return F.gelu(a, "tanh") end, function(a) return F.leaky_relu(a, 0.3) end,
      function(a) return F.softmax(a, 2) end, function(a) return F.log_softmax(a, 1) end } do
      H.gradcheck(f, { x })
    end
  end)
end)

-- attention by its definition, in Lua loops: softmax(q k^T * scale + mask) v
local function attn_ref(q, k, v, o)
  o = o or {}
  local L, E, S, Ev = q:size(-2), q:size(-1), k:size(-2), v:size(-1)
  local B = q:numel() / (L * E)
  local qt, kt, vt = q:reshape(B, L, E):totable(), k:reshape(B, S, E):totable(), v:reshape(B, S, Ev):totable()
  local mask = o.attn_mask and o.attn_mask:totable()
  local scale = o.scale or 1 / math.sqrt(E)
  local out = {}
  for b = 1, B do
    out[b] = {}
    for i = 1, L do
      local s, m = {}, -math.huge
      for j = 1, S do
        local x = 0
        for d = 1, E do x = x + qt[b][i][d] * kt[b][j][d] end
        x = x * scale
        if o.is_causal and j > i then x = -math.huge end
        if mask then
          if type(mask[i][j]) == "boolean" then if not mask[i][j] then x = -math.huge end else x = x + mask[i][j] end
        end
        s[j] = x; m = math.max(m, x)
      end
      local l = 0
      for j = 1, S do s[j] = math.exp(s[j] - m); l = l + s[j] end
      out[b][i] = {}
      for c = 1, Ev do
        local y = 0
        for j = 1, S do y = y + s[j] * vt[b][j][c] end
        out[b][i][c] = y / l
      end
    end
  end
  local shape = q:size()
  shape[#shape] = Ev
  return tide.tensor(out, f64):view(shape)
end

describe("nn.functional.scaled_dot_product_attention", function()
  it("equals its definition: causal, full, scaled, fused and composed paths", function()
    local function r(...) return tide.randn({ ... }, f64) end
    local q, k, v = r(2, 3, 6, 4), r(2, 3, 6, 4), r(2, 3, 6, 5)
    H.close(F.scaled_dot_product_attention(q, k, v), attn_ref(q, k, v), 1e-12, "full")
    H.close(F.scaled_dot_product_attention(q, k, v, { is_causal = true }), attn_ref(q, k, v, { is_causal = true }), 1e-12, "causal")
    H.close(F.scaled_dot_product_attention(q, k, v, { scale = 0.7 }), attn_ref(q, k, v, { scale = 0.7 }), 1e-12, "scale")
    -- more keys than queries (causal: query i sees keys 1..i), and float32
    local q2, k2, v2 = r(5, 3), r(9, 3), r(9, 2)
    H.close(F.scaled_dot_product_attention(q2, k2, v2, { is_causal = true }), attn_ref(q2, k2, v2, { is_causal = true }), 1e-12)
    H.close(F.scaled_dot_product_attention(q2:float(), k2:float(), v2:float(), { is_causal = true }):double(),
      attn_ref(q2, k2, v2, { is_causal = true }), 1e-5, "float32")
    -- broadcast batch dims and masks take the composed path
    local q3 = r(6, 4)
    H.close(F.scaled_dot_product_attention(q3, k, v), attn_ref(q3:expand(2, 3, 6, 4), k, v), 1e-12, "broadcast")
    local bm = tide.rand(6, 6):gt(0.3):logical_or(tide.eye(6):bool())
    H.close(F.scaled_dot_product_attention(q, k, v, { attn_mask = bm }), attn_ref(q, k, v, { attn_mask = bm }), 1e-12, "bool mask")
    local fm = r(6, 6)
    H.close(F.scaled_dot_product_attention(q, k, v, { attn_mask = fm }), attn_ref(q, k, v, { attn_mask = fm }), 1e-12, "float mask")
  end)

  it("the fused op's gradients equal the composed formula's, and double backward works", function()
    local q, k, v = H.rand64 { 2, 7, 4 }, H.rand64 { 2, 7, 4 }, H.rand64 { 2, 7, 3 }
    local w = tide.randn({ 2, 7, 3 }, f64)
    local fused = F.scaled_dot_product_attention(q, k, v, { is_causal = true })
    local mask = tide.arange(7):view(7, 1):lt(tide.arange(7):view(1, 7))
    local comp = (q:matmul(k:transpose(2, 3)) * 0.5):masked_fill(mask, -math.huge):softmax(-1):matmul(v)
    local gf = tide.autograd.grad({ (fused * w):sum() }, { q, k, v }, { create_graph = true })
    local gc = tide.autograd.grad({ (comp * w):sum() }, { q, k, v }, { create_graph = true })
    for i = 1, 3 do H.close(gf[i], gc[i]:detach(), 1e-12, "grad " .. i) end
    local hf = tide.autograd.grad({ (gf[1] * gf[2]):sum() + (gf[3] ^ 2):sum() }, { k })[1]
    local hc = tide.autograd.grad({ (gc[1] * gc[2]):sum() + (gc[3] ^ 2):sum() }, { k })[1]
    H.close(hf, hc, 1e-12, "second order")
  end)

  it("float32 kernels at sizes that fill their vector tiles equal the float64 formula", function()
    -- keys past one and several 16-lane blocks (transposed in 16x16 tiles, with
    -- remainders), embedding sizes of whole and partial blocks, the heads of a
    -- packed qkv tensor read in place, causal and full, forward and gradients
    tide.manual_seed(7)
    for _, c in ipairs { { 2, 37, 37, 32, 32 }, { 3, 70, 70, 20, 48 }, { 2, 16, 41, 64, 64 }, { 1, 33, 19, 17, 5 } } do
      local B, L, S, E, Ev = c[1], c[2], c[3], c[4], c[5]
      local qkv = tide.randn(B, math.max(L, S), 2 * E + Ev)
      local q = qkv:narrow(2, 1, L):narrow(3, 1, E):contiguous()
      local qv = qkv:narrow(2, 1, L):narrow(3, 1, E)                -- strided rows
      local k, v = qkv:narrow(2, 1, S):narrow(3, E + 1, E), qkv:narrow(2, 1, S):narrow(3, 2 * E + 1, Ev)
      local g = tide.randn(B, L, Ev)
      for _, causal in ipairs { false, true } do
        local what = ("(%d,%d,%d,%d,%d) causal=%s"):format(B, L, S, E, Ev, tostring(causal))
        local args = {}
        for i, x in ipairs { qv, k, v } do args[i] = x:detach():requires_grad_() end
        local y = F.scaled_dot_product_attention(args[1], args[2], args[3], { is_causal = causal })
        local gs = tide.autograd.grad({ (y * g):sum() }, args)
        local ref = {}
        for i, x in ipairs { q, k, v } do ref[i] = x:double():requires_grad_() end
        local s = ref[1]:matmul(ref[2]:transpose(2, 3)) / math.sqrt(E)
        if causal then s = s:masked_fill(tide.arange(L):view(L, 1):lt(tide.arange(S):view(1, S)), -math.huge) end
        local yr = s:softmax(-1):matmul(ref[3])
        local gr = tide.autograd.grad({ (yr * g:double()):sum() }, ref)
        H.close(y:double(), yr:detach(), 2e-5, "forward " .. what)
        for i = 1, 3 do H.close(gs[i]:double(), gr[i], 1e-4, ("gradient %d %s"):format(i, what)) end
      end
    end
  end)

  it("names the shapes and options it rejects", function()
    local q, k, v = tide.randn(2, 5, 4), tide.randn(2, 6, 4), tide.randn(2, 6, 3)
    H.raises(function() F.scaled_dot_product_attention(q, tide.randn(2, 6, 3), v) end,
      "scaled_dot_product_attention", "[2,5,4]", "[2,6,3]", "embedding sizes")
    H.raises(function() F.scaled_dot_product_attention(q, k, tide.randn(2, 5, 3)) end, "different lengths", "[2,6,4]", "[2,5,3]")
    H.raises(function() F.scaled_dot_product_attention(q, k, v, { causal = true }) end, "unknown option 'causal'")
    H.raises(function() F.scaled_dot_product_attention(q, k, v, { is_causal = true, attn_mask = tide.ones(5, 6):bool() }) end,
      "is_causal and attn_mask")
    H.raises(function() F.scaled_dot_product_attention(tide.randn(4), k, v) end, "at least 2 dims", "[4]")
    H.raises(function() F.scaled_dot_product_attention(q, tide.randn(2, 0, 4), tide.randn(2, 0, 3)) end, "no positions")
    H.raises(function() F.scaled_dot_product_attention(q:long(), k:long(), v:long()) end, "float")
    H.raises(function() F.scaled_dot_product_attention(q, k, v, { dropout_p = 1.5 }) end, "dropout_p between 0 and 1")
  end)
end)

describe("nn layers", function()
  local function set(t, v) tide.no_grad(function() t:copy_(t64(v)) end) end

  it("Linear: forward, PyTorch default init bounds, gradcheck", function()
    tide.manual_seed(0)
    local big = nn.Linear(100, 300)
    local bound = 1 / math.sqrt(100)
    assert.is_true(big.weight:abs():max():item() <= bound)
    assert.is_true(big.weight:abs():max():item() > 0.95 * bound)
    assert.is_true(math.abs(big.weight:mean():item()) < 0.005)
    -- U(-a, a) has variance a^2/3
    assert.is_true(math.abs(big.weight:var():item() - bound * bound / 3) < 0.0005)
    assert.is_true(big.bias:abs():max():item() <= bound)
    assert.are.same({ 300, 100 }, big.weight:size())
    assert.is_true(big.weight.requires_grad and big.weight.is_leaf)

    local m = nn.Linear(3, 2, f64)
    assert.are.equal(tide.float64, m.weight.dtype)
    set(m.weight, { { 0.1, -0.2, 0.3 }, { 0.4, 0.5, -0.6 } }); set(m.bias, { 0.05, -0.1 })
    H.close(m(t64(X)), { { 0.9, -1.6 }, { -0.075, 1.075 } }, 1e-12)
    local x = H.rand64 { 4, 3 }
    H.gradcheck(function(a) return m(a) end, { x, m.weight, m.bias })
    local nb = nn.Linear(3, 2, { bias = false })
    assert.is_nil(nb.bias)
    assert.are.equal(1, #nb:parameters())
    assert.are.equal("Linear(in_features=3, out_features=2, bias=False)", tostring(nb))
  end)

  it("Bilinear, Embedding, LayerNorm, RMSNorm: values and gradcheck", function()
    tide.manual_seed(2)
    local bl = nn.Bilinear(2, 3, 2, f64)
    set(bl.weight, (tide.arange(0, 12, f64):view(2, 2, 3) / 10 - 0.5):totable()); set(bl.bias, { 0.1, 0.2 })
    H.close(bl(t64 { { 1.0, -2.0 }, { 0.5, 0.25 } }, t64(X)), { { -0.35, -1.15 }, { -0.29375, 0.25625 } }, 1e-12)
    H.gradcheck(function(a, b) return bl(a, b) end, { H.rand64 { 3, 2 }, H.rand64 { 3, 3 }, bl.weight, bl.bias })
    assert.is_true(bl.weight:abs():max():item() <= 1 / math.sqrt(2))

    local e = nn.Embedding(10, 3, { padding_idx = 2, dtype = tide.float64 })
    H.close(e.weight[2], { 0, 0, 0 }, 0)
    H.close(e(tide.long { 4, 2 })[1], e.weight[4], 0)
    H.gradcheck(function() return e(tide.long { { 1, 4 }, { 3, 3 } }) end, { e.weight })
    assert.are.equal("Embedding(10, 3, padding_idx=2)", tostring(e))
    assert.are.equal(10, nn.Embedding(10, 3, { padding_idx = -1 }).padding_idx)
    local pre = nn.Embedding.from_pretrained(t64 { { 1, 2 }, { 3, 4 } })
    H.close(pre(tide.long { 2 }), { { 3, 4 } }, 0)
    assert.is_false(pre.weight.requires_grad)
    assert.are.equal(1, #pre:parameters())                 -- frozen: still a parameter, as in PyTorch
    assert.are.same({ "weight" }, select(2, pre:state_dict()))
    local big = nn.Embedding(1000, 50)
    assert.is_true(math.abs(big.weight:std():item() - 1) < 0.03)     -- N(0, 1)

    local ln = nn.LayerNorm(3, f64)
    H.close(ln.weight, { 1, 1, 1 }, 0); H.close(ln.bias, { 0, 0, 0 }, 0)
    set(ln.weight, { 1.5, -0.5, 2.0 }); set(ln.bias, { 0.1, 0.0, -0.1 })
    H.close(ln(t64(X)), { { 0.1, 0.6123704, 2.3494816 }, { 2.0012394, 0.0452676, -2.4539155 } }, 1e-6)
    H.gradcheck(function(a) return ln(a) end, { H.rand64 { 2, 3 }, ln.weight, ln.bias })
    local ln2 = nn.LayerNorm({ 2, 3 }, { elementwise_affine = false, dtype = tide.float64 })
    assert.are.equal(0, #ln2:parameters())
    H.close(ln2(t64(X)), { { 0.0766962, -1.303835, 1.4572273 }, { 0.9970503, -0.1533923, -1.0737464 } }, 1e-6)

    local rn = nn.RMSNorm(3, { eps = 1e-6, dtype = tide.float64 })
    set(rn.weight, { 1.0, 2.0, 0.5 })
    H.close(rn(t64(X)), { { 0.3779644, -1.5118575, 0.7559287 }, { 1.532261, 0.5107537, -0.3830652 } }, 1e-6)
    H.gradcheck(function(a) return rn(a) end, { H.rand64 { 2, 3 }, rn.weight })
    assert.are.equal("RMSNorm((3,), eps=None, elementwise_affine=True)", tostring(nn.RMSNorm(3)))
  end)

  it("activation modules, Flatten, Identity: values, gradcheck, repr", function()
    local v = t64(V)
    H.close(nn.ReLU()(v), { 0.0, 0.0, 0.0, 0.75, 3.0 }, 1e-12)
    H.close(nn.LeakyReLU(0.2)(v), { -0.4, -0.1, 0.0, 0.75, 3.0 }, 1e-12)
    H.close(nn.GELU()(v), { -0.0455003, -0.1542688, 0.0, 0.5800295, 2.9959503 }, 1e-6)
    H.close(nn.GELU({ approximate = "tanh" })(v), { -0.0454023, -0.154286, 0.0, 0.5799606, 2.9963626 }, 1e-6)
    H.close(nn.SiLU()(v), { -0.2384058, -0.1887703, 0.0, 0.509384, 2.8577224 }, 1e-6)
    H.close(nn.Tanh()(v), { -0.9640276, -0.4621172, 0.0, 0.635149, 0.9950548 }, 1e-6)
    H.close(nn.Sigmoid()(v), { 0.1192029, 0.3775407, 0.5, 0.6791787, 0.9525741 }, 1e-6)
    H.close(nn.Softmax(2)(t64(X)), { { 0.1752904, 0.0391126, 0.785597 }, { 0.7184403, 0.2058366, 0.0757231 } }, 1e-6)
    H.close(nn.LogSoftmax(1)(t64(X)),
      { { -1.3132617, -1.5019291, -0.0619676 }, { -0.3132617, -0.2519291, -2.8119676 } }, 1e-6)
    local x = H.rand64 { 2, 3, 2 }
    for _, m in ipairs { nn.ReLU(), nn.LeakyReLU(), nn.GELU(), nn.GELU("tanh"), nn.SiLU(), nn.Tanh(), nn.Sigmoid(),
      nn.Softmax(-1), nn.LogSoftmax(2), nn.Flatten(), nn.Identity(), nn.Dropout(0.3):eval() } do
      H.gradcheck(function(a) return m(a) end, { x })
    end
    assert.are.same({ 2, 6 }, nn.Flatten()(x):size())
    assert.are.same({ 6, 2 }, nn.Flatten(1, 2)(x):size())
    assert.are.equal(x, nn.Identity()(x))
    assert.are.equal("Flatten(start_dim=2, end_dim=-1)", tostring(nn.Flatten()))
    assert.are.equal("LeakyReLU(negative_slope=0.01)", tostring(nn.LeakyReLU()))
    assert.are.equal("GELU(approximate='none')", tostring(nn.GELU()))
    assert.are.equal("Softmax(dim=2)", tostring(nn.Softmax(2)))
    assert.are.equal("LayerNorm((2, 3), eps=1e-05, elementwise_affine=True)", tostring(nn.LayerNorm({ 2, 3 })))
    assert.are.equal("Bilinear(in1_features=2, in2_features=3, out_features=4, bias=True)", tostring(nn.Bilinear(2, 3, 4)))
    assert.are.equal("Dropout(p=0.5, inplace=False)", tostring(nn.Dropout()))
    H.raises(function() nn.Softmax() end, "Softmax: dim must be")
    H.raises(function() nn.GELU("fast") end, "approximate", "fast")
    H.raises(function() nn.Dropout(2) end, "Dropout", "got 2")
  end)

  it("train/eval switches Dropout", function()
    tide.manual_seed(5)
    local m = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    assert.is_true(m.training and m[2].training)
    local x = tide.ones(64, 4)
    local d = nn.Dropout(0.5)
    assert.is_true(d(x):eq(0):sum():item() > 0)
    assert.are.equal(m, m:eval())
    assert.is_false(m.training or m[2].training)
    H.close(m(x), m[1](x), 0)
    m:train()
    assert.is_true(m[2].training)
    assert.is_true(m[2](x):eq(0):sum():item() > 0)
  end)
end)

describe("nn.init", function()
  it("fills in place with PyTorch's fans and gains", function()
    tide.manual_seed(4)
    local w = tide.empty(200, 100, { requires_grad = true })
    local same = nn.init.kaiming_uniform_(w)
    assert.are.equal(w, same)
    assert.is_true(w.is_leaf and w.grad_fn == nil)
    local b = math.sqrt(2) * math.sqrt(3 / 100)
    assert.is_true(w:abs():max():item() <= b and w:abs():max():item() > 0.95 * b)
    nn.init.kaiming_uniform_(w, { mode = "fan_out", nonlinearity = "relu" })
    b = math.sqrt(2) * math.sqrt(3 / 200)
    assert.is_true(w:abs():max():item() <= b and w:abs():max():item() > 0.95 * b)
    nn.init.kaiming_normal_(w)
    assert.is_true(math.abs(w:std():item() - math.sqrt(2 / 100)) < 0.005)
    nn.init.xavier_uniform_(w, 2)
    b = 2 * math.sqrt(6 / 300)
    assert.is_true(w:abs():max():item() <= b and w:abs():max():item() > 0.95 * b)
    nn.init.xavier_normal_(w)
    assert.is_true(math.abs(w:std():item() - math.sqrt(2 / 300)) < 0.003)
    nn.init.normal_(w, 3, 0.5)
    assert.is_true(math.abs(w:mean():item() - 3) < 0.01 and math.abs(w:std():item() - 0.5) < 0.01)
    nn.init.uniform_(w, -2, -1)
    assert.is_true(w:min():item() >= -2 and w:max():item() < -1)
    H.close(nn.init.constant_(w, 0.25):sum(), 0.25 * 20000, 1e-3)
    H.close(nn.init.ones_(w):sum(), 20000, 0)
    H.close(nn.init.zeros_(w):sum(), 0, 0)
    -- conv-shaped weights: fans multiply by the receptive field
    local fi, fo = nn.init._calculate_fan_in_and_fan_out(tide.empty(8, 4, 3, 3))
    assert.are.same({ 36, 72 }, { fi, fo })
    H.close(nn.init.calculate_gain("leaky_relu", math.sqrt(5)), math.sqrt(1 / 3), 1e-12)
    H.close(nn.init.calculate_gain("tanh"), 5 / 3, 1e-12)
    H.raises(function() nn.init.xavier_uniform_(tide.empty(5)) end, "fewer than 2 dims", "[5]")
    H.raises(function() nn.init.kaiming_uniform_(w, 0, "fan_both") end, "mode", "fan_both")
    H.raises(function() nn.init.calculate_gain("swish") end, "unsupported nonlinearity 'swish'")
  end)
end)

-- the model PyTorch printed and whose keys are pasted below
local Attn = nn.Module:extend("Attn")
function Attn:__init() self.qkv = nn.Linear(4, 12); self.proj = nn.Linear(4, 4, { bias = false }) end
local Block = nn.Module:extend("Block")
function Block:__init()
  self.ln1 = nn.LayerNorm(4); self.attn = Attn()
  self.mlp = nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Linear(8, 4))
end
function Block:forward(x) return x + self.mlp(self.ln1(x)) end
local GPT = nn.Module:extend("GPT")
function GPT:__init()
  self.wte = nn.Embedding(10, 4)
  self.blocks = nn.ModuleList({ Block(), Block() })
  self.heads = nn.ModuleDict({ lm = nn.Linear(4, 10) })
  self.ln_f = nn.LayerNorm(4)
  self.note = "plain field"
end

local TORCH_KEYS = { 'wte.weight', 'blocks.0.ln1.weight', 'blocks.0.ln1.bias', 'blocks.0.attn.qkv.weight',
  'blocks.0.attn.qkv.bias', 'blocks.0.attn.proj.weight', 'blocks.0.mlp.0.weight', 'blocks.0.mlp.0.bias',
  'blocks.0.mlp.2.weight', 'blocks.0.mlp.2.bias', 'blocks.1.ln1.weight', 'blocks.1.ln1.bias',
  'blocks.1.attn.qkv.weight', 'blocks.1.attn.qkv.bias', 'blocks.1.attn.proj.weight', 'blocks.1.mlp.0.weight',
  'blocks.1.mlp.0.bias', 'blocks.1.mlp.2.weight', 'blocks.1.mlp.2.bias', 'heads.lm.weight', 'heads.lm.bias',
  'ln_f.weight', 'ln_f.bias' }

local TORCH_REPR = [[
GPT(
  (wte): Embedding(10, 4)
  (blocks): ModuleList(
    (0): Block(
      (ln1): LayerNorm((4,), eps=1e-05, elementwise_affine=True)
      (attn): Attn(
        (qkv): Linear(in_features=4, out_features=12, bias=True)
        (proj): Linear(in_features=4, out_features=4, bias=False)
      )
      (mlp): Sequential(
        (0): Linear(in_features=4, out_features=8, bias=True)
        (1): GELU(approximate='none')
        (2): Linear(in_features=8, out_features=4, bias=True)
      )
    )
    (1): Block(
      (ln1): LayerNorm((4,), eps=1e-05, elementwise_affine=True)
      (attn): Attn(
        (qkv): Linear(in_features=4, out_features=12, bias=True)
        (proj): Linear(in_features=4, out_features=4, bias=False)
      )
      (mlp): Sequential(
        (0): Linear(in_features=4, out_features=8, bias=True)
        (1): GELU(approximate='none')
        (2): Linear(in_features=8, out_features=4, bias=True)
      )
    )
  )
  (heads): ModuleDict(
    (lm): Linear(in_features=4, out_features=10, bias=True)
  )
  (ln_f): LayerNorm((4,), eps=1e-05, elementwise_affine=True)
)]]

describe("nn.Module", function()
  it("state_dict keys and the printed tree match PyTorch's", function()
    local g = GPT()
    local sd, keys = g:state_dict()
    assert.are.same(TORCH_KEYS, keys)
    local names = {}
    for n, p in g:named_parameters() do names[#names + 1] = n; assert.are.equal(sd[n]:numel(), p:numel()) end
    assert.are.same(TORCH_KEYS, names)
    assert.are.equal(#TORCH_KEYS, #g:parameters())
    assert.are.equal(TORCH_REPR, tostring(g))
    assert.is_false(sd["wte.weight"].requires_grad)
    assert.are.equal(4, #g:children())
    assert.are.equal(1 + 1 + 1 + 2 * (1 + 1 + 3 + 1 + 3) + 1 + 1 + 1, #g:modules())
    assert.are.equal("plain field", g.note)
    assert.are.equal(g.blocks[2], g.blocks[-1])
    assert.are.equal(g.heads.lm, g.heads:get("lm"))
    assert.are.same({ "lm" }, g.heads:keys())
    -- shared parameters are listed once by parameters(), but state_dict keeps both names
    local lin = nn.Linear(2, 2)
    local tied = nn.Sequential(lin, lin)
    assert.are.equal(2, #tied:parameters())
    assert.are.same({ "0.weight", "0.bias", "1.weight", "1.bias" }, select(2, tied:state_dict()))
  end)

  it("load_state_dict round trip and its errors", function()
    tide.manual_seed(7)
    local a, b = GPT(), GPT()
    local x = tide.randn(3, 4)
    assert.is_true((a.blocks[1](x) - b.blocks[1](x)):abs():max():item() > 1e-3)
    local w_before = b.wte.weight
    b:load_state_dict(a:state_dict())
    assert.are.equal(w_before, b.wte.weight)           -- copied in place: same tensor
    for _, k in ipairs(TORCH_KEYS) do H.close(b:state_dict()[k], a:state_dict()[k], 0, k) end
    H.close(b.blocks[1](x), a.blocks[1](x), 0)
    assert.is_true(b.wte.weight.is_leaf and b.wte.weight.requires_grad)

    local sd = a:state_dict()
    sd["ln_f.bias"] = nil
    H.raises(function() b:load_state_dict(sd) end, "missing key(s)", '"ln_f.bias"')
    sd = a:state_dict()
    sd["ln_f.extra"] = tide.zeros(4)
    H.raises(function() b:load_state_dict(sd) end, "unexpected key(s)", '"ln_f.extra"')
    local r = b:load_state_dict(sd, { strict = false })
    assert.are.same({ "ln_f.extra" }, r.unexpected_keys)
    sd = a:state_dict()
    sd["blocks.1.mlp.0.weight"] = tide.zeros(4, 8)
    local before = b.ln_f.weight:clone()
    b.ln_f.weight:detach():fill_(5)
    local err = H.raises(function() b:load_state_dict(sd) end, '"blocks.1.mlp.0.weight"', "[4,8]", "[8,4]")
    assert.is_truthy(err:find("nn_spec.lua", 1, true))     -- raised at the caller's line
    H.close(b.ln_f.weight, tide.full({ 4 }, 5), 0)        -- nothing was copied
    assert.is_not_nil(before)
  end)

  it("zero_grad, to(dtype) keeping identity, buffers, registration rules", function()
    local m = nn.Sequential(nn.Linear(3, 2), nn.Tanh())
    local w = m[1].weight
    m(tide.randn(4, 3)):sum():backward()
    assert.is_not_nil(w.grad)
    m:to(tide.float64)
    assert.are.equal(w, m[1].weight)
    assert.are.equal(tide.float64, w.dtype)
    assert.are.equal(tide.float64, w.grad.dtype)
    assert.is_true(w.requires_grad and w.is_leaf)
    m:zero_grad()
    assert.is_nil(w.grad)
    H.gradcheck(function(a) return m(a) end, { H.rand64 { 2, 3 }, m[1].weight, m[1].bias })
    m:float()
    assert.are.equal(tide.float32, m[1].bias.dtype)
    H.raises(function() m:to(tide.int64) end, "floating dtype", "int64")

    local Stat = nn.Module:extend("Stat")
    function Stat:__init()
      self.scale = nn.Parameter(tide.ones(2))
      self:register_buffer("running_mean", tide.zeros(2))
      self:register_parameter("frozen", tide.ones(1))
      self.cache = tide.zeros(3)                          -- no grad: a plain field
      self:register_buffer("scratch", tide.zeros(1), { persistent = false })
    end
    function Stat:forward(x) return x * self.scale + self.running_mean end
    function Stat:extra_repr() return "2" end
    local s = Stat()
    local sd, keys = s:state_dict()
    assert.are.same({ "scale", "frozen", "running_mean" }, keys)
    assert.are.equal(2, #s:parameters())
    assert.are.equal(2, #s:buffers())                    -- scratch is a buffer, not saved
    assert.are.equal("Stat(2)", tostring(s))
    s:requires_grad_(false)
    assert.is_false(s.scale.requires_grad)
    s:requires_grad_()
    s.running_mean = tide.ones(2)                         -- reassigning keeps it a buffer
    assert.are.equal(2, #s:buffers())
    H.close(s(tide.zeros(2)), { 1, 1 }, 0)
    H.raises(function() s.scale = 3 end, "cannot assign number as parameter 'scale'")
    H.raises(function() nn.Module:extend("Empty")():forward() end, "Empty: forward is not implemented")
    H.raises(function() nn.Sequential(nn.ReLU(), 3) end, "bad argument #2 to 'Sequential' (Module expected, got number)")
    assert.is_nil(sd.cache)
  end)

  it("containers: Sequential from a list, ModuleList append/insert, ModuleDict order", function()
    local seq = nn.Sequential({ nn.Linear(2, 3), nn.ReLU() })
    assert.are.equal(2, #seq)
    seq:append(nn.Linear(3, 1))
    assert.are.same({ 1 }, { seq(tide.randn(5, 2)):size(2) })
    local ml = nn.ModuleList()
    ml:append(nn.ReLU()):insert(1, nn.Tanh())
    assert.are.equal("ModuleList(\n  (0): Tanh()\n  (1): ReLU()\n)", tostring(ml))
    ml[3] = nn.SiLU()
    assert.are.equal(3, #ml:children())
    ml:extend({ nn.ReLU(), nn.Identity() })
    assert.are.equal(5, #ml)
    assert.are.equal("Identity()", tostring(ml[5]))
    H.raises(function() ml[7] = nn.SiLU() end, "index 7 is out of range")
    local md = nn.ModuleDict({ { "b", nn.ReLU() }, { "a", nn.Tanh() } })
    assert.are.same({ "b", "a" }, md:keys())
    md.c = nn.SiLU()
    assert.are.same({ "b", "a", "c" }, md:keys())
    assert.are.equal("Sequential(\n  (0): Linear(in_features=784, out_features=512, bias=True)\n  (1): ReLU()\n)",
      tostring(nn.Sequential(nn.Linear(784, 512), nn.ReLU())))
  end)

  it("a tiny MLP trains with plain SGD", function()
    tide.manual_seed(11)
    local Xs = tide.randn(64, 2)
    local Ys = (Xs[{ {}, 1 }] * Xs[{ {}, 2 }]):unsqueeze(2)   -- a nonlinear target
    local model = nn.Sequential(nn.Linear(2, 16), nn.Tanh(), nn.Linear(16, 1))
    local first, last
    for step = 1, 200 do
      local loss = ((model(Xs) - Ys) ^ 2):mean()
      if step == 1 then first = loss:item() end
      last = loss:item()
      model:zero_grad()
      loss:backward()
      tide.no_grad(function()
        for _, p in ipairs(model:parameters()) do p:sub_(p.grad * 0.1) end
      end)
    end
    assert.is_true(last < 0.5 * first, ("loss %g -> %g"):format(first, last))
  end)
end)
