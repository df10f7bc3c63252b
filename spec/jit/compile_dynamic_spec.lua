-- tide.compile with sizes passed at run time (jit/cg.h "Run-time sizes",
-- jit/jit_compile.c "Sizes"): a new batch size builds a variant whose kernels
-- come from the memory cache, except those whose code depends on the size.
-- Every result is compared with eager; the kernels compiled for each new size
-- are counted with tide.jit.stats(); what tide.compile prints is captured.
-- The correctness risk is a kernel compiled at one count and run at another:
-- flat, column and row kernels are run at odd sizes after another size.
local tide = require "tide"
local H = require "helper"
local nn, F = tide.nn, tide.nn.functional

-- same dtype and shape, |got - want| <= rtol*|want| + atol*max(1, max|want|)
local function close(got, want, what, rtol, atol)
  rtol, atol = rtol or 1e-5, atol or 1e-5
  assert.equal(tostring(want.dtype), tostring(got.dtype), what .. ": dtype")
  assert.same(want:size(), got:size(), what .. ": shape")
  local g, w = got:detach():double():contiguous():view(-1), want:detach():double():contiguous():view(-1)
  if w:numel() == 0 then return end
  local scale = math.max(1, w:abs():max():item())
  local bad = ((g - w):abs() - (w:abs() * rtol + atol * scale)):max():item()
  assert(bad <= 0, ("%s: max |diff| %.3g over the tolerance"):format(what, (g - w):abs():max():item()))
end

-- kernels compiled by libgccjit while fn runs (and fn's stderr, results)
local function kernels_of(fn, ...)
  local s0 = tide.jit.stats().kernels
  local res = { H.stderr_of(fn, ...) }
  return tide.jit.stats().kernels - s0, unpack(res)
end

local function code(c, ...) return c:explain(...):match("%-%- code\n(.*)$") or "" end
local function schedule(c, ...) return c:explain(...):match("%-%- schedule\n(.-)%-%- code") or "" end

local function has(text, ...)
  for _, s in ipairs { ... } do
    if not text:find(s, 1, true) then error(("%q does not contain %q"):format(text, s), 2) end
  end
end

local function randidx(shape, n) return tide.randint(1, n + 1, shape, { dtype = "int64" }) end

describe("tide.compile dynamic sizes", function()
  it("an MLP training step at batch sizes 128, 96, 7, 1, 128: eager's results, kernels shared", function()
    local function make() return H.mlp_step(11) end
    local m1, eager_step = make()
    local m2, step = make()
    local cstep = tide.compile(step, { name = "mlp_step" })
    local p1, p2 = m1:parameters(), m2:parameters()
    local texts, compiled = {}, {}
    -- 128 twice first: AdamW's bias corrections become kernel arguments (a
    -- Lua-number recompile), so the later counts are about sizes only
    local sizes = { 128, 128, 96, 7, 1, 128 }
    for s, B in ipairs(sizes) do
      local x, y = tide.randn(B, 13), randidx({ B }, 5)
      local le = eager_step(x, y)
      local n, text, lc = kernels_of(cstep, x, y)
      texts[s], compiled[s] = text, n
      close(lc, le, ("call %d (batch %d) loss"):format(s, B), 1e-5, 1e-6)
      for i = 1, #p1 do
        close(p2[i]:detach(), p1[i]:detach(), ("call %d (batch %d) parameter %d"):format(s, B, i))
        close(p2[i].grad, p1[i].grad, ("call %d (batch %d) grad of parameter %d"):format(s, B, i), 1e-4, 1e-5)
      end
    end
    local total = select(2, code(cstep, tide.randn(96, 13), randidx({ 96 }, 5)):gsub("\nvoid k_", ""))
    assert.truthy(total >= 10, "kernels per variant: " .. total)
    -- the first new size: one note with the reason and the count; then silence
    has(texts[3], "tide.compile: new sizes for mlp_step (arg 1 shape [128,13] -> [96,13]); kernels shared, ",
        " compiled; sizes are dynamic from now on\n")
    assert.equal(0, select(2, texts[3]:gsub("\n", "")) - 1, texts[3])
    local got, of = texts[3]:match("kernels shared, (%d+) of (%d+) compiled")
    assert.equal(compiled[3], tonumber(got))
    assert.equal(total, tonumber(of))
    for s = 4, 6 do assert.equal("", texts[s], "call " .. s) end
    -- What compiles for a new size: the kernels whose code depends on it. At
    -- 96 and 7 that is the loss's mean over the batch (a reduction over the
    -- batch inside one row: its element count is the row length), at most
    -- two kernels; everything else (row counts, flat lengths, column-mode
    -- reductions over the batch: the bias gradients) is a run-time value. At
    -- batch 1 the size-1 dim is dropped from kernels (as PyTorch specializes
    -- 0 and 1), so more differ, but not all. Back at 128: nothing compiles.
    assert.truthy(compiled[3] <= 2, "kernels compiled at 96: " .. compiled[3])
    assert.truthy(compiled[4] <= 2, "kernels compiled at 7: " .. compiled[4])
    assert.truthy(compiled[5] < total, ("kernels compiled at 1: %d of %d"):format(compiled[5], total))
    assert.equal(0, compiled[6])
  end)

  it("opts.dynamic = true: 12 batch sizes stay within the variant limit, quietly, as eager", function()
    local W1, b1, W2 = tide.randn(24, 16), tide.randn(16), tide.randn(16, 3)
    local function f(x, y)
      local h = (x:matmul(W1) + b1):relu()
      local logits = h:matmul(W2)
      return F.cross_entropy(logits, y), logits:softmax(-1), h:sum(1)
    end
    local c = tide.compile(f, { name = "dyn", dynamic = true })
    local sizes = { 64, 3, 5, 9, 17, 33, 65, 100, 129, 2, 250, 31 }
    local text = H.stderr_of(function()
      for _, B in ipairs(sizes) do
        local x, y = tide.randn(B, 24), randidx({ B }, 3)
        local got, want = { c(x, y) }, { f(x, y) }
        for k = 1, #want do close(got[k], want[k], ("batch %d result %d"):format(B, k)) end
        assert.truthy(c:variants() <= 8, "variants: " .. c:variants())
      end
    end)
    assert.equal("", text)
    assert.equal(8, c:variants())
    -- the first sizes were evicted (least recently used); back to one: rebuilt
    -- quietly from the memory cache, nothing compiles
    local x, y = tide.randn(64, 24), randidx({ 64 }, 3)
    local n, text2, l = kernels_of(c, x, y)
    assert.equal("", text2)
    assert.equal(0, n)
    close(l, f(x, y), "batch 64 again")
    H.raises(function() tide.compile(f, { dynamic = 1 }) end, "compile: dynamic must be a boolean, got number")
  end)

  it("flat kernels compiled at one length run at 1, 7, 1023 and 4097 rows", function()
    local function f(x, y) return (x:sin() * 2 + y:exp()) * x - y end
    local c = tide.compile(f, { dynamic = true })
    local x, y = tide.randn(1000, 5), tide.randn(1000, 5)
    close(c(x, y), f(x, y), "batch 1000")
    assert.truthy(code(c, x, y):find("(flat: dims[0] elements)", 1, true))
    for _, B in ipairs { 1, 7, 1023, 4097 } do
      local xb, yb = tide.randn(B, 5), tide.randn(B, 5)
      local n, _, r = kernels_of(c, xb, yb)
      close(r, f(xb, yb), "batch " .. B)
      assert.equal(0, n, "kernels compiled at batch " .. B)
    end
  end)

  it("column kernels compiled at one reduction count run at 7, 1023 and 5000 (several blocks)", function()
    -- [B,33] summed over the batch: cred = B; at 5000 the steps split into blocks
    local function f(x) return (x * x + 1):sum(1), (x * 3):mean(1, true), x:amax(1) end
    local c = tide.compile(f, { dynamic = true })
    local x = tide.randn(300, 33)
    local got, want = { c(x) }, { f(x) }
    for k = 1, #want do close(got[k], want[k], "batch 300 result " .. k) end
    assert.truthy(code(c, x):find("column mode", 1, true))
    for _, B in ipairs { 7, 1023, 5000, 1 } do
      local xb = tide.randn(B, 33)
      local n, _, g1, g2, g3 = kernels_of(c, xb)
      got, want = { g1, g2, g3 }, { f(xb) }
      for k = 1, #want do close(got[k], want[k], ("batch %d result %d"):format(B, k)) end
      -- the mean's 1/B is a constant of the kernel: at most that kernel compiles
      -- (batch 1: the reduced dim is dropped, another kernel kind)
      if B > 1 then assert.truthy(n <= 1, ("kernels compiled at batch %d: %d"):format(B, n)) end
    end
    assert.truthy(schedule(c, tide.randn(5000, 33)):find("columns reduced over 5000 in %d+ blocks"))
  end)

  it("column kernels with the batch among the rows, and row kernels, at odd batch sizes", function()
    -- [B,8,24] summed over dim 2: rows = B x column tiles (a run-time unit count);
    -- small rows keep the live set small (a big one raises the GC pacer's next
    -- threshold for later specs: spec/lua/memory_spec.lua)
    local function g(x) return (x * x):sum(2), x:softmax(-1), (x - 1):sum(2, true) end
    local c = tide.compile(g, { dynamic = true })
    local x = tide.randn(3, 8, 24)
    local got, want = { c(x) }, { g(x) }
    for k = 1, #want do close(got[k], want[k], "batch 3 result " .. k) end
    assert.truthy(code(c, x):find("column mode", 1, true))
    for _, B in ipairs { 7, 1023, 1, 20 } do
      local xb = tide.randn(B, 8, 24)
      local n, _, g1, g2, g3 = kernels_of(c, xb)
      got, want = { g1, g2, g3 }, { g(xb) }
      for k = 1, #want do close(got[k], want[k], ("batch %d result %d"):format(B, k)) end
      if B > 1 then assert.equal(0, n, "kernels compiled at batch " .. B) end
    end
  end)
end)
