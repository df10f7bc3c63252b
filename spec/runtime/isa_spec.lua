-- The portable build (issue: eager speed): libtide is baseline x86-64 and its hot
-- kernels come in three instruction-set variants (runtime/rt_isa.h). Each variant
-- the CPU has gives the same bits on 1 and 2 threads and agrees with float64
-- formulas; the baseline library runs under qemu's Westmere model (no AVX).
local tide = require "tide"
local H = require "helper"

-- a small eager program over the hot kernels; prints one hex word per result value
local PROGRAM = [[
local tide = require "tide"
local ffi = require "ffi"
tide.manual_seed(7)
local x = tide.randn(4099)
local m = tide.randn(37, 129)
local out = {}
local function put(t)
  t = t:contiguous():float()
  local p = ffi.cast("const uint32_t *", require("tide.tensor").fields(t).ptr)
  for i = 0, t:numel() - 1 do out[#out + 1] = ("%08x"):format(p[i]) end
end
put(x:sin() * x:cos() + x:exp():log1p() - x:tanh() + x:sigmoid() * x:gelu() + x:erf())
put(x ^ 2 + x:abs() ^ 2.5 - x ^ 3 + x:abs() ^ -0.5)
local xg = x:clone():requires_grad_()
local ya = xg:silu() + xg:gelu() + xg:sin() ^ 2 + xg:tanh() + xg:erf() + xg:abs() ^ 1.5
ya:backward(x); put(xg.grad)
put(m:sum(2)); put(m:mean(1)); put(m:max(2)); put(m:std(1)); put(m:logsumexp(2))
put(m:softmax(-1)); put(m:log_softmax(1)); put(m:cumsum(2))
-- the fused row functions, convolution, pooling and batch norm, forward and backward
local F = tide.nn.functional
local xl = m:clone():requires_grad_()
local wl, bl = tide.randn(129):requires_grad_(), tide.randn(129):requires_grad_()
local yl = F.layer_norm(xl, 129, wl, bl) + F.rms_norm(xl, 129, wl) + xl:softmax(-1) + xl:log_softmax(1)
yl:backward(m); put(yl:detach()); put(xl.grad); put(wl.grad); put(bl.grad)
xl.grad = nil
local lc = F.cross_entropy(xl, tide.randint(1, 130, { 37 }), { label_smoothing = 0.1 })
lc:backward(); put(lc:detach():view(1)); put(xl.grad)
local xc, wc = tide.randn(3, 4, 11, 10):requires_grad_(), tide.randn(5, 4, 3, 3):requires_grad_()
local yc = F.conv2d(xc, wc, nil, { padding = 1 })
local yp = F.batch_norm(F.max_pool2d(yc, 2) + F.avg_pool2d(yc, 2), nil, nil, nil, nil, { training = true })
yp:backward(tide.randn(3, 5, 5, 5)); put(yp:detach()); put(xc.grad); put(wc.grad)
local q, k, v = tide.randn(2, 3, 17, 8), tide.randn(2, 3, 17, 8), tide.randn(2, 3, 17, 8)
put(tide.nn.functional.scaled_dot_product_attention(q, k, v, { is_causal = true }))
put(tide.im2col(tide.randn(2, 3, 9, 9), { 3, 3 }, { padding = 1 }))
local p = tide.randn(300, { requires_grad = true })
local opt = tide.optim.Adam({ p }, { lr = 0.1 })
for _ = 1, 3 do opt:zero_grad(); local l = (p * p):sum(); l:backward(); opt:step() end
put(p:detach())
print(tide.config().eager_isa)
print(table.concat(out, " "))
]]

local function run(isa, threads)
  local out, rc = H.child(PROGRAM, { TIDE_ISA = isa, TIDE_NUM_THREADS = tostring(threads) })
  assert(rc == 0, out)
  local name, words = out:match("^([^\n]*)\n([^\n]*)")
  return name, words
end

-- the float values of a word string
local function floats(words)
  local ffi = require "ffi"
  local u = ffi.new("uint32_t[1]")
  local r = {}
  for w in words:gmatch("%x+") do u[0] = tonumber(w, 16); r[#r + 1] = ffi.cast("float *", u)[0] end
  return r
end

local function close(a, b, tol, what)
  assert.equal(#a, #b, what)
  for i = 1, #a do
    local d = math.abs(a[i] - b[i])
    assert(d <= tol * math.max(1, math.abs(b[i])), ("%s: value %d differs: %.9g vs %.9g"):format(what, i, a[i], b[i]))
  end
end

describe("instruction-set variants of the eager kernels", function()
  local best = tide.config().eager_isa
  local levels = { "base", "v3", "v4" }
  local names = { base = "x86-64", v3 = "x86-64-v3", v4 = "x86-64-v4" }
  local have = {}
  for _, l in ipairs(levels) do
    have[#have + 1] = l
    if names[l] == best then break end
  end

  it("the library picks the CPU's best level; tide.config reports it", function()
    assert.truthy(best == "x86-64" or best == "x86-64-v3" or best == "x86-64-v4")
    local out = H.child('io.write(require("tide").config().eager_isa)', { TIDE_ISA = "" })
    assert.equal(best, out)
  end)

  it("each variant the CPU has gives the same bits on 1 and 2 threads, and they agree", function()
    local ref
    for _, l in ipairs(have) do
      local n1, w1 = run(l, 1)
      local n2, w2 = run(l, 2)
      assert.equal(names[l], n1)
      assert.equal(w1, w2, l .. ": results depend on the thread count")
      local f = floats(w1)
      -- variants differ only by the libm/libmvec implementations (a few ulp)
      if ref then close(f, ref, 2e-5, l .. " vs base") else ref = f end
    end
  end)

  it("an unknown or unavailable level is refused with a note", function()
    local out = H.child('io.write(require("tide").config().eager_isa)', { TIDE_ISA = "avx9000" })
    assert.truthy(out:find("TIDE_ISA=avx9000 is not one of base, v3, v4", 1, true), out)
  end)

  local qemu = io.popen("command -v qemu-x86_64 2>/dev/null"):read("*l")
  -- (not under make test-asan: ASan's shadow memory does not map under qemu-user)
  local it_qemu = H.asan and pending or it
  it_qemu("the library runs on a CPU without AVX (qemu-x86_64 -cpu Westmere)", function()
    assert(qemu and qemu ~= "", "qemu-x86_64 not found (Debian's qemu-user; make deps installs it)")
    local path = os.tmpname()
    local f = assert(io.open(path, "w")); f:write(PROGRAM); f:close()
    -- OpenBLAS would pick its kernels from /proc/cpuinfo (the host's): name an old core
    local p = io.popen(("LUA_PATH=%s OPENBLAS_CORETYPE=Nehalem TIDE_NUM_THREADS=2 timeout -s KILL 300 %s -cpu Westmere "
      .. "$(command -v luajit) %s 2>&1; echo \"@rc=$?\""):format(H.sh_quote(package.path), qemu, H.sh_quote(path)))
    local out = p:read("*a"); p:close(); os.remove(path)
    assert.truthy(out:find("@rc=0", 1, true), out:sub(1, 2000))
    local name, words = out:match("^([^\n]*)\n([^\n]*)")
    assert.equal("x86-64", name)
    local _, native = run("base", 2)
    close(floats(words), floats(native), 2e-5, "qemu Westmere vs native base")
  end)
end)
