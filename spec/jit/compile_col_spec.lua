-- tide.compile: column reductions (reduced dims outside the innermost kept dim),
-- lowered to column-mode kernels (jit/jit_lower_col.h, jit/cg_walk_col.h):
-- results against eager at odd sizes, with pointwise producers, across thread
-- counts, and the schedules of the MLP bias gradients and layer_norm backward.
local tide = require "tide"
local F = tide.nn.functional

-- max |got - want| within rtol*|want| + atol*max(1, max|want|), same shape and dtype
local function close(got, want, what, rtol, atol)
  rtol, atol = rtol or 1e-5, atol or 1e-6
  assert.equal(tostring(want.dtype), tostring(got.dtype), what .. ": dtype")
  assert.same(want:size(), got:size(), what .. ": shape")
  local g, w = got:double():contiguous():view(-1), want:double():contiguous():view(-1)
  local scale = math.max(1, w:numel() > 0 and w:abs():max():item() or 0)
  local lim = (w:abs() * rtol + atol * scale)
  local bad = ((g - w):abs() - lim):max():item()
  assert(w:numel() == 0 or bad <= 0, ("%s: max |diff| %.3g over the tolerance"):format(what, (g - w):abs():max():item()))
end

local function schedule(c, ...)
  return c:explain(...):match("%-%- schedule\n(.-)%-%- code") or ""
end

describe("tide.compile column reductions", function()
  it("sums, means, max and min over the first dim of 2-D tensors, with producers", function()
    local function f(x, y)
      local p = x * y + 1
      return p:sum(1), x:relu():mean(1, true), (x - y):amax(1), x:amin(1, true), (x * 2):sum(1, true)
    end
    for _, R in ipairs { 1, 3, 129 } do
      for _, C in ipairs { 1, 7, 1023 } do
        local x, y = tide.randn(R, C), tide.randn(R, C)
        local c = tide.compile(f)
        local got, want = { c(x, y) }, { f(x, y) }
        for k = 1, #want do close(got[k], want[k], ("[%d,%d] result %d"):format(R, C, k)) end
      end
    end
  end)

  it("sums, means and max over the middle dim of 3-D tensors, with producers", function()
    local function f(x, w)
      local h = (x * w):sigmoid()
      return h:sum(2), (x * x):mean(2, true), x:amax(2), h:sum(2) * w:view(1, -1)
    end
    for _, R in ipairs { 1, 3, 129 } do
      for _, C in ipairs { 1, 7, 1023 } do
        local x, w = tide.randn(5, R, C), tide.randn(C)
        local c = tide.compile(f)
        local got, want = { c(x, w) }, { f(x, w) }
        for k = 1, #want do close(got[k], want[k], ("[5,%d,%d] result %d"):format(R, C, k)) end
      end
    end
  end)

  it("the MLP bias gradient: where(h > 0, g, 0) stored and summed over rows in one column kernel", function()
    local function f(h, g)
      local m = tide.where(h:gt(0), g, 0)
      return m, m:sum(1, true), m:sum(1, true):view(-1)
    end
    local h, g = tide.randn(128, 512), tide.randn(128, 512)
    local c = tide.compile(f)
    local got, want = { c(h, g) }, { f(h, g) }
    for k = 1, #want do close(got[k], want[k], "result " .. k) end
    local s = schedule(c, h, g)
    assert.is_nil(s:find("eager sum"), s)
    assert.truthy(s:find("gt, [^\n]*where, [^\n]*sum[^\n]*columns reduced over 128"), s)
  end)

  it("layer_norm backward: dweight and dbias in one column kernel, no eager sum, as eager", function()
    local R, C = 96, 200
    local gl = tide.randn(R, C)
    local function fb(x, w, b)
      local y = F.layer_norm(x, { C }, w, b, 1e-5)
      ;(y * gl):sum():backward()
      return y
    end
    local x, w, b = tide.randn(R, C), tide.randn(C), tide.randn(C)
    local xc, wc, bc = x:clone():requires_grad_(), w:clone():requires_grad_(), b:clone():requires_grad_()
    local xe, we, be = x:clone():requires_grad_(), w:clone():requires_grad_(), b:clone():requires_grad_()
    local c = tide.compile(fb)
    close(c(xc, wc, bc), fb(xe, we, be), "y", 1e-5, 1e-5)
    close(xc.grad, xe.grad, "dx", 1e-4, 1e-5)
    close(wc.grad, we.grad, "dweight", 1e-5, 1e-6)
    close(bc.grad, be.grad, "dbias", 1e-5, 1e-6)
    local s = schedule(c, xc, wc, bc)
    assert.is_nil(s:find("eager sum"), s)
    local n = 0
    for line in s:gmatch("[^\n]+") do
      if line:find("columns reduced") then n = n + 1; assert.truthy(select(2, line:gsub(" sum", "")) >= 2, line) end
    end
    assert.equal(1, n, s)
  end)

  it("results do not depend on the thread count (blocks of rows combined in order)", function()
    local x, y = tide.randn(4100, 37), tide.randn(4100, 37)
    local function f(a, b) return (a * b):sum(1), (a - b):mean(1), a:amax(1) end
    local c = tide.compile(f)
    local n0 = tide.get_num_threads()
    tide.set_num_threads(1)
    local one = { c(x, y) }
    tide.set_num_threads(math.max(2, n0))
    local two = { c(x, y) }
    tide.set_num_threads(n0)
    local want = { f(x, y) }
    for k = 1, #want do
      assert.equal(0, (one[k] - two[k]):abs():max():item(), "result " .. k .. ": 1 thread vs more")
      close(two[k], want[k], "result " .. k)
    end
    assert.truthy(schedule(c, x, y):find("columns reduced over 4100 in %d+ blocks"))
  end)

  it("a column reduction read per row (x - mean over rows), var and integer sums fall back correctly", function()
    local function f(x, n)
      local d = x - x:mean(1, true)
      return (d * d):sum(1), x:var(1), n:sum(1), (x * x):sum(1) + x:std(1)
    end
    local x, n = tide.randn(33, 70), tide.randint(-5, 6, { 33, 70 })
    local c = tide.compile(f)
    local got, want = { c(x, n) }, { f(x, n) }
    for k = 1, #want do close(got[k], want[k], "result " .. k, 1e-5, 1e-5) end
  end)

  it("columns that are not one unit-stride dim (a transpose, a broadcast over two kept dims) use row kernels", function()
    local function f(x, y, w) return x:t():sum(1), (x:t() * 2):amax(1), (y * w):sum(1) end
    local x, y, w = tide.randn(300, 200), tide.randn(50, 4, 8), tide.randn(8)
    local c = tide.compile(f)
    local got, want = { c(x, y, w) }, { f(x, y, w) }
    for k = 1, #want do close(got[k], want[k], "result " .. k) end
    assert.is_nil(schedule(c, x, y, w):find("columns reduced"))
  end)
end)
