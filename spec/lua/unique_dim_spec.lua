-- unique and unique_consecutive along a dim (issue 17; td_unique_dim in
-- runtime/rt_sort.c) against PyTorch's torch.unique(dim=) (spec/ref/unique_reference.lua,
-- written by spec/ref/unique_reference.py; walked by spec/ref_walk.lua: values,
-- tide.compile's data-dependent error, OpenCL == CPU), then NaN slices, every
-- dtype, the host round trip of OpenCL tensors and the errors.
local tide = require "tide"
local H = require "helper"

require("ref_walk")(dofile("spec/ref/unique_reference.lua"), "unique along a dim against PyTorch")

describe("unique along a dim", function()
  it("keeps slices holding a NaN apart and sorts them last; -0 equals 0", function()
    local x = tide.tensor({ { 0 / 0, 1 }, { 0, 1 }, { 0 / 0, 1 }, { -0.0, 0 }, { 0, 1 } }, { dtype = tide.float64 })
    local v, inv, cnt = x:unique({ dim = 1, return_inverse = true, return_counts = true })
    assert.same({ 4, 2 }, v:size())
    assert.same({ 0, 0, 0, 1 }, { v[1][1]:item(), v[1][2]:item(), v[2][1]:item(), v[2][2]:item() })
    assert.is_true(v[3][1]:item() ~= v[3][1]:item() and v[4][1]:item() ~= v[4][1]:item())
    assert.same({ 3, 2, 4, 1, 2 }, inv:totable())
    assert.same({ 1, 2, 1, 1 }, cnt:totable())
  end)

  it("sorts every dtype lexicographically and gathers the first slice of each run", function()
    for _, dt in ipairs { tide.float32, tide.float64, tide.int32, tide.int64, tide.uint8 } do
      local x = tide.tensor({ { 3, 1, 2, 1 }, { 0, 5, 0, 5 }, { 7, 2, 7, 2 } }):to(dt)
      local v, inv, cnt = x:unique({ dim = 2, return_inverse = true, return_counts = true })
      H.close(v:double(), tide.tensor({ { 1, 2, 3 }, { 5, 0, 0 }, { 2, 7, 7 } }, { dtype = tide.float64 }), 0)
      assert.equal(dt, v.dtype)
      assert.same({ 3, 1, 2, 1 }, inv:totable())
      assert.same({ 2, 1, 1 }, cnt:totable())
    end
    local big = tide.long({ { 2 ^ 40, 1 }, { -(2 ^ 40), 1 }, { 2 ^ 40, 0 } })
    assert.same({ { -(2 ^ 40), 1 }, { 2 ^ 40, 0 }, { 2 ^ 40, 1 } }, big:unique({ dim = 1 }):totable())
  end)

  it("equals the flattened unique on a 1-D tensor and has no gradient", function()
    tide.manual_seed(5)
    local x = (tide.randn(50) * 3):round()
    H.close(x:unique({ dim = 1 }), x:unique(), 0)
    local y = x:clone():requires_grad_()
    assert.is_false(y:unique({ dim = -1 }).requires_grad)
  end)

  it("raises for a dim out of range, zero-sized other dims and under tide.compile", function()
    local x = tide.ones(3, 2)
    H.raises(function() return x:unique({ dim = 3 }) end, "unique: dim 3 is out of range for a tensor with 2 dims")
    H.raises(function() return x:unique({ dim = 0 }) end, "unique: dim 0 is invalid")
    H.raises(function() return x:unique({ dim = "a" }) end, "unique", "integer dim")
    H.raises(function() return tide.tensor(2):unique({ dim = 1 }) end, "unique: dim 1 is out of range for a 0-dim tensor")
    H.raises(function() return tide.ones(3, 0):unique({ dim = 1 }) end,
      "unique: the input [3,0] has a zero-sized dim besides dim 1, so its slices along dim 1 cannot be told apart")
    H.raises(function() return tide.ones(0, 0):unique_consecutive({ dim = 2 }) end,
      "unique_consecutive: the input [0,0] has a zero-sized dim besides dim 2")
    H.raises(function() return tide.compile(function(a) return a:unique({ dim = 1 }) end)(x) end,
      "unique: the output's size depends")
    local core = require "tide.core"
    local o = core.ffi.new("td_tensor *[3]")
    assert.is_true(core.C.td_unique_dim(x.p, 2, 0, o, o + 1, o + 2) ~= 0)
    assert.matches("unique: dim 2 is out of range for a tensor of shape [3,2]", core.last_error(), 1, true)
  end)
end)

describe("unique along a dim on OpenCL #opencl", function()
  it("copies to the host and back: equal to the CPU", function()
    if not H.has_opencl() then pending("no OpenCL device") return end
    local x = tide.long({ { 1, 2 }, { 0, 3 }, { 1, 2 } })
    local v, inv, cnt = x:to("opencl"):unique({ dim = 1, return_inverse = true, return_counts = true })
    assert.equal(1, v.device_type)
    local cv, ci, cc = x:unique({ dim = 1, return_inverse = true, return_counts = true })
    H.close(v:cpu(), cv, 0); H.close(inv:cpu(), ci, 0); H.close(cnt:cpu(), cc, 0)
  end)
end)
