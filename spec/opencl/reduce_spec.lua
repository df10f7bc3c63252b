-- Reductions and softmax/log_softmax on the OpenCL device (opencl/cl_red.c) against
-- the eager CPU kernels on the same fresh random inputs: dims, keepdim, all dims,
-- strided views made on the device, odd sizes, float32/float64/integer dtypes,
-- NaN, indices of max/min/argmax, empty reductions and errors.
local tide = require "tide"
local H = require "helper"

local f64, f32 = { dtype = tide.float64 }, { dtype = tide.float32 }

local agree, describe_cl = H.agree, H.describe_cl   -- agree(got, want, rtol, msg)

-- the same strided view of a CPU tensor and of its device copy: "contig", "t"
-- (first and last dims swapped in memory), "slice" (every other element of the
-- last dim), "expand" (dim 1 broadcast, stride 0); view ops run on the device
local function pair(shape, kind, opts, gen)
  gen = gen or function(s) return tide.randn(s, opts) end
  local n, s = #shape, {}
  for i = 1, n do s[i] = shape[i] end
  local view = function(t) return t end
  if n > 0 and kind == "t" then
    s[1], s[n] = shape[n], shape[1]
    view = function(t) return t:transpose(1, n) end
  elseif n > 0 and kind == "slice" then
    s[n] = 2 * shape[n]
    view = function(t) return t:slice(n, 1, 2 * shape[n], 2) end
  elseif n > 0 and kind == "expand" then
    s[1] = 1
    view = function(t) return t:expand(shape) end
  end
  local base = gen(s)
  return view(base), view(base:to("opencl"))
end

-- every reduction of x with dims/keep, as name -> function(t) returning one or two tensors
local function red_ops(dims, keep)
  local ops = {
    sum = function(t) return t:sum(dims, keep) end,
    mean = function(t) return t:mean(dims, keep) end,
    prod = function(t) return (t * 0.05 + 1):prod(dims, keep) end,
    amax = function(t) return t:amax(dims, keep) end,
    amin = function(t) return t:amin(dims, keep) end,
    var = function(t) return t:var(dims, { keepdim = keep }) end,
    var0 = function(t) return t:var(dims, { keepdim = keep, correction = 0 }) end,
    std = function(t) return t:std(dims, { keepdim = keep }) end,
    logsumexp = function(t) return t:logsumexp(dims, keep) end,
  }
  for _, p in ipairs { 2, 1, 3, 0, 0.5, math.huge, -math.huge } do
    ops["norm" .. p] = function(t) return t:norm(p, dims, keep) end
  end
  if dims == nil then
    ops.argmax = function(t) return t:argmax() end
    ops.argmin = function(t) return t:argmin() end
  elseif type(dims) == "number" then
    ops.max = function(t) return t:max(dims, keep) end
    ops.min = function(t) return t:min(dims, keep) end
    ops.argmax = function(t) return t:argmax(dims, keep) end
    ops.argmin = function(t) return t:argmin(dims, keep) end
  end
  return ops
end

local function check_ops(x, y, dims, keep, rtol, what)
  for name, f in pairs(red_ops(dims, keep)) do
    local w1, w2 = f(x)
    local g1, g2 = f(y)
    local exact = name:match("^arg") or name:match("^am") or name == "max" or name == "min" or name == "norminf"
      or name == "norm-inf" or name == "norm0"
    agree(g1, w1, exact and 0 or rtol, name .. " " .. what)
    assert.equal(w2 == nil, g2 == nil, name .. " " .. what .. ": indices")
    if w2 then agree(g2, w2, 0, name .. " indices " .. what) end
  end
end

describe_cl("opencl reductions #opencl", function()
  it("match the CPU for every op, dims, keepdim and layout (float64, float32)", function()
    tide.manual_seed(21)
    local cases = {
      { { 1 }, nil }, { { 7 }, 1 }, { { 1023 }, nil }, { { 7, 1023 }, 2 }, { { 7, 1023 }, 1, true },
      { { 1023, 7 }, -1 }, { { 1, 7, 1 }, { 1, 3 } }, { { 3, 1, 5, 7 }, { 1, 3 } },
      { { 3, 1, 5, 7 }, { 2, 4 }, true }, { { 3, 4, 5, 6 }, { -1, -3 } }, { { 5, 3, 7 }, 3 },
      { { 2, 3, 300 }, { 1, 2 } }, { { 4, 6, 5 }, nil, true }, { { 4, 6, 5 }, 2 },
    }
    for _, c in ipairs(cases) do
      local shape, dims, keep = c[1], c[2], c[3]
      for _, lay in ipairs { "contig", "t", "slice", "expand" } do
        local what = ("{%s} dims %s keep %s %s"):format(table.concat(shape, ","),
          type(dims) == "table" and "{" .. table.concat(dims, ",") .. "}" or tostring(dims), tostring(keep), lay)
        local x, y = pair(shape, lay, f64)
        check_ops(x, y, dims, keep, 1e-12, "float64 " .. what)
        if lay == "contig" or lay == "t" then
          x, y = pair(shape, lay, f32)
          check_ops(x, y, dims, keep, 1e-5, "float32 " .. what)
        end
      end
    end
  end)

  it("keep float32 results close for long rows and a full reduction", function()
    tide.manual_seed(22)
    local x = tide.rand(3, 70001) * 4 - 2
    local y = x:to("opencl")
    agree(y:sum(2), x:sum(2), 1e-6, "sum rows")
    agree(y:sum(), x:sum(), 1e-6, "sum all")
    agree(y:t():mean(1), x:t():mean(1), 1e-6, "mean columns")
    agree(y:var(), x:var(), 1e-6, "var all")
    agree(y:logsumexp(2), x:logsumexp(2), 1e-6, "logsumexp rows")
    agree(y:norm(), x:norm(), 1e-6, "norm")
    agree(y:argmax(), x:argmax(), 0, "argmax")
  end)

  it("integer and bool dtypes: int64 sums and products (wrapping), means, max with indices", function()
    tide.manual_seed(23)
    for _, dt in ipairs { tide.int64, tide.int32, tide.uint8 } do
      local lo, hi = dt == tide.uint8 and 0 or -50, 50
      local x = tide.randint(lo, hi, { 7, 1023 }, { dtype = dt })
      local y = x:to("opencl")
      local name = tostring(dt)
      for _, d in ipairs { 1, 2 } do
        agree(y:sum(d), x:sum(d), 0, name .. " sum " .. d)
        agree(y:t():sum(d), x:t():sum(d), 0, name .. " sum t " .. d)
        agree(y:mean(d), x:mean(d), 1e-6, name .. " mean " .. d)
        agree(y:var(d), x:var(d), 1e-5, name .. " var " .. d)
        agree(y:amax(d), x:amax(d), 0, name .. " amax " .. d)
        local v, i = y:min(d, true)
        local w, j = x:min(d, true)
        agree(v, w, 0, name .. " min " .. d); agree(i, j, 0, name .. " min idx " .. d)
        agree(y:argmax(d), x:argmax(d), 0, name .. " argmax " .. d)
      end
      local s = tide.randint(1, 4, { 5, 9 }, { dtype = dt })
      agree(s:to("opencl"):prod(2), s:prod(2), 0, name .. " prod")
      agree(y:argmin(), x:argmin(), 0, name .. " argmin")
      agree(y:sum(), x:sum(), 0, name .. " sum all")
      agree(y:norm(1, 2), x:norm(1, 2), 1e-6, name .. " norm1")
    end
    local big = tide.long { 2 ^ 62, 3, -2 ^ 62 - 3, 4 }
    local gb = big:to("opencl")
    agree(gb:max(), big:max(), 0, "int64 max exact"); agree(gb:min(), big:min(), 0, "int64 min exact")
    agree(gb:prod(), big:prod(), 0, "int64 prod wraps")
    agree((gb * 2):sum(), (big * 2):sum(), 0, "int64 sum wraps")
    local bo = tide.rand(5, 33):gt(0.5)
    local gbo = bo:to("opencl")
    agree(gbo:sum(2), bo:sum(2), 0, "bool sum")
    agree(gbo:prod(1), bo:prod(1), 0, "bool prod")
    agree(gbo:mean(), bo:mean(), 1e-6, "bool mean")
    local v, i = gbo:max(2)
    local w, j = bo:max(2)
    agree(v, w, 0, "bool max"); agree(i, j, 0, "bool max idx")
    agree(gbo:argmin(1), bo:argmin(1), 0, "bool argmin")
  end)

  it("propagate NaN through max, min and sums; the first NaN wins argmax", function()
    for _, opts in ipairs { f64, f32 } do
      local x = tide.randn({ 4, 1023 }, opts)
      x[{ 2, 700 }] = 0 / 0; x[{ 2, 5 }] = 0 / 0; x[{ 3, 1023 }] = 0 / 0; x[{ 4, 1 }] = 0 / 0
      local y = x:to("opencl")
      for _, d in ipairs { 1, 2 } do
        for n, f in pairs { max = tide.Tensor.max, min = tide.Tensor.min } do
          local v, i = f(y, d)
          local w, j = f(x, d)
          agree(v, w, 0, n .. " NaN " .. d); agree(i, j, 0, n .. " NaN idx " .. d)
        end
        agree(y:argmax(d), x:argmax(d), 0, "argmax NaN " .. d)
        agree(y:argmin(d), x:argmin(d), 0, "argmin NaN " .. d)
        agree(y:amax(d), x:amax(d), 0, "amax NaN " .. d)
        agree(y:sum(d), x:sum(d), 1e-5, "sum NaN " .. d)
        agree(y:logsumexp(d), x:logsumexp(d), 1e-5, "logsumexp NaN " .. d)
        agree(y:norm(math.huge, d), x:norm(math.huge, d), 0, "norminf NaN " .. d)
      end
      agree(y:argmax(), x:argmax(), 0, "argmax NaN all")
      H.close(y:argmax():cpu(), 5 + 1023, 0)                    -- flat index of the first NaN
      agree(y:max(), x:max(), 0, "max NaN all")
    end
    -- infinities: logsumexp of -inf rows and +inf entries; max of -inf
    local z = tide.tensor({ { -math.huge, -math.huge }, { 1, math.huge }, { -math.huge, 2 } }, f64)
    local g = z:to("opencl")
    agree(g:logsumexp(2), z:logsumexp(2), 0, "logsumexp inf")
    agree(g:amax(2), z:amax(2), 0, "amax -inf")
    local v, i = g:max(2)
    local w, j = z:max(2)
    agree(v, w, 0, "max inf"); agree(i, j, 0, "max inf idx")
    agree(g:argmin(), z:argmin(), 0, "argmin -inf ties")
  end)

  it("keep the first of ties in argmax, argmin and max(dim)", function()
    local x = tide.zeros(5, 1023); x[{ 3, 700 }] = 1; x[{ 4, 700 }] = 1; x[{ 5, 2 }] = 1
    local y = x:to("opencl")
    agree(y:argmax(1), x:argmax(1), 0, "argmax 1")
    agree(y:argmax(2), x:argmax(2), 0, "argmax 2")
    agree(y:argmax(), x:argmax(), 0, "argmax all")
    agree(y:argmin(), x:argmin(), 0, "argmin all")
    local v, i = y:t():max(2, true)
    local w, j = x:t():max(2, true)
    agree(v, w, 0, "max t"); agree(i, j, 0, "max t idx")
    H.close(tide.ones(1023):to("opencl"):argmax():cpu(), 1, 0)
  end)

  it("handle 0-dim inputs, empty reductions and report errors as the CPU does", function()
    local s = tide.tensor(2.5, f64)
    local gs = s:to("opencl")
    agree(gs:sum(), s:sum(), 0, "0-dim sum"); agree(gs:sum(1), s:sum(1), 0, "0-dim sum 1")
    local v, i = gs:max(1)
    local w, j = s:max(1)
    agree(v, w, 0, "0-dim max"); agree(i, j, 0, "0-dim max idx")
    agree(gs:argmax(), s:argmax(), 0, "0-dim argmax")
    local e = tide.zeros(3, 0)
    local ge = e:to("opencl")
    for _, f in ipairs {
      function(t) return t:sum(2) end, function(t) return t:prod(2) end, function(t) return t:mean(2) end,
      function(t) return t:var(2) end, function(t) return t:logsumexp(2) end, function(t) return t:norm(2, 2) end,
      function(t) return t:sum(1) end, function(t) return t:sum() end, function(t) return t:long():sum(2) end,
      function(t) return t:long():prod() end,
    } do agree(f(ge), f(e), 0, "empty") end
    local ev, ei = ge:max(1)
    assert.same({ 0 }, ev:size()); assert.same({ 0 }, ei:size())
    assert.equal(tide.int64, ei.dtype)
    H.raises(function() return ge:max(2) end, "max: cannot reduce over dim 2 of size 0 (shape [3,0])")
    H.raises(function() return ge:amin() end, "min: cannot reduce an empty tensor of shape [3,0]")
    H.raises(function() return ge:argmax(2) end, "argmax: cannot reduce over dim 2 of size 0")
    local g = tide.randn(3, 4):to("opencl")
    H.raises(function() return g:sum(3) end, "sum: dim 3 out of range for a tensor with 2 dims")
    H.raises(function() return g:argmax({ 1, 2 }) end, "argmax: expected one dim")
    H.raises(function() return g:norm(0 / 0) end, "norm: p must be a number, got nan")
    H.raises(function() return g:sum(2) + tide.randn(3) end, "add: tensors are on different devices")
  end)
end)

describe_cl("opencl softmax and log_softmax #opencl", function()
  it("match the CPU along every dim, strided and odd sizes, float32 and float64", function()
    tide.manual_seed(24)
    for _, c in ipairs { { { 1 }, 1 }, { { 7 }, 1 }, { { 3, 1023 }, 2 }, { { 1023, 3 }, 1 }, { { 2, 5, 300 }, 2 },
                        { { 4, 7, 1 }, 2 }, { { 1, 1 }, -1 }, { { 3, 2, 11 }, 3 }, { { 3, 2, 11 }, 1 } } do
      for _, lay in ipairs { "contig", "t", "slice" } do
        for _, opts in ipairs { f64, f32 } do
          local x, y = pair(c[1], lay, opts, function(s) return tide.randn(s, opts) * 3 end)
          local what = ("{%s} dim %d %s %s"):format(table.concat(c[1], ","), c[2], lay, tostring(opts.dtype))
          local tol = opts == f64 and 1e-13 or 2e-6
          agree(y:softmax(c[2]), x:softmax(c[2]), tol, "softmax " .. what)
          agree(y:log_softmax(c[2]), x:log_softmax(c[2]), tol, "log_softmax " .. what)
        end
      end
    end
  end)

  it("is stable for large logits and infinities, and handles 0-dim and empty inputs", function()
    local x = tide.tensor({ { 1000, 1001, 1002 }, { -1000, -1001, -1002 }, { -math.huge, 0, 1 } }, f32)
    local y = x:to("opencl")
    agree(y:softmax(2), x:softmax(2), 1e-6, "softmax large")
    agree(y:log_softmax(2), x:log_softmax(2), 1e-6, "log_softmax large")
    agree(y:softmax(1), x:softmax(1), 1e-6, "softmax columns with -inf")
    local s = tide.tensor(2.5, f64)
    agree(s:to("opencl"):softmax(1), s:softmax(1), 0, "0-dim softmax")
    agree(s:to("opencl"):log_softmax(-1), s:log_softmax(-1), 0, "0-dim log_softmax")
    local e = tide.zeros(0, 4)
    agree(e:to("opencl"):softmax(2), e:softmax(2), 0, "empty softmax")
    H.raises(function() return tide.long({ 1, 2 }):to("opencl"):log_softmax(1) end,
      "log_softmax: expected a floating point tensor, got int64")
    H.raises(function() return tide.randn(2, 3):to("opencl"):softmax(3) end, "softmax: dim 3 out of range")
  end)
end)
