-- matmul (opencl/cl_blas.c: CLBlast for floats, a kernel for integers) and the
-- index ops, cat and unfold/fold (opencl/cl_index.c) on the OpenCL device against
-- the eager CPU kernels on the same fresh random inputs: 1-D operands, broadcast
-- batches, transposed and sliced views made on the device, odd sizes, float32 /
-- float64 / integer dtypes; every index op along every dim with repeated indices
-- and strided operands; conv-like windows; out-of-range indices raise the CPU's
-- message. The accumulating ops (index_add, scatter_add, fold) add in the CPU's
-- order, so they must match it exactly.
local tide = require "tide"
local H = require "helper"
local tensor = require "tide.tensor"
local OP = require("tide.core").OP

local describe_cl, same = H.describe_cl, H.same_opencl   -- same(f, inputs, rtol, msg)

local function rand(shape, dt)
  if dt == "float32" or dt == "float64" then return tide.randn(shape, { dtype = dt }) end
  if dt == "bool" then return tide.randint(0, 2, shape):to("bool") end
  return tide.randint(dt == "uint8" and 0 or -9, 10, shape):to(dt)
end

local function shape_str(s) return "(" .. table.concat(s, ",") .. ")" end

-- -- matmul -------------------------------------------------------------------------------------

describe_cl("opencl matmul #opencl", function()
  -- a's shape, b's shape; views are applied on each side's device copy
  local shapes = {
    { { 7 }, { 7 } }, { { 33 }, { 33, 1 } }, { { 7 }, { 7, 3 } }, { { 5, 7 }, { 7 } }, { { 1, 1 }, { 1, 1 } },
    { { 5, 7 }, { 7, 3 } }, { { 33, 7 }, { 7, 33 } }, { { 1, 33 }, { 33, 7 } }, { { 7, 1 }, { 1, 33 } },
    { { 2, 1, 3, 7 }, { 5, 7, 4 } }, { { 3, 7, 5 }, { 5 } }, { { 7 }, { 2, 7, 4 } }, { { 4, 3, 7 }, { 7, 5 } },
    { { 2, 3, 1, 7 }, { 3, 7, 2 } }, { { 1, 5, 33 }, { 2, 1, 33, 7 } },
  }

  it("equals the CPU on every shape form (float32, float64, int64, int32, uint8)", function()
    for _, dt in ipairs { "float32", "float64", "int64", "int32", "uint8" } do
      local rtol = dt == "float32" and 1e-5 or dt == "float64" and 1e-13 or 0
      for _, s in ipairs(shapes) do
        same(tide.matmul, { rand(s[1], dt), rand(s[2], dt) }, rtol, ("%s %s @ %s"):format(dt, shape_str(s[1]), shape_str(s[2])))
      end
    end
  end)

  it("takes transposed, sliced, expanded and offset views as they are", function()
    for _, dt in ipairs { "float32", "float64", "int64" } do
      local rtol = dt == "float32" and 1e-5 or dt == "float64" and 1e-13 or 0
      local cases = {
        { "a:t()", function(a, b) return a:t():matmul(b) end, { 7, 5 }, { 7, 3 } },
        { "b:t()", function(a, b) return a:matmul(b:t()) end, { 5, 7 }, { 33, 7 } },
        { "a:t() @ b:t()", function(a, b) return a:t():matmul(b:t()) end, { 33, 1 }, { 7, 33 } },
        { "batched transposes", function(a, b) return a:transpose(2, 3):matmul(b:transpose(-1, -2)) end, { 3, 7, 5 }, { 3, 4, 7 } },
        { "permuted batch", function(a, b) return a:permute(2, 1, 3):matmul(b) end, { 5, 3, 7 }, { 3, 7, 2 } },
        { "sliced columns (copied)", function(a, b) return a:slice(2, 1, 14, 2):matmul(b) end, { 5, 14 }, { 7, 3 } },
        { "sliced rows", function(a, b) return a:slice(1, 2, 9, 3):matmul(b:slice(2, 1, 33, 4)) end, { 9, 7 }, { 7, 33 } },
        { "narrowed (offsets)", function(a, b) return a:narrow(1, 3, 4):matmul(b:narrow(2, 2, 5)) end, { 7, 7 }, { 7, 7 } },
        { "expanded batch", function(a, b) return a:expand(4, 5, 7):matmul(b:expand(4, 7, 3)) end, { 1, 5, 7 }, { 1, 7, 3 } },
        { "1-D strided", function(a, b) return a:slice(1, 1, 14, 2):matmul(b) end, { 14 }, { 2, 7, 3 } },
        { "x (B,T,C) @ W (C,D) of a sliced x", function(a, b) return a:narrow(3, 1, 7):matmul(b) end, { 2, 5, 9 }, { 7, 4 } },
      }
      for _, c in ipairs(cases) do
        same(c[2], { rand(c[3], dt), rand(c[4], dt) }, rtol, dt .. " " .. c[1])
      end
    end
  end)

  it("promotes mixed dtypes and gives zeros for K = 0 and empty results", function()
    same(tide.matmul, { rand({ 4, 7 }, "int64"), rand({ 7, 3 }, "float32") }, 1e-5, "int64 @ float32")
    same(tide.matmul, { rand({ 4, 7 }, "float32"), rand({ 7, 3 }, "float64") }, 1e-13, "float32 @ float64")
    same(tide.matmul, { rand({ 4, 7 }, "int32"), rand({ 7, 3 }, "int64") }, 0, "int32 @ int64")
    for _, dt in ipairs { "float32", "float64", "int64" } do
      same(tide.matmul, { rand({ 3, 0 }, dt), rand({ 0, 4 }, dt) }, 0, dt .. " K = 0")
      same(tide.matmul, { rand({ 2, 3, 0 }, dt), rand({ 0 }, dt) }, 0, dt .. " batched K = 0")
      same(tide.matmul, { rand({ 0, 5 }, dt), rand({ 5, 4 }, dt) }, 0, dt .. " M = 0")
      same(tide.matmul, { rand({ 2, 0, 3, 5 }, dt), rand({ 5, 4 }, dt) }, 0, dt .. " empty batch")
    end
  end)

  it("raises the CPU's shape errors", function()
    local a, b = tide.zeros(3, 4):to("opencl"), tide.zeros(5, 6):to("opencl")
    H.raises(function() return a:matmul(b) end, "matmul: shape mismatch [3,4] @ [5,6]")
    H.raises(function() return a:matmul(tide.zeros(3, 4)) end, "matmul: tensors are on different devices")
  end)
end)

-- -- index_select and gather -------------------------------------------------------------------

local dtypes = { "float32", "float64", "int64", "int32", "uint8", "bool" }

-- x and its device copy through the same view: "contig", "t" (dims 1 and 3
-- swapped), "slice" (every other element of dim 2); shape is the view's
local function views(shape, dt)
  local s = { shape[1], shape[2], shape[3] }
  local out = {}
  local x = rand(s, dt)
  out[1] = { "contig", x }
  local t = rand({ s[3], s[2], s[1] }, dt)
  out[2] = { "transposed", t:transpose(1, 3), function(d) return d:transpose(1, 3) end, t }
  local sl = rand({ s[1], 2 * s[2], s[3] }, dt)
  out[3] = { "sliced", sl:slice(2, 1, 2 * s[2], 2), function(d) return d:slice(2, 1, 2 * s[2], 2) end, sl }
  return out
end

-- f(view(x), ...) on the CPU and on the device, the view made on each side
local function same_view(f, v, args, rtol, msg)
  local x, view, base = v[2], v[3], v[4]
  local dx = view and view(base:to("opencl")) or x:to("opencl")
  local dargs = H.to_opencl(args)
  H.agree(f(dx, unpack(dargs, 1, #args)), f(x, unpack(args, 1, #args)), rtol, msg)
end

describe_cl("opencl index_select and gather #opencl", function()
  it("index_select along every dim, every dtype, repeated and strided indices", function()
    for _, dt in ipairs(dtypes) do
      for _, v in ipairs(views({ 5, 7, 3 }, dt)) do
        for d = 1, 3 do
          local n = v[2]:size(d)
          local idx = tide.randint(1, n + 1, { 11 }, { dtype = d == 2 and "int32" or "int64" })
          same_view(function(x, i) return x:index_select(d, i) end, v, { idx }, 0, ("%s %s dim %d"):format(dt, v[1], d))
        end
      end
    end
    local x = tide.randn(6, 4)
    local idx = tide.tensor({ 6, 1, 6, 6, 2, 3, 1, 5 }, { dtype = "int64" })
    same(function(x, i) return x:index_select(1, i:slice(1, 1, 8, 3)) end, { x, idx }, 0, "strided index")
    same(function(x, i) return x:index_select(2, i) end, { x, tide.tensor({}, { dtype = "int64" }) }, 0, "empty index")
    same(function(x, i) return x:index_select(1, i) end, { tide.randn(1023, 5), tide.randint(1, 1024, { 700 }) }, 0, "embedding-sized")
  end)

  it("gather along every dim with indices smaller than x and permuted", function()
    for _, dt in ipairs { "float32", "float64", "int64", "uint8" } do
      for _, v in ipairs(views({ 5, 4, 3 }, dt)) do
        for d = 1, 3 do
          local s = v[2]:size()
          s[d] = 6
          for k = 1, 3 do if k ~= d then s[k] = math.max(1, s[k] - 1) end end
          local hi = v[2]:size(d) + 1
          local idx = tide.randint(1, hi, s, { dtype = d == 3 and "int32" or "int64" })
          same_view(function(x, i) return x:gather(d, i) end, v, { idx }, 0, ("%s %s dim %d"):format(dt, v[1], d))
          local it = tide.randint(1, hi, { s[3], s[2], s[1] }):permute(3, 2, 1)
          same_view(function(x, i) return x:gather(d, i) end, v, { it }, 0, ("%s %s dim %d, permuted index"):format(dt, v[1], d))
        end
      end
    end
    same(function(x, i) return x:gather(2, i) end, { tide.randn(3, 3), tide.zeros(3, 0, { dtype = "int64" }) }, 0, "empty")
  end)
end)

-- -- index_add and scatter_add -----------------------------------------------------------------

describe_cl("opencl index_add and scatter_add #opencl", function()
  it("index_add along every dim with repeated indices, strided base and source (exact)", function()
    for _, dt in ipairs { "float32", "float64", "int64", "int32", "uint8" } do
      for d = 1, 3 do
        for _, v in ipairs(views({ 5, 4, 3 }, dt)) do
          local s = v[2]:size()
          s[d] = 9
          local src = rand({ s[3], s[2], s[1] }, dt):permute(3, 2, 1)
          local idx = tide.randint(1, v[2]:size(d) + 1, { 9 }, { dtype = d == 1 and "int32" or "int64" })
          idx[1] = idx[2]                                                   -- at least one repeat
          same_view(function(x, i, s) return x:index_add(d, i, s) end, v, { idx, src }, 0,
            ("%s %s dim %d"):format(dt, v[1], d))
        end
      end
    end
    -- many duplicates into few rows: float sums in the CPU's order
    local emb, g = tide.zeros(7, 33), tide.randn(1023, 33)
    same(function(e, i, g) return e:index_add(1, i, g) end, { emb, tide.randint(1, 8, { 1023 }), g }, 0, "embedding gradient")
    same(function(b, i, s) return b:index_add(2, i, s) end, { tide.randn(3, 4), tide.randint(1, 5, { 6 }), tide.randn(3, 6, { dtype = "float64" }) }, 0,
      "float64 source into float32")
    same(function(b, i, s) return b:index_add(1, i, s) end, { tide.ones(2, 2), tide.tensor({}, { dtype = "int64" }), tide.zeros(0, 2) }, 0, "empty index")
    local x = tide.zeros(3, 2)
    local dx = x:to("opencl")
    dx:index_add_(1, tide.tensor({ 3, 3 }, { dtype = "int64" }):to("opencl"), tide.tensor({ { 1, 2 }, { 3, 4 } }):to("opencl"))
    assert.are.same({ { 0, 0 }, { 0, 0 }, { 4, 6 } }, dx:cpu():totable())
  end)

  it("scatter_add along every dim with repeated indices and larger, strided sources (exact)", function()
    for _, dt in ipairs { "float32", "float64", "int64", "int32" } do
      for d = 1, 3 do
        for _, v in ipairs(views({ 5, 4, 3 }, dt)) do
          local s = { 4, 3, 2 }
          s[d] = 9
          local idx = tide.randint(1, v[2]:size(d) + 1, s, { dtype = d == 2 and "int32" or "int64" })
          local src = rand({ s[3], s[2], s[1] }, dt):permute(3, 2, 1)
          same_view(function(x, i, s) return x:scatter_add(d, i, s) end, v, { idx, src }, 0, ("%s %s dim %d"):format(dt, v[1], d))
          local big = rand({ s[1] + 1, s[2] + 2, s[3] + 1 }, dt)
          same_view(function(x, i, s) return x:scatter_add(d, i, s) end, v, { idx, big }, 0, ("%s %s dim %d, larger source"):format(dt, v[1], d))
          local it = tide.randint(1, v[2]:size(d) + 1, { s[3], s[2], s[1] }):permute(3, 2, 1)
          same_view(function(x, i, s) return x:scatter_add(d, i, s) end, v, { it, src }, 0, ("%s %s dim %d, permuted index"):format(dt, v[1], d))
        end
      end
    end
    same(function(b, i, s) return b:scatter_add(1, i, s) end, { tide.zeros(7), tide.randint(1, 8, { 1023 }), tide.randn(1023) }, 0, "1-D, many repeats")
  end)
end)

-- -- slice_scatter and cat -----------------------------------------------------------------------

local function slice_scatter(base, src, dim, start, stop, step)
  local at = tensor.attrs()
  at.i[0], at.i[1], at.i[2], at.i[3] = dim, start, stop, step   -- 0-based C attrs
  return tensor.opn(OP.slice_scatter, { base, src }, at)
end

describe_cl("opencl slice_scatter and cat #opencl", function()
  it("slice_scatter replaces (stepped) slices of strided bases, promoting dtypes", function()
    local cases = {
      { { 5, 7, 3 }, 1, 1, 7, 2 }, { { 5, 7, 3 }, 0, 0, 5, 1 }, { { 5, 7, 3 }, 2, 2, 3, 1 }, { { 5, 7, 3 }, 0, -2, 100, 1 },
      { { 5, 7, 3 }, 1, 0, 7, 3 },
    }
    for _, dt in ipairs { "float32", "float64", "int64" } do
      for _, c in ipairs(cases) do
        local shape, dim, start, stop, step = unpack(c)
        local n = shape[dim + 1]
        local a, b = start < 0 and math.max(n + start, 0) or math.min(start, n), math.min(stop, n)
        local len = math.max(0, math.floor((b - a + step - 1) / step))
        local ss = { shape[1], shape[2], shape[3] }
        ss[dim + 1] = len
        local base = rand({ shape[3], shape[2], shape[1] }, dt):transpose(1, 3)
        local src = rand(ss, "float32")
        same(function(x, s) return slice_scatter(x, s, dim, start, stop, step) end, { base, src }, 0,
          ("%s dim %d %d:%d:%d"):format(dt, dim, start, stop, step))
      end
    end
  end)

  it("cat of several tensors along several dims: strided, mixed dtypes, empty parts", function()
    for d = 1, 3 do
      local parts, sizes = {}, { 1, 7, 0, 3, 2 }
      for k, n in ipairs(sizes) do
        local s = { 2, 3, 5 }
        s[d] = n
        local p = tide.randn(s)
        if k == 2 then p = tide.randn(s[3], s[2], s[1]):permute(3, 2, 1) end       -- strided
        if k == 4 then p = tide.randn(s):double() end                                 -- another dtype
        if k == 5 then p = tide.randint(-9, 9, s) end                                 -- int64
        parts[k] = p
      end
      same(function(...) return tide.cat({ ... }, d) end, parts, 0, "dim " .. d)
      same(function(a, b, c) return tide.cat({ a, b, c }, d - 4) end, { parts[1], parts[1], parts[2] }, 0, "dim " .. (d - 4))
    end
    for _, dt in ipairs { "int32", "uint8", "bool" } do
      same(function(a, b) return tide.cat({ a, b }, 2) end, { rand({ 3, 4 }, dt), rand({ 4, 3 }, dt):t() }, 0, dt)
    end
    local many = {}
    for k = 1, 64 do many[k] = tide.randn(1, 2) end
    same(function(...) return tide.cat({ ... }, 1) end, many, 0, "64 tensors")
    same(function(a, b) return tide.cat({ a, b:narrow(2, 2, 3) }, 2) end, { tide.randn(4, 2), tide.randn(4, 5) }, 0, "narrowed part")
  end)
end)

-- -- unfold and fold (im2col / col2im) ------------------------------------------------------------

describe_cl("opencl unfold and fold #opencl", function()
  local params = {
    { 3, {} }, { 2, { stride = 2 } }, { { 3, 2 }, { padding = { 1, 0 }, dilation = { 1, 2 } } },
    { 3, { stride = 2, padding = 1, dilation = { 2, 1 } } }, { 1, { stride = { 1, 3 } } }, { { 2, 3 }, { stride = { 3, 2 }, padding = 2 } },
    { 5, { padding = 2 } },
  }

  it("unfold equals the CPU for conv-like parameters, dtypes and strided inputs", function()
    for _, p in ipairs(params) do
      local k, o = p[1], p[2]
      local msg = ("kernel %s, %s"):format(tostring(type(k) == "table" and shape_str(k) or k), tostring(o.stride or 1))
      same(function(x) return tide.im2col(x, k, o) end, { tide.randn(2, 3, 7, 6) }, 0, "float32 " .. msg)
      same(function(x) return tide.im2col(x, k, o) end, { tide.randn(1, 2, 5, 9, { dtype = "float64" }) }, 0, "float64 " .. msg)
      same(function(x) return tide.im2col(x:permute(1, 4, 2, 3), k, o) end, { tide.randn(2, 7, 3, 6) }, 0, "permuted " .. msg)
    end
    same(function(x) return tide.im2col(x, 2) end, { tide.randint(-9, 9, { 1, 2, 4, 5 }) }, 0, "int64 input (to float32)")
  end)

  it("fold equals the CPU exactly (the same order of additions), also on strided columns", function()
    for _, p in ipairs(params) do
      local k, o = p[1], p[2]
      for _, dt in ipairs { "float32", "float64" } do
        local x = tide.randn(2, 3, 7, 6, { dtype = dt })
        local cols = tide.im2col(x, k, o)
        local c = tide.randn(cols:size(), { dtype = dt })
        same(function(c) return tide.col2im(c, { 7, 6 }, k, o) end, { c }, 0, dt)
        local ct = tide.randn(cols:size(3), cols:size(2), cols:size(1), { dtype = dt }):permute(3, 2, 1)
        same(function(c) return tide.col2im(c, { 7, 6 }, k, o) end, { ct }, 0, dt .. " strided")
      end
    end
  end)

  it("convolves: unfold + matmul on the device", function()
    local x, w = tide.randn(2, 3, 8, 8), tide.randn(4, 3, 3, 3)
    same(function(x, w) return w:view(4, 27):matmul(tide.im2col(x, 3, { padding = 1 })) end, { x, w }, 1e-5, "conv")
  end)
end)

-- -- Out-of-range indices ------------------------------------------------------------------------

describe_cl("opencl index errors #opencl", function()
  local i64 = function(t) return tide.tensor(t, { dtype = "int64" }) end
  local i32 = function(t) return tide.tensor(t, { dtype = "int32" }) end

  -- the device raises the CPU's message, with the first bad index in idx's order
  local function same_error(f, inputs, ...)
    local ok, want = pcall(f, unpack(inputs, 1, #inputs))
    assert(not ok, "the CPU did not raise")
    local dev = H.to_opencl(inputs)
    local got = H.raises(function() return f(unpack(dev, 1, #dev)) end, ...)
    assert.are.equal(want:gsub("^.-:%d+: ", ""), got:gsub("^.-:%d+: ", ""))
  end

  it("names the op, the index, the dim and the size as the CPU does", function()
    local x = tide.randn(3, 4)
    same_error(function(x, i) return x:index_select(2, i) end, { x, i64 { 1, 7, 4, 9 } },
      "index_select: index 7 is out of range for dim 2 with size 4")
    same_error(function(x, i) return x:index_select(1, i) end, { x, i32 { 0 } }, "index_select: index 0 is out of range for dim 1 with size 3")
    same_error(function(x, i) return x:index_select(1, i) end, { x, i64 { 2, -2 } }, "index_select: index -2 is out of range for dim 1 with size 3")
    same_error(function(x, i) return x:index_select(1, i) end, { tide.zeros(3, 0), i64 { 1, 5 } },
      "index_select: index 5 is out of range for dim 1 with size 3")
    same_error(function(x, i) return x:gather(2, i) end, { x, i64 { { 1, 2 }, { 3, 5 }, { 6, 1 } } },
      "gather: index 5 is out of range for dim 2 with size 4")
    same_error(function(x, i) return x:gather(1, i:t()) end, { x, i32 { { 1, 2 }, { 4, 1 }, { 9, 1 } } },
      "gather: index 4 is out of range for dim 1 with size 3")
    same_error(function(x, i, s) return x:index_add(1, i, s) end, { x, i64 { 1, 4, 1 }, tide.ones(3, 4) },
      "index_add: index 4 is out of range for dim 1 with size 3")
    same_error(function(x, i, s) return x:index_add(2, i, s) end, { tide.zeros(0, 2), i64 { 3 }, tide.ones(0, 1) },
      "index_add: index 3 is out of range for dim 2 with size 2")
    same_error(function(x, i, s) return x:scatter_add(2, i, s) end, { x, i64 { { 1, 1 }, { 2, 0 } }, tide.ones(2, 2) },
      "scatter_add: index 0 is out of range for dim 2 with size 4")
    same_error(function(x, i, s) return x:scatter_add(1, i, s) end, { x, i32 { { 1, 2, 3, 1 }, { 3, 2, 1, 8 } }, tide.ones(2, 4) },
      "scatter_add: index 8 is out of range for dim 1 with size 3")
  end)

  it("leaves the destination of an in-place op untouched", function()
    local x = tide.zeros(3, 2):to("opencl")
    H.raises(function() x:index_add_(1, i64({ 1, 4 }):to("opencl"), tide.ones(2, 2):to("opencl")) end,
      "index_add: index 4 is out of range for dim 1 with size 3")
    H.raises(function() x:scatter_add_(2, i64({ { 1, 9 } }):to("opencl"), tide.ones(1, 2):to("opencl")) end,
      "scatter_add: index 9 is out of range for dim 2 with size 2")
    assert.are.same({ { 0, 0 }, { 0, 0 }, { 0, 0 } }, x:cpu():totable())
    -- and a good index afterwards works (the error slot is reset)
    local r = x:index_select(1, i64({ 3, 1 }):to("opencl"))
    assert.are.same({ { 0, 0 }, { 0, 0 } }, r:cpu():totable())
  end)
end)
