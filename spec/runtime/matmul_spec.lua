-- matmul and its Lua forms (mm, bmm, dot, mv, outer, addmm): torch.matmul
-- semantics against literal values (PyTorch, computed offline) and a naive
-- reference over :totable(); BLAS layouts (transposed, sliced, broadcast
-- operands), integer dtypes, errors, and gradients.
local tide = require "tide"
local H = require "helper"

-- -- Reference: torch.matmul on nested tables with explicit loops ---------------------------

local function ref_matmul(a, b)
  local sa, sb = a:size(), b:size()
  local A, B = a:double():totable(), b:double():totable()
  local a1, b1 = #sa == 1, #sb == 1
  if a1 then A = { A }; sa = { 1, sa[1] } end
  if b1 then
    local t = {}
    for k = 1, #B do t[k] = { B[k] } end
    B, sb = t, { sb[1], 1 }
  end
  local M, K, N = sa[#sa - 1], sa[#sa], sb[#sb]
  local ba, bb = {}, {}
  for i = 1, #sa - 2 do ba[i] = sa[i] end
  for i = 1, #sb - 2 do bb[i] = sb[i] end
  local n = math.max(#ba, #bb)
  local bs = {}
  for i = 1, n do
    local x, y = ba[i - (n - #ba)] or 1, bb[i - (n - #bb)] or 1
    assert(x == y or x == 1 or y == 1)
    bs[i] = x == 1 and y or x
  end
  local function pick(T, shape, idx)
    for d = 1, #shape do T = T[shape[d] == 1 and 1 or idx[d + n - #shape]] end
    return T
  end
  local function product(Am, Bm)
    local C = {}
    for i = 1, M do
      C[i] = {}
      for j = 1, N do
        local s = 0
        for k = 1, K do s = s + Am[i][k] * Bm[k][j] end
        C[i][j] = s
      end
    end
    if b1 then for i = 1, M do C[i] = C[i][1] end end
    if a1 then C = C[1] end
    return C
  end
  local idx = {}
  local function rec(d)
    if d > n then return product(pick(A, ba, idx), pick(B, bb, idx)) end
    local r = {}
    for i = 1, bs[d] do idx[d] = i; r[i] = rec(d + 1) end
    return r
  end
  return rec(1)
end

local function tol_for(x, K) return x.dtype.name == "float32" and 1e-5 * (K + 8) or 1e-9 end

local function check(a, b, msg)
  local K = a:size(a:dim())
  local got = a:matmul(b)
  H.close(got, ref_matmul(a, b), tol_for(got, K), msg)
  return got
end

-- -- Forward: literal values ---------------------------------------------------------------

describe("matmul forward", function()
  local a = tide.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "float64" })
  local b = tide.tensor({ { 0.5, -1 }, { 2, 0.25 }, { -3, 1 } }, { dtype = "float64" })

  it("multiplies 2-D matrices (literal values)", function()
    local c = a:matmul(b)
    assert.are.same({ 2, 2 }, c:size())
    H.close(c, { { -4.5, 2.5 }, { -6.0, 3.25 } }, 1e-12)
    H.close(tide.matmul(a, b), { { -4.5, 2.5 }, { -6.0, 3.25 } }, 1e-12)
  end)

  it("1-D . 1-D is a 0-dim dot product", function()
    local d = tide.tensor { 1, 2, 3 }:double():matmul(tide.tensor { 4, 5, 6 }:double())
    assert.are.equal(0, d:dim())
    assert.are.equal(32, d:item())
  end)

  it("promotes a 1-D operand and removes its dim", function()
    local v = tide.tensor({ 1, -1, 2 }, { dtype = "float64" })
    local mv = a:matmul(v)
    assert.are.same({ 2 }, mv:size())
    H.close(mv, { 5, 11 }, 1e-12)
    local vm = tide.tensor({ 1, -1 }, { dtype = "float64" }):matmul(a)
    assert.are.same({ 3 }, vm:size())
    H.close(vm, { -3, -3, -3 }, 1e-12)
    -- batched (2,4,3) @ (3) and (3) @ (2,3,4)
    local v3 = tide.arange(1, 4, { dtype = "float64" })
    H.close(tide.arange(1, 25, { dtype = "float64" }):view(2, 4, 3):matmul(v3),
      { { 14, 32, 50, 68 }, { 86, 104, 122, 140 } }, 1e-12)
    H.close(v3:matmul(tide.arange(1, 25, { dtype = "float64" }):view(2, 3, 4)),
      { { 38, 44, 50, 56 }, { 110, 116, 122, 128 } }, 1e-12)
  end)

  it("broadcasts batch dims (literal values)", function()
    local A = tide.arange(1, 13, { dtype = "float64" }):view(2, 1, 2, 3)
    local B = (tide.arange(1, 13, { dtype = "float64" }) - 6):view(2, 3, 2)
    local C = A:matmul(B)
    assert.are.same({ 2, 2, 2, 2 }, C:size())
    H.close(C, {
      { { { -14, -8 }, { -41, -26 } }, { { 22, 28 }, { 49, 64 } } },
      { { { -68, -44 }, { -95, -62 } }, { { 76, 100 }, { 103, 136 } } } }, 1e-12)
  end)

  it("computes integer products exactly in the input dtype", function()
    for _, dt in ipairs { "int64", "int32", "uint8" } do
      local x = tide.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = dt })
      local y = tide.tensor({ { 5, 6 }, { 7, 8 } }, { dtype = dt })
      local z = x:matmul(y)
      assert.are.equal(dt, z.dtype.name)
      assert.are.same({ { 19, 22 }, { 43, 50 } }, z:totable())
    end
    local big = tide.tensor({ { 3000000000, 1 } }, { dtype = "int64" })
    assert.are.same({ { 9000000002 } }, big:matmul(tide.tensor({ { 3 }, { 2 } }, { dtype = "int64" })):totable())
    assert.are.same({ 4 }, tide.tensor({ 1, 2 }, { dtype = "int32" }):matmul(tide.tensor({ { 2 }, { 1 } }, { dtype = "int32" })):totable())
  end)

  it("promotes mixed dtypes", function()
    local i = tide.tensor { { 1, 2 }, { 3, 4 } }                    -- int64
    local f = tide.tensor { { 0.5, 0 }, { 0, 0.25 } }               -- float32
    local r = i:matmul(f)
    assert.are.equal("float32", r.dtype.name)
    H.close(r, { { 0.5, 0.5 }, { 1.5, 1.0 } }, 0)
    assert.are.equal("float64", f:matmul(i:double()).dtype.name)
  end)

  it("handles zero-size dims (K = 0 gives zeros)", function()
    local z = tide.randn(3, 0):matmul(tide.randn(0, 4))
    assert.are.same({ 3, 4 }, z:size())
    H.close(z, tide.zeros(3, 4), 0)
    assert.are.same({ 0, 4 }, tide.randn(0, 5):matmul(tide.randn(5, 4)):size())
    assert.are.same({ 3, 0 }, tide.randn(3, 5):matmul(tide.randn(5, 0)):size())
    assert.are.same({ 2, 0, 4 }, tide.randn(2, 0, 5):matmul(tide.randn(5, 4)):size())
    local d = tide.randn(0):double():matmul(tide.randn(0):double())
    assert.are.equal(0, d:item())
    H.close(tide.ones(2, 0, { dtype = "int64" }):matmul(tide.ones(0, 3, { dtype = "int64" })), tide.zeros(2, 3), 0)
  end)
end)

-- -- Forward: random inputs against the reference ----------------------------------------------

describe("matmul against a naive reference", function()
  it("covers 2-D shapes with odd sizes (1, 7, 1023) in float32 and float64", function()
    for _, dt in ipairs { "float32", "float64" } do
      for _, s in ipairs { { 1, 1, 1 }, { 1, 7, 1 }, { 7, 1, 7 }, { 7, 7, 7 }, { 1023, 7, 3 }, { 3, 1023, 7 },
                           { 7, 3, 1023 }, { 1, 1023, 7 }, { 7, 1023, 1 }, { 1023, 1, 1 } } do
        local a = tide.randn(s[1], s[2], { dtype = dt })
        local b = tide.randn(s[2], s[3], { dtype = dt })
        check(a, b, dt .. " " .. table.concat(s, "x"))
      end
    end
  end)

  it("covers 1-D operands with odd sizes", function()
    for _, dt in ipairs { "float32", "float64" } do
      for _, K in ipairs { 1, 7, 1023 } do
        local v, w = tide.randn(K, { dtype = dt }), tide.randn(K, { dtype = dt })
        local d = check(v, w)
        assert.are.equal(0, d:dim())
        check(tide.randn(5, K, { dtype = dt }), v)
        check(v, tide.randn(K, 6, { dtype = dt }))
        check(tide.randn(2, 3, K, { dtype = dt }), v)
        check(v, tide.randn(2, K, 3, { dtype = dt }))
      end
    end
  end)

  it("passes transposed operands without changing the result", function()
    for _, dt in ipairs { "float32", "float64" } do
      for _, s in ipairs { { 7, 5, 3 }, { 1, 7, 5 }, { 5, 7, 1 }, { 7, 1, 7 }, { 33, 17, 9 } } do
        local M, K, N = s[1], s[2], s[3]
        local at = tide.randn(K, M, { dtype = dt }):t()            -- (M,K) with strides (1, M)
        local bt = tide.randn(N, K, { dtype = dt }):t()            -- (K,N) with strides (1, K)
        local a, b = at:contiguous(), bt:contiguous()
        assert.is_false(M > 1 and K > 1 and at:is_contiguous())
        local want = ref_matmul(a, b)
        local tol = tol_for(a, K)
        H.close(at:matmul(b), want, tol, "A^T")
        H.close(a:matmul(bt), want, tol, "B^T")
        H.close(at:matmul(bt), want, tol, "A^T B^T")
        -- the same transposed operand as a vector side
        H.close(at:matmul(bt:select(2, 1)), ref_matmul(a, b:select(2, 1)), tol, "A^T v")
        H.close(at:select(1, 1):matmul(bt), ref_matmul(a:select(1, 1), b), tol, "v B^T")
      end
    end
  end)

  it("splits big products over the thread pool (row and column blocks, a 1-wide last block) with results independent of the thread count", function()
    local nt = tide.get_num_threads()
    for _, dt in ipairs { "float32", "float64" } do
      for _, s in ipairs { { 20, 4096, 33 }, { 33, 4096, 20 }, { 1, 40000, 65 }, { 65, 40000, 1 } } do
        local M, K, N = s[1], s[2], s[3]
        local a, b = tide.randn(M, K, { dtype = dt }), tide.randn(K, N, { dtype = dt })
        local at, bt = a:t():contiguous():t(), b:t():contiguous():t()
        local want = ref_matmul(a, b)
        local tol = tol_for(a, K)
        local name = dt .. " " .. table.concat(s, "x")
        tide.set_num_threads(2)
        local got = { a:matmul(b), at:matmul(b), a:matmul(bt), at:matmul(bt) }
        tide.set_num_threads(1)
        local one = { a:matmul(b), at:matmul(b), a:matmul(bt), at:matmul(bt) }
        tide.set_num_threads(nt)
        for i = 1, 4 do
          H.close(got[i], want, tol, name .. " layout " .. i)
          assert.are.equal(0, (got[i] - one[i]):abs():max():item(), name .. " layout " .. i .. ": 2 threads vs 1")
        end
      end
    end
  end)

  it("copies operands that fit no BLAS layout (sliced, stepped, broadcast)", function()
    for _, dt in ipairs { "float32", "float64" } do
      local big = tide.randn(9, 14, { dtype = dt })
      local a = big:slice(2, 1, 14, 2)                             -- (9,7), column stride 2
      local b = tide.randn(7, 10, 3, { dtype = dt }):select(3, 2)  -- (7,10), strides (30, 3)
      check(a, b, "strided")
      check(a, b:t():contiguous():t())
      local v = tide.randn(21, { dtype = dt }):slice(1, 1, 21, 3)  -- (7), stride 3
      check(a, v, "stepped vector")
      check(v, b, "stepped vector left")
      check(v, v, "stepped dot")
      local e = tide.randn(7, 1, { dtype = dt }):expand(7, 5)      -- column stride 0
      check(a, e, "expanded")
      local r = tide.randn(1, 7, { dtype = dt }):expand(4, 7)      -- row stride 0
      check(r, b, "expanded rows")
      check(a, tide.randn(1, { dtype = dt }):expand(7), "expanded vector")
    end
  end)

  it("broadcasts batch dims without copying, including permuted batches", function()
    for _, dt in ipairs { "float32", "float64" } do
      local cases = {
        { { 2, 3, 4, 5 }, { 3, 5, 6 } }, { { 2, 1, 4, 5 }, { 3, 5, 6 } }, { { 4, 5 }, { 2, 3, 5, 6 } },
        { { 2, 3, 4, 5 }, { 5, 6 } }, { { 1, 4, 5 }, { 7, 5, 1 } }, { { 7, 1, 5 }, { 5, 3 } },
        { { 3, 1, 1 }, { 1, 1, 4 } }, { { 2, 1, 3, 7, 1 }, { 1, 4, 1, 1, 7 } },
      }
      for _, cs in ipairs(cases) do
        check(tide.randn(cs[1], { dtype = dt }), tide.randn(cs[2], { dtype = dt }),
          dt .. " " .. table.concat(cs[1], "x") .. " @ " .. table.concat(cs[2], "x"))
      end
      -- batch-of-rows folding with a non-contiguous batch, and batches as expanded views
      local x = tide.randn(4, 3, 5, { dtype = dt }):transpose(1, 2)            -- (3,4,5)
      check(x, tide.randn(5, 2, { dtype = dt }), "permuted batch")
      local w = tide.randn(5, 6, { dtype = dt }):expand(3, 5, 6)               -- batch stride 0
      check(tide.randn(3, 4, 5, { dtype = dt }), w, "expanded batch")
      check(tide.randn(1, 4, 5, { dtype = dt }):expand(3, 4, 5), w, "both expanded")
      check(tide.randn(3, 5, 4, { dtype = dt }):transpose(2, 3), tide.randn(3, 6, 5, { dtype = dt }):transpose(2, 3), "batched A^T B^T")
    end
  end)

  it("handles int64 and int32 with odd sizes", function()
    for _, dt in ipairs { "int64", "int32" } do
      for _, s in ipairs { { 1, 1, 1 }, { 7, 7, 7 }, { 1023, 3, 2 }, { 2, 1023, 3 } } do
        local a = tide.randint(-50, 50, { s[1], s[2] }, { dtype = dt })
        local b = tide.randint(-50, 50, { s[2], s[3] }, { dtype = dt })
        local c = a:matmul(b)
        assert.are.equal(dt, c.dtype.name)
        assert.are.same(ref_matmul(a, b), c:double():totable())
        assert.are.same(ref_matmul(a:t(), a), a:t():matmul(a):double():totable())
      end
      local a, b = tide.randint(-9, 9, { 2, 1, 3, 4 }, { dtype = dt }), tide.randint(-9, 9, { 3, 4, 5 }, { dtype = dt })
      assert.are.same(ref_matmul(a, b), a:matmul(b):double():totable())
      local v = tide.randint(-9, 9, { 4 }, { dtype = dt })
      assert.are.same(ref_matmul(a, v), a:matmul(v):double():totable())
      assert.are.equal(ref_matmul(v, v), v:matmul(v):item())
    end
  end)
end)

-- -- The Lua forms ---------------------------------------------------------------------------------

describe("mm, bmm, dot, mv, outer, addmm", function()
  local a = tide.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }, { dtype = "float64" })
  local b = tide.tensor({ { 0.5, -1 }, { 2, 0.25 }, { -3, 1 } }, { dtype = "float64" })

  it("compute literal values", function()
    H.close(a:mm(b), { { -4.5, 2.5 }, { -6.0, 3.25 } }, 1e-12)
    H.close(tide.mm(a, b), { { -4.5, 2.5 }, { -6.0, 3.25 } }, 1e-12)
    local A = tide.arange(1, 13, { dtype = "float64" }):view(2, 2, 3)
    local B = (tide.arange(1, 13, { dtype = "float64" }) - 6):view(2, 3, 2)
    H.close(A:bmm(B), { { { -14, -8 }, { -41, -26 } }, { { 76, 100 }, { 103, 136 } } }, 1e-12)
    assert.are.equal(32, tide.tensor { 1, 2, 3 }:dot(tide.tensor { 4, 5, 6 }):item())
    H.close(a:mv(tide.tensor({ 1, -1, 2 }, { dtype = "float64" })), { 5, 11 }, 1e-12)
    H.close(tide.tensor { 1, 2 }:outer(tide.tensor { 3, 4, 5 }), { { 3, 4, 5 }, { 6, 8, 10 } }, 0)
    local c = tide.tensor({ { 1, 2 }, { 3, 4 } }, { dtype = "float64" })
    H.close(c:addmm(a, b), { { -3.5, 4.5 }, { -3.0, 7.25 } }, 1e-12)
    H.close(c:addmm(a, b, { beta = 0.5, alpha = 2 }), { { -8.5, 6.0 }, { -10.5, 8.5 } }, 1e-12)
    H.close(c:addmm(a, b, { beta = 0 }), { { -4.5, 2.5 }, { -6.0, 3.25 } }, 1e-12)
  end)

  it("check their argument ranks", function()
    H.raises(function() return tide.randn(2, 3, 4):mm(tide.randn(4, 2)) end, "mm: expected 2-D tensors, got [2,3,4] and [4,2]")
    H.raises(function() return tide.randn(2, 3, 4):bmm(tide.randn(3, 4, 2)) end,
      "bmm: expected 3-D tensors with the same batch size, got [2,3,4] and [3,4,2]")
    H.raises(function() return tide.randn(2, 3):dot(tide.randn(3)) end, "dot: expected 1-D tensors, got [2,3] and [3]")
    H.raises(function() return tide.randn(3):mv(tide.randn(3)) end, "mv: expected a 2-D and a 1-D tensor, got [3] and [3]")
    H.raises(function() return tide.randn(3):outer(tide.randn(3, 1)) end, "outer: expected 1-D tensors")
    H.raises(function() return tide.randn(3):dot(tide.randn(4)) end, "matmul: shape mismatch [3] @ [4]")
    H.raises(function() return tide.randn(3, 4):mm(nil) end, "bad argument #2 to 'mm' (Tensor expected, got nil)")
  end)
end)

-- -- Errors -------------------------------------------------------------------------------------------

describe("matmul errors", function()
  it("names the shapes on an inner-dim mismatch", function()
    H.raises(function() return tide.randn(3, 4):matmul(tide.randn(5, 6)) end, "matmul: shape mismatch [3,4] @ [5,6]")
    H.raises(function() return tide.randn(3, 4):matmul(tide.randn(5)) end, "matmul: shape mismatch [3,4] @ [5]")
    H.raises(function() return tide.randn(4):matmul(tide.randn(5, 6)) end, "matmul: shape mismatch [4] @ [5,6]")
    H.raises(function() return tide.randn(2, 3, 4):matmul(tide.randn(2, 5, 6)) end, "matmul: shape mismatch [2,3,4] @ [2,5,6]")
  end)

  it("rejects batch dims that cannot broadcast, 0-dim operands and bool", function()
    H.raises(function() return tide.randn(2, 3, 4):matmul(tide.randn(3, 4, 5)) end,
      "matmul: batch dims of [2,3,4] @ [3,4,5] cannot be broadcast")
    H.raises(function() return tide.tensor(2):matmul(tide.randn(3)) end, "matmul: both arguments need at least 1 dim, got [] @ [3]")
    H.raises(function() return tide.ones(2, 2, { dtype = "bool" }):matmul(tide.ones(2, 2, { dtype = "bool" })) end,
      "matmul: bool tensors are not supported")
    H.raises(function() return tide.randn(2, 2):matmul(3) end, "bad argument #2 to 'matmul'")
  end)
end)

-- -- Gradients ----------------------------------------------------------------------------------------

describe("matmul gradients", function()
  it("2-D @ 2-D, odd sizes and transposed operands", function()
    H.gradcheck(function(x, y) return x:matmul(y) end, { H.rand64 { 3, 4 }, H.rand64 { 4, 5 } })
    H.gradcheck(function(x, y) return x:matmul(y) end, { H.rand64 { 1, 7 }, H.rand64 { 7, 1 } })
    H.gradcheck(function(x, y) return x:t():matmul(y:t()) end, { H.rand64 { 7, 3 }, H.rand64 { 2, 7 } })
    H.gradcheck(function(x) return x:matmul(x) end, { H.rand64 { 4, 4 } })
  end)

  it("1-D cases", function()
    H.gradcheck(function(x, y) return x:matmul(y) end, { H.rand64 { 7 }, H.rand64 { 7 } })
    H.gradcheck(function(x, y) return x:matmul(y) end, { H.rand64 { 3, 5 }, H.rand64 { 5 } })
    H.gradcheck(function(x, y) return x:matmul(y) end, { H.rand64 { 5 }, H.rand64 { 5, 3 } })
    H.gradcheck(function(x, y) return x:matmul(y) end, { H.rand64 { 2, 3, 5 }, H.rand64 { 5 } })
    H.gradcheck(function(x, y) return x:matmul(y) end, { H.rand64 { 5 }, H.rand64 { 2, 5, 3 } })
  end)

  it("batched with broadcast batch dims", function()
    H.gradcheck(function(x, y) return x:matmul(y) end, { H.rand64 { 2, 3, 4 }, H.rand64 { 2, 4, 3 } })
    H.gradcheck(function(x, y) return x:matmul(y) end, { H.rand64 { 2, 1, 3, 4 }, H.rand64 { 3, 4, 2 } })
    H.gradcheck(function(x, y) return x:matmul(y) end, { H.rand64 { 2, 3, 4 }, H.rand64 { 4, 2 } })
    H.gradcheck(function(x, y) return x:matmul(y) end, { H.rand64 { 3, 4 }, H.rand64 { 2, 4, 2 } })
  end)

  it("mm, bmm, dot, mv, outer, addmm", function()
    H.gradcheck(function(x, y) return x:mm(y) end, { H.rand64 { 3, 7 }, H.rand64 { 7, 2 } })
    H.gradcheck(function(x, y) return x:bmm(y) end, { H.rand64 { 2, 3, 4 }, H.rand64 { 2, 4, 5 } })
    H.gradcheck(function(x, y) return x:dot(y) end, { H.rand64 { 7 }, H.rand64 { 7 } })
    H.gradcheck(function(x, y) return x:mv(y) end, { H.rand64 { 3, 7 }, H.rand64 { 7 } })
    H.gradcheck(function(x, y) return x:outer(y) end, { H.rand64 { 3 }, H.rand64 { 4 } })
    H.gradcheck(function(c, x, y) return c:addmm(x, y, { beta = 0.5, alpha = 2 }) end,
      { H.rand64 { 3, 2 }, H.rand64 { 3, 4 }, H.rand64 { 4, 2 } })
    H.gradcheck(function(c, x, y) return c:addmm(x, y) end, { H.rand64 { 2 }, H.rand64 { 3, 4 }, H.rand64 { 4, 2 } })
  end)
end)

describe("tide.config", function()
  local function child(env)
    local cmd = ("%s luajit -e %q 2>&1"):format(env, ("package.path = %q; local c = require('tide').config(); "
      .. "io.write(c.num_threads, ' ', c.blas_core, ' ', c.jit_isa)"):format(package.path))
    local p = assert(io.popen(cmd))
    local out = p:read("*a")
    p:close()
    local n, core, isa = out:match("^(%d+) (%S+) (%S+)$")
    assert(n, "child failed: " .. out)
    return tonumber(n), core, isa
  end
  local f = assert(io.open("/proc/cpuinfo"))
  local flags = f:read("*a"):match("\nflags%s*:([^\n]*)") .. " "
  f:close()
  local avx512 = true
  for _, x in ipairs { "avx512f", "avx512bw", "avx512dq", "avx512vl" } do
    avx512 = avx512 and flags:find(" " .. x .. " ", 1, true) ~= nil
  end

  it("reports the thread count, OpenBLAS's kernels and the ISA of compiled kernels", function()
    local c = tide.config()
    assert.equal(tide.get_num_threads(), c.num_threads)
    assert.equal(avx512 and "x86-64-v4" or "x86-64-v3", c.jit_isa)
    assert.is_true(#c.blas_core > 0)
    local n, _, isa = child("TIDE_NUM_THREADS=1 TIDE_CG_ISA=v3")
    assert.equal(1, n)
    assert.equal("x86-64-v3", isa)
  end)

  it("asks OpenBLAS for its AVX-512 kernels on an AVX-512 CPU, unless OPENBLAS_CORETYPE chooses", function()
    local _, core = child("env -u OPENBLAS_CORETYPE")
    if avx512 then assert.equal("SkylakeX", core) else assert.are_not.equal("SkylakeX", core) end
    _, core = child("OPENBLAS_CORETYPE=Haswell")
    assert.equal("Haswell", core)
  end)
end)
