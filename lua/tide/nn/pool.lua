--[[
tide.nn.pool -- the pooling and bag layers beside MaxPool2d/AvgPool2d:
F.max_pool1d / nn.MaxPool1d, F.avg_pool1d / nn.AvgPool1d,
F.adaptive_max_pool2d / nn.AdaptiveMaxPool2d, F.embedding_bag / nn.EmbeddingBag,
as PyTorch's (names, options, defaults); returned indices are 1-based.

  max_pool1d, avg_pool1d: max_pool2d / avg_pool2d over a (N, C, L, 1) plane (the
    fused eager kernels where they apply); max_pool1d's indices are positions in
    L, as PyTorch's.
  adaptive_max_pool2d: output cell (i, j) is the maximum of rows
    floor(i H / OH) .. ceil((i+1) H / OH) - 1 and the same columns (0-based), as
    PyTorch's windows. Sizes that divide the input are a max pool; other sizes
    take the maximum over each window's rows, then its columns (one narrow and
    amax per output row and column: OH + OW ops). Indices are positions in the
    H*W plane.
  embedding_bag: bags of rows of the weight reduced by sum, mean or max; a 2-D
    input is one bag per row; a 1-D input with offsets (1-based starts of the
    bags) is cut there. Sum and mean are one index_add over the bag of each
    entry (per_sample_weights scale the rows for sum); max takes each bag's rows
    (one narrow and amax per bag). Offsets are read on the host, so the 1-D form
    does not run under tide.compile (the 2-D form does).
--]]
local tide = require "tide"
local core = require "tide.core"
local args = require "tide.args"
local raise, is_tensor = core.raise, core.is_tensor
local nn = require "tide.nn"        -- the module being built: init.lua requires this file at its end
local F, init = nn.functional, nn.init

local shape = require("tide.tensor").shape_str   -- "[2,3]"
local function int1(fname, v, argn, what, min)
  if type(v) == "table" and not is_tensor(v) and #v == 1 then v = v[1] end
  if not args.is_int(v) or v < min then args.argerr(argn, fname, ("integer %s >= %d"):format(what, min), v) end
  return v
end

-- x (N, C, L) or (C, L) -> (N, C, L, 1) and a function undoing it on results
local function as_plane(fname, x)
  args.tensor(x, 1, fname)
  if x:dim() == 3 then return x:unsqueeze(4), function(y) return y:squeeze(4) end end
  if x:dim() == 2 then return x:unsqueeze(1):unsqueeze(4), function(y) return y:squeeze(4):squeeze(1) end end
  raise(("%s: expected a 2-D or 3-D input (N, C, L), got %s"):format(fname, shape(x)))
end

--- F.max_pool1d(x, kernel_size[, {stride = kernel_size, padding = 0, dilation = 1, return_indices = false}]) -> Tensor[, indices]
--- The maximum of each window of x (N, C, L) or (C, L); indices are 1-based positions in L.
function F.max_pool1d(x, k, opts)
  local fname = "max_pool1d"
  opts = args.opts(fname, opts, "stride padding dilation return_indices ceil_mode", 3)
  if opts.ceil_mode then raise(fname .. ": ceil_mode=true is not supported") end
  k = int1(fname, k, 2, "kernel_size", 1)
  local st = int1(fname, opts.stride or k, 3, "stride", 1)
  local pd = int1(fname, opts.padding or 0, 3, "padding", 0)
  local dl = int1(fname, opts.dilation or 1, 3, "dilation", 1)
  local xp, back = as_plane(fname, x)
  local y, i = F.max_pool2d(xp, { k, 1 }, { stride = { st, 1 }, padding = { pd, 0 }, dilation = { dl, 1 },
    return_indices = opts.return_indices })
  if not opts.return_indices then return back(y) end
  return back(y), back(i)   -- max_pool2d's plane position is the position in L (W = 1)
end

--- F.avg_pool1d(x, kernel_size[, {stride = kernel_size, padding = 0, count_include_pad = true}]) -> Tensor
--- The mean of each window of x (N, C, L) or (C, L) (padding counted, as PyTorch's default).
function F.avg_pool1d(x, k, opts)
  local fname = "avg_pool1d"
  opts = args.opts(fname, opts, "stride padding ceil_mode count_include_pad", 3)
  k = int1(fname, k, 2, "kernel_size", 1)
  local st = int1(fname, opts.stride or k, 3, "stride", 1)
  local pd = int1(fname, opts.padding or 0, 3, "padding", 0)
  local xp, back = as_plane(fname, x)
  return back(F.avg_pool2d(xp, { k, 1 }, { stride = { st, 1 }, padding = { pd, 0 }, ceil_mode = opts.ceil_mode,
    count_include_pad = opts.count_include_pad }))
end

--- F.adaptive_max_pool2d(x, output_size[, return_indices = false]) -> Tensor[, indices]
--- Max pooling of x (N, C, H, W) or (C, H, W) to output_size (a number or {OH, OW}); indices are 1-based positions in the H*W plane.
function F.adaptive_max_pool2d(x, output_size, return_indices)
  local fname = "adaptive_max_pool2d"
  args.tensor(x, 1, fname)
  if x:dim() == 3 then
    local y, i = F.adaptive_max_pool2d(x:unsqueeze(1), output_size, return_indices)
    if return_indices then return y:squeeze(1), i:squeeze(1) end
    return y:squeeze(1)
  end
  if x:dim() ~= 4 then raise(("%s: expected a 3-D or 4-D input (N, C, H, W), got %s"):format(fname, shape(x))) end
  local o = type(output_size) == "number" and { output_size, output_size } or output_size
  if type(o) ~= "table" or #o ~= 2 or not args.is_int(o[1]) or not args.is_int(o[2]) or o[1] < 1 or o[2] < 1 then
    args.argerr(2, fname, "positive integer or pair of them output_size", output_size)
  end
  local N, C, H, W = unpack(x:size())
  if H < 1 or W < 1 then raise(("%s: input %s has an empty plane"):format(fname, shape(x))) end
  local OH, OW = o[1], o[2]
  if OH * H >= 2 ^ 53 or OW * W >= 2 ^ 53 or N * C * OH * OW >= 2 ^ 53 then
    raise(("%s: size overflows int64 (output {%d, %d} of input %s)"):format(fname, OH, OW, shape(x)))
  end
  local function lo(i, I, O) return math.floor(i * I / O) end
  local function hi(i, I, O) return math.ceil((i + 1) * I / O) end
  if not return_indices then
    if H % OH == 0 and W % OW == 0 then return F.max_pool2d(x, { H / OH, W / OW }) end
    local rows = {}
    for i = 0, OH - 1 do rows[#rows + 1] = x:narrow(3, lo(i, H, OH) + 1, hi(i, H, OH) - lo(i, H, OH)):amax(3, true) end
    local r = #rows == 1 and rows[1] or tide.cat(rows, 3)            -- (N, C, OH, W)
    local cols = {}
    for j = 0, OW - 1 do cols[#cols + 1] = r:narrow(4, lo(j, W, OW) + 1, hi(j, W, OW) - lo(j, W, OW)):amax(4, true) end
    return #cols == 1 and cols[1] or tide.cat(cols, 4)
  end
  -- with indices: per output cell, the window's maximum and its position (first of ties)
  local vals, idxs = {}, {}
  for i = 0, OH - 1 do
    local r0, rn = lo(i, H, OH), hi(i, H, OH) - lo(i, H, OH)
    for j = 0, OW - 1 do
      local c0, cn = lo(j, W, OW), hi(j, W, OW) - lo(j, W, OW)
      local v, k = x:narrow(3, r0 + 1, rn):narrow(4, c0 + 1, cn):reshape(N, C, rn * cn):max(3)
      vals[#vals + 1] = v
      -- window tap k (1-based) -> row r0 + (k-1) // cn, column c0 + (k-1) % cn -> plane position
      local k0 = k - 1
      local rr = (k0:to(tide.float64) / cn):floor():to(tide.int64)
      idxs[#idxs + 1] = (rr + r0) * W + (k0 - rr * cn) + c0 + 1
    end
  end
  return tide.stack(vals, 3):view(N, C, OH, OW), tide.stack(idxs, 3):view(N, C, OH, OW)
end

-- -- EmbeddingBag ------------------------------------------------------------------------------

--- F.embedding_bag(input, weight[, offsets][, {mode = "mean", per_sample_weights, include_last_offset = false, padding_idx}]) -> Tensor
--- Sums, means or maxima of bags of weight's rows: input (B, L) holds B bags of L indices (1-based); a 1-D input is cut into bags at offsets (1-based starts).
function F.embedding_bag(input, weight, offsets, opts)
  local fname = "embedding_bag"
  opts = args.opts(fname, opts, "mode per_sample_weights include_last_offset padding_idx", 4)
  args.tensor(input, 1, fname); args.tensor(weight, 2, fname)
  if weight:dim() ~= 2 then raise(("%s: weight must be 2-D (num_embeddings, dim), got %s"):format(fname, shape(weight))) end
  local mode = opts.mode or "mean"
  if mode ~= "sum" and mode ~= "mean" and mode ~= "max" then
    raise(("%s: mode must be 'sum', 'mean' or 'max', got %s"):format(fname, tostring(mode)))
  end
  local psw = opts.per_sample_weights
  if psw ~= nil then
    args.tensor(psw, 4, fname)
    if mode ~= "sum" then raise(("%s: per_sample_weights only go with mode 'sum', got mode '%s'"):format(fname, mode)) end
    if shape(psw) ~= shape(input) then
      raise(("%s: per_sample_weights %s must have the input's shape %s"):format(fname, shape(psw), shape(input)))
    end
  end
  if input.dtype.is_floating_point then raise(("%s: input must hold integer indices, got %s"):format(fname, input.dtype.name)) end
  local D = weight:size(2)
  local pad = opts.padding_idx
  if pad ~= nil then
    if not args.is_int(pad) then args.argerr(4, fname, "integer padding_idx", pad) end
    if pad < 0 then pad = weight:size(1) + pad + 1 end
  end
  if input:dim() == 2 then
    if offsets ~= nil then raise(("%s: offsets go with a 1-D input, got input %s"):format(fname, shape(input))) end
    local B, L = input:size(1), input:size(2)
    local e = F.embedding(input, weight)                                -- (B, L, D)
    local keep = pad ~= nil and input:ne(pad):to(weight.dtype):unsqueeze(3) or nil
    if mode == "max" then
      if keep then e = e:masked_fill(keep:eq(0), -math.huge) end
      local m = e:amax(2)
      if keep then m = m:masked_fill(m:eq(-math.huge), 0) end
      return m
    end
    if psw ~= nil then e = e * psw:unsqueeze(3) end
    if keep then e = e * keep end
    local s = e:sum(2)
    if mode == "sum" then return s end
    local n = keep and keep:sum(2) or L
    if keep then return s / n:clamp(1) end
    return L > 0 and s / n or s
  end
  if input:dim() ~= 1 then raise(("%s: expected a 1-D or 2-D input, got %s"):format(fname, shape(input))) end
  if offsets == nil then raise(fname .. ": a 1-D input needs offsets (the 1-based start of each bag)") end
  args.tensor(offsets, 3, fname)
  local n = input:size(1)
  local off = offsets:reshape(-1):totable()
  if opts.include_last_offset then
    if #off < 1 then raise(fname .. ": include_last_offset needs at least one offset") end
    off[#off] = nil
  end
  local B = #off
  for b = 1, B do
    local nxt = off[b + 1] or n + 1
    if off[b] < 1 or off[b] > nxt or (b == 1 and off[1] ~= 1) or nxt > n + 1 then
      raise(("%s: offsets must start at 1 and not decrease nor pass the input's %d entries + 1, got %s at bag %d")
        :format(fname, n, tostring(off[b]), b))
    end
  end
  -- the bag of each entry (1-based) and each bag's size
  local bag, count = {}, {}
  for b = 1, B do
    local nxt = off[b + 1] or n + 1
    count[b] = nxt - off[b]
    for _ = off[b], nxt - 1 do bag[#bag + 1] = b end
  end
  local e = F.embedding(input, weight)                                  -- (n, D)
  local keep = pad ~= nil and input:ne(pad):to(weight.dtype):unsqueeze(2) or nil
  if mode == "max" then
    local rows = {}
    for b = 1, B do
      if count[b] == 0 then
        rows[b] = tide.zeros({ 1, D }, { dtype = weight.dtype, device = weight.device })
      else
        local eb = e:narrow(1, off[b], count[b])
        if keep then eb = eb:masked_fill(keep:narrow(1, off[b], count[b]):eq(0), -math.huge) end
        local m = eb:amax(1, true)
        rows[b] = keep and m:masked_fill(m:eq(-math.huge), 0) or m
      end
    end
    if B == 0 then return tide.zeros({ 0, D }, { dtype = weight.dtype, device = weight.device }) end
    return #rows == 1 and rows[1] or tide.cat(rows, 1)
  end
  if psw ~= nil then e = e * psw:unsqueeze(2) end
  if keep then e = e * keep end
  local out = tide.zeros({ B, D }, { dtype = weight.dtype, device = weight.device })
  if n > 0 then out = out:index_add(1, tide.tensor(bag, { dtype = tide.int64, device = weight.device }), e) end
  if mode == "sum" then return out end
  local cnt
  if keep then
    cnt = tide.zeros({ B, 1 }, { dtype = weight.dtype, device = weight.device })
    if n > 0 then cnt = cnt:index_add(1, tide.tensor(bag, { dtype = tide.int64, device = weight.device }), keep) end
  else
    cnt = tide.tensor(count, { dtype = weight.dtype, device = weight.device }):view(B, 1)
  end
  return out / cnt:clamp(1)
end

-- -- The layers -------------------------------------------------------------------------------

local function pyv(v) return type(v) == "table" and "(" .. table.concat(v, ", ") .. ")" or tostring(v) end

--- nn.MaxPool1d(kernel_size[, {stride = kernel_size, padding = 0, dilation = 1, return_indices = false}])
--- The maximum over each window of (N, C, L).
local MaxPool1d = nn.Module:extend("MaxPool1d")
nn.MaxPool1d = MaxPool1d
function MaxPool1d:__init(k, opts)
  opts = args.opts("MaxPool1d", opts, "stride padding dilation return_indices", 2)
  self.kernel_size = int1("MaxPool1d", k, 1, "kernel_size", 1)
  self.stride = int1("MaxPool1d", opts.stride or k, 2, "stride", 1)
  self.padding = int1("MaxPool1d", opts.padding or 0, 2, "padding", 0)
  self.dilation = int1("MaxPool1d", opts.dilation or 1, 2, "dilation", 1)
  self.return_indices = opts.return_indices == true
end
function MaxPool1d:forward(x)
  return F.max_pool1d(x, self.kernel_size, { stride = self.stride, padding = self.padding, dilation = self.dilation,
    return_indices = self.return_indices })
end
function MaxPool1d:extra_repr()
  return ("kernel_size=%d, stride=%d, padding=%d, dilation=%d, ceil_mode=False"):format(self.kernel_size, self.stride,
    self.padding, self.dilation)
end

--- nn.AvgPool1d(kernel_size[, {stride = kernel_size, padding = 0}])
--- The mean over each window of (N, C, L).
local AvgPool1d = nn.Module:extend("AvgPool1d")
nn.AvgPool1d = AvgPool1d
function AvgPool1d:__init(k, opts)
  opts = args.opts("AvgPool1d", opts, "stride padding", 2)
  self.kernel_size = int1("AvgPool1d", k, 1, "kernel_size", 1)
  self.stride = int1("AvgPool1d", opts.stride or k, 2, "stride", 1)
  self.padding = int1("AvgPool1d", opts.padding or 0, 2, "padding", 0)
end
function AvgPool1d:forward(x) return F.avg_pool1d(x, self.kernel_size, { stride = self.stride, padding = self.padding }) end
function AvgPool1d:extra_repr()
  return ("kernel_size=(%d,), stride=(%d,), padding=(%d,)"):format(self.kernel_size, self.stride, self.padding)
end

--- nn.AdaptiveMaxPool2d(output_size[, {return_indices = false}])
--- Max pooling to a fixed output size (H, W).
local AdaptiveMaxPool2d = nn.Module:extend("AdaptiveMaxPool2d")
nn.AdaptiveMaxPool2d = AdaptiveMaxPool2d
function AdaptiveMaxPool2d:__init(size, opts)
  opts = args.opts("AdaptiveMaxPool2d", opts, "return_indices", 2)
  if not args.is_int(size) and not (type(size) == "table" and #size == 2 and args.is_int(size[1]) and args.is_int(size[2])) then
    args.argerr(1, "AdaptiveMaxPool2d", "integer or pair of integers output_size", size)
  end
  self.output_size, self.return_indices = size, opts.return_indices == true
end
function AdaptiveMaxPool2d:forward(x) return F.adaptive_max_pool2d(x, self.output_size, self.return_indices) end
function AdaptiveMaxPool2d:extra_repr() return "output_size=" .. pyv(self.output_size) end

--- nn.EmbeddingBag(num_embeddings, embedding_dim[, {mode = "mean", include_last_offset = false, padding_idx, dtype, device}])
--- Bags of embeddings reduced by sum, mean or max; forward(input[, offsets[, per_sample_weights]]).
local EmbeddingBag = nn.Module:extend("EmbeddingBag")
nn.EmbeddingBag = EmbeddingBag
function EmbeddingBag:__init(num, dim, opts)
  opts = args.opts("EmbeddingBag", opts, "mode include_last_offset padding_idx dtype device", 3)
  if not args.is_int(num) or num < 1 then args.argerr(1, "EmbeddingBag", "positive integer num_embeddings", num) end
  if not args.is_int(dim) or dim < 1 then args.argerr(2, "EmbeddingBag", "positive integer embedding_dim", dim) end
  local mode = opts.mode or "mean"
  if mode ~= "sum" and mode ~= "mean" and mode ~= "max" then
    raise(("EmbeddingBag: mode must be 'sum', 'mean' or 'max', got %s"):format(tostring(mode)))
  end
  self.num_embeddings, self.embedding_dim, self.mode = num, dim, mode
  self.include_last_offset, self.padding_idx = opts.include_last_offset == true, opts.padding_idx
  self.weight = init.normal_(tide.empty({ num, dim }, { dtype = opts.dtype, device = opts.device })):requires_grad_()
  if self.padding_idx ~= nil then
    local p = self.padding_idx < 0 and num + self.padding_idx + 1 or self.padding_idx
    tide.no_grad(function() self.weight:narrow(1, p, 1):zero_() end)
  end
end
function EmbeddingBag:forward(input, offsets, per_sample_weights)
  return F.embedding_bag(input, self.weight, offsets, { mode = self.mode, per_sample_weights = per_sample_weights,
    include_last_offset = self.include_last_offset, padding_idx = self.padding_idx })
end
function EmbeddingBag:extra_repr()
  return ("%d, %d, mode='%s'"):format(self.num_embeddings, self.embedding_dim, self.mode)
end

return F
