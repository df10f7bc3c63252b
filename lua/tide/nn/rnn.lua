--[[
tide.nn.rnn -- the recurrent layers: RNN, LSTM and GRU (multi-layer,
bidirectional, batch_first, dropout between layers, initial states, packed
sequences) and the cells RNNCell, LSTMCell and GRUCell, with PyTorch's
parameter names (weight_ih_l0, bias_hh_l1_reverse, ...), gate order (LSTM
i f g o; GRU r z n with n = tanh(W_in x + b_in + r * (W_hn h + b_hn))) and
initialization (every parameter uniform in +-1/sqrt(hidden_size)), so a
PyTorch state_dict loads as is; and nn.utils.rnn: pad_sequence,
pack_padded_sequence, pad_packed_sequence, pack_sequence, PackedSequence.

How a layer runs, per layer and direction: the input projection of all time
steps is one matmul, X (N, in) W_ih^T + b, N the rows of all steps (T*B, or
the rows of a packed sequence); then each step is one matmul h W_hh^T added
to its rows of that projection, and the gate math (under tide.compile one
fused kernel per step). A step reads its rows as a slice: autograd joins the
gradients of the T slices into one cat, and the T products' gradients of
W_hh into one matmul over all steps' rows (jit_autograd.c).
Packed sequences are sorted by length, so the batch sizes decrease with time:
step t updates the first b_t rows of the state and keeps the others (their
sequences have ended); the reverse direction runs the same rows backwards,
and a sequence's first reverse step starts from its row of h0.

Loaded by tide.nn (lua/tide/nn/init.lua) once nn.Module and the core layers
exist; the classes are installed into it.
--]]
local tide = require "tide"
local core = require "tide.core"
local args = require "tide.args"
local raise, is_tensor = core.raise, core.is_tensor
local nn = require "tide.nn"        -- the module being built: init.lua requires this file at its end

local function size_str(s) return "[" .. table.concat(s, ",") .. "]" end
local function shape_of(x) return size_str(x:size()) end

-- cat of any number of tensors (tide.cat takes 64 at once)
local function cat_all(list, d)
  if #list == 1 then return list[1] end
  while #list > 64 do
    local next = {}
    for i = 1, #list, 64 do
      local part = {}
      for j = i, math.min(i + 63, #list) do part[#part + 1] = list[j] end
      next[#next + 1] = #part == 1 and part[1] or tide.cat(part, d)
    end
    list = next
  end
  return tide.cat(list, d)
end

local U = require "tide.nn.layer_util"
local param, posint = U.param, U.posint

-- -- Cells: the math of one step ---------------------------------------------------------------
-- xg: the input's projection with the biases that go with it (n, G); h, c: (n, H);
-- WT: W_hh^T (H, G). Gates as PyTorch orders them.

-- Each gate is activated on its own (n, H) slice: every value of the step then
-- has one shape, so under tide.compile the step's gate math (and the values
-- the backward keeps) is one kernel, and the backward's one kernel per step
-- too; the slices' gradients join into the gates' gradient as one cat.

-- LSTM: g = xg + h W_hh^T; c' = f * c + i * tanh(g_g); h' = o * tanh(c')
local function lstm_step(xg, h, c, WT, H)
  local g = tide.addmm(xg, h, WT)
  local i = g:narrow(2, 1, H):sigmoid()
  local f = g:narrow(2, H + 1, H):sigmoid()
  local gg = g:narrow(2, 2 * H + 1, H):tanh()
  local o = g:narrow(2, 3 * H + 1, H):sigmoid()
  local c2 = f * c + i * gg
  return o * c2:tanh(), c2
end

-- GRU: r, z = sigmoid(xg_rz + hg_rz); n = tanh(xg_n + r * hg_n); h' = n + z * (h - n),
-- hg = h W_hh^T + b_hh (b_hn stays inside r * (...), as PyTorch)
local function gru_step(xg, h, WT, bhh, H)
  local hg = bhh ~= nil and tide.addmm(bhh, h, WT) or h:matmul(WT)
  local r = (xg:narrow(2, 1, H) + hg:narrow(2, 1, H)):sigmoid()
  local z = (xg:narrow(2, H + 1, H) + hg:narrow(2, H + 1, H)):sigmoid()
  local n = (xg:narrow(2, 2 * H + 1, H) + r * hg:narrow(2, 2 * H + 1, H)):tanh()
  return n + z * (h - n)
end

-- RNN: h' = act(xg + h W_hh^T)
local function rnn_step(xg, h, WT, relu)
  local a = tide.addmm(xg, h, WT)
  return relu and a:relu() or a:tanh()
end

local GATES = { LSTM = 4, GRU = 3, RNN_TANH = 1, RNN_RELU = 1 }

-- -- PackedSequence ------------------------------------------------------------------------------

local utils_rnn = {}

--- nn.utils.rnn.PackedSequence(data, batch_sizes[, sorted_indices[, unsorted_indices]])
--- Sequences packed time-major (data: the rows of step 1 of each sequence, then step 2, ...), as the RNNs take them.
local PackedSequence = {}
PackedSequence.__index = PackedSequence
PackedSequence.__name = "PackedSequence"
utils_rnn.PackedSequence = setmetatable(PackedSequence, {
  __call = function(_, data, batch_sizes, sorted_indices, unsorted_indices)
    local fname = "PackedSequence"
    args.tensor(data, 1, fname)
    if data.ndim < 1 then raise("PackedSequence: data must have at least 1 dim (rows), got a 0-dim tensor") end
    local bs = {}
    if is_tensor(batch_sizes) then bs = batch_sizes:totable()
    elseif type(batch_sizes) == "table" then for i, v in ipairs(batch_sizes) do bs[i] = v end
    else args.argerr(2, fname, "Tensor or table of batch sizes", batch_sizes) end
    local total = 0
    for t, n in ipairs(bs) do
      if not args.is_int(n) or n < 1 or (t > 1 and n > bs[t - 1]) then
        raise(("PackedSequence: batch sizes must be positive and non-increasing, got %s"):format(size_str(bs)))
      end
      total = total + n
    end
    if #bs == 0 then raise("PackedSequence: batch_sizes is empty") end
    if total ~= data:size(1) then
      raise(("PackedSequence: batch sizes sum to %d but data has %d rows"):format(total, data:size(1)))
    end
    if sorted_indices ~= nil then args.tensor(sorted_indices, 3, fname) end
    if sorted_indices ~= nil and unsorted_indices == nil then
      -- the inverse permutation
      local s, u = sorted_indices:totable(), {}
      for j, b in ipairs(s) do u[b] = j end
      unsorted_indices = tide.long(u)
    end
    return setmetatable({ data = data, batch_sizes = tide.long(bs), sorted_indices = sorted_indices,
      unsorted_indices = unsorted_indices, _bs = bs, _sorted = sorted_indices and sorted_indices:totable() }, PackedSequence)
  end,
})
--- nn.utils.rnn.PackedSequence.is_packed(v) -> boolean
--- Whether v is a PackedSequence.
function PackedSequence.is_packed(v) return getmetatable(v) == PackedSequence end
function PackedSequence:__tostring()
  return ("PackedSequence(data=%s, batch_sizes=%s)"):format(shape_of(self.data), size_str(self._bs))
end
--- nn.utils.rnn.PackedSequence:to(device | dtype) -> PackedSequence
--- The same sequences with data moved or converted (indices stay on the CPU, as PyTorch's).
function PackedSequence:to(...)
  local p = setmetatable({}, PackedSequence)
  for k, v in pairs(self) do p[k] = v end
  p.data = self.data:to(...)
  return p
end

-- lengths as a Lua list of integers (a table or a 1-D integer tensor)
local function lengths_of(fname, lengths, n)
  local l
  if is_tensor(lengths) then
    if lengths.ndim ~= 1 or lengths:is_floating_point() then
      raise(("%s: lengths must be a 1-D integer tensor or a table, got %s %s"):format(fname, lengths.dtype.name,
        shape_of(lengths)))
    end
    l = lengths:cpu():totable()
  elseif type(lengths) == "table" then l = lengths
  else args.argerr(n, fname, "table or Tensor of lengths", lengths) end
  for _, v in ipairs(l) do
    if not args.is_int(v) then args.argerr(n, fname, "integer lengths", v) end
  end
  return l
end

--- nn.utils.rnn.pack_padded_sequence(input, lengths[, {batch_first = false, enforce_sorted = true}]) -> PackedSequence
--- Packs padded sequences (T, B, *) (or (B, T, *)) of the given lengths; enforce_sorted = false sorts them by length.
function utils_rnn.pack_padded_sequence(input, lengths, opts)
  local fname = "pack_padded_sequence"
  args.tensor(input, 1, fname)
  opts = args.opts(fname, opts, "batch_first enforce_sorted", 3)
  local bf = opts.batch_first == true
  if input.ndim < 2 then raise(("%s: input must have at least 2 dims (T, B, *), got %s"):format(fname, shape_of(input))) end
  local T, B = input:size(bf and 2 or 1), input:size(bf and 1 or 2)
  local len = lengths_of(fname, lengths, 2)
  if #len ~= B then
    raise(("%s: %d lengths for a batch of %d sequences (input %s%s)"):format(fname, #len, B, shape_of(input),
      bf and ", batch_first" or ""))
  end
  for b, v in ipairs(len) do
    if v < 1 or v > T then
      raise(("%s: length %d of sequence %d is outside 1..%d (input %s)"):format(fname, v, b, T, shape_of(input)))
    end
  end
  local order = {}
  for b = 1, B do order[b] = b end
  local sorted = opts.enforce_sorted ~= false
  if sorted then
    for b = 2, B do
      if len[b] > len[b - 1] then
        raise(("%s: lengths must be sorted in decreasing order when enforce_sorted is true (got %s); pass "
          .. "enforce_sorted = false to sort them"):format(fname, size_str(len)))
      end
    end
  else
    -- stable: equal lengths keep their order
    table.sort(order, function(a, b) if len[a] ~= len[b] then return len[a] > len[b] end return a < b end)
  end
  local bs, idx = {}, {}
  for t = 1, len[order[1]] do
    local n = 0
    for j = 1, B do
      local b = order[j]
      if len[b] < t then break end
      n = n + 1
      idx[#idx + 1] = bf and (b - 1) * T + t or (t - 1) * B + b
    end
    bs[t] = n
  end
  local rest = input:size()
  table.remove(rest, 1); rest[1] = T * B
  local data = input:reshape(rest):index_select(1, tide.long(idx):to(input.device))
  if sorted then return utils_rnn.PackedSequence(data, bs) end
  return utils_rnn.PackedSequence(data, bs, tide.long(order))
end

--- nn.utils.rnn.pad_packed_sequence(sequence[, {batch_first = false, padding_value = 0, total_length}]) -> Tensor, lengths
--- The padded tensor (T, B, *) (or (B, T, *)) of a PackedSequence, in its original batch order, and the lengths (int64).
function utils_rnn.pad_packed_sequence(seq, opts)
  local fname = "pad_packed_sequence"
  if not PackedSequence.is_packed(seq) then args.argerr(1, fname, "PackedSequence", seq) end
  opts = args.opts(fname, opts, "batch_first padding_value total_length", 2)
  local bs, data = seq._bs, seq.data
  local T, B = #bs, bs[1]
  local TT = opts.total_length or T
  if not args.is_int(TT) or TT < T then
    raise(("%s: total_length %s is less than the longest sequence's length %d"):format(fname, tostring(TT), T))
  end
  local bf = opts.batch_first == true
  local orig = seq._sorted or {}
  local pos, len = {}, {}
  for t = 1, T do
    for j = 1, bs[t] do
      local b = orig[j] or j
      pos[#pos + 1] = bf and (b - 1) * TT + t or (t - 1) * B + b
      len[b] = t
    end
  end
  local rest = data:size()
  rest[1] = TT * B
  local on = { dtype = data.dtype, device = data.device }
  local out = tide.zeros(rest, on):index_add(1, tide.long(pos):to(data.device), data)
  local pv = opts.padding_value or 0
  if pv ~= 0 then
    local fill = {}
    for i = 1, TT * B do fill[i] = pv end
    for _, p in ipairs(pos) do fill[p] = 0 end
    local shape = { TT * B }
    for d = 2, #rest do shape[d] = 1 end
    out = out + tide.tensor(fill, on):view(shape)
  end
  local shape = data:size()
  table.remove(shape, 1)
  table.insert(shape, 1, bf and TT or B)
  table.insert(shape, 1, bf and B or TT)
  return out:view(shape), tide.long(len)
end

--- nn.utils.rnn.pad_sequence(sequences[, {batch_first = false, padding_value = 0, padding_side = "right"}]) -> Tensor
--- A list of tensors (L_i, *) padded to the longest and stacked: (L, B, *), or (B, L, *) with batch_first.
function utils_rnn.pad_sequence(seqs, opts)
  local fname = "pad_sequence"
  if type(seqs) ~= "table" or is_tensor(seqs) or #seqs == 0 then args.argerr(1, fname, "non-empty list of Tensors", seqs) end
  opts = args.opts(fname, opts, "batch_first padding_value padding_side", 2)
  local side = opts.padding_side or "right"
  if side ~= "right" and side ~= "left" then
    raise(("%s: padding_side must be 'right' or 'left', got %s"):format(fname, tostring(side)))
  end
  local L, rest = 0, nil
  for i, s in ipairs(seqs) do
    args.tensor(s, 1, fname)
    if s.ndim < 1 then raise(("%s: sequence %d is a 0-dim tensor"):format(fname, i)) end
    local r = s:size(); table.remove(r, 1)
    if rest and size_str(r) ~= size_str(rest) then
      raise(("%s: sequence %d has shape %s, sequence 1 %s: the dims after the first must match"):format(fname, i,
        shape_of(s), shape_of(seqs[1])))
    end
    rest = r
    L = math.max(L, s:size(1))
  end
  local d = opts.batch_first and 1 or 2
  local list = {}
  for i, s in ipairs(seqs) do
    local n = s:size(1)
    if n < L then
      local ps = { L - n }
      for k, v in ipairs(rest) do ps[k + 1] = v end
      local pad = tide.full(ps, opts.padding_value or 0, { dtype = s.dtype, device = s.device })
      s = tide.cat(side == "right" and { s, pad } or { pad, s }, 1)
    end
    list[i] = s:unsqueeze(d)
  end
  return cat_all(list, d)
end

--- nn.utils.rnn.pack_sequence(sequences[, {enforce_sorted = true}]) -> PackedSequence
--- Packs a list of tensors (L_i, *): pad_sequence, then pack_padded_sequence with their lengths.
function utils_rnn.pack_sequence(seqs, opts)
  opts = args.opts("pack_sequence", opts, "enforce_sorted", 2)
  local padded = utils_rnn.pad_sequence(seqs)
  local len = {}
  for i, s in ipairs(seqs) do len[i] = s:size(1) end
  return utils_rnn.pack_padded_sequence(padded, len, { enforce_sorted = opts.enforce_sorted })
end

-- -- The layers -----------------------------------------------------------------------------------

local F, init = nn.functional, nn.init
local pyfloat = nn._pyfloat
nn.utils.rnn = utils_rnn

-- the input's dtype must be the parameters' (PyTorch's rule; a promotion would hide a mistake)
local function check_dtype(name, x, w)
  if x.dtype ~= w.dtype then
    raise(("%s: input dtype %s does not match the parameters' %s (convert one of them: module:to(%s) or x:to(%s))")
      :format(name, x.dtype.name, w.dtype.name, x.dtype.name, w.dtype.name))
  end
end

-- -- RNNBase: RNN, LSTM, GRU ----------------------------------------------------------------

--- nn.RNNBase(mode, input_size, hidden_size[, opts])
--- The base class of RNN, LSTM and GRU: mode "LSTM", "GRU", "RNN_TANH" or "RNN_RELU" (as PyTorch's); opts as nn.LSTM's.
local RNNBase = nn.Module:extend("RNNBase")
nn.RNNBase = RNNBase

local function base_init(self, name, mode, input_size, hidden_size, opts, extra)
  opts = args.opts(name, opts, "num_layers bias batch_first dropout bidirectional dtype device" .. (extra or ""), 3)
  self.mode = mode
  self.input_size = posint(name, input_size, 1, "input_size")
  self.hidden_size = posint(name, hidden_size, 2, "hidden_size")
  self.num_layers = posint(name, opts.num_layers or 1, 3, "num_layers")
  if self.num_layers > 65536 then raise(("%s: num_layers = %d is more than 65536 layers"):format(name, self.num_layers)) end
  self.bias = opts.bias ~= false
  self.batch_first = opts.batch_first == true
  local p = opts.dropout or 0
  if type(p) ~= "number" or p < 0 or p > 1 then
    raise(("%s: dropout should be a number in range [0, 1] representing the probability of an element being "
      .. "zeroed, got %s"):format(name, tostring(p)))
  end
  self.dropout = p
  self.bidirectional = opts.bidirectional == true
  self.proj_size = 0
  local G, D = GATES[mode] * hidden_size, self.bidirectional and 2 or 1
  self._names = {}
  for l = 0, self.num_layers - 1 do
    for d = 0, D - 1 do
      local sfx = ("_l%d%s"):format(l, d == 1 and "_reverse" or "")
      local lin = l == 0 and input_size or hidden_size * D
      self["weight_ih" .. sfx] = param({ G, lin }, opts)
      self["weight_hh" .. sfx] = param({ G, hidden_size }, opts)
      if self.bias then
        self["bias_ih" .. sfx] = param({ G }, opts)
        self["bias_hh" .. sfx] = param({ G }, opts)
      end
      self._names[#self._names + 1] = sfx
    end
  end
  self:reset_parameters()
end

function RNNBase:__init(mode, input_size, hidden_size, opts)
  if type(mode) ~= "string" or GATES[mode] == nil then
    raise(("RNNBase: mode must be 'LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU', got %s"):format(tostring(mode)))
  end
  base_init(self, "RNNBase", mode, input_size, hidden_size, opts)
end

function RNNBase:reset_parameters()
  local stdv = 1 / math.sqrt(self.hidden_size)
  for _, p in ipairs(self:parameters()) do init.uniform_(p, -stdv, stdv) end
end

function RNNBase:extra_repr()
  local s = ("%d, %d"):format(self.input_size, self.hidden_size)
  if self.num_layers ~= 1 then s = s .. ", num_layers=" .. self.num_layers end
  if self.mode == "RNN_RELU" then s = s .. ", nonlinearity='relu'" end
  if not self.bias then s = s .. ", bias=False" end
  if self.batch_first then s = s .. ", batch_first=True" end
  if self.dropout ~= 0 then s = s .. ", dropout=" .. pyfloat(self.dropout) end
  if self.bidirectional then s = s .. ", bidirectional=True" end
  return s
end

-- One direction of one layer over the rows X (N, in): bs[t] rows at step t
-- (offsets off[t]), state h (B, H) (c for the LSTM). Returns the outputs of
-- all steps as rows (N, H) in X's order, and the final state.
function RNNBase:_direction(X, bs, off, sfx, h, c, reverse)
  local H, mode = self.hidden_size, self.mode
  local wih, whh = self["weight_ih" .. sfx], self["weight_hh" .. sfx]
  local bih, bhh = self["bias_ih" .. sfx], self["bias_hh" .. sfx]
  local WT = whh:t()
  local xp
  if mode == "GRU" then xp = F.linear(X, wih, bih)                  -- b_hh goes with h W_hh^T
  else xp = F.linear(X, wih, bih ~= nil and bih + bhh or nil) end
  local B, T, outs = h:size(1), #bs, {}
  local t0, t1, dt = 1, T, 1
  if reverse then t0, t1, dt = T, 1, -1 end
  local relu = mode == "RNN_RELU"
  for t = t0, t1, dt do
    local n = bs[t]
    local xg = xp:narrow(1, off[t] + 1, n)
    local hp, cp = h, c
    if n < B then hp = h:narrow(1, 1, n); cp = c and c:narrow(1, 1, n) end
    local h2, c2
    if mode == "LSTM" then h2, c2 = lstm_step(xg, hp, cp, WT, H)
    elseif mode == "GRU" then h2 = gru_step(xg, hp, WT, bhh, H)
    else h2 = rnn_step(xg, hp, WT, relu) end
    outs[t] = h2
    if n < B then
      h = tide.cat({ h2, h:narrow(1, n + 1, B - n) }, 1)
      if c then c = tide.cat({ c2, c:narrow(1, n + 1, B - n) }, 1) end
    else h, c = h2, c2 end
  end
  return cat_all(outs, 1), h, c
end

-- the initial state (D*L, B, H) of hx (or nil: zeros), checked; rows in the packed order
local function initial(self, name, which, hx, B, batched, like, sorted)
  local DL, H = (self.bidirectional and 2 or 1) * self.num_layers, self.hidden_size
  if hx == nil then return tide.zeros({ DL, B, H }, { dtype = like.dtype, device = like.device }) end
  if not is_tensor(hx) then args.argerr(2, name, "Tensor " .. which, hx) end
  if batched and hx.ndim ~= 3 then
    raise(("%s: for batched 3-D input, %s should also be 3-D (num_layers * num_directions, batch, hidden_size) "
      .. "but got %s"):format(name, which, shape_of(hx)))
  end
  if not batched and hx.ndim ~= 2 then
    raise(("%s: for unbatched 2-D input, %s should also be 2-D (num_layers * num_directions, hidden_size) but got %s")
      :format(name, which, shape_of(hx)))
  end
  if not batched then hx = hx:unsqueeze(2) end
  if hx:size(1) ~= DL or hx:size(2) ~= B or hx:size(3) ~= H then
    raise(("%s: expected %s of shape %s (num_layers * num_directions, batch, hidden_size), got %s"):format(name,
      which, size_str(batched and { DL, B, H } or { DL, H }), shape_of(batched and hx or hx:squeeze(2))))
  end
  check_dtype(name, hx, like)
  if sorted then hx = hx:index_select(2, sorted:to(hx.device)) end
  return hx
end

--- nn.RNNBase:forward(input[, hx]) -> output, h_n
--- input (T, B, in) ((B, T, in) with batch_first; (T, in) unbatched) or a PackedSequence; the LSTM's hx and h_n are {h, c}.
function RNNBase:forward(input, hx)
  local name, mode = self.__name, self.mode
  local I, H, L = self.input_size, self.hidden_size, self.num_layers
  local D = self.bidirectional and 2 or 1
  local w0 = self.weight_ih_l0
  local packed = PackedSequence.is_packed(input)
  local X, bs, B, T, batched
  if packed then
    X, bs = input.data, input._bs
    if X.ndim ~= 2 or X:size(2) ~= I then
      raise(("%s: packed data of shape %s does not match input_size %d (expected [rows, %d])"):format(name,
        shape_of(X), I, I))
    end
    B, T, batched = bs[1], #bs, true
  else
    if not is_tensor(input) then args.argerr(1, name, "Tensor or PackedSequence", input) end
    if input.ndim ~= 2 and input.ndim ~= 3 then
      raise(("%s: expected input with 2 (unbatched) or 3 dims (%s, input_size), got %s"):format(name,
        self.batch_first and "batch, seq_len" or "seq_len, batch", shape_of(input)))
    end
    if input:size(-1) ~= I then
      raise(("%s: input size %d does not match input_size %d (input of shape %s)"):format(name, input:size(-1), I,
        shape_of(input)))
    end
    batched = input.ndim == 3
    local x = batched and input or input:unsqueeze(2)
    if self.batch_first and batched then x = x:transpose(1, 2) end
    T, B = x:size(1), x:size(2)
    if T == 0 or B == 0 then raise(("%s: expected a non-empty input, got %s"):format(name, shape_of(input))) end
    X = x:reshape(T * B, I)
    bs = {}
    for t = 1, T do bs[t] = B end
  end
  check_dtype(name, X, w0)
  local sorted = packed and input.sorted_indices or nil
  local h0, c0
  if mode == "LSTM" then
    if hx ~= nil and (type(hx) ~= "table" or is_tensor(hx)) then
      args.argerr(2, name, "table {h0, c0}", hx)
    end
    h0 = initial(self, name, "h0", hx and hx[1], B, batched, X, sorted)
    c0 = initial(self, name, "c0", hx and hx[2], B, batched, X, sorted)
  else
    h0 = initial(self, name, "hx", hx, B, batched, X, sorted)
  end
  local off, o = {}, 0
  for t = 1, T do off[t] = o; o = o + bs[t] end
  local hn, cn = {}, {}
  for l = 1, L do
    local outs = {}
    for d = 1, D do
      local k = (l - 1) * D + d
      local out, h, c = self:_direction(X, bs, off, self._names[k], h0[k], c0 and c0[k], d == 2)
      outs[d], hn[k], cn[k] = out, h, c
    end
    X = D == 1 and outs[1] or tide.cat(outs, 2)
    if l < L and self.dropout > 0 and self.training then X = F.dropout(X, self.dropout, true) end
  end
  local h_n, c_n = tide.stack(hn, 1), c0 and tide.stack(cn, 1)
  local output
  if packed then
    output = setmetatable({}, PackedSequence)
    for k, v in pairs(input) do output[k] = v end
    output.data = X
    local un = input.unsorted_indices
    if un then
      un = un:to(h_n.device)
      h_n = h_n:index_select(2, un); c_n = c_n and c_n:index_select(2, un)
    end
  else
    output = X:view(T, B, D * H)
    if self.batch_first and batched then output = output:transpose(1, 2) end
    if not batched then
      output, h_n, c_n = output:squeeze(2), h_n:squeeze(2), c_n and c_n:squeeze(2)
    end
  end
  if mode == "LSTM" then return output, { h_n, c_n } end
  return output, h_n
end

--- nn.RNN(input_size, hidden_size[, {num_layers = 1, nonlinearity = "tanh", bias = true, batch_first = false, dropout = 0, bidirectional = false, dtype, device}])
--- Elman RNN: h_t = tanh(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh) (or relu); rnn(x[, h0]) -> output, h_n.
local RNN = RNNBase:extend("RNN")
nn.RNN = RNN
function RNN:__init(input_size, hidden_size, opts)
  local nl = type(opts) == "table" and opts.nonlinearity or "tanh"
  if nl ~= "tanh" and nl ~= "relu" then raise(("RNN: unknown nonlinearity '%s' (tanh or relu)"):format(tostring(nl))) end
  base_init(self, "RNN", nl == "relu" and "RNN_RELU" or "RNN_TANH", input_size, hidden_size, opts, " nonlinearity")
  self.nonlinearity = nl
end

--- nn.LSTM(input_size, hidden_size[, {num_layers = 1, bias = true, batch_first = false, dropout = 0, bidirectional = false, dtype, device}])
--- Long short-term memory (gates i, f, g, o as PyTorch); lstm(x[, {h0, c0}]) -> output, {h_n, c_n}. proj_size is not supported.
local LSTM = RNNBase:extend("LSTM")
nn.LSTM = LSTM
function LSTM:__init(input_size, hidden_size, opts)
  if type(opts) == "table" and opts.proj_size ~= nil and opts.proj_size ~= 0 then
    raise(("LSTM: proj_size (%s) is not supported yet (projections of h); leave it out or 0"):format(tostring(opts.proj_size)))
  end
  if type(opts) == "table" and opts.proj_size ~= nil then
    local o = {}
    for k, v in pairs(opts) do if k ~= "proj_size" then o[k] = v end end
    opts = o
  end
  base_init(self, "LSTM", "LSTM", input_size, hidden_size, opts)
end

--- nn.GRU(input_size, hidden_size[, {num_layers = 1, bias = true, batch_first = false, dropout = 0, bidirectional = false, dtype, device}])
--- Gated recurrent unit (gates r, z, n as PyTorch); gru(x[, h0]) -> output, h_n.
local GRU = RNNBase:extend("GRU")
nn.GRU = GRU
function GRU:__init(input_size, hidden_size, opts) base_init(self, "GRU", "GRU", input_size, hidden_size, opts) end

-- -- Cells ---------------------------------------------------------------------------------------

--- nn.RNNCellBase(input_size, hidden_size, bias, num_chunks[, {dtype, device}])
--- The base class of RNNCell, LSTMCell and GRUCell: weight_ih (num_chunks * hidden_size, input_size), weight_hh and the biases.
local CellBase = nn.Module:extend("RNNCellBase")
nn.RNNCellBase = CellBase

local function cell_init(self, name, mode, input_size, hidden_size, opts, extra, chunks)
  opts = args.opts(name, opts, "bias dtype device" .. (extra or ""), 3)
  self.mode = mode
  self.input_size = posint(name, input_size, 1, "input_size")
  self.hidden_size = posint(name, hidden_size, 2, "hidden_size")
  self.bias = opts.bias ~= false
  local G = (chunks or GATES[mode]) * hidden_size
  self.weight_ih = param({ G, input_size }, opts)
  self.weight_hh = param({ G, hidden_size }, opts)
  if self.bias then
    self.bias_ih = param({ G }, opts)
    self.bias_hh = param({ G }, opts)
  else
    self:register_parameter("bias_ih", nil); self:register_parameter("bias_hh", nil)
  end
  self:reset_parameters()
end
function CellBase:__init(input_size, hidden_size, bias, num_chunks, opts)
  posint("RNNCellBase", num_chunks, 4, "num_chunks")
  if bias ~= nil and type(bias) ~= "boolean" then args.argerr(3, "RNNCellBase", "boolean bias", bias) end
  opts = args.opts("RNNCellBase", opts, "dtype device", 5)
  cell_init(self, "RNNCellBase", nil, input_size, hidden_size, { bias = bias, dtype = opts.dtype, device = opts.device },
    nil, num_chunks)
end
CellBase.reset_parameters = RNNBase.reset_parameters
function CellBase:extra_repr()
  local s = ("%d, %d"):format(self.input_size, self.hidden_size)
  if not self.bias then s = s .. ", bias=False" end
  if self.mode == "RNN_RELU" then s = s .. ", nonlinearity='relu'" end
  return s
end

-- input (N, in) or (in); a state (N, H) or (H) (nil: zeros); returns x as 2-D, the
-- state(s) as 2-D and whether the input was batched
local function cell_state(self, name, which, s, x, batched)
  local H = self.hidden_size
  if s == nil then return tide.zeros({ x:size(1), H }, { dtype = x.dtype, device = x.device }) end
  if not is_tensor(s) then args.argerr(2, name, "Tensor " .. which, s) end
  local want = batched and { x:size(1), H } or { H }
  if size_str(s:size()) ~= size_str(want) then
    raise(("%s: expected %s of shape %s, got %s"):format(name, which, size_str(want), shape_of(s)))
  end
  check_dtype(name, s, x)
  return batched and s or s:unsqueeze(1)
end

local function cell_input(self, name, x)
  if not is_tensor(x) then args.argerr(1, name, "Tensor", x) end
  if x.ndim ~= 1 and x.ndim ~= 2 then
    raise(("%s: expected input to be 1-D or 2-D (batch, input_size), got %s"):format(name, shape_of(x)))
  end
  if x:size(-1) ~= self.input_size then
    raise(("%s: input size %d does not match input_size %d (input of shape %s)"):format(name, x:size(-1),
      self.input_size, shape_of(x)))
  end
  check_dtype(name, x, self.weight_ih)
  local batched = x.ndim == 2
  return batched and x or x:unsqueeze(1), batched
end

--- nn.RNNCell(input_size, hidden_size[, {bias = true, nonlinearity = "tanh", dtype, device}])
--- One step of nn.RNN: cell(x[, h]) -> h' for x (N, in) or (in).
local RNNCell = CellBase:extend("RNNCell")
nn.RNNCell = RNNCell
function RNNCell:__init(input_size, hidden_size, opts)
  local nl = type(opts) == "table" and opts.nonlinearity or "tanh"
  if nl ~= "tanh" and nl ~= "relu" then raise(("RNNCell: unknown nonlinearity '%s' (tanh or relu)"):format(tostring(nl))) end
  cell_init(self, "RNNCell", nl == "relu" and "RNN_RELU" or "RNN_TANH", input_size, hidden_size, opts, " nonlinearity")
  self.nonlinearity = nl
end
function RNNCell:forward(x, hx)
  local batched
  x, batched = cell_input(self, "RNNCell", x)
  local h = cell_state(self, "RNNCell", "hx", hx, x, batched)
  local b = self.bias_ih ~= nil and self.bias_ih + self.bias_hh or nil
  local h2 = rnn_step(F.linear(x, self.weight_ih, b), h, self.weight_hh:t(), self.mode == "RNN_RELU")
  return batched and h2 or h2:squeeze(1)
end

--- nn.LSTMCell(input_size, hidden_size[, {bias = true, dtype, device}])
--- One step of nn.LSTM: cell(x[, {h, c}]) -> h', c' for x (N, in) or (in).
local LSTMCell = CellBase:extend("LSTMCell")
nn.LSTMCell = LSTMCell
function LSTMCell:__init(input_size, hidden_size, opts) cell_init(self, "LSTMCell", "LSTM", input_size, hidden_size, opts) end
function LSTMCell:forward(x, hx)
  local batched
  x, batched = cell_input(self, "LSTMCell", x)
  if hx ~= nil and (type(hx) ~= "table" or is_tensor(hx)) then args.argerr(2, "LSTMCell", "table {h, c}", hx) end
  local h = cell_state(self, "LSTMCell", "h", hx and hx[1], x, batched)
  local c = cell_state(self, "LSTMCell", "c", hx and hx[2], x, batched)
  local b = self.bias_ih ~= nil and self.bias_ih + self.bias_hh or nil
  local h2, c2 = lstm_step(F.linear(x, self.weight_ih, b), h, c, self.weight_hh:t(), self.hidden_size)
  if batched then return h2, c2 end
  return h2:squeeze(1), c2:squeeze(1)
end

--- nn.GRUCell(input_size, hidden_size[, {bias = true, dtype, device}])
--- One step of nn.GRU: cell(x[, h]) -> h' for x (N, in) or (in).
local GRUCell = CellBase:extend("GRUCell")
nn.GRUCell = GRUCell
function GRUCell:__init(input_size, hidden_size, opts) cell_init(self, "GRUCell", "GRU", input_size, hidden_size, opts) end
function GRUCell:forward(x, hx)
  local batched
  x, batched = cell_input(self, "GRUCell", x)
  local h = cell_state(self, "GRUCell", "hx", hx, x, batched)
  local h2 = gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh:t(), self.bias_hh, self.hidden_size)
  return batched and h2 or h2:squeeze(1)
end

return { RNN = nn.RNN, LSTM = nn.LSTM, GRU = nn.GRU, RNNCell = nn.RNNCell, LSTMCell = nn.LSTMCell,
  GRUCell = nn.GRUCell, utils_rnn = utils_rnn }
