-- float32 batched matmul on the 64-column register tile (runtime/rt_bmmtile.c,
-- x86-64-v4): the same cases run in child processes with the tile forced for
-- every product (TIDE_BMM_TILE=1) and with OpenBLAS only (TIDE_MM_BLAS=1), each
-- checked against the float64 product (dgemm, which the tile never runs) and
-- against each other; edge shapes around the tile's 6 rows, 16/64 columns and
-- 128-step K chunks, transposed, strided and broadcast (stride 0) operands,
-- broadcast batch dims, empty dims, NaN and inf; the same bits on 1 and 2
-- threads; the attention shapes routed to the tile by default; einsum's
-- gradient through a broadcast operand.
local tide = require "tide"
local H = require "helper"

local v4 = tide.config().eager_isa == "x86-64-v4"

-- prints "name <projection> <bit hash>" per case and "bmm <calls>"; errors on a
-- value off the float64 product (NaN/inf where and only where it has them)
local cases = [[
local tide = require "tide"
local ffi = require "ffi"
local fields = require("tide.tensor").fields
tide.manual_seed(21)
local out = {}
local function hash(y)
  local p, h = ffi.cast("const uint32_t *", fields(y:contiguous()).ptr), 0
  for i = 0, y:numel() - 1 do h = (h * 31 + p[i]) % 4294967291 end
  return h
end
local function run(name, a, b)
  local y = a:matmul(b)
  local want = a:double():matmul(b:double())
  assert(y.dtype == tide.float32)
  assert(table.concat(y:size(), ",") == table.concat(want:size(), ","), name .. ": shape")
  local n = y:numel()
  if n > 0 then
    local yd = y:double()
    local same_nan = yd:isnan():eq(want:isnan()):all():item()
    assert(same_nan, name .. ": NaN where float64 has none, or none where it has")
    local fin = want:isfinite()
    local inf_ok = yd:isinf():eq(want:isinf()):all():item() and
      tide.where(want:isinf(), yd, 0):eq(tide.where(want:isinf(), want, 0)):all():item()
    assert(inf_ok, name .. ": inf differs from float64's")
    local scale = math.max(1, tide.where(fin, want, 0):abs():max():item())
    local d = tide.where(fin, (yd - want):abs(), 0):max():item()
    local tol = 2e-6 * math.sqrt(math.max(1, a:size(-1))) * scale
    assert(d <= tol, ("%s: max diff %g > %g"):format(name, d, tol))
  end
  tide.manual_seed(99)
  local w = tide.randn(y:size(), { dtype = tide.float64 })
  local proj = n > 0 and tide.where(want:isfinite(), y:double() * w, 0):sum():item() or 0
  out[#out + 1] = ("%s %.17g %d"):format(name, proj, hash(y))
end
-- operand layouts: A (..., M, K) rows, or stored transposed; B (..., K, N) likewise
local function A(pre, M, K, t)
  local s = {}
  for i, v in ipairs(pre) do s[i] = v end
  if t then s[#s + 1] = K; s[#s + 1] = M; return tide.randn(s):transpose(-1, -2) end
  s[#s + 1] = M; s[#s + 1] = K; return tide.randn(s)
end
local Ms = { 1, 5, 6, 7, 12, 13, 64, 65, 130 }
local Ns = { 1, 15, 16, 17, 33, 48, 63, 64, 65, 127, 128, 129, 130 }
local Ks = { 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 130, 300 }
local i = 0
for _, N in ipairs(Ns) do
  for j = 1, 3 do
    i = i + 1
    local M, K = Ms[(i * 2 + j) % #Ms + 1], Ks[(i * 5 + j) % #Ks + 1]
    local ta, tb = j % 2 == 0, (i + j) % 2 == 0
    run(("%dx%dx%d ta=%s tb=%s"):format(M, K, N, ta, tb), A({ 3 }, M, K, ta), A({ 3 }, K, N, tb))
  end
end
-- strided: every other column of A (neither rows nor columns contiguous), an offset window of B
local big = tide.randn(2, 300, 180)
run("A every other column", tide.randn(2, 70, 258)[{ {}, {}, { 1, 258, 2 } }], big:narrow(2, 3, 129):narrow(3, 5, 140))
run("B every other row, transposed", tide.randn(2, 33, 40), tide.randn(2, 150, 80)[{ {}, {}, { 1, 80, 2 } }]:transpose(2, 3))
-- broadcast (stride 0): sum()'s gradient, a row repeated, a batch-broadcast B
run("A expanded", tide.randn(1, 1, 1):expand(4, 100, 70), tide.randn(4, 70, 90))
run("A^T expanded", tide.randn(1, 1, 1):expand(4, 70, 100):transpose(2, 3), tide.randn(4, 70, 66))
run("B expanded", tide.randn(4, 40, 70), tide.randn(1, 1, 1):expand(4, 70, 90))
run("A row repeated", tide.randn(3, 1, 50):expand(3, 40, 50), tide.randn(3, 50, 70))
run("batch broadcast", A({ 3, 1 }, 20, 30), A({ 1, 4 }, 30, 70))
run("B shared by the batch", A({ 5 }, 40, 64, true), tide.randn(64, 96))
-- empty dims and K 0
run("empty batch", tide.randn(0, 20, 30), tide.randn(0, 30, 70))
run("M 0", tide.randn(2, 0, 30), tide.randn(2, 30, 70))
run("N 0", tide.randn(2, 20, 30), tide.randn(2, 30, 0))
run("K 0", tide.randn(2, 20, 0), tide.randn(2, 0, 70))
-- NaN and inf travel as in the float64 product
local a, b = tide.randn(2, 30, 40), tide.randn(2, 40, 100)
a[{ 1, 7, 3 }] = 0 / 0; a[{ 2, 20, 40 }] = math.huge
b[{ 1, 5, 66 }] = -math.huge; b[{ 2, 1, 1 }] = 0 / 0
run("NaN and inf", a, b)
-- the attention shapes
run("scores", tide.randn(4, 256, 64), tide.randn(4, 256, 64):transpose(2, 3))
run("weighted sum", tide.randn(4, 256, 256), tide.randn(4, 256, 64))
print(table.concat(out, "\n"))
print("bmm " .. tide.matmul_stats().bmm)
]]

local function results(env)
  local text, rc = H.child(cases, env)
  assert.equal(0, rc, text)
  local r, names = {}, {}
  for line in text:gmatch("[^\n]+") do
    local name, proj, h = line:match("^(.-) (%S+) (%d+)$")
    if name then r[name] = { tonumber(proj), h }; names[#names + 1] = name end
  end
  return r, names, tonumber(text:match("bmm (%d+)")), text
end

describe("the batched matmul tile", function()
  it("agrees with the float64 product and with OpenBLAS over edge shapes, layouts, NaN and inf", function()
    local tile, names, calls, text = results({ TIDE_BMM_TILE = "1" })
    local blas, _, blas_calls = results({ TIDE_MM_BLAS = "1" })
    assert.is_true(#names >= 54, text)
    assert.equal(0, blas_calls)
    if v4 then assert.is_true(calls >= 45, text) end          -- the forced tile ran the products
    for _, n in ipairs(names) do
      local t, o = tile[n][1], blas[n][1]
      assert(o, n .. " missing in the OpenBLAS run")
      assert(math.abs(t - o) <= 1e-4 * math.max(1, math.abs(o)), ("%s: projections %.9g (tile) and %.9g (OpenBLAS)"):format(n, t, o))
    end
  end)

  it("gives the same bits on 1 and 2 threads", function()
    local one = select(4, results({ TIDE_BMM_TILE = "1", TIDE_NUM_THREADS = "1" }))
    local two = select(4, results({ TIDE_BMM_TILE = "1", TIDE_NUM_THREADS = "2" }))
    assert.equal(one, two)
  end)

  it("runs the attention shapes by default, and never float64", function()
    tide.manual_seed(4)
    local before = tide.matmul_stats().bmm
    local q, k, p = tide.randn(2, 4, 256, 64), tide.randn(2, 4, 256, 64), tide.randn(2, 4, 256, 256)
    local s = tide.einsum("bhqd,bhkd->bhqk", q, k)
    local o = tide.einsum("bhqk,bhkd->bhqd", p, k)
    H.close(s, tide.einsum("bhqd,bhkd->bhqk", q:double(), k:double()), 1e-4)
    H.close(o, tide.einsum("bhqk,bhkd->bhqd", p:double(), k:double()), 2e-4)
    if v4 then assert.equal(2, tide.matmul_stats().bmm - before) end
    local mid = tide.matmul_stats().bmm
    tide.randn(4, 128, 128, { dtype = tide.float64 }):matmul(tide.randn(4, 128, 128, { dtype = tide.float64 }))
    assert.equal(mid, tide.matmul_stats().bmm)
  end)

  it("takes einsum's gradient through sum()'s broadcast ones without copying it", function()
    tide.manual_seed(5)
    local q = tide.randn(2, 2, 128, 64):requires_grad_()
    local k = tide.randn(2, 2, 160, 64):requires_grad_()
    local before = tide.matmul_stats().bmm
    tide.einsum("bhqd,bhkd->bhqk", q, k):sum():backward()
    if v4 then assert.equal(3, tide.matmul_stats().bmm - before) end   -- forward, dq, dk
    -- d(sum s)/dq[i, d] = sum_j k[j, d]; d/dk[j, d] = sum_i q[i, d]
    H.close(q.grad, k:detach():double():sum(3, true):expand(2, 2, 128, 64), 1e-3)
    H.close(k.grad, q:detach():double():sum(3, true):expand(2, 2, 160, 64), 1e-3)
  end)
end)
