-- The recurrent and attention layers (tide.nn.rnn, tide.nn.transformer)
-- against PyTorch: spec/ref/layers_reference.lua (written by
-- spec/ref/layers_reference.py with torch 2.x) gives each case's module, its
-- state_dict (names and order must be tide's), literal inputs and PyTorch's
-- outputs in float64. Per case: the values (1e-10), float64 gradcheck in the
-- inputs and parameters (flag grad), tide.compile == eager (all cases in one
-- compiled function: one compiler run); then a PyTorch safetensors file of
-- float32 state_dicts, compiled training steps, and the errors. OpenCL ==
-- CPU: spec/opencl/layers_spec.lua (in the OpenCL specs' process).
local tide = require "tide"
local H = require "helper"
local L = require "ref.layers_cases"
local REF, flag, flatten = L.REF, L.flag, L.flatten
local nn = tide.nn

-- a case's module, body and inputs; the state_dict keys must be PyTorch's, in order
local function setup(c)
  local m, fn, xs, keys, want = L.setup(c)
  if m then assert.same(want, keys, c.name .. ": state_dict keys (PyTorch's names and order)") end
  return m, fn, xs
end

local function same(got, want, tol, what)
  assert(tide.is_tensor(got), what .. ": not a tensor")
  assert.same(want.shape, got:size(), what .. ": shape")
  assert.equal(want.dtype, got.dtype.name, what .. ": dtype")
  local flat = got:cpu():reshape(-1):totable()
  for i, w in ipairs(want.data) do
    local g = flat[i]
    local ok = (w ~= w and g ~= g) or g == w or math.abs(g - w) <= tol * math.max(1, math.abs(w))
    assert(ok, ("%s: element %d is %.17g, torch %.17g"):format(what, i, g, w))
  end
end

local function check_outs(c, got, tol, what)
  assert.equal(#c.outs, #got, c.name .. ": number of results" .. what)
  for i, want in ipairs(c.outs) do same(got[i], want, tol, c.name .. " result " .. i .. what) end
end

describe("recurrent and attention layers against PyTorch", function()
  for _, c in ipairs(REF) do
    it(c.name, function()
      local m, fn, xs = setup(c)
      check_outs(c, flatten(fn(m, unpack(xs))), 1e-10, "")
      if flag(c, "grad") then
        -- inputs that are float, then the parameters: the module reads them, gradcheck perturbs them
        local ins, k = {}, #xs
        for i, x in ipairs(xs) do
          ins[i] = x:is_floating_point() and x:clone():requires_grad_() or x
        end
        if m then for _, p in ipairs(m:parameters()) do ins[#ins + 1] = p end end
        local wrt = {}
        for _, x in ipairs(ins) do if x.requires_grad then wrt[#wrt + 1] = x end end
        H.gradcheck(function(...)
          local a = { ... }
          local args = {}
          for i = 1, k do args[i] = a[i] end
          local r = flatten(fn(m, unpack(args, 1, k)))
          local f = {}
          for _, t in ipairs(r) do if t:is_floating_point() then f[#f + 1] = t end end
          return unpack(f)
        end, ins)
        assert.is_true(#wrt > 0)
      end
    end)
  end
end)

describe("recurrent and attention layers, compiled", function()
  it("give the values of eager mode: every case in one compiled function", function()
    local cases = {}
    for _, c in ipairs(REF) do
      if c.module and not flag(c, "nocompile") then
        local m, fn, xs = setup(c)
        cases[#cases + 1] = { c = c, m = m, fn = fn, xs = xs }
      end
    end
    local all = tide.compile(function()
      local res = {}
      for i, e in ipairs(cases) do res[i] = flatten(e.fn(e.m, unpack(e.xs))) end
      return res
    end, { name = "layers" })
    local res = tide.no_grad(all)       -- (with grad on, outputs needing grad run eagerly)
    for i, e in ipairs(cases) do check_outs(e.c, res[i], 1e-10, " (compiled)") end
  end)
end)

describe("a PyTorch safetensors file", function()
  it("loads into tide's LSTM, GRU, MultiheadAttention and TransformerEncoderLayer and gives PyTorch's outputs", function()
    -- float32 state_dicts as PyTorch initializes them, with inputs and outputs (spec/ref/layers_reference.py)
    local all = tide.load("spec/ref/layers_torch.safetensors")
    local function part(prefix, io)
      local sd, got = {}, {}
      for k, v in pairs(all) do
        local name = k:match("^" .. prefix .. "%.(.+)$")
        if name then
          if io[name] then got[name] = v else sd[name] = v end
        end
      end
      return sd, got
    end
    local io = { input = true, output = true, h_n = true, c_n = true, key_padding_mask = true, weights = true }
    local lstm = nn.LSTM(4, 6, { num_layers = 2, bidirectional = true, batch_first = true })
    local sd, t = part("lstm", io)
    lstm:load_state_dict(sd)
    local o, hc = lstm(t.input)
    H.close(o, t.output, 1e-5, "lstm output"); H.close(hc[1], t.h_n, 1e-5, "lstm h_n"); H.close(hc[2], t.c_n, 1e-5, "lstm c_n")

    local gru = nn.GRU(4, 6, { num_layers = 2 })
    sd, t = part("gru", io)
    gru:load_state_dict(sd)
    local og, h = gru(t.input)
    H.close(og, t.output, 1e-5, "gru output"); H.close(h, t.h_n, 1e-5, "gru h_n")

    local mha = nn.MultiheadAttention(8, 2, { batch_first = true })
    sd, t = part("mha", io)
    mha:load_state_dict(sd)
    local om, w = mha(t.input, t.input, t.input, { key_padding_mask = t.key_padding_mask })
    H.close(om, t.output, 1e-5, "mha output"); H.close(w, t.weights, 1e-6, "mha weights")

    local enc = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 32, batch_first = true })
    sd, t = part("enc", io)
    enc:load_state_dict(sd)
    enc:eval()
    H.close(enc(t.input, { src_mask = nn.Transformer.generate_square_subsequent_mask(5) }), t.output, 1e-5, "encoder layer")
  end)
end)

describe("compiled training steps of the layers", function()
  -- an LSTM tagger, a GRU over packed sequences and a Transformer encoder trained together by one step
  local function models(seed)
    tide.manual_seed(seed)
    local m = {
      lstm = nn.LSTM(5, 8, { num_layers = 2, bidirectional = true }), head = nn.Linear(16, 3),
      gru = nn.GRU(5, 6, { batch_first = true }),
      enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, norm_first = true }), 2),
    }
    local params = {}
    for _, k in ipairs { "lstm", "head", "gru", "enc" } do
      for _, p in ipairs(m[k]:parameters()) do params[#params + 1] = p end
    end
    -- SGD: the key bias of attention has a zero gradient (softmax ignores a per-query constant), and
    -- Adam would turn its rounding noise into steps of lr either way
    local opt = tide.optim.SGD(params, { lr = 0.05 })
    local F, P = nn.functional, nn.utils.rnn
    local mask = nn.Transformer.generate_square_subsequent_mask(4)
    local function step(x, y, xs, src)
      local o = m.lstm(x)
      local loss = F.cross_entropy(m.head(o):view(-1, 3), y)
      local og, hg = m.gru(P.pack_padded_sequence(xs, { 4, 2, 3 }, { batch_first = true, enforce_sorted = false }))
      loss = loss + (og.data ^ 2):mean() + hg:sum() * 0.1
      loss = loss + (m.enc(src, { mask = mask, is_causal = true }) ^ 2):mean()
      opt:zero_grad(); loss:backward(); opt:step()
      return loss
    end
    return params, step
  end

  it("follow eager mode (losses and parameters over 3 steps)", function()
    local pe, se = models(7)
    local pc, sc = models(7)
    local cstep = tide.compile(sc, { name = "layers_step" })
    tide.manual_seed(3)
    for _ = 1, 3 do
      local x, y = tide.randn(6, 4, 5), tide.randint(1, 4, { 24 })
      local xs, src = tide.randn(3, 4, 5), tide.randn(4, 2, 8)
      local le, lc = se(x, y, xs, src), cstep(x, y, xs, src)
      H.close(lc, le, 1e-4, "loss")
    end
    for i = 1, #pe do H.close(pc[i], pe[i], 1e-4, "parameter " .. i) end
  end)

  it("an LSTM step is one kernel of gate math forward, one kernel, a cat and dh backward; dW_hh is one matmul", function()
    local T = 5
    local lstm = nn.LSTM(4, 8)
    local x = tide.randn(T, 3, 4)
    -- the schedule as letters: M an eager matmul, C an eager cat, K a kernel whose ops include
    -- sigmoid and tanh (gate math), k any other kernel
    local function letters(text)
      local s = {}
      for line in text:match("%-%- schedule\n(.-)%-%- code"):gmatch("[^\n]+") do
        if line:match("^eager matmul") then s[#s + 1] = "M"
        elseif line:match("^eager cat") then s[#s + 1] = "C"
        elseif line:match("^k_") then s[#s + 1] = (line:match(" sigmoid") and line:match(" tanh")) and "K" or "k" end
      end
      return table.concat(s)
    end
    local fwd = tide.compile(function(x) return (lstm(x)) end)
    local seq = letters(tide.no_grad(function() return fwd:explain(x) end))
    assert.truthy(seq:find(("MK"):rep(T) .. "C", 1, true), "forward: matmul, one gate kernel per step, the outputs' cat: " .. seq)
    assert.equal(T, select(2, seq:gsub("K", "")), seq)
    local train = tide.compile(function(x) local o, hc = lstm(x); local l = (o * o):sum() + hc[2]:sum(); l:backward(); return l end)
    seq = letters(train:explain(x))
    assert.truthy(seq:find(("MK"):rep(T), 1, true), "forward of the training step: " .. seq)
    assert.truthy(seq:find(("KCM"):rep(T - 1) .. "KC", 1, true),
      "backward: per step one gate kernel, the gates' gradient as one cat, dh: " .. seq)
    -- matmuls: the input projection and one per step forward, one per step but the first backward (dh), and
    -- one for each weight's gradient (W_hh's products joined: one matmul over all steps' rows)
    assert.equal(2 * T + 2, select(2, seq:gsub("M", "")), seq)
  end)
end)

describe("layer options", function()
  it("dropout between recurrent layers acts in training mode only", function()
    tide.manual_seed(1)
    local lstm = nn.LSTM(3, 4, { num_layers = 2, dropout = 0.5 })
    local plain = nn.LSTM(3, 4, { num_layers = 2 })
    plain:load_state_dict(lstm:state_dict())
    local x = tide.randn(5, 2, 3)
    assert.is_true(H.maxdiff(lstm(x), plain(x)) > 1e-3, "training: dropout between the layers")
    lstm:eval()
    H.close(lstm(x), plain(x), 0, "eval: no dropout")
    local one = nn.GRU(3, 4, { dropout = 0.5 })               -- one layer: nothing between layers
    local y1 = one(x)
    H.close(one(x), y1, 0)
  end)

  it("print as PyTorch's and copy the layer in the stacks", function()
    assert.equal("LSTM(10, 20, num_layers=2, batch_first=True, dropout=0.1, bidirectional=True)",
      tostring(nn.LSTM(10, 20, { num_layers = 2, batch_first = true, dropout = 0.1, bidirectional = true })))
    assert.equal("GRU(3, 4, bias=False)", tostring(nn.GRU(3, 4, { bias = false })))
    assert.equal("RNNCell(3, 4, nonlinearity='relu')", tostring(nn.RNNCell(3, 4, { nonlinearity = "relu" })))
    local layer = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16 })
    local enc = nn.TransformerEncoder(layer, 2)
    local a, b = enc.layers[1].linear1.weight, enc.layers[2].linear1.weight
    H.close(a, b, 0, "copies start equal (PyTorch deep-copies the layer)")
    assert.is_false(rawequal(a, b))
    assert.is_false(rawequal(a, layer.linear1.weight))
    tide.no_grad(function() a:add_(1) end)
    assert.is_true(H.maxdiff(a, b) > 0.5, "and are separate tensors")
    assert.equal(#layer:parameters() * 2, #enc:parameters())
    -- nn.Transformer: PyTorch's parameter count for these sizes (d_model 16, ff 32, 2 + 1 layers)
    local tf = nn.Transformer({ d_model = 16, nhead = 4, num_encoder_layers = 2, num_decoder_layers = 1, dim_feedforward = 32 })
    local n = 0
    for _, p in ipairs(tf:parameters()) do n = n + p:numel() end
    assert.equal(2 * 2224 + 3344 + 2 * 32, n)
  end)

  it("take an activation function or module", function()
    local x = tide.randn(3, 2, 8)
    local a = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, activation = nn.functional.silu })
    local b = nn.TransformerEncoderLayer(8, 2, { dim_feedforward = 16, dropout = 0, activation = nn.SiLU() })
    b:load_state_dict(a:state_dict())
    H.close(a(x), b(x), 1e-6)
    assert.equal(#select(2, a:state_dict()), #select(2, b:state_dict()))
  end)
end)

describe("layer errors", function()
  it("name the layer and the values", function()
    local lstm = nn.LSTM(10, 20, { num_layers = 2 })
    H.raises(function() return lstm(tide.randn(5, 3, 7)) end, "LSTM: input size 7 does not match input_size 10", "[5,3,7]")
    H.raises(function() return lstm(tide.randn(5, 3, 2, 10)) end, "LSTM: expected input with 2 (unbatched) or 3 dims", "[5,3,2,10]")
    H.raises(function() return lstm(tide.randn(5, 3, 10), { tide.zeros(1, 3, 20), tide.zeros(2, 3, 20) }) end,
      "LSTM: expected h0 of shape [2,3,20]", "got [1,3,20]")
    H.raises(function() return lstm(tide.randn(5, 3, 10), tide.zeros(2, 3, 20)) end, "bad argument #2 to 'LSTM' (table {h0, c0} expected")
    H.raises(function() return lstm(tide.randn(5, 10), { tide.zeros(2, 3, 20), tide.zeros(2, 3, 20) }) end,
      "for unbatched 2-D input, h0 should also be 2-D")
    H.raises(function() return nn.GRU(3, 4)(tide.randn(5, 2, 3), tide.zeros(1, 3, 4)) end, "GRU: expected hx of shape [1,2,4]")
    H.raises(function() return nn.GRU(3, 4)(tide.randn(5, 2, 3, { dtype = tide.float64 })) end,
      "GRU: input dtype float64 does not match the parameters' float32")
    H.raises(function() return nn.RNN(3, 4, { nonlinearity = "sigmoid" }) end, "RNN: unknown nonlinearity 'sigmoid'")
    H.raises(function() return nn.LSTM(3, 4, { proj_size = 2 }) end, "LSTM: proj_size (2) is not supported")
    H.raises(function() return nn.LSTM(3, 4, { num_layer = 2 }) end, "LSTM: unknown option 'num_layer'")
    H.raises(function() return nn.LSTM(3, 4, { dropout = 1.5 }) end, "LSTM: dropout should be a number in range [0, 1]")
    H.raises(function() return nn.LSTMCell(3, 4)(tide.randn(2, 5)) end, "LSTMCell: input size 5 does not match input_size 3")
    H.raises(function() return nn.GRUCell(3, 4)(tide.randn(2, 3), tide.zeros(3, 4)) end, "GRUCell: expected hx of shape [2,4], got [3,4]")
    local P = nn.utils.rnn
    H.raises(function() return P.pack_padded_sequence(tide.randn(4, 2, 3), { 2, 3 }) end,
      "pack_padded_sequence: lengths must be sorted in decreasing order when enforce_sorted is true (got [2,3])")
    H.raises(function() return P.pack_padded_sequence(tide.randn(4, 2, 3), { 5, 3 }) end, "length 5 of sequence 1 is outside 1..4")
    H.raises(function() return P.pack_padded_sequence(tide.randn(4, 2, 3), { 3 }) end, "1 lengths for a batch of 2 sequences")
    H.raises(function() return P.pad_sequence({ tide.ones(2, 3), tide.ones(2, 4) }) end,
      "pad_sequence: sequence 2 has shape [2,4], sequence 1 [2,3]")
  end)

  it("of attention name the layer and the shapes", function()
    H.raises(function() return nn.MultiheadAttention(10, 3) end, "MultiheadAttention: embed_dim 10 must be divisible by num_heads 3")
    H.raises(function() return nn.MultiheadAttention(8, 2, { add_bias_kv = true }) end, "add_bias_kv is not supported")
    local mha = nn.MultiheadAttention(8, 2)
    local q, k = tide.randn(3, 2, 8), tide.randn(4, 2, 8)
    H.raises(function() return mha(q, k, k, { key_padding_mask = tide.zeros(2, 3):gt(0) }) end,
      "expected key_padding_mask of shape [2,4] (batch, source length), got [2,3]")
    H.raises(function() return mha(q, k, k, { attn_mask = tide.zeros(4, 3) }) end,
      "the shape of the 2-D attn_mask is [4,3], but should be [3,4]")
    H.raises(function() return mha(q, k, k, { attn_mask = tide.zeros(2, 3, 4) }) end,
      "the shape of the 3-D attn_mask is [2,3,4], but should be [4,3,4]")
    H.raises(function() return mha(q, k, k, { attn_mask = tide.zeros(3, 4, { dtype = tide.int64 }) }) end,
      "only bool and floating types of attn_mask are supported")
    H.raises(function() return mha(q, tide.randn(4, 2, 6), k) end, "key [4,2,6] and value [4,2,8] must end in kdim 8 and vdim 8")
    H.raises(function() return mha(q, q, q, { is_causal = true }) end, "is_causal needs attn_mask")
    H.raises(function() return mha(tide.randn(3, 2, 7), k, k) end, "query's embedding size 7 does not match embed_dim 8")
    local tf = nn.Transformer({ d_model = 8, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 8 })
    H.raises(function() return tf(tide.randn(3, 2, 8), tide.randn(3, 4, 8)) end, "Transformer: the batch number of src [3,2,8] and tgt [3,4,8] must be equal")
    H.raises(function() return nn.TransformerEncoderLayer(8, 2, { activation = "tanh" }) end,
      "TransformerEncoderLayer: activation should be relu/gelu or a function, not tanh")
  end)
end)
