--[[
tide.ops_sort -- sorting, selection, counting and search (PyTorch's names; dims
and returned indices 1-based): sort argsort msort topk kthvalue median
nanmedian mode quantile nanquantile unique unique_consecutive searchsorted
bucketize bincount histc. The op table's SORT, TOPK, MODE and SEARCHSORTED
rows (runtime/rt_sort.c) give 0-based indices; values are gathered at them, so
their gradient is gather's: scattered back to those indices. OpenCL tensors
are sorted on the host (copied there and back). unique and bincount have
sizes that depend on the values: eager only, an error under tide.compile.
Installed as Tensor methods (and so as tide.* functions) by init.lua.
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local args = require "tide.args"
local ffi, C, OP = core.ffi, core.C, core.OP
local raise, is_tensor = core.raise, core.is_tensor
local T = tensor.Tensor
local attrs, op1, op2, targ = tensor.attrs, tensor.op1, tensor.op2, args.tensor

local M = {}

local function tide() return require "tide" end

-- the values of x at the 0-based indices ix along 0-based dim d (gather: differentiable)
local function take(x, d, ix)
  local at = attrs(); at.i[0] = d
  return op2(OP.gather, x, ix, at)
end

-- a 1-based (or negative) dim of x -> 0-based positive
local function dim0(x, d, fname, argn)
  if x.ndim == 0 then
    if d ~= nil and d ~= 1 and d ~= -1 then args.dim(d, 1, fname, argn) end
    return 0
  end
  return args.dim(d == nil and -1 or d, x.ndim, fname, argn) - 1
end

local function bool_arg(v, n, fname, what)
  if v ~= nil and type(v) ~= "boolean" then args.argerr(n, fname, what or "boolean", v) end
  return v
end

-- -- sort, argsort, topk --------------------------------------------------------------------

-- (x[, dim][, descending][, opts]) of sort and argsort -> dim0, descending
local function sort_args(fname, x, d, desc, opts)
  targ(x, 1, fname)
  if type(d) == "table" then d, desc, opts = nil, nil, d
  elseif type(desc) == "table" then desc, opts = nil, desc end
  opts = args.opts(fname, opts, "dim descending stable")
  if opts.dim ~= nil then d = opts.dim end
  if opts.descending ~= nil then desc = opts.descending end
  bool_arg(desc, 3, fname, "boolean descending")
  bool_arg(opts.stable, 4, fname, "boolean stable")
  return dim0(x, d, fname, 2), desc == true
end

local function sort_ix(x, d, desc)
  local at = attrs(); at.i[0] = d; at.flags = desc and 1 or 0
  return op1(OP.sort, x, at)
end

--- Tensor:sort([dim = -1[, descending = false]][, opts]) -> Tensor, Tensor
--- The values sorted along dim and their 1-based indices in x. Always stable: equal values keep their order, descending too (opts.stable is accepted); NaN sorts last (first when descending), as PyTorch. opts: dim, descending, stable. OpenCL tensors are sorted on the host (copied there and back), as are those of argsort, topk, kthvalue, median, mode, quantile, unique, searchsorted.
function T.sort(x, d, desc, opts)
  local d0, ds = sort_args("sort", x, d, desc, opts)
  if x.ndim == 0 then return x:clone(), tide().ones({}, { dtype = tide().int64, device = x.device }) end
  local ix = sort_ix(x, d0, ds)
  return take(x, d0, ix), ix + 1
end

--- Tensor:argsort([dim = -1[, descending = false]][, opts]) -> Tensor
--- The 1-based indices that sort x along dim (stable; opts: dim, descending, stable).
function T.argsort(x, d, desc, opts)
  local d0, ds = sort_args("argsort", x, d, desc, opts)
  if x.ndim == 0 then return tide().ones({}, { dtype = tide().int64, device = x.device }) end
  return sort_ix(x, d0, ds) + 1
end

--- Tensor:msort() -> Tensor
--- x sorted along its first dim (values only).
function T.msort(x)
  targ(x, 1, "msort")
  return (T.sort(x, 1))
end

--- Tensor:topk(k[, dim = -1[, largest = true[, sorted = true]]][, opts]) -> Tensor, Tensor
--- The k largest (largest = false: smallest) values along dim and their 1-based indices, best first (ties by index). k larger than the dim's size is an error. opts: dim, largest, sorted. On OpenCL: selected on the host.
function T.topk(x, k, d, largest, sorted, opts)
  targ(x, 1, "topk")
  args.int(k, 2, "topk", "integer k")
  if type(d) == "table" then d, largest, sorted, opts = nil, nil, nil, d
  elseif type(largest) == "table" then largest, sorted, opts = nil, nil, largest
  elseif type(sorted) == "table" then sorted, opts = nil, sorted end
  opts = args.opts("topk", opts, "dim largest sorted")
  if opts.dim ~= nil then d = opts.dim end
  if opts.largest ~= nil then largest = opts.largest end
  bool_arg(largest, 4, "topk", "boolean largest")
  bool_arg(opts.sorted or sorted, 5, "topk", "boolean sorted")
  local d0 = dim0(x, d, "topk", 3)
  local n = x.ndim == 0 and 1 or x:size(d0 + 1)
  if k < 0 or k > n then
    raise(("topk: k (%d) is out of range for dim %d of size %d (0 <= k <= %d)"):format(k, d0 + 1, n, n))
  end
  if x.ndim == 0 then return T.sort(x) end
  local at = attrs(); at.i[0] = d0; at.i[1] = k; at.i[2] = 0; at.flags = largest == false and 0 or 1
  local ix = op1(OP.topk, x, at)
  return take(x, d0, ix), ix + 1
end

-- -- kthvalue, median, mode -------------------------------------------------------------------

-- one selected element per row (mode 1 kth, 2 median, 3 nanmedian; MODE): values, 1-based indices
local function select1(fname, x, id, mode, k, d, keep)
  local d0 = dim0(x, d, fname, 3)
  if keep ~= nil and type(keep) ~= "boolean" then args.argerr(4, fname, "boolean keepdim", keep) end
  if x.ndim == 0 then return x:clone(), tide().ones({}, { dtype = tide().int64, device = x.device }) end
  if x:size(d0 + 1) == 0 then raise(("%s: dim %d is empty (shape %s)"):format(fname, d0 + 1, tostring(x:size()))) end
  local at = attrs(); at.i[0] = d0; at.i[1] = k or 1; at.i[2] = mode
  local ix = op1(id, x, at)
  local v = take(x, d0, ix)
  if not keep then v, ix = v:squeeze(d0 + 1), ix:squeeze(d0 + 1) end
  return v, ix + 1
end

--- Tensor:kthvalue(k[, dim = -1[, keepdim = false]]) -> Tensor, Tensor
--- The k-th smallest value along dim and its 1-based index (ties in index order, as a stable sort).
function T.kthvalue(x, k, d, keep)
  targ(x, 1, "kthvalue")
  args.int(k, 2, "kthvalue", "integer k")
  local n = x.ndim == 0 and 1 or x:size(dim0(x, d, "kthvalue", 3) + 1)
  if k < 1 or k > n then
    raise(("kthvalue: k (%d) is out of range for dim %d of size %d (1 <= k <= %d)"):format(k, dim0(x, d, "kthvalue", 3) + 1, n, n))
  end
  return select1("kthvalue", x, OP.topk, 1, k, d, keep)
end

local function median(fname, mode)
  return function(x, d, keep)
    targ(x, 1, fname)
    if d == nil then                        -- of all elements: the value only
      if x:numel() == 0 then raise(fname .. ": the tensor is empty") end
      local v = select1(fname, x:reshape(-1), OP.topk, mode, 1, 1, false)
      return v
    end
    return select1(fname, x, OP.topk, mode, 1, d, keep)
  end
end
--- Tensor:median([dim[, keepdim = false]]) -> Tensor[, Tensor]
--- The lower median (the ((n + 1) // 2)-th smallest) of all elements, or along dim with its 1-based index. NaN if the row holds one.
T.median = median("median", 2)
--- Tensor:nanmedian([dim[, keepdim = false]]) -> Tensor[, Tensor]
--- median ignoring NaNs (NaN only where a row is all NaN).
T.nanmedian = median("nanmedian", 3)

--- Tensor:mode([dim = -1[, keepdim = false]]) -> Tensor, Tensor
--- The most frequent value along dim (the smallest on ties) and the 1-based index of its last occurrence. On OpenCL: on the host.
function T.mode(x, d, keep)
  targ(x, 1, "mode")
  return select1("mode", x, OP.mode, 0, 1, d, keep)
end

-- -- quantile -------------------------------------------------------------------------------

local INTERP = { linear = true, lower = true, higher = true, midpoint = true, nearest = true }

local function quantile(fname, nan)
  return function(x, q, d, keep, opts)
    targ(x, 1, fname)
    if type(d) == "table" then d, keep, opts = nil, nil, d elseif type(keep) == "table" then keep, opts = nil, keep end
    opts = args.opts(fname, opts, "dim keepdim interpolation")
    if opts.dim ~= nil then d = opts.dim end
    if opts.keepdim ~= nil then keep = opts.keepdim end
    bool_arg(keep, 4, fname, "boolean keepdim")
    local interp = opts.interpolation or "linear"
    if not INTERP[interp] then
      raise(("%s: interpolation must be 'linear', 'lower', 'higher', 'midpoint' or 'nearest', got %s"):format(fname, tostring(interp)))
    end
    if not x:is_floating_point() then raise(("%s: expected a float tensor, got %s"):format(fname, x.dtype.name)) end
    local on = { dtype = x.dtype, device = x.device }
    local qt, scalar_q
    if type(q) == "number" then
      if not (q >= 0 and q <= 1) then raise(("%s: q must be in [0, 1], got %s"):format(fname, tostring(q))) end
      qt, scalar_q = tide().full({ 1 }, q, on), true
    elseif is_tensor(q) then
      if q.ndim > 1 then raise(("%s: q must be a number or a 0-D or 1-D tensor, got %d dims"):format(fname, q.ndim)) end
      if q.dtype ~= x.dtype then raise(("%s: q (%s) must have the input's dtype (%s)"):format(fname, q.dtype.name, x.dtype.name)) end
      if not core.tracing() and q:numel() > 0 and (q:min():item() < 0 or q:max():item() > 1) then
        raise(("%s: q values must be in [0, 1]"):format(fname))
      end
      scalar_q = q.ndim == 0
      qt = q:reshape(-1):to(x.device)
    else args.argerr(2, fname, "number or Tensor q", q) end
    local xd, d0 = x, nil
    if d == nil then xd, d0 = x:reshape(-1), 0 else d0 = dim0(x, d, fname, 3) end
    if xd.ndim == 0 then xd = xd:reshape(1) end
    local n = xd:size(d0 + 1)
    if n == 0 then raise(("%s: cannot compute a quantile of an empty dim"):format(fname)) end
    -- sorted rows last: s (..., n); NaN sorts last
    local s = T.sort(xd, d0 + 1):movedim(d0 + 1, -1)
    local rest = s:size(); rest[#rest] = nil
    local Q = qt:numel()
    local qs = { Q }; for _ = 1, #rest + 1 do qs[#qs + 1] = 1 end
    local qb = qt:reshape(qs)                                  -- (Q, 1.., 1)
    local last = s:narrow(-1, n, 1):unsqueeze(1)              -- (1, ..., 1)
    local pos
    if nan then
      local k = s:isnan():logical_not():sum(-1, true):to(x.dtype):unsqueeze(1)
      pos = tide().where(k:eq(0), n - 1, qb * (k - 1))
    else
      pos = tide().where(last:isnan(), n - 1, qb * (n - 1))  -- a NaN in the row: the result is NaN
    end
    local lo = pos:floor()
    local hi = pos:ceil()
    if interp == "nearest" then lo = pos:round(); hi = lo end
    local full = { Q }; for _, v in ipairs(rest) do full[#full + 1] = v end; full[#full + 1] = n
    local se = s:unsqueeze(1):expand(full)
    local function at(p)
      local ix = p:clamp(0, n - 1):to(tide().int64)
      local gs = {}; for i, v in ipairs(full) do gs[i] = v end; gs[#gs] = 1
      return take(se, #full - 1, ix:expand(gs)):squeeze(-1)
    end
    local r
    if interp == "lower" or interp == "nearest" then r = at(lo)
    elseif interp == "higher" then r = at(hi)
    else
      local vlo, vhi = at(lo), at(hi)
      local w = interp == "midpoint" and 0.5 or (pos - lo):squeeze(-1)
      r = tide().lerp(vlo, vhi, w)
    end
    -- r: (Q, rest...); keepdim puts the reduced dim back (all dims when dim is nil)
    if keep then
      if d == nil then
        local ks = { Q }; for _ = 1, x.ndim do ks[#ks + 1] = 1 end
        r = r:reshape(ks)
      else r = r:unsqueeze(d0 + 2) end
    end
    if scalar_q then r = r:squeeze(1) end
    return r
  end
end
--- Tensor:quantile(q[, dim[, keepdim = false]][, opts]) -> Tensor
--- The q-th quantiles (q a number or a 1-D tensor in [0, 1]; its dim comes first) of all elements or along dim, interpolating between the neighbouring sorted values. opts: dim, keepdim, interpolation ('linear', 'lower', 'higher', 'midpoint', 'nearest'). NaN where the row holds one.
T.quantile = quantile("quantile", false)
--- Tensor:nanquantile(q[, dim[, keepdim = false]][, opts]) -> Tensor
--- quantile ignoring NaNs (NaN only where a row is all NaN).
T.nanquantile = quantile("nanquantile", true)

-- -- unique ----------------------------------------------------------------------------------

local outs3 = ffi.new("td_tensor *[3]")

local function unique(fname, consecutive)
  return function(x, opts)
    targ(x, 1, fname)
    opts = args.opts(fname, opts, consecutive and "return_inverse return_counts dim" or "sorted return_inverse return_counts dim")
    if core.tracing() then
      raise(fname .. ": the output's size depends on the tensor's values, which tide.compile cannot trace; "
        .. "call it outside the compiled function")
    end
    if opts.dim ~= nil and x.ndim == 0 then
      raise(("%s: dim %s is out of range for a 0-dim tensor"):format(fname, tostring(opts.dim)))
    end
    local dim = opts.dim ~= nil and args.dim(opts.dim, x.ndim, fname, 2) or nil
    local dev = x.device
    local xc = dev == "cpu" and x or x:cpu()
    if dim then
      core.check(C.td_unique_dim(xc.p, dim - 1, consecutive and 1 or 0, outs3, outs3 + 1, outs3 + 2))
    else
      core.check(C.td_unique(xc.p, consecutive and 1 or 0, outs3, outs3 + 1, outs3 + 2))
    end
    local v, inv, cnt = core.wrap(outs3[0]), core.wrap(outs3[1]), core.wrap(outs3[2])
    if dev ~= "cpu" then v, inv, cnt = v:to(dev), inv:to(dev), cnt:to(dev) end
    local r = { v }
    if opts.return_inverse then r[#r + 1] = inv + 1 end
    if opts.return_counts then r[#r + 1] = cnt end
    return unpack(r)
  end
end
--- Tensor:unique([opts]) -> Tensor[, Tensor[, Tensor]]
--- The distinct values of x (flattened), sorted; opts.return_inverse adds each element's 1-based position in them (x's shape), opts.return_counts their counts. With opts.dim: the distinct slices along dim, sorted lexicographically (the inverse and counts then 1-D, one entry per slice), as torch.unique(dim=). Eager only (the size depends on the values), no gradient; OpenCL tensors go through the host. opts: sorted, return_inverse, return_counts, dim.
T.unique = unique("unique", false)
--- Tensor:unique_consecutive([opts]) -> Tensor[, Tensor[, Tensor]]
--- The runs of equal consecutive values of x (flattened; with opts.dim: of equal consecutive slices along dim), one each; opts.return_inverse, opts.return_counts as unique. Eager only.
T.unique_consecutive = unique("unique_consecutive", true)

-- -- searchsorted, bucketize --------------------------------------------------------------------

local function search(fname, seq, v, opts, argn)
  opts = args.opts(fname, opts, "right side out_int32", argn)
  local right = opts.right
  bool_arg(right, argn, fname, "boolean right")
  if opts.side ~= nil then
    if opts.side ~= "left" and opts.side ~= "right" then
      raise(("%s: side must be 'left' or 'right', got %s"):format(fname, tostring(opts.side)))
    end
    if right ~= nil and right ~= (opts.side == "right") then
      raise(fname .. ": side and right disagree (side = '" .. opts.side .. "', right = " .. tostring(right) .. ")")
    end
    right = opts.side == "right"
  end
  local at = attrs(); at.flags = right and 1 or 0
  local r = op2(OP.searchsorted, seq, v, at) + 1
  if opts.out_int32 then r = r:to(tide().int32) end
  return r
end

--- tide.searchsorted(sorted_sequence, values[, opts]) -> Tensor
--- For each value the 1-based position where it would be inserted into the sorted last dim of sorted_sequence to keep it sorted: before the first element >= it (opts.right or side = 'right': > it), n + 1 after all. A 1-D sequence serves every value; else the leading dims match. values may be a number. opts: right, side, out_int32. On OpenCL: searched on the host.
function M.searchsorted(seq, v, opts)
  targ(seq, 1, "searchsorted")
  if type(v) == "number" then v = tide().tensor(v, { dtype = seq.dtype, device = seq.device }) end
  targ(v, 2, "searchsorted")
  return search("searchsorted", seq, v, opts, 3)
end

--- Tensor:bucketize(boundaries[, opts]) -> Tensor
--- The 1-based bucket of each element among the sorted 1-D boundaries: i where boundaries[i-1] < x <= boundaries[i] (opts.right: boundaries[i-1] <= x < boundaries[i]), n + 1 past the last. opts: right, out_int32.
function T.bucketize(x, b, opts)
  targ(x, 1, "bucketize"); targ(b, 2, "bucketize")
  if b.ndim ~= 1 then raise(("bucketize: boundaries must be 1-D, got %d dims"):format(b.ndim)) end
  return search("bucketize", b, x, opts, 3)
end

-- -- bincount, histc ----------------------------------------------------------------------------

--- Tensor:bincount([weights][, minlength = 0][, opts]) -> Tensor
--- out[v + 1] = how many times the non-negative integer v occurs in the 1-D x (with weights: their sum), for v < max(max(x) + 1, minlength). Eager only (the size depends on the values). opts: weights, minlength.
function T.bincount(x, w, minlength, opts)
  targ(x, 1, "bincount")
  if type(w) == "table" and not is_tensor(w) then w, minlength, opts = nil, nil, w
  elseif type(w) == "number" then w, minlength, opts = nil, w, minlength end
  if type(minlength) == "table" then minlength, opts = nil, minlength end
  opts = args.opts("bincount", opts, "weights minlength")
  w = opts.weights or w
  minlength = args.count(opts.minlength or minlength or 0, 3, "bincount", "non-negative integer minlength")
  if x.ndim ~= 1 then raise(("bincount: expected a 1-D tensor, got %d dims"):format(x.ndim)) end
  if x:is_floating_point() or x.dtype == tide().bool then
    raise(("bincount: expected an integer tensor, got %s"):format(x.dtype.name))
  end
  if w ~= nil then
    targ(w, 2, "bincount")
    if w.ndim ~= 1 or w:size(1) ~= x:size(1) then
      raise(("bincount: weights of shape %s for an input of %d elements"):format(tostring(w:size()), x:size(1)))
    end
  end
  if core.tracing() then
    raise("bincount: the output's size depends on the tensor's values, which tide.compile cannot trace; "
      .. "call it outside the compiled function")
  end
  local n = 0
  if x:numel() > 0 then
    local lo = x:min():item()
    if lo < 0 then raise(("bincount: the input holds a negative value (%d)"):format(lo)) end
    n = x:max():item() + 1
  end
  n = math.max(n, minlength)
  local dt = w == nil and tide().int64 or (w:is_floating_point() and w.dtype or tide().float64)
  local src = w == nil and tide().ones({ x:numel() }, { dtype = dt, device = x.device }) or w:to(dt)
  local at = attrs(); at.i[0] = 0
  return tensor.opn(OP.index_add, { tide().zeros({ n }, { dtype = dt, device = x.device }), x, src }, at)
end

--- Tensor:histc([bins = 100[, min = 0[, max = 0]]][, opts]) -> Tensor
--- A histogram of x: counts in bins equal-width bins over [min, max] (both 0: the data's min and max); elements outside are ignored. opts: bins, min, max.
function T.histc(x, bins, lo, hi, opts)
  targ(x, 1, "histc")
  if type(bins) == "table" then bins, lo, hi, opts = nil, nil, nil, bins end
  opts = args.opts("histc", opts, "bins min max")
  bins = opts.bins or bins or 100
  lo, hi = opts.min or lo or 0, opts.max or hi or 0
  if not args.is_int(bins) or bins < 1 then args.argerr(2, "histc", "positive integer bins", bins) end
  if type(lo) ~= "number" then args.argerr(3, "histc", "number min", lo) end
  if type(hi) ~= "number" then args.argerr(4, "histc", "number max", hi) end
  if lo > hi then raise(("histc: max (%s) must be larger than min (%s)"):format(tostring(hi), tostring(lo))) end
  if not x:is_floating_point() then raise(("histc: expected a float tensor, got %s"):format(x.dtype.name)) end
  local on = { dtype = x.dtype, device = x.device }
  local xs = x:detach():reshape(-1)
  local mn, mx
  if lo == 0 and hi == 0 and xs:numel() > 0 then
    mn, mx = xs:amin(), xs:amax()
    local same = mn:eq(mx)
    mn, mx = tide().where(same, mn - 1, mn), tide().where(same, mx + 1, mx)
  else
    if lo == hi then lo, hi = lo - 1, hi + 1 end
    mn, mx = tide().full({}, lo, on), tide().full({}, hi, on)
  end
  local inside = xs:ge(mn):logical_and(xs:le(mx))
  -- bin = floor((x - min) * bins / (max - min)); x == max joins the last bin
  local b = ((xs - mn) * bins / (mx - mn)):floor():clamp(0, bins - 1)
  b = tide().where(inside, b, 0):to(tide().int64)
  local at = attrs(); at.i[0] = 0
  return tensor.opn(OP.index_add, { tide().zeros({ bins }, on), b, inside:to(x.dtype) }, at)
end

return M
