--[[
tide.ops_contract -- contractions lowered to permute / reshape / batched matmul
(one BLAS call per pair of operands): einsum (any equation PyTorch accepts:
implicit output, `...`, repeated letters as diagonals, letters summed in one
operand, left-to-right pairs for three or more), tensordot, kron, cross,
cdist, baddbmm, addbmm, addmv.
--]]
local core = require "tide.core"
local tensor = require "tide.tensor"
local args = require "tide.args"
local raise, is_tensor = core.raise, core.is_tensor
local T = tensor.Tensor

local M = {}

local function tide() return require "tide" end
local function size_str(s) return "[" .. table.concat(s, ",") .. "]" end

-- -- einsum -------------------------------------------------------------------------------------

-- one operand's term: a list of labels (single letters; "..." expands to
-- labels "\1", "\2", ... for its trailing-aligned broadcast dims)
local function parse_term(eq, term, nd, nell)
  local labels, seen_ell = {}, false
  local i = 1
  while i <= #term do
    local c = term:sub(i, i)
    if term:sub(i, i + 2) == "..." then
      if seen_ell then raise(("einsum: '%s': more than one ellipsis in a term"):format(eq)) end
      seen_ell = true
      labels[#labels + 1] = "..."
      i = i + 3
    elseif c:match("%a") then
      labels[#labels + 1] = c; i = i + 1
    elseif c == " " then i = i + 1
    else raise(("einsum: '%s': invalid character '%s' (labels are letters)"):format(eq, c)) end
  end
  local explicit = 0
  for _, l in ipairs(labels) do if l ~= "..." then explicit = explicit + 1 end end
  if nd then
    if (seen_ell and explicit > nd) or (not seen_ell and explicit ~= nd) then
      raise(("einsum: '%s': term '%s' has %d labels for an operand with %d dims"):format(eq, term, explicit, nd))
    end
  end
  local out = {}
  for _, l in ipairs(labels) do
    if l == "..." then
      local k = nd and nd - explicit or nell
      for j = nell - k + 1, nell do out[#out + 1] = string.char(j) end
    else out[#out + 1] = l end
  end
  return out, seen_ell
end

-- x with its repeated labels reduced to one (the diagonal), labels updated
local function take_diagonals(x, labels)
  local changed = true
  while changed do
    changed = false
    for i = 1, #labels do
      for j = i + 1, #labels do
        if labels[i] == labels[j] then
          if x:size(i) ~= x:size(j) then
            raise(("einsum: label '%s' has sizes %d and %d in one operand"):format(labels[i], x:size(i), x:size(j)))
          end
          x = T.diagonal(x, 0, i, j):movedim(-1, i)        -- diagonal goes last; back to i
          table.remove(labels, j)
          changed = true
          break
        end
      end
      if changed then break end
    end
  end
  return x, labels
end

-- sum the labels of x that no other operand and not the output needs
local function sum_private(x, labels, keep)
  local dims, rest = {}, {}
  for i, l in ipairs(labels) do
    if keep[l] then rest[#rest + 1] = l else dims[#dims + 1] = i end
  end
  if #dims > 0 then x = x:sum(dims) end
  return x, rest
end

-- v, a view of the intermediate x, becomes the only Lua reference to x's
-- storage: x:free() now, so that freeing the result (or the result going out
-- of scope) releases the storage without waiting for the collector to find x
local function own_view(x, v)
  if not rawequal(x, v) then x:free() end
  return v
end

local function index_of(list, v) for i, x in ipairs(list) do if x == v then return i end end end

-- contract a (labels la) with b (labels lb), keeping the labels in `keep`:
-- permute to (batch, a-only, shared) @ (batch, shared, b-only) and one matmul
local function contract(a, la, b, lb, keep, size)
  local batch, aonly, bonly, summed = {}, {}, {}, {}
  for _, l in ipairs(la) do
    if index_of(lb, l) then
      if keep[l] then batch[#batch + 1] = l else summed[#summed + 1] = l end
    else aonly[#aonly + 1] = l end
  end
  for _, l in ipairs(lb) do if not index_of(la, l) then bonly[#bonly + 1] = l end end
  -- x's dims in `order` (no op when they are already: an identity permute
  -- would be one more view for the gradient to flow back through)
  local function perm(x, labels, order)
    local p, same = {}, true
    for i, l in ipairs(order) do p[i] = index_of(labels, l); same = same and p[i] == i end
    if same then return x end
    return x:permute(p)
  end
  local function prod(list) local n = 1 for _, l in ipairs(list) do n = n * size[l] end return n end
  local ao, bo = {}, {}
  for _, l in ipairs(batch) do ao[#ao + 1] = l; bo[#bo + 1] = l end
  for _, l in ipairs(aonly) do ao[#ao + 1] = l end
  for _, l in ipairs(summed) do ao[#ao + 1] = l; bo[#bo + 1] = l end
  for _, l in ipairs(bonly) do bo[#bo + 1] = l end
  -- broadcast labels (size 1 in one operand) are expanded to the shared size
  local function expanded(x, labels)
    local s, need = x:size(), false
    for i, l in ipairs(labels) do if s[i] ~= size[l] then s[i] = size[l]; need = true end end
    return need and x:expand(s) or x
  end
  a = perm(expanded(a, la), la, ao)
  b = perm(expanded(b, lb), lb, bo)
  -- (batch..., rows, inner) @ (batch..., inner, cols): matmul takes the batch
  -- dims as they are (strided, never merged by a copy); a group of labels
  -- becomes one dim by a reshape only where it is not one label already
  local out, shape, bs = {}, {}, {}
  for _, l in ipairs(batch) do out[#out + 1] = l; shape[#shape + 1] = size[l]; bs[#bs + 1] = size[l] end
  local function grouped(x, g1, g2)
    if #g1 == 1 and #g2 == 1 then return x end
    local s = { unpack(bs) }
    s[#s + 1] = prod(g1); s[#s + 1] = prod(g2)
    return x:reshape(s)
  end
  local r = grouped(a, aonly, summed):matmul(grouped(b, summed, bonly))
  for _, l in ipairs(aonly) do out[#out + 1] = l; shape[#shape + 1] = size[l] end
  for _, l in ipairs(bonly) do out[#out + 1] = l; shape[#shape + 1] = size[l] end
  if #aonly == 1 and #bonly == 1 then return r, out end
  return own_view(r, r:reshape(shape)), out
end

-- The labels of each operand's term and of the output, for an equation and
-- operands of these ranks: parsed once, then cached (a training step calls
-- the same few equations; parsing cost ~12 us a call). Only sizes are
-- checked per call.
local plans, nplans = {}, 0
local function plan_of(eq, ops)
  local key = eq
  for i = 1, #ops do key = key .. "\0" .. ops[i].ndim end
  local p = plans[key]
  if p then return p end
  local lhs, rhs = eq:match("^(.-)%->(.*)$")
  if not lhs then lhs = eq end
  local terms = {}
  for t in (lhs .. ","):gmatch("([^,]*),") do terms[#terms + 1] = t end
  if #terms ~= #ops then
    raise(("einsum: '%s' has %d operand terms for %d operands"):format(eq, #terms, #ops))
  end
  -- the ellipsis covers the most dims any operand gives it
  local nell = 0
  local labels, known = {}, {}
  for i, t in ipairs(terms) do
    local explicit = select(2, t:gsub("%a", ""))
    if t:find("...", 1, true) then nell = math.max(nell, ops[i].ndim - explicit) end
  end
  for i, t in ipairs(terms) do
    labels[i] = parse_term(eq, t, ops[i].ndim, nell)
    for _, l in ipairs(labels[i]) do known[l] = true end
  end
  -- the output: explicit, or the ellipsis then the labels used once, in order
  local out
  if rhs then
    out = parse_term(eq, rhs, nil, nell)
    for _, l in ipairs(out) do
      if not known[l] then raise(("einsum: '%s': output label '%s' is in no operand"):format(eq, l)) end
    end
    local seen = {}
    for _, l in ipairs(out) do
      if seen[l] then raise(("einsum: '%s': output label '%s' repeats"):format(eq, l)) end
      seen[l] = true
    end
  else
    local count = {}
    for _, ls in ipairs(labels) do for _, l in ipairs(ls) do count[l] = (count[l] or 0) + 1 end end
    out = {}
    for j = 1, nell do out[#out + 1] = string.char(j) end
    local letters = {}
    for l, c in pairs(count) do if c == 1 and l:byte() >= 32 then letters[#letters + 1] = l end end
    table.sort(letters)
    for _, l in ipairs(letters) do out[#out + 1] = l end
  end
  if nplans >= 256 then plans, nplans = {}, 0 end
  p = { labels = labels, out = out }
  plans[key], nplans = p, nplans + 1
  return p
end

--- tide.einsum(equation, operands...) -> Tensor
--- Einstein summation as PyTorch's ('ij,jk->ik', implicit output, '...', diagonals 'ii->i'); pairs of operands become one batched matmul.
function M.einsum(eq, ...)
  if type(eq) ~= "string" then args.argerr(1, "einsum", "equation string", eq) end
  local ops = { ... }
  if #ops == 1 and type(ops[1]) == "table" and not is_tensor(ops[1]) then ops = ops[1] end
  if #ops == 0 then raise("einsum: no operands") end
  for i, x in ipairs(ops) do args.tensor(x, i + 1, "einsum") end
  local p = plan_of(eq, ops)
  local labels, size, out = { unpack(p.labels) }, {}, p.out
  for i = 1, #ops do
    for d, l in ipairs(labels[i]) do
      local s = ops[i]:size(d)
      if size[l] == nil or size[l] == 1 then size[l] = s
      elseif s ~= 1 and s ~= size[l] then
        raise(("einsum: '%s': label '%s' has size %d in operand %d but %d elsewhere"):format(eq,
          l:byte() < 32 and "..." or l, s, i, size[l]))
      end
    end
  end
  local outset = {}
  for _, l in ipairs(out) do outset[l] = true end
  -- diagonals, then labels only one operand has (and the output lacks) summed away
  local xs = {}
  for i, x in ipairs(ops) do
    local ls = {}
    for k, l in ipairs(labels[i]) do ls[k] = l end
    xs[i], labels[i] = take_diagonals(x, ls)
  end
  local function needed_except(skip)
    local keep = {}
    for l in pairs(outset) do keep[l] = true end
    for j, ls in ipairs(labels) do if not skip[j] then for _, l in ipairs(ls) do keep[l] = true end end end
    return keep
  end
  for i = 1, #xs do xs[i], labels[i] = sum_private(xs[i], labels[i], needed_except({ [i] = true })) end
  -- left to right: the running result with the next operand
  local acc, la = xs[1], labels[1]
  for i = 2, #xs do
    local skip = {}
    for j = 1, i do skip[j] = true end
    acc, la = contract(acc, la, xs[i], labels[i], needed_except(skip), size)
  end
  acc, la = sum_private(acc, la, outset)
  -- broadcast output labels an operand gave as 1 only
  local p = {}
  for i, l in ipairs(out) do p[i] = index_of(la, l) end
  if #p > 0 then acc = #xs > 1 and own_view(acc, acc:permute(p)) or acc:permute(p) end
  local shape, need = acc:size(), false
  for i, l in ipairs(out) do if shape[i] ~= size[l] then shape[i] = size[l]; need = true end end
  if need then acc = acc:expand(shape) end
  return acc
end

--- tide.tensordot(a, b, dims) -> Tensor
--- Sum over the last `dims` dims of a and the first of b (a number), or over the listed dims {{a dims}, {b dims}}.
function M.tensordot(a, b, dims)
  args.tensor(a, 1, "tensordot"); args.tensor(b, 2, "tensordot")
  local da, db = {}, {}
  if type(dims) == "number" then
    args.count(dims, 3, "tensordot", "non-negative integer")
    if dims > a.ndim or dims > b.ndim then
      raise(("tensordot: %d dims contracted for tensors of %d and %d dims"):format(dims, a.ndim, b.ndim))
    end
    for i = 1, dims do da[i] = a.ndim - dims + i; db[i] = i end
  elseif type(dims) == "table" and type(dims[1]) == "table" and type(dims[2]) == "table" then
    if #dims[1] ~= #dims[2] then raise(("tensordot: %d dims of a against %d dims of b"):format(#dims[1], #dims[2])) end
    for i = 1, #dims[1] do
      da[i] = args.dim(dims[1][i], a.ndim, "tensordot", 3)
      db[i] = args.dim(dims[2][i], b.ndim, "tensordot", 3)
      if a:size(da[i]) ~= b:size(db[i]) then
        raise(("tensordot: dim %d of a (size %d) and dim %d of b (size %d) differ"):format(da[i], a:size(da[i]),
          db[i], b:size(db[i])))
      end
    end
  else args.argerr(3, "tensordot", "number or {{dims of a}, {dims of b}}", dims) end
  -- einsum with generated labels
  local letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
  local k, ta, tb, to = 0, {}, {}, {}
  local function nxt() k = k + 1; return letters:sub(k, k) end
  for i = 1, a.ndim do ta[i] = false end
  for i = 1, b.ndim do tb[i] = false end
  for i = 1, #da do local l = nxt(); ta[da[i]] = l; tb[db[i]] = l end
  for i = 1, a.ndim do if not ta[i] then ta[i] = nxt(); to[#to + 1] = ta[i] end end
  for i = 1, b.ndim do if not tb[i] then tb[i] = nxt(); to[#to + 1] = tb[i] end end
  return M.einsum(table.concat(ta) .. "," .. table.concat(tb) .. "->" .. table.concat(to), a, b)
end

--- tide.kron(a, b) -> Tensor
--- The Kronecker product: block (i, j, ...) is a[i, j, ...] * b.
function M.kron(a, b)
  args.tensor(a, 1, "kron"); args.tensor(b, 2, "kron")
  local n = math.max(a.ndim, b.ndim)
  local function padded(x)
    local s = x:size()
    while #s < n do table.insert(s, 1, 1) end
    return s
  end
  local sa, sb = padded(a), padded(b)
  local va, vb, out = {}, {}, {}
  for i = 1, n do
    va[2 * i - 1], va[2 * i] = sa[i], 1
    vb[2 * i - 1], vb[2 * i] = 1, sb[i]
    out[i] = sa[i] * sb[i]
  end
  return (a:reshape(va) * b:reshape(vb)):reshape(out)
end

--- tide.cross(a, b, dim) -> Tensor
--- The cross product of 3-vectors along dim (default: the first dim of size 3).
function M.cross(a, b, dim)
  args.tensor(a, 1, "cross"); args.tensor(b, 2, "cross")
  local d
  if dim == nil then
    for i = 1, a.ndim do if a:size(i) == 3 then d = i break end end
    if not d then raise(("cross: no dim of size 3 in %s"):format(size_str(a:size()))) end
  else d = args.dim(dim, a.ndim, "cross", 3) end
  if a:size(d) ~= 3 or b.ndim ~= a.ndim or b:size(d) ~= 3 then
    raise(("cross: dim %d must have size 3 in both, got %s and %s"):format(d, size_str(a:size()), size_str(b:size())))
  end
  local function c(x, i) return x:narrow(d, i, 1) end
  return tide().cat({ c(a, 2) * c(b, 3) - c(a, 3) * c(b, 2), c(a, 3) * c(b, 1) - c(a, 1) * c(b, 3),
    c(a, 1) * c(b, 2) - c(a, 2) * c(b, 1) }, d)
end

--- tide.cdist(x1, x2, p) -> Tensor
--- p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M): (..., P, R); p = 2 by default.
function M.cdist(x1, x2, p)
  args.tensor(x1, 1, "cdist"); args.tensor(x2, 2, "cdist")
  p = p or 2
  if type(p) ~= "number" or p < 0 then args.argerr(3, "cdist", "non-negative number p", p) end
  if x1.ndim < 2 or x2.ndim < 2 or x1:size(-1) ~= x2:size(-1) then
    raise(("cdist: expected (..., P, M) and (..., R, M), got %s and %s"):format(size_str(x1:size()), size_str(x2:size())))
  end
  local P, R = x1:size(-2), x2:size(-2)
  if p == 2 and (P > 25 or R > 25) then
    -- PyTorch's mm path for big inputs: |x|^2 + |y|^2 - 2 x.y, clamped at 0
    local n1 = (x1 * x1):sum(-1, true)
    local n2 = (x2 * x2):sum(-1, true)
    local d2 = n1 - x1:matmul(x2:transpose(-1, -2)) * 2 + n2:transpose(-1, -2)
    return d2:clamp(0):sqrt()
  end
  local diff = x1:unsqueeze(-2) - x2:unsqueeze(-3)                 -- (..., P, R, M)
  if p == 0 then return diff:ne(0):sum(-1):to(x1.dtype) end
  if p == 2 then return (diff * diff):sum(-1):sqrt() end
  if p == 1 then return diff:abs():sum(-1) end
  if p == math.huge then return diff:abs():max(-1) end
  return (diff:abs() ^ p):sum(-1) ^ (1 / p)
end

-- beta * c + alpha * prod, with beta = 0 ignoring c's values (as addmm)
local function scaled_sum(fname, c, prod, opts, argn)
  opts = args.opts(fname, opts, "beta alpha", argn)
  local beta, alpha = opts.beta or 1, opts.alpha or 1
  if type(beta) ~= "number" then args.argerr(argn, fname, "number beta", beta) end
  if type(alpha) ~= "number" then args.argerr(argn, fname, "number alpha", alpha) end
  if alpha ~= 1 then prod = prod * alpha end
  if beta == 0 then return prod + tide().zeros_like(c) end
  return (beta ~= 1 and c * beta or c) + prod
end

--- tide.baddbmm(input, b1, b2, {beta=1, alpha=1}) -> Tensor
--- beta * input + alpha * (b1 @ b2) for batches of matrices (beta = 0 ignores input's values).
function M.baddbmm(c, a, b, opts)
  args.tensor(c, 1, "baddbmm")
  return scaled_sum("baddbmm", c, tide().bmm(a, b), opts, 4)
end

--- tide.addbmm(input, b1, b2, {beta=1, alpha=1}) -> Tensor
--- beta * input + alpha * sum over the batch of b1[i] @ b2[i].
function M.addbmm(c, a, b, opts)
  args.tensor(c, 1, "addbmm")
  return scaled_sum("addbmm", c, tide().bmm(a, b):sum(1), opts, 4)
end

--- tide.addmv(input, mat, vec, {beta=1, alpha=1}) -> Tensor
--- beta * input + alpha * (mat @ vec).
function M.addmv(c, m, v, opts)
  args.tensor(c, 1, "addmv"); args.tensor(m, 2, "addmv"); args.tensor(v, 3, "addmv")
  if m.ndim ~= 2 or v.ndim ~= 1 then
    raise(("addmv: expected a matrix and a vector, got %s and %s"):format(size_str(m:size()), size_str(v:size())))
  end
  return scaled_sum("addmv", c, m:matmul(v), opts, 4)
end

for _, n in ipairs { "tensordot", "kron", "cross", "baddbmm", "addbmm", "addmv" } do
  T[n] = M[n]
end

return M
