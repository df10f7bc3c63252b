-- Compiled sin and cos of float32 vectors (jit/cg_vmath.h, w_vsincosf): one
-- range reduction and two polynomials for both, the pair made once per value
-- (W1: sin(x)^2 + cos(x)^2). Within 2 ulp of C's sinf/cosf (1.5 measured) for
-- |x| <= 1024, libmvec beyond (a vector with a huge lane, inf, NaN), the same
-- in the vector body and the remainder, and the W1 kernel calls libmvec's
-- sinf/cosf only on that fallback path.
local tide = require "tide"
local ffi = require "ffi"

pcall(ffi.cdef, [[ float sinf(float); float cosf(float); ]])

local u = ffi.new("union { float f; int32_t i; }")
local function ord(x) u.f = x; local i = u.i; return i < 0 and -2147483648 - i or i end
local function ulps(a, b)
  if a ~= a or b ~= b then return (a ~= a and b ~= b) and 0 or math.huge end
  if a == b then return 0 end
  return math.abs(ord(a) - ord(b))
end

local sc = tide.compile(function(x) return x:sin(), x:cos() end, { name = "sincos_spec" })

local function check(xs, bound, what)
  local x = tide.tensor(xs, { dtype = tide.float32 })
  local s, c = sc(x)
  local xv, sv, cv = x:totable(), s:totable(), c:totable()
  for i = 1, #xv do
    local es, ec = ulps(sv[i], ffi.C.sinf(xv[i])), ulps(cv[i], ffi.C.cosf(xv[i]))
    assert(es <= bound and ec <= bound, ("%s: x = %.9g: sin %.9g (%g ulp), cos %.9g (%g ulp) from sinf %.9g, cosf %.9g")
      :format(what, xv[i], sv[i], es, cv[i], ec, ffi.C.sinf(xv[i]), ffi.C.cosf(xv[i])))
  end
end

describe("compiled float32 sin and cos", function()
  it("within 2 ulp of C's sinf/cosf over |x| <= 1024 (vector body and remainder)", function()
    tide.manual_seed(21)
    local xs = (tide.rand(20011) * 2048 - 1024):totable()
    for _, v in ipairs { 0, 1e-30, 1e-3, 0.7853982, 1.5707964, 3.1415927, 4.712389, 6.2831855, 100, 1000, 1024 } do
      xs[#xs + 1] = v; xs[#xs + 1] = -v
    end
    check(xs, 2, "dense")
  end)

  it("edges: signed zeros, denormals, inf, NaN, huge arguments (libmvec's reduction)", function()
    local xs = { 0, -0.0, 1e-40, -1e-40, 1 / 0, -1 / 0, 0 / 0, 1e30, -1e30, 3.4e38, 1025, -5000.5, 123456.7, 0.5 }
    for _ = 1, 5 do for _, v in ipairs { 0.3, -2, 7, 1e6 } do xs[#xs + 1] = v end end
    check(xs, 2, "edges")
    local x = tide.tensor({ 0, -0.0 }, { dtype = tide.float32 })
    local s = sc(x):totable()
    assert(1 / s[1] > 0 and 1 / s[2] < 0, "sin keeps the sign of zero")
  end)

  it("W1 reads each value's sin and cos from one inline evaluation", function()
    local w1 = tide.compile(function(v) return v:sin() ^ 2 + v:cos() ^ 2 end, { name = "sincos_spec_w1" })
    local x = tide.randn(5000) * 10
    local y = w1(x)
    assert((y - 1):abs():max():item() <= 3e-7)
    -- one range reduction (x * 2/pi appears once), libmvec only in the fallback and the remainder
    local code, lines = w1:explain(x), 0
    for l in code:gmatch("[^\n]+") do if l:find("0.636619", 1, true) then lines = lines + 1 end end
    assert.equal(1, lines)
    assert.equal(3, select(2, code:gsub("_ZGV%w+_sinf%(", "")))   -- the declaration, the fallback, the remainder
  end)
end)
