-- float32 matmul with a short A on tide's register tile (runtime/rt_mmtile.c,
-- x86-64-v4): against the float64 product (OpenBLAS's dgemm) over shapes around
-- its thresholds, layouts (transposed, strided, offset views, B packed into the
-- cache or read in place), the same bits on 1 and 2 threads, a weight written in
-- place between products (the packed-B cache must never serve stale panels),
-- and an LSTM whose recurrent products run on the tile against PyTorch's values.
local tide = require "tide"
local H = require "helper"

local v4 = tide.config().eager_isa == "x86-64-v4"

-- the product in float32 (twice: the second call finds B's panels cached) and
-- its float64 reference; float32 tolerance scaled by K and the values' size
local function check(a, b, what)
  local want = a:double():matmul(b:double())
  local tol = 2e-6 * math.sqrt(a:size(-1)) * math.max(1, want:abs():max():item())
  for call = 1, 2 do H.close(a:matmul(b), want, tol, ("%s call %d"):format(what, call)) end
end

describe("the small-M matmul tile", function()
  it("equals the float64 product over shapes around its thresholds", function()
    tide.manual_seed(3)
    local before = tide.matmul_stats().tile
    for _, M in ipairs { 1, 2, 3, 4, 7, 8, 9, 31, 33, 63, 64, 65, 70 } do
      for _, NK in ipairs { { 32, 1 }, { 47, 9 }, { 100, 37 }, { 257, 33 }, { 300, 64 }, { 31, 20 } } do
        local N, K = NK[1], NK[2]
        local a = tide.randn(M, K)
        check(a, tide.randn(N, K):t(), ("A %dx%d @ B^T %dx%d"):format(M, K, K, N))
        check(a, tide.randn(K, N), ("A %dx%d @ B %dx%d"):format(M, K, K, N))
      end
    end
    if v4 then assert.is_true(tide.matmul_stats().tile - before >= 40, "products ran on the tile") end
  end)

  it("takes transposed and strided A, strided and offset B, and folded batches", function()
    tide.manual_seed(4)
    local before = tide.matmul_stats().tile
    local at = tide.randn(77, 24)                       -- A transposed: 24 x 77
    local big = tide.randn(130, 500)
    check(at:t(), tide.randn(300, 77):t(), "A^T @ B^T")
    check(at:t(), big:narrow(1, 3, 77):narrow(2, 5, 300), "A^T @ B rows of stride 500 at an offset")
    check(tide.randn(20, 2, 90):select(2, 2), big:narrow(1, 11, 100):narrow(2, 2, 90):t(), "strided A @ offset B^T")
    check(tide.randn(16, 140):narrow(2, 3, 129), tide.randn(129, 1200):narrow(2, 7, 1100), "in place, 1100 columns")
    check(tide.randn(3, 10, 64), tide.randn(200, 64):t(), "a batch of 3 folded into 30 rows")
    check(tide.randn(5, 64), tide.randn(64, 64, 256)[1] * 1, "K 64 N 256")
    check(tide.randn(6, 40), tide.randn(80, 40)[{ { 1, 80, 2 } }]:t(), "B^T rows of stride 80")
    if v4 then assert.is_true(tide.matmul_stats().tile - before >= 6, "products ran on the tile") end
  end)

  it("gives the same bits on 1 and 2 threads", function()
    local prog = [[
      local tide = require "tide"
      local ffi = require "ffi"
      tide.manual_seed(9)
      local out = {}
      for _, s in ipairs { { 32, 1024, 256 }, { 5, 100, 37 }, { 64, 600, 300 }, { 17, 256, 512 } } do
        local a = tide.randn(s[1], s[3])
        local w, b = tide.randn(s[2], s[3]), tide.randn(s[3], s[2])
        for _ = 1, 2 do
          for _, y in ipairs { a:matmul(w:t()), a:matmul(b) } do
            local p = ffi.cast("const uint32_t *", require("tide.tensor").fields(y).ptr)
            local h = 0
            for i = 0, y:numel() - 1 do h = (h * 31 + p[i]) % 4294967291 end
            out[#out + 1] = ("%d"):format(h)
          end
        end
      end
      print(table.concat(out, " "), tide.matmul_stats().tile)
    ]]
    local one, two = H.on_threads(prog)
    assert.equal(one, two)
    if v4 then assert.is_true(tonumber(one:match("(%d+)%s*$")) >= 8, one) end
  end)

  it("never uses stale panels of a weight written in place", function()
    tide.manual_seed(5)
    local w = tide.randn(512, 256)
    local x = tide.randn(32, 256)
    local packs = tide.matmul_stats().packs
    for step = 1, 3 do
      check(x, w:t(), "step " .. step)                  -- the second call of each step packs
      w:add_(1)                                         -- an in-place write (an optimizer step)
      check(x, w:t(), "after add_ " .. step)
      w:narrow(1, 100, 1):mul_(-3)                      -- a write through a view of one row
      check(x, w:t(), "after a view's mul_ " .. step)
    end
    local wt = w:t():contiguous()                      -- B with contiguous rows: cached too
    check(x, wt, "rows")
    wt:narrow(2, 7, 1):zero_()
    check(x, wt, "rows after zero_")
    tide.no_grad(function() wt:copy_(tide.randn(256, 512)) end)
    check(x, wt, "rows after copy_")
    if v4 then assert.is_true(tide.matmul_stats().packs - packs >= 9, "panels were packed again") end
    tide.empty_cache()                                  -- frees the packed panels
    check(x, w:t(), "after empty_cache")
  end)

  it("keeps each weight's panels apart when more weights than cache slots take turns", function()
    tide.manual_seed(6)
    local x, ws = tide.randn(16, 64), {}
    for i = 1, 40 do ws[i] = tide.randn(96, 64) end     -- more weights than cache slots
    for _ = 1, 2 do for i = 1, 40 do check(x, ws[i]:t(), "weight " .. i) end end
  end)

  it("runs an LSTM's recurrent products and matches PyTorch's values", function()
    -- nn.LSTM(16, 128), seq 5, batch 16: h (16, 128) @ W_hh^T (128, 512) and dG (16, 512) @ W_hh
    -- on the tile; weights and input from a formula (spec/ref/lstm_tile_reference.py)
    local ref = dofile("spec/ref/lstm_tile_reference.lua")
    local function fill(shape, a, b, scale)
      local n, v = 1, {}
      for _, s in ipairs(shape) do n = n * s end
      for k = 1, n do v[k] = scale * math.sin(a * k + b) end
      return tide.tensor(v):view(shape)
    end
    local lstm = tide.nn.LSTM(16, 128)
    local names = { "bias_hh_l0", "bias_ih_l0", "weight_hh_l0", "weight_ih_l0" }   -- PyTorch's sorted order
    tide.no_grad(function()
      for j, name in ipairs(names) do
        local p = lstm[name]
        p:copy_(fill(p:size(), 0.37 + 0.01 * (j - 1), 0.5 * (j - 1), 0.08))
      end
    end)
    local x = fill({ 5, 16, 16 }, 0.713, 0.2, 1.0):requires_grad_()
    local before = tide.matmul_stats().tile
    local o, hc = lstm(x)
    local loss = (o * fill(o:size(), 0.291, 0.1, 1.0)):sum()
    loss:backward()
    if v4 then assert.is_true(tide.matmul_stats().tile - before >= 6, "recurrent products ran on the tile") end
    local function agree(t, r, what)
      local f = t:detach():reshape(-1)
      local scale = math.max(1, f:abs():max():item())
      assert(math.abs(f:double():sum():item() - r.sum) <= 1e-4 * scale * math.sqrt(f:numel()), what .. " sum")
      for i, v in ipairs(r.at) do
        local got = f[(i - 1) * 97 + 1]:item()
        assert(math.abs(got - v) <= 2e-5 * scale, ("%s value %d: %.9g vs PyTorch's %.9g"):format(what, i, got, v))
      end
    end
    agree(o, ref.output, "output"); agree(hc[2], ref.c_n, "c_n"); agree(x.grad, ref.dx, "dx")
    for _, name in ipairs { "weight_hh_l0", "weight_ih_l0", "bias_hh_l0" } do
      agree(lstm[name].grad, ref["d_" .. name], "d" .. name)
    end
  end)
end)
