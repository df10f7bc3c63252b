-- tide.compile: column reductions (reduced dims outside the innermost kept dim),
-- lowered to column-mode kernels (jit/jit_lower_col.h, jit/cg_walk_col.h):
-- results against eager at odd sizes, with pointwise producers, across thread
-- counts, and the schedules of the MLP bias gradients and layer_norm backward
-- (whose column sums join its row kernel as partials per block of rows).
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

-- f compiled gives the same bits on 1 thread and on 2 or more, and eager's
-- results within the tolerances; returns the compiled function
local function same_bits_on_threads(f, a, b, rtol, atol)
  local c = tide.compile(f)
  local n0 = tide.get_num_threads()
  tide.set_num_threads(1)
  local one = { c(a, b) }
  tide.set_num_threads(math.max(2, n0))
  local two = { c(a, b) }
  tide.set_num_threads(n0)
  local want = { f(a, b) }
  for k = 1, #want do
    assert.equal(0, (one[k] - two[k]):abs():max():item(), "result " .. k .. ": 1 thread vs more")
    close(two[k], want[k], "result " .. k, rtol, atol)
  end
  return c
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

  it("layer_norm backward: dweight and dbias summed inside its row kernel as column partials, as eager", function()
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
    assert.is_nil(s:find("columns reduced"), s)       -- no second pass over x and the gradient
    local row = s:match("[^\n]*mean, [^\n]*var[^\n]*")
    assert.truthy(row and row:find("96 rows x 200, %d passes, column sums of %%%d+, %%%d+%)"), s)
  end)

  it("column sums inside a row kernel: odd sizes, 3-D inputs, float64, keepdim, as eager", function()
    local function f2(x, w)
      local d = (x - x:mean(-1, true)) * w
      return d, d:sum(1), (x * x):sum(1, true), x:sum(1) * 2
    end
    local function f3(x, w)
      local d = (x - x:mean(-1, true)) * w
      return d:amax(-1), d:sum({ 1, 2 }), x:sum({ 1, 2 }, true)
    end
    for _, dt in ipairs { "float", "double" } do
      for _, R in ipairs { 1, 7, 1023 } do
        for _, C in ipairs { 1, 7, 1023 } do
          local x, w = tide.randn(R, C):type(dt), tide.randn(C):type(dt)
          local c = tide.compile(f2)
          local got, want = { c(x, w) }, { f2(x, w) }
          for k = 1, #want do close(got[k], want[k], ("%s [%d,%d] result %d"):format(dt, R, C, k), 1e-5, 1e-5) end
          if R > 1 and C > 1 then
            assert.truthy(schedule(c, x, w):find("column sums of %%%d+, %%%d+, %%%d+%)"), schedule(c, x, w))
          end
        end
      end
      local x3, w3 = tide.randn(3, 37, 70):type(dt), tide.randn(70):type(dt)
      local c3 = tide.compile(f3)
      local got, want = { c3(x3, w3) }, { f3(x3, w3) }
      for k = 1, #want do close(got[k], want[k], ("%s [3,37,70] result %d"):format(dt, k), 1e-5, 1e-5) end
      assert.truthy(schedule(c3, x3, w3):find("column sums of"), schedule(c3, x3, w3))
    end
  end)

  it("column sums inside a row kernel give the same bits on 1 and 2 threads", function()
    local function f(x, g)
      local y = F.layer_norm(x, { 300 })
      return (y * g):sum(1), g:sum(1), y:amax(-1)
    end
    local x, g = tide.randn(4100, 300), tide.randn(4100, 300)
    local c = same_bits_on_threads(f, x, g, 1e-5, 1e-5)
    assert.truthy(schedule(c, x, g):find("column sums of"), schedule(c, x, g))
  end)

  it("tensors with a size-0 dim: row and column sums, softmax, layer_norm fwd+bwd as eager (no division by zero)", function()
    local function f(x, w) local d = (x - x:mean(-1, true)) * w; return d, d:sum(1), x:softmax(-1), (x * 2):sum(1, true) end
    for _, sh in ipairs { { 0, 40 }, { 3, 0 }, { 0, 0 } } do
      local x, w = tide.randn(sh[1], sh[2]), tide.randn(sh[2])
      local got, want = { tide.compile(f)(x, w) }, { f(x, w) }
      for k = 1, #want do
        assert.same(want[k]:size(), got[k]:size())
        if want[k]:numel() > 0 then close(got[k], want[k], ("[%d,%d] result %d"):format(sh[1], sh[2], k)) end
      end
    end
    local x, w, b, g = tide.randn(0, 16):requires_grad_(), tide.randn(16):requires_grad_(), tide.randn(16):requires_grad_(),
      tide.randn(0, 16)
    tide.compile(function(v, ww, bb) local y = F.layer_norm(v, { 16 }, ww, bb, 1e-5); (y * g):sum():backward(); return y end)(x, w, b)
    assert.equal(0, w.grad:abs():max():item())    -- sums over no row
    assert.equal(0, b.grad:abs():max():item())
  end)

  it("results do not depend on the thread count (blocks of rows combined in order)", function()
    local x, y = tide.randn(4100, 37), tide.randn(4100, 37)
    local function f(a, b) return (a * b):sum(1), (a - b):mean(1), a:amax(1) end
    local c = same_bits_on_threads(f, x, y)
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
