-- Hostile input (issue: reliability): inputs that crashed or hung the process, or
-- gave silently wrong results, now raise an error naming the op and the values.
-- Cases that crashed run in a child process (H.child), so a regression shows as
-- a failed spec, not a dead suite; the rest run here.
local tide = require "tide"
local H = require "helper"
local F = tide.nn.functional

-- run snippet in a child; it must print "ok" after its own checks, and exit 0
local function survives(snippet)
  local out, rc = H.child('local tide = require "tide"\nlocal F = tide.nn.functional\n' .. snippet ..
    '\nprint("ok")\n', nil, 60)
  assert(rc == 0 and out:find("ok\n$"), ("child exited with %s:\n%s"):format(tostring(rc), out))
  return out
end

-- snippet must raise an error containing each of the plain strings (in a child)
local function child_raises(snippet, ...)
  local want = {}
  for _, s in ipairs { ... } do want[#want + 1] = ("%q"):format(s) end
  return survives(([[
local ok, err = pcall(function() %s end)
assert(not ok, "no error")
for _, s in ipairs { %s } do
  assert(tostring(err):find(s, 1, true), ("error %%q lacks %%q"):format(tostring(err), s))
end]]):format(snippet, table.concat(want, ", ")))
end

describe("dims lists", function()
  it("more than 8 dims raise instead of writing past the attribute array", function()
    child_raises("local d = {} for i = 1, 100 do d[i] = 1 end return tide.ones(2, 3):sum(d)",
      "sum: 100 dims given, at most 8 are supported")
    child_raises("return tide.ones(2, 3):sum({ 1, 2, 1, 2, 1, 2, 1, 2, 1 })", "sum: 9 dims given")
  end)

  it("repeats and out-of-range dims raise, for reductions and permute", function()
    H.raises(function() return tide.ones(2, 3):sum({ 1, 1 }) end, "sum: dim 1 appears multiple times")
    H.raises(function() return tide.ones(2, 3):mean({ 1, 3 }) end, "mean: dim 3 out of range")
    H.raises(function() return tide.ones(2, 3):sum({ 1, 2, 1 }) end, "sum: 3 dims given for a tensor with 2 dims")
    H.raises(function() return tide.ones(2, 3):permute(1, 1) end, "permute: dim 1 appears multiple times")
    H.raises(function() return tide.ones(2, 3):sum({ 1, 0 / 0 }) end, "bad argument #2 to 'sum' (integer dim expected, got nan)")
  end)

  it("the C API checks attrs.ndims itself", function()
    local ffi = require "ffi"
    local at = ffi.new("td_attrs"); at.ndims = 9; at.dtype = -1
    local x = tide.ones(2, 3)
    local inb = ffi.new("td_tensor *[1]", x.p)
    assert.is_true(tide.C.td_op(require("tide.core").OP.sum, 1, inb, at) == nil)
    assert.truthy(ffi.string(tide.C.td_last_error()):find("sum: 9 dims given, at most 8", 1, true))
  end)
end)

describe("sizes that overflow int64", function()
  it("conv2d, im2col and col2im with huge padding raise (they wrote out of bounds or spun)", function()
    child_raises("return F.conv2d(tide.randn(1, 1, 4, 4), tide.randn(1, 1, 1, 1), nil, { padding = 2^60 })",
      "size overflows int64")
    child_raises("return tide.im2col(tide.randn(1, 1, 4, 4), { 1, 1 }, { padding = 2^61 })", "size overflows int64")
    child_raises("return tide.col2im(tide.randn(1, 1, 16), { 4, 4 }, 1, { padding = 2^60 })", "size overflows int64")
  end)

  it("adaptive_avg_pool2d with a huge or non-integer output size raises (it looped forever)", function()
    child_raises("return F.adaptive_avg_pool2d(tide.randn(1, 1, 4, 4), math.huge)", "adaptive_avg_pool2d: output_size")
    child_raises("return F.adaptive_avg_pool2d(tide.randn(1, 1, 4, 4), 1e15)", "adaptive_avg_pool2d: size overflows int64")
    child_raises("return F.adaptive_avg_pool2d(tide.randn(1, 1, 4, 4), 2^62)", "adaptive_avg_pool2d: size overflows int64")
  end)

  it("adaptive_avg_pool2d to a size that does not divide the input averages PyTorch's windows", function()
    local x = H.rand64 { 2, 3, 5, 7 }
    local y = F.adaptive_avg_pool2d(x, { 3, 4 })
    for i = 0, 2 do
      for j = 0, 3 do
        local h0, h1 = math.floor(i * 5 / 3), math.ceil((i + 1) * 5 / 3)
        local w0, w1 = math.floor(j * 7 / 4), math.ceil((j + 1) * 7 / 4)
        local want = x:narrow(3, h0 + 1, h1 - h0):narrow(4, w0 + 1, w1 - w0):mean({ 3, 4 })
        H.close(y[{ {}, {}, i + 1, j + 1 }], want, 1e-12)
      end
    end
    -- an output larger than the input (windows overlap)
    H.close(F.adaptive_avg_pool2d(x, { 7, 9 }):size(), { 2, 3, 7, 9 }, 0)
  end)

  it("every op's result shape passes the int64 check, for C hosts too", function()
    H.raises(function() return tide.ones(1, 1, 1):expand(2 ^ 40, 2 ^ 40, 2 ^ 40) end, "expand: size overflows int64")
    H.raises(function() return tide.eye(2 ^ 62) end, "too large")
    H.raises(function() return tide.arange(0, 2 ^ 62) end, "arange: size overflows int64")
  end)
end)

describe("freed tensors as arguments", function()
  local function freed() local f = tide.ones(2, 3); f:free(); return f end

  it("raise instead of reading a NULL handle", function()
    child_raises("local f = tide.ones(2, 3); f:free(); return tide.ones(2, 3):expand_as(f)", "expand_as", "free")
    child_raises("local f = tide.ones(2, 3); f:free(); return tide.ones(2, 3):view_as(f)", "view_as", "free")
    child_raises("local f = tide.ones(2, 3); f:free(); return tide.ones(2, 3):reshape_as(f)", "reshape_as", "free")
    child_raises("local f = tide.ones(1); f:free(); return tide.Tensor.item(f)", "item", "free")
    child_raises("local f = tide.ones(1); f:free(); return tide.Tensor.size(f)", "size", "free")
    child_raises("local f = tide.ones(1); f:free(); return tide.Tensor.contiguous(f)", "contiguous", "free")
    child_raises("local f = tide.ones(1); f:free(); return tide.Tensor.detach(f)", "detach", "free")
    child_raises("local f = tide.ones(1); f:free(); return tide.Tensor.backward(f)", "backward", "free")
    child_raises([[local y = tide.ones(2):requires_grad_(); local f = (y * 2):sum(); f:free()
      return tide.autograd.grad(f, y)]], "grad", "free")
    child_raises([[local y = tide.ones(2):requires_grad_(); local s = (y * 2):sum(); local f = tide.ones(2); f:free()
      return tide.autograd.grad(s, f)]], "grad", "free")
  end)

  it("in any argument position of an op", function()
    H.raises(function() return tide.ones(2, 3) + freed() end, "bad argument #2 to 'add'", "free")
    H.raises(function() return tide.where(freed():gt(0), 1, 2) end, "free")
    H.raises(function() return tide.cat({ tide.ones(2, 3), freed() }) end, "free")
    H.raises(function() return tide.ones(2, 3):copy_(freed()) end, "free")
  end)

  it("y.grad = freed raises and keeps the gradient", function()
    local y = tide.ones(2):requires_grad_()
    y.grad = tide.full({ 2 }, 3)
    H.raises(function() y.grad = freed():view(2) end, "free")
    local f = tide.ones(2); f:free()
    H.raises(function() y.grad = f end, "bad argument #2 to 'grad' (Tensor or nil expected, got freed Tensor)")
    H.close(y.grad, { 3, 3 }, 0)
  end)

  it("a compiled function returning a freed tensor says so", function()
    local g = tide.compile(function(x) local y = x * 2; local z = x + 1; z:free(); return y, z end)
    pcall(tide.ones, -1)                      -- an unrelated earlier error must not be reported
    H.raises(function() return g(tide.ones(3)) end, "returned tensor 2 was freed")
    H.close(g:variants(), 0, 0)
    H.close((g.fn)(tide.ones(3)), { 2, 2, 2 }, 0)
  end)
end)

describe("tide.compile on size-0 tensors", function()
  -- each case crashed in the kernel that follows the fused op
  local cases = {
    { "a:softmax(-1) * 2", { { 0, 40 } } },
    { "a:log_softmax(-1) + 1", { { 0, 3 } } },
    { "tide.matmul(a, b) + 1", { { 0, 3 }, { 3, 4 } } },
    { "tide.matmul(a, b):relu()", { { 3, 4 }, { 4, 0 } } },
    { "(a * 3):sum(1)", { { 0, 5 } } },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " equals eager", function()
      local shapes = {}
      for i, s in ipairs(c[2]) do shapes[i] = ("tide.randn(%d, %d)"):format(s[1], s[2]) end
      survives(([[
local fn = function(a, b) return %s end
local a, b = %s
local y, want = tide.compile(fn)(a, b), fn(a, b)
assert(table.concat(y:size(), ",") == table.concat(want:size(), ","), "shape")
assert((y - want):abs():sum():item() == 0, "values")]]):format(c[1], table.concat(shapes, ", ")))
    end)
  end
end)

describe("a compiled function suspended in a coroutine", function()
  it("never traces eager ops outside it, even when never resumed", function()
    local g = tide.compile(function(x) local y = x * 2; coroutine.yield(); return y + 1 end)
    local co = coroutine.create(function() return g(tide.ones(2)) end)
    assert.is_true(coroutine.resume(co))
    assert.is_false(tide.C.td_is_tracing() ~= 0)
    -- all of these failed or did nothing while the trace was left on
    local y = tide.zeros(2)
    y:copy_(tide.full({ 2 }, 5)); y:add_(1)
    H.close(y, { 6, 6 }, 0)
    assert.equal(3, tide.ones(3):sum():item())
    local path = os.tmpname()
    tide.save({ w = y }, path)
    H.close(tide.load(path).w, { 6, 6 }, 0)
    os.remove(path)
    co = nil
    collectgarbage(); collectgarbage()
    assert.equal(3, tide.ones(3):sum():item())
  end)

  it("resumes its trace with the function: yields pass through, results are right", function()
    local g = tide.compile(function(x)
      local y = x * 2
      local k = coroutine.yield("half")
      return y + k
    end)
    for round = 1, 2 do
      local co = coroutine.create(function() return g(tide.ones(2)) end)
      local ok, v = coroutine.resume(co)
      assert.is_true(ok); assert.equal("half", v)
      local eager = tide.ones(2) * 10          -- runs eagerly while g is suspended
      H.close(eager, { 10, 10 }, 0)
      local ok2, r = coroutine.resume(co, 5)
      assert.is_true(ok2, tostring(r))
      H.close(r, { 7, 7 }, 0, "round " .. round)
    end
    assert.equal(1, g:variants())
  end)

  it("a call abandoned by a later call of the same function reports it when resumed", function()
    local g = tide.compile(function(x) coroutine.yield(); return x + 1 end)
    local co = coroutine.create(function() return g(tide.ones(2)) end)
    coroutine.resume(co)
    local co2 = coroutine.create(function() return g(tide.ones(2)) end)
    coroutine.resume(co2)
    local ok, r = coroutine.resume(co2)
    assert.is_true(ok); H.close(r, { 2, 2 }, 0)
    local ok1, err = coroutine.resume(co)
    assert.is_false(ok1)
    assert.truthy(tostring(err):find("was called again while this call was suspended", 1, true))
  end)

  it("yielding outside a coroutine is Lua's error, and the trace ends", function()
    local g = tide.compile(function(x) coroutine.yield(); return x end)
    H.raises(function() return g(tide.ones(2)) end, "yield")
    assert.is_false(tide.C.td_is_tracing() ~= 0)
    assert.equal(2, tide.ones(2):sum():item())
  end)
end)

describe("values that were silently wrong", function()
  it("slice bounds beyond the dim clamp (inf and 2^63 too), NaN raises", function()
    local x = tide.arange(10):view(2, 5)
    H.close(x:slice(2, math.huge), tide.zeros(2, 0), 0)
    H.close(x:slice(2, 2 ^ 63), tide.zeros(2, 0), 0)
    H.close(x:slice(2, 1, math.huge), x, 0)
    H.close(x:slice(2, -math.huge, 2), x:slice(2, 1, 2), 0)
    H.close(x:slice(2, 2, 2 ^ 63), x:slice(2, 2, 5), 0)
    H.raises(function() return x:slice(2, 0 / 0) end, "bad argument #3 to 'slice'")
  end)

  it("addmm with beta = 0 ignores c, NaN and inf included", function()
    local c = tide.tensor({ { 0 / 0, math.huge }, { -math.huge, 0 / 0 } })
    local a, b = H.rand64({ 2, 3 }):float(), H.rand64({ 3, 2 }):float()
    H.close(tide.addmm(c, a, b, { beta = 0 }), a:matmul(b), 1e-6)
    H.close(tide.addmm(c, a, b, { beta = 0, alpha = 2 }), a:matmul(b) * 2, 1e-6)
    H.raises(function() return tide.addmm(c, a, b, { betta = 0 }) end, "addmm: unknown option 'betta'")
  end)

  it("float to int conversions out of range raise", function()
    H.raises(function() return tide.tensor({ 2 ^ 64 }, { dtype = tide.int64 }) end, "tensor: value", "out of range for int64")
    H.raises(function() return tide.tensor({ 0 / 0 }, { dtype = tide.int32 }) end, "tensor: cannot convert nan to int32")
    H.raises(function() return tide.full({ 2 }, 1e300, { dtype = tide.int32 }) end, "full: value 1e+300 is out of range for int32")
    H.raises(function() return tide.full({ 2 }, 256, { dtype = tide.uint8 }) end, "out of range for uint8")
    H.raises(function() return tide.eye(3, 2 ^ 63) end, "bad argument #2 to 'eye'")
    H.raises(function() return tide.randint(0, 300, { 4 }, { dtype = tide.uint8 }) end, "randint: value 299 is out of range for uint8")
    H.raises(function() return tide.zeros(2, { dtype = tide.int32 }):fill_(2 ^ 40) end, "out of range for int32")
    -- the edges that fit
    H.close(tide.full({ 1 }, -2 ^ 63, { dtype = tide.int64 }):item(), -2 ^ 63, 0)
    H.close(tide.full({ 1 }, 255.9, { dtype = tide.uint8 }):item(), 255, 0)
    H.close(tide.full({ 1 }, -0.5, { dtype = tide.uint8 }):item(), 0, 0)
    assert.is_true(tide.randint(0, 256, { 1000 }, { dtype = tide.uint8 }):max():item() <= 255)
  end)

  it("integer tensors to negative integer tensor powers raise, as a negative number does", function()
    local x = tide.tensor({ 2, 3 }, { dtype = tide.int64 })
    H.raises(function() return x ^ tide.tensor({ -1 }, { dtype = tide.int64 }) end, "pow: integers to negative integer powers")
    H.raises(function() return x ^ -1 end, "pow: integers to negative integer powers")
    H.raises(function() return x:clone():pow_(tide.tensor({ 1, -2 }, { dtype = tide.int32 })) end, "exponent -2")
    H.close(x ^ tide.tensor({ 3 }, { dtype = tide.int64 }), { 8, 27 }, 0)
    -- compiled: the integer pow with a tensor exponent is an eager step of the plan, so it checks too
    local f = tide.compile(function(a, b) return a ^ b + 1 end)
    H.close(f(x, tide.tensor({ 2, 3 }, { dtype = tide.int64 })), { 5, 28 }, 0)
    H.raises(function() return f(x, tide.tensor({ 2, -1 }, { dtype = tide.int64 })) end, "pow: integers to negative integer powers")
  end)

  it("split and chunk take integers", function()
    local x = tide.ones(4)
    H.raises(function() return x:split(0 / 0) end, "bad argument #2 to 'split'")
    H.raises(function() return x:chunk(0 / 0) end, "bad argument #2 to 'chunk'")
    H.raises(function() return x:split(1.5) end, "bad argument #2 to 'split'")
    H.raises(function() return x:split({ 2, 0 / 0 }) end, "bad argument #2 to 'split'")
    assert.equal(2, #x:split(2))
  end)
end)

describe("option tables", function()
  -- every function taking an options table names an unknown key (a typo must not pass silently)
  local x4, w4 = tide.randn(1, 2, 5, 5), tide.randn(3, 2, 3, 3)
  local cases = {
    { "zeros", function() return tide.zeros(2, { dtyp = tide.float64 }) end },
    { "zeros_like", function() return tide.zeros_like(x4, { devic = "cpu" }) end },
    { "full", function() return tide.full({ 2 }, 1, { dtyp = 1 }) end },
    { "arange", function() return tide.arange(0, 3, { dtyp = 1 }) end },
    { "tensor", function() return tide.tensor({ 1 }, { requires_gard = true }) end },
    { "randint", function() return tide.randint(0, 3, { 2 }, { dtyp = 1 }) end },
    { "conv2d", function() return F.conv2d(x4, w4, nil, { pading = 1 }) end },
    { "max_pool2d", function() return F.max_pool2d(x4, 2, { strde = 2 }) end },
    { "avg_pool2d", function() return F.avg_pool2d(x4, 2, { strde = 2 }) end },
    { "batch_norm", function() return F.batch_norm(x4, nil, nil, nil, nil, { trainin = true }) end },
    { "im2col", function() return tide.im2col(x4, 2, { strid = 1 }) end },
    { "embedding", function() return F.embedding(tide.tensor({ 1 }, { dtype = tide.int64 }), tide.randn(3, 2), { pad = 1 }) end },
    { "scaled_dot_product_attention", function() local q = tide.randn(2, 4); return F.scaled_dot_product_attention(q, q, q, { causal = true }) end },
    { "var", function() return x4:var(1, { correctoin = 0 }) end },
    { "sum", function() return x4:sum(1, { keep = true }) end },
    { "gelu", function() return x4:gelu({ approx = "tanh" }) end },
    { "backward", function() return (x4:clone():requires_grad_() * 2):sum():backward({ retain = true }) end },
    { "grad", function() local a = tide.ones(2):requires_grad_(); return tide.autograd.grad(a:sum(), a, { alow_unused = true }) end },
    { "compile", function() return tide.compile(function() end, { fallbak = "eager" }) end },
    { "DataLoader", function() return tide.data.DataLoader(tide.data.TensorDataset(tide.ones(4)), { num_worker = 2 }) end },
    { "Linear", function() return tide.nn.Linear(2, 3, { biass = false }) end },
    { "Conv2d", function() return tide.nn.Conv2d(2, 3, 3, { pading = 1 }) end },
    { "BatchNorm2d", function() return tide.nn.BatchNorm2d(2, { momentun = 0.1 }) end },
    { "LayerNorm", function() return tide.nn.LayerNorm(2, { epsilon = 1e-5 }) end },
    { "Adam", function() return tide.optim.Adam({ tide.ones(2):requires_grad_() }, { betas2 = 1 }) end },
    { "load", function() return tide.load("/nonexistent", { map = false }) end },
    { "bar", function() return tide.progress.bar(3, { descr = "x" }) end },
    { "addmm", function() return tide.addmm(tide.ones(2, 2), tide.ones(2, 2), tide.ones(2, 2), { betta = 0 }) end },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " rejects an unknown option", function()
      H.raises(c[2], c[1] .. ": unknown option '")
    end)
  end

  it("a non-table where options go is a type error", function()
    H.raises(function() return F.conv2d(x4, w4, nil, 3) end, "bad argument #4 to 'conv2d' (options table expected, got number)")
    H.raises(function() return tide.compile(function() end, "eager") end, "bad argument #2 to 'compile' (options table expected, got string)")
  end)

  it("compile's name must be a string", function()
    H.raises(function() return tide.compile(function() end, { name = {} }) end, "compile: name must be a string, got table")
  end)

  it("a trailing dtype is the dtype option; state_dict's key list is not options", function()
    assert.equal(tide.float64, tide.randn(2, 3, tide.float64).dtype)
    assert.equal(tide.float64, tide.zeros({ 2 }, tide.float64).dtype)
    local a, b = tide.nn.Linear(2, 2), tide.nn.Linear(2, 2)
    b:load_state_dict(a:state_dict())
    H.close(a.weight, b.weight, 0)
  end)
end)
