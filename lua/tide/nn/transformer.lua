--[[
tide.nn.transformer -- attention and the Transformer as PyTorch's
torch.nn: MultiheadAttention (on F.scaled_dot_product_attention),
TransformerEncoderLayer, TransformerEncoder, TransformerDecoderLayer,
TransformerDecoder and Transformer, with PyTorch's parameter names
(in_proj_weight or q/k/v_proj_weight, in_proj_bias, out_proj.weight,
linear1, norm1, layers.0, ...), initialization and defaults, so a PyTorch
state_dict loads as is.

Masks follow PyTorch's MultiheadAttention: a bool attn_mask or
key_padding_mask marks with true what may NOT be attended (the opposite of
F.scaled_dot_product_attention's bool mask); a float mask is added to the
scores. Both become float masks (-inf where true) and are summed, as in
PyTorch. Without weights to return (need_weights = false, which the
Transformer layers use) attention is F.scaled_dot_product_attention: the
fused CPU op when there is no mask (or is_causal alone), the matmul-softmax
formula with one; with weights it is that formula, scores kept.
Layouts: projections run on the input as it is laid out (seq-first (L, N, E)
or batch_first (N, L, E)); the heads are views (N, H, L, E/H) of them.

Loaded by tide.nn (lua/tide/nn/init.lua) at its end; the classes are
installed into it.
--]]
local tide = require "tide"
local core = require "tide.core"
local args = require "tide.args"
local raise, is_tensor = core.raise, core.is_tensor
local nn = require "tide.nn"        -- the module being built: init.lua requires this file at its end

local function size_str(s) return "[" .. table.concat(s, ",") .. "]" end
local function shape_of(x) return size_str(x:size()) end

local F, init = nn.functional, nn.init

local U = require "tide.nn.layer_util"
local param, posint = U.param, U.posint

local function dropout_p(fname, p)
  p = p == nil and 0.1 or p
  if type(p) ~= "number" or p < 0 or p > 1 then
    raise(("%s: dropout probability has to be between 0 and 1, but got %s"):format(fname, tostring(p)))
  end
  return p
end

-- a bool mask (true: not attended) or a float mask (added) as a float mask of dtype dt
local function canonical_mask(fname, what, m, q)
  if m == nil then return nil end
  if not is_tensor(m) then raise(("%s: %s must be a Tensor, got %s"):format(fname, what, args.typename(m))) end
  if m.dtype == tide.bool then
    return tide.zeros(m:size(), { dtype = q.dtype, device = q.device }):masked_fill(m, -math.huge)
  end
  if not m:is_floating_point() then
    raise(("%s: only bool and floating types of %s are supported, got %s"):format(fname, what, m.dtype.name))
  end
  if m.dtype ~= q.dtype then
    raise(("%s: a float %s must have the query's dtype %s, got %s"):format(fname, what, q.dtype.name, m.dtype.name))
  end
  return m
end

-- -- MultiheadAttention ---------------------------------------------------------------------

-- PyTorch's out_proj class (a Linear by another name)
local OutProj = nn.Linear:extend("NonDynamicallyQuantizableLinear")

--- nn.MultiheadAttention(embed_dim, num_heads[, {dropout = 0, bias = true, kdim, vdim, batch_first = false, dtype, device}])
--- Multi-head attention (PyTorch's parameters and masks); mha(query, key, value[, opts]) -> output, weights.
local MHA = nn.Module:extend("MultiheadAttention")
nn.MultiheadAttention = MHA
function MHA:__init(embed_dim, num_heads, opts)
  local name = "MultiheadAttention"
  opts = args.opts(name, opts, "dropout bias add_bias_kv add_zero_attn kdim vdim batch_first dtype device", 3)
  posint(name, embed_dim, 1, "embed_dim")
  posint(name, num_heads, 2, "num_heads")
  if embed_dim % num_heads ~= 0 then
    raise(("%s: embed_dim %d must be divisible by num_heads %d"):format(name, embed_dim, num_heads))
  end
  if opts.add_bias_kv then raise(name .. ": add_bias_kv is not supported (leave it out or false)") end
  if opts.add_zero_attn then raise(name .. ": add_zero_attn is not supported (leave it out or false)") end
  self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim / num_heads
  self.kdim = opts.kdim ~= nil and posint(name, opts.kdim, 3, "kdim") or embed_dim
  self.vdim = opts.vdim ~= nil and posint(name, opts.vdim, 3, "vdim") or embed_dim
  self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
  self.dropout = dropout_p(name, opts.dropout or 0)
  self.batch_first = opts.batch_first == true
  local po = { dtype = opts.dtype, device = opts.device }
  if self._qkv_same_embed_dim then
    self.in_proj_weight = param({ 3 * embed_dim, embed_dim }, po)
  else
    self.q_proj_weight = param({ embed_dim, embed_dim }, po)
    self.k_proj_weight = param({ embed_dim, self.kdim }, po)
    self.v_proj_weight = param({ embed_dim, self.vdim }, po)
    self:register_parameter("in_proj_weight", nil)
  end
  if opts.bias ~= false then self.in_proj_bias = param({ 3 * embed_dim }, po)
  else self:register_parameter("in_proj_bias", nil) end
  self.out_proj = OutProj(embed_dim, embed_dim, { bias = opts.bias ~= false, dtype = opts.dtype, device = opts.device })
  self:reset_parameters()
end

-- xavier_uniform_ for the projections, zero biases (out_proj.weight keeps Linear's init), as PyTorch
function MHA:reset_parameters()
  if self._qkv_same_embed_dim then init.xavier_uniform_(self.in_proj_weight)
  else
    init.xavier_uniform_(self.q_proj_weight); init.xavier_uniform_(self.k_proj_weight)
    init.xavier_uniform_(self.v_proj_weight)
  end
  if self.in_proj_bias ~= nil then
    init.zeros_(self.in_proj_bias)
    init.zeros_(self.out_proj.bias)
  end
end

function MHA:extra_repr()
  if self.kdim ~= self.embed_dim or self.vdim ~= self.embed_dim then
    return ("kdim=%d, vdim=%d"):format(self.kdim, self.vdim)
  end
  return ""
end

-- the q, k, v projections of the inputs, in their layouts
function MHA:_in_proj(query, key, value)
  local E, b = self.embed_dim, self.in_proj_bias
  local function bias(i) return b ~= nil and b:narrow(1, (i - 1) * E + 1, E) or nil end
  if self._qkv_same_embed_dim then
    local W = self.in_proj_weight
    if rawequal(query, key) and rawequal(key, value) then
      local qkv = F.linear(query, W, b):split(E, -1)          -- one matmul for all three
      return qkv[1], qkv[2], qkv[3]
    end
    local q = F.linear(query, W:narrow(1, 1, E), bias(1))
    if rawequal(key, value) then
      local kv = F.linear(key, W:narrow(1, E + 1, 2 * E), b ~= nil and b:narrow(1, E + 1, 2 * E) or nil):split(E, -1)
      return q, kv[1], kv[2]
    end
    return q, F.linear(key, W:narrow(1, E + 1, E), bias(2)), F.linear(value, W:narrow(1, 2 * E + 1, E), bias(3))
  end
  return F.linear(query, self.q_proj_weight, bias(1)), F.linear(key, self.k_proj_weight, bias(2)),
    F.linear(value, self.v_proj_weight, bias(3))
end

--- nn.MultiheadAttention:forward(query, key, value[, {key_padding_mask, need_weights = true, attn_mask, average_attn_weights = true, is_causal = false}]) -> output, weights
--- query (L, N, E) (batch_first: (N, L, E); unbatched (L, E)); masks as PyTorch's (bool true: not attended); weights nil unless need_weights.
function MHA:forward(query, key, value, opts)
  local name = "MultiheadAttention"
  args.tensor(query, 1, name); args.tensor(key, 2, name); args.tensor(value, 3, name)
  opts = args.opts(name, opts, "key_padding_mask need_weights attn_mask average_attn_weights is_causal", 4)
  local E, Hn, hd = self.embed_dim, self.num_heads, self.head_dim
  local batched = query.ndim == 3
  if query.ndim ~= 2 and query.ndim ~= 3 then
    raise(("%s: query should be 2-D (unbatched) or 3-D (batched), got %s"):format(name, shape_of(query)))
  end
  if key.ndim ~= query.ndim or value.ndim ~= query.ndim then
    raise(("%s: for %s query, key and value must be %d-D, got key %s and value %s"):format(name,
      batched and "batched 3-D" or "unbatched 2-D", query.ndim, shape_of(key), shape_of(value)))
  end
  local bf = self.batch_first and batched
  local sd, bd = bf and 2 or 1, bf and 1 or 2                   -- seq and batch dims (batched)
  local L, S = query:size(batched and sd or 1), key:size(batched and sd or 1)
  local N = batched and query:size(bd) or 1
  if query:size(-1) ~= E then
    raise(("%s: query's embedding size %d does not match embed_dim %d (query %s)"):format(name, query:size(-1), E,
      shape_of(query)))
  end
  if key:size(-1) ~= self.kdim or value:size(-1) ~= self.vdim then
    raise(("%s: key %s and value %s must end in kdim %d and vdim %d"):format(name, shape_of(key), shape_of(value),
      self.kdim, self.vdim))
  end
  if (batched and (key:size(bd) ~= N or value:size(bd) ~= N)) or value:size(batched and sd or 1) ~= S then
    raise(("%s: key %s and value %s must have the same batch size and sequence length, and the query %s the same "
      .. "batch size"):format(name, shape_of(key), shape_of(value), shape_of(query)))
  end
  local w = self.in_proj_weight or self.q_proj_weight
  if query.dtype ~= w.dtype then
    raise(("%s: query dtype %s does not match the parameters' %s"):format(name, query.dtype.name, w.dtype.name))
  end
  local need_weights = opts.need_weights ~= false
  local is_causal = opts.is_causal == true
  local kpm, am = opts.key_padding_mask, opts.attn_mask
  if is_causal and am == nil then
    raise(name .. ": is_causal needs attn_mask (the causal mask: nn.Transformer.generate_square_subsequent_mask(L))")
  end
  -- the masks as float masks broadcasting against the scores (N, H, L, S)
  if kpm ~= nil then
    local want = batched and { N, S } or { S }
    if not is_tensor(kpm) or size_str(kpm:size()) ~= size_str(want) then
      raise(("%s: expected key_padding_mask of shape %s (%s), got %s"):format(name, size_str(want),
        batched and "batch, source length" or "source length", is_tensor(kpm) and shape_of(kpm) or args.typename(kpm)))
    end
    kpm = canonical_mask(name, "key_padding_mask", kpm, query):view(N, 1, 1, S)
  end
  if is_causal and kpm == nil and not need_weights then am = nil
  elseif am ~= nil then
    if not is_tensor(am) then args.argerr(4, name, "Tensor attn_mask", am) end
    if am.ndim == 2 then
      if am:size(1) ~= L or am:size(2) ~= S then
        raise(("%s: the shape of the 2-D attn_mask is %s, but should be %s (target length, source length)"):format(name,
          shape_of(am), size_str({ L, S })))
      end
      am = canonical_mask(name, "attn_mask", am, query)
    elseif am.ndim == 3 then
      if am:size(1) ~= N * Hn or am:size(2) ~= L or am:size(3) ~= S then
        raise(("%s: the shape of the 3-D attn_mask is %s, but should be %s (batch * num_heads, target length, "
          .. "source length)"):format(name, shape_of(am), size_str({ N * Hn, L, S })))
      end
      am = canonical_mask(name, "attn_mask", am, query):view(N, Hn, L, S)
    else
      raise(("%s: attn_mask should be 2-D or 3-D, got %s"):format(name, shape_of(am)))
    end
    if kpm ~= nil then is_causal = false end
  end
  local mask = am
  if kpm ~= nil then mask = mask ~= nil and mask + kpm or kpm end
  -- heads: (N, H, len, hd) views of the projections
  local q, k, v = self:_in_proj(query, key, value)
  local function heads(t, len)
    if not batched then return t:view(len, Hn, hd):transpose(1, 2):unsqueeze(1) end
    if bf then return t:view(N, len, Hn, hd):transpose(2, 3) end
    return t:view(len, N, Hn, hd):permute(2, 3, 1, 4)
  end
  q, k, v = heads(q, L), heads(k, S), heads(v, S)
  local p = self.training and self.dropout or 0
  local o, weights
  if need_weights then
    local s = (q * math.sqrt(1 / hd)):matmul(k:transpose(-2, -1))
    if mask ~= nil then s = s + mask end
    weights = s:softmax(-1)
    if p > 0 then weights = F.dropout(weights, p) end
    o = weights:matmul(v)
    if opts.average_attn_weights ~= false then weights = weights:mean(2) end
    if not batched then weights = weights:squeeze(1) end
  else
    o = F.scaled_dot_product_attention(q, k, v, { attn_mask = mask, is_causal = is_causal and mask == nil,
      dropout_p = p })
  end
  -- back to the input's layout, heads joined: (L, N, E), (N, L, E) or (L, E)
  if not batched then o = o:squeeze(1):transpose(1, 2):reshape(L, E)
  elseif bf then o = o:transpose(2, 3):reshape(N, L, E)
  else o = o:permute(3, 1, 2, 4):reshape(L, N, E) end
  return self.out_proj(o), weights
end

-- -- Shared parts of the layers --------------------------------------------------------------

local function activation_of(fname, a)
  if a == nil or a == "relu" then return F.relu, "relu" end
  if a == "gelu" then return F.gelu, "gelu" end
  if type(a) == "function" or nn.is_module(a) then return a, nil end
  raise(("%s: activation should be relu/gelu or a function, not %s"):format(fname, tostring(a)))
end

local LAYER_OPTS = "dim_feedforward dropout activation layer_norm_eps batch_first norm_first bias dtype device"

local function layer_init(self, name, d_model, nhead, opts, cross)
  opts = args.opts(name, opts, LAYER_OPTS, 3)
  posint(name, d_model, 1, "d_model")
  posint(name, nhead, 2, "nhead")
  local ff = opts.dim_feedforward ~= nil and posint(name, opts.dim_feedforward, 3, "dim_feedforward") or 2048
  local p = dropout_p(name, opts.dropout)
  local lo = { bias = opts.bias ~= false, dtype = opts.dtype, device = opts.device }
  local mo = { dropout = p, bias = opts.bias ~= false, batch_first = opts.batch_first, dtype = opts.dtype,
    device = opts.device }
  self.self_attn = MHA(d_model, nhead, mo)
  if cross then self.multihead_attn = MHA(d_model, nhead, mo) end
  self.linear1 = nn.Linear(d_model, ff, lo)
  self.dropout = nn.Dropout(p)
  self.linear2 = nn.Linear(ff, d_model, lo)
  self.norm_first = opts.norm_first == true
  local eps = opts.layer_norm_eps or 1e-5
  local no = { eps = eps, bias = opts.bias ~= false, dtype = opts.dtype, device = opts.device }
  -- one per statement: registration order is state_dict order (a, b = ... assigns right to left)
  self.norm1 = nn.LayerNorm(d_model, no)
  self.norm2 = nn.LayerNorm(d_model, no)
  if cross then self.norm3 = nn.LayerNorm(d_model, no) end
  self.dropout1 = nn.Dropout(p)
  self.dropout2 = nn.Dropout(p)
  if cross then self.dropout3 = nn.Dropout(p) end
  local act = activation_of(name, opts.activation)
  self.activation = act                      -- a module becomes a child (no parameters), as PyTorch's
  self.batch_first = opts.batch_first == true
end

local function ff_block(self, x)
  return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))
end

-- a trailing options table, or a mask tensor in its place (PyTorch's second positional argument)
local function layer_opts(fname, opts, first, allowed, n)
  if is_tensor(opts) then return { [first] = opts } end
  return args.opts(fname, opts, allowed, n)
end

-- -- TransformerEncoderLayer --------------------------------------------------------------------

--- nn.TransformerEncoderLayer(d_model, nhead[, {dim_feedforward = 2048, dropout = 0.1, activation = "relu", layer_norm_eps = 1e-5, batch_first = false, norm_first = false, bias = true, dtype, device}])
--- Self-attention and a feed-forward block, each with a residual and LayerNorm (after, or before with norm_first); activation "relu", "gelu" or a function.
local EncLayer = nn.Module:extend("TransformerEncoderLayer")
nn.TransformerEncoderLayer = EncLayer
function EncLayer:__init(d_model, nhead, opts) layer_init(self, "TransformerEncoderLayer", d_model, nhead, opts, false) end

--- nn.TransformerEncoderLayer:forward(src[, {src_mask, src_key_padding_mask, is_causal = false} | src_mask]) -> Tensor
--- src (S, N, E) (batch_first: (N, S, E)); masks as MultiheadAttention's.
function EncLayer:forward(src, opts)
  local name = "TransformerEncoderLayer"
  args.tensor(src, 1, name)
  opts = layer_opts(name, opts, "src_mask", "src_mask src_key_padding_mask is_causal", 2)
  local function sa(x)
    return self.dropout1((self.self_attn(x, x, x, { attn_mask = opts.src_mask, key_padding_mask = opts.src_key_padding_mask,
      need_weights = false, is_causal = opts.is_causal })))
  end
  local x = src
  if self.norm_first then
    x = x + sa(self.norm1(x))
    return x + ff_block(self, self.norm2(x))
  end
  x = self.norm1(x + sa(x))
  return self.norm2(x + ff_block(self, x))
end

-- -- TransformerDecoderLayer --------------------------------------------------------------------

--- nn.TransformerDecoderLayer(d_model, nhead[, opts])
--- Self-attention, attention over the encoder's memory and a feed-forward block; opts as TransformerEncoderLayer's.
local DecLayer = nn.Module:extend("TransformerDecoderLayer")
nn.TransformerDecoderLayer = DecLayer
function DecLayer:__init(d_model, nhead, opts) layer_init(self, "TransformerDecoderLayer", d_model, nhead, opts, true) end

local DEC_OPTS = "tgt_mask memory_mask tgt_key_padding_mask memory_key_padding_mask tgt_is_causal memory_is_causal"

--- nn.TransformerDecoderLayer:forward(tgt, memory[, {tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal, memory_is_causal} | tgt_mask]) -> Tensor
--- tgt (T, N, E) and memory (S, N, E) (batch_first: batch first); masks as MultiheadAttention's.
function DecLayer:forward(tgt, memory, opts)
  local name = "TransformerDecoderLayer"
  args.tensor(tgt, 1, name); args.tensor(memory, 2, name)
  opts = layer_opts(name, opts, "tgt_mask", DEC_OPTS, 3)
  local function sa(x)
    return self.dropout1((self.self_attn(x, x, x, { attn_mask = opts.tgt_mask, key_padding_mask = opts.tgt_key_padding_mask,
      need_weights = false, is_causal = opts.tgt_is_causal })))
  end
  local function mha(x)
    return self.dropout2((self.multihead_attn(x, memory, memory, { attn_mask = opts.memory_mask,
      key_padding_mask = opts.memory_key_padding_mask, need_weights = false, is_causal = opts.memory_is_causal })))
  end
  local function ff(x) return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x))))) end
  local x = tgt
  if self.norm_first then
    x = x + sa(self.norm1(x))
    x = x + mha(self.norm2(x))
    return x + ff(self.norm3(x))
  end
  x = self.norm1(x + sa(x))
  x = self.norm2(x + mha(x))
  return self.norm3(x + ff(x))
end

-- -- Stacks -------------------------------------------------------------------------------------

-- a deep copy of module m (PyTorch's copy.deepcopy of a layer): parameters and
-- buffers cloned (same values, new leaves), children copied, plain fields copied
local function deepcopy(v, memo)
  if type(v) ~= "table" then
    if is_tensor(v) then
      if memo[v] == nil then
        local c = v:detach():clone()
        if v.requires_grad then c:requires_grad_() end
        memo[v] = c
      end
      return memo[v]
    end
    return v
  end
  if memo[v] then return memo[v] end
  local c = {}
  memo[v] = c
  for k, x in pairs(v) do c[deepcopy(k, memo)] = deepcopy(x, memo) end
  local mt = getmetatable(v)
  return mt and setmetatable(c, mt) or c
end
-- (a copy's fields are filled before its metatable is set: a module's
-- __newindex would register them anew)
local function clone_module(m) return deepcopy(m, {}) end

local function clones(fname, layer, n, cls)
  if not nn.is_module(layer) or getmetatable(layer) ~= cls then args.argerr(1, fname, cls.__name, layer) end
  posint(fname, n, 2, "num_layers")
  if n > 65536 then raise(("%s: num_layers = %d is more than 65536 copies of the layer"):format(fname, n)) end
  local list = {}
  for i = 1, n do list[i] = clone_module(layer) end
  return nn.ModuleList(list)
end

--- nn.TransformerEncoder(encoder_layer, num_layers[, {norm, enable_nested_tensor, mask_check}])
--- num_layers copies of encoder_layer (same initial values, as PyTorch's deep copies), then norm if given.
local Encoder = nn.Module:extend("TransformerEncoder")
nn.TransformerEncoder = Encoder
function Encoder:__init(layer, num_layers, opts)
  local name = "TransformerEncoder"
  opts = args.opts(name, opts, "norm enable_nested_tensor mask_check", 3)
  self.layers = clones(name, layer, num_layers, EncLayer)
  self.num_layers = num_layers
  if opts.norm ~= nil and not nn.is_module(opts.norm) then args.argerr(3, name, "Module norm", opts.norm) end
  if opts.norm ~= nil then self.norm = opts.norm else self.norm = nil end
end
--- nn.TransformerEncoder:forward(src[, {mask, src_key_padding_mask, is_causal} | mask]) -> Tensor
--- Runs the layers in order with the same masks, then the final norm.
function Encoder:forward(src, opts)
  opts = layer_opts("TransformerEncoder", opts, "mask", "mask src_key_padding_mask is_causal", 2)
  local x = src
  local lo = { src_mask = opts.mask, src_key_padding_mask = opts.src_key_padding_mask, is_causal = opts.is_causal }
  for _, layer in ipairs(self.layers) do x = layer(x, lo) end
  if self.norm ~= nil then x = self.norm(x) end
  return x
end

--- nn.TransformerDecoder(decoder_layer, num_layers[, {norm}])
--- num_layers copies of decoder_layer, then norm if given.
local Decoder = nn.Module:extend("TransformerDecoder")
nn.TransformerDecoder = Decoder
function Decoder:__init(layer, num_layers, opts)
  local name = "TransformerDecoder"
  opts = args.opts(name, opts, "norm", 3)
  self.layers = clones(name, layer, num_layers, DecLayer)
  self.num_layers = num_layers
  if opts.norm ~= nil and not nn.is_module(opts.norm) then args.argerr(3, name, "Module norm", opts.norm) end
  if opts.norm ~= nil then self.norm = opts.norm end
end
--- nn.TransformerDecoder:forward(tgt, memory[, opts | tgt_mask]) -> Tensor
--- Runs the layers in order over the same memory and masks (TransformerDecoderLayer's options), then the final norm.
function Decoder:forward(tgt, memory, opts)
  opts = layer_opts("TransformerDecoder", opts, "tgt_mask", DEC_OPTS, 3)
  local x = tgt
  for _, layer in ipairs(self.layers) do x = layer(x, memory, opts) end
  if self.norm ~= nil then x = self.norm(x) end
  return x
end

-- -- Transformer --------------------------------------------------------------------------------

--- nn.Transformer([{d_model = 512, nhead = 8, num_encoder_layers = 6, num_decoder_layers = 6, dim_feedforward = 2048, dropout = 0.1, activation = "relu", custom_encoder, custom_decoder, layer_norm_eps = 1e-5, batch_first = false, norm_first = false, bias = true, dtype, device}])
--- The encoder-decoder model of "Attention Is All You Need" as PyTorch's (final LayerNorms; matrices xavier_uniform).
local Transformer = nn.Module:extend("Transformer")
nn.Transformer = Transformer
function Transformer:__init(a, b, c)
  local name = "Transformer"
  local opts = a
  if type(a) == "number" then opts = {}; for k, v in pairs(c or {}) do opts[k] = v end; opts.d_model, opts.nhead = a, b end
  opts = args.opts(name, opts, LAYER_OPTS .. " d_model nhead num_encoder_layers num_decoder_layers custom_encoder custom_decoder", 1)
  local d, h = opts.d_model or 512, opts.nhead or 8
  local lo = {}
  for k in LAYER_OPTS:gmatch("%S+") do lo[k] = opts[k] end
  local no = { eps = opts.layer_norm_eps or 1e-5, bias = opts.bias ~= false, dtype = opts.dtype, device = opts.device }
  if opts.custom_encoder ~= nil then self.encoder = opts.custom_encoder
  else
    self.encoder = Encoder(EncLayer(d, h, lo), opts.num_encoder_layers or 6, { norm = nn.LayerNorm(d, no) })
  end
  if opts.custom_decoder ~= nil then self.decoder = opts.custom_decoder
  else
    self.decoder = Decoder(DecLayer(d, h, lo), opts.num_decoder_layers or 6, { norm = nn.LayerNorm(d, no) })
  end
  self.d_model, self.nhead, self.batch_first = d, h, opts.batch_first == true
  self:reset_parameters()
end
function Transformer:reset_parameters()
  for _, p in ipairs(self:parameters()) do
    if p:dim() > 1 then init.xavier_uniform_(p) end
  end
end

local TF_OPTS = "src_mask tgt_mask memory_mask src_key_padding_mask tgt_key_padding_mask memory_key_padding_mask "
  .. "src_is_causal tgt_is_causal memory_is_causal"

--- nn.Transformer:forward(src, tgt[, {src_mask, tgt_mask, memory_mask, src_key_padding_mask, tgt_key_padding_mask, memory_key_padding_mask, src_is_causal, tgt_is_causal, memory_is_causal}]) -> Tensor
--- The decoder's output for tgt (T, N, E) over the encoding of src (S, N, E) (batch first with batch_first).
function Transformer:forward(src, tgt, opts)
  local name = "Transformer"
  args.tensor(src, 1, name); args.tensor(tgt, 2, name)
  opts = args.opts(name, opts, TF_OPTS, 3)
  local batched = src.ndim == 3
  local bd = self.batch_first and 1 or 2
  if batched and (tgt.ndim ~= 3 or src:size(bd) ~= tgt:size(bd)) then
    raise(("%s: the batch number of src %s and tgt %s must be equal"):format(name, shape_of(src), shape_of(tgt)))
  end
  if src:size(-1) ~= self.d_model or tgt:size(-1) ~= self.d_model then
    raise(("%s: the feature number of src %s and tgt %s must be equal to d_model %d"):format(name, shape_of(src),
      shape_of(tgt), self.d_model))
  end
  local memory = self.encoder(src, { mask = opts.src_mask, src_key_padding_mask = opts.src_key_padding_mask,
    is_causal = opts.src_is_causal })
  return self.decoder(tgt, memory, { tgt_mask = opts.tgt_mask, memory_mask = opts.memory_mask,
    tgt_key_padding_mask = opts.tgt_key_padding_mask, memory_key_padding_mask = opts.memory_key_padding_mask,
    tgt_is_causal = opts.tgt_is_causal, memory_is_causal = opts.memory_is_causal })
end

--- nn.Transformer.generate_square_subsequent_mask(sz[, {device, dtype}]) -> Tensor
--- The causal mask (sz, sz): -inf above the diagonal (a position sees itself and the ones before), 0 elsewhere.
function Transformer.generate_square_subsequent_mask(sz, opts)
  if not args.is_int(sz) or sz < 0 then args.argerr(1, "generate_square_subsequent_mask", "non-negative integer size", sz) end
  opts = args.opts("generate_square_subsequent_mask", opts, "device dtype", 2)
  return tide.full({ sz, sz }, -math.huge, { dtype = opts.dtype, device = opts.device }):triu(1)
end

return { MultiheadAttention = nn.MultiheadAttention, Transformer = nn.Transformer }
