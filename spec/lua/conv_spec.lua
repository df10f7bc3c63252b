-- tide.nn.conv (functional): conv1d/conv2d (stride, padding, dilation, groups),
-- max/avg/adaptive pooling and batch_norm against PyTorch's values, with
-- float64 gradchecks and error messages.
local tide = require "tide"
local H = require "helper"
local F = require "tide.nn.conv"

-- sin(0.7 k + 0.3) over the elements in order: the same inputs as the torch script
local function inp(...)
  local s = { ... }
  local n = 1
  for _, v in ipairs(s) do n = n * v end
  return (tide.arange(n, { dtype = "float64" }) * 0.7 + 0.3):sin():view(s)
end

describe("convolution", function()
  it("conv2d with stride, padding, dilation and groups matches torch", function()
    local y = F.conv2d(inp(2, 4, 5, 6), inp(6, 2, 3, 2) * 0.5, inp(6), { stride = { 2, 1 }, padding = 1, dilation = { 1, 2 }, groups = 2 })
    assert.are.same({ 2, 6, 3, 6 }, y:size())
    H.close(y:sum(), 80.44848674, 1e-8)
    H.close(y[{ 2, 6, 2 }], { 0.4074684117, 0.8566254146, 0.3790476766, -0.5645684332, -1.5304255139, -1.3458271725 }, 1e-9)
  end)

  it("conv1d matches torch", function()
    local y = F.conv1d(inp(2, 3, 7), inp(4, 3, 3), inp(4), { stride = 2, padding = 1 })
    assert.are.same({ 2, 4, 4 }, y:size())
    H.close(y[{ 2, 3 }], { 1.0975850768, -1.3232606975, -1.2925976351, 1.126616117 }, 1e-9)
  end)

  it("conv2d and conv1d pass gradcheck for input, weight and bias", function()
    H.gradcheck(function(x, w, b) return F.conv2d(x, w, b, { stride = 2, padding = { 1, 0 }, groups = 2 }) end,
      { H.rand64 { 1, 4, 5, 4 }, H.rand64 { 2, 2, 3, 2 }, H.rand64 { 2 } })
    H.gradcheck(function(x, w) return F.conv1d(x, w, nil, { dilation = 2, padding = 2 }) end,
      { H.rand64 { 2, 2, 6 }, H.rand64 { 3, 2, 2 } })
  end)

  it("rejects mismatched shapes with the values", function()
    H.raises(function() F.conv2d(tide.zeros(1, 3, 5, 5), tide.zeros(2, 2, 3, 3)) end,
      "conv2d: input [1,3,5,5] with 1 groups needs weight (O, 3, kh, kw)")
    H.raises(function() F.conv2d(tide.zeros(3, 5, 5), tide.zeros(2, 3, 3, 3)) end, "conv2d: expected a 4-D input (N, C, H, W), got [3,5,5]")
    H.raises(function() F.conv1d(tide.zeros(1, 3, 5), tide.zeros(2, 3)) end, "conv1d: weight must be a 3-D tensor")
  end)
end)

describe("pooling", function()
  it("max_pool2d with padding never picks the padding, matches torch", function()
    local m = F.max_pool2d(inp(1, 2, 5, 5), 3, { stride = 2, padding = 1 })
    H.close(m[{ 1, 2 }], { { 0.6374225962, 0.8676441006, 0.9839066946 }, { 0.6374225962, 0.9807632477, 0.9807632477 },
      { 0.8838704235, 0.9773425124, 0.6111551463 } }, 1e-9)
    local neg = F.max_pool2d(-tide.ones(1, 1, 2, 2), 2, { stride = 1, padding = 1 })
    H.close(neg, { { { { -1, -1, -1 }, { -1, -1, -1 }, { -1, -1, -1 } } } }, 1e-12)
  end)

  it("avg_pool2d and adaptive_avg_pool2d match torch", function()
    H.close(F.avg_pool2d(inp(1, 2, 5, 5), 2)[{ 1, 1 }], { { -0.1130992043, 0.1024491676 }, { -0.0041483844, 0.1642474531 } }, 1e-9)
    H.close(F.adaptive_avg_pool2d(inp(1, 1, 5, 7), { 3, 2 })[{ 1, 1 }],
      { { 0.3385957308, 0.2068994196 }, { -0.324913528, 0.2076904654 }, { 0.1895251773, -0.5444836312 } }, 1e-9)
    H.close(F.adaptive_avg_pool2d(inp(2, 3, 4, 6), 1):view(2, 3), inp(2, 3, 4, 6):mean({ 3, 4 }), 1e-12)
  end)

  it("pooling passes gradcheck", function()
    H.gradcheck(function(x) return F.max_pool2d(x, 2, { stride = 1, padding = 1 }) end, { H.rand64 { 1, 2, 3, 4 } })
    H.gradcheck(function(x) return F.avg_pool2d(x, { 2, 3 }, { stride = 1 }) end, { H.rand64 { 2, 1, 4, 5 } })
    H.gradcheck(function(x) return F.adaptive_avg_pool2d(x, { 2, 3 }) end, { H.rand64 { 1, 2, 5, 7 } })
  end)

  it("rejects padding larger than half the kernel", function()
    H.raises(function() F.max_pool2d(tide.zeros(1, 1, 4, 4), 2, { padding = 2 }) end, "padding {2, 2} must be at most half the kernel {2, 2}")
  end)
end)

describe("batch_norm", function()
  it("training normalizes with batch statistics and updates the running ones as torch", function()
    local rm, rv = tide.zeros(3, { dtype = "float64" }), tide.ones(3, { dtype = "float64" })
    local y = F.batch_norm(inp(4, 3, 2, 2), rm, rv, inp(3) + 1, inp(3), { training = true })
    H.close(y:sum(), 34.0584960307, 1e-8)
    H.close(y[{ 2, 3 }]:reshape(-1), { 3.4804266062, 2.5166170136, 0.6767719185, -1.1738007826 }, 1e-9)
    H.close(rm, { 0.0179718994, -0.0157933652, 0.0117898237 }, 1e-9)
    H.close(rv, { 0.9514318624, 0.9514871741, 0.9515702111 }, 1e-9)
    local e = F.batch_norm(inp(4, 3, 2, 2), rm, rv, inp(3) + 1, inp(3))
    H.close(e[{ 4, 2 }]:reshape(-1), { 0.8228383014, -0.3815368415, -0.9966898012, -0.7333045287 }, 1e-9)
  end)

  it("passes gradcheck in training mode (input, weight, bias)", function()
    H.gradcheck(function(x, w, b) return F.batch_norm(x, nil, nil, w, b, { training = true }) end,
      { H.rand64 { 3, 2, 2, 2 }, H.rand64 { 2 }, H.rand64 { 2 } })
  end)

  it("errors on one value per channel in training and on missing running stats in eval", function()
    H.raises(function() F.batch_norm(tide.zeros(1, 3), nil, nil, nil, nil, { training = true }) end, "expected more than 1 value per channel")
    H.raises(function() F.batch_norm(tide.zeros(2, 3), nil, nil) end, "running_mean and running_var are required")
  end)
end)

describe("conv, pooling and batch norm modules", function()
  local nn = tide.nn
  it("compute their functions with their parameters and print like PyTorch", function()
    local c = nn.Conv2d(4, 6, { 3, 2 }, { stride = 2, padding = 1, groups = 2, dtype = "float64" })
    assert.are.same({ 6, 2, 3, 2 }, c.weight:size())
    local x = inp(2, 4, 6, 5)
    H.close(c(x), F.conv2d(x, c.weight, c.bias, { stride = 2, padding = 1, groups = 2 }), 0)
    assert.are.equal("Conv2d(4, 6, kernel_size=(3, 2), stride=(2, 2), padding=(1, 1), groups=2)", tostring(c))
    local c1 = nn.Conv1d(3, 2, 3, { bias = false, dtype = "float64" })
    assert.is_nil(c1.bias)
    H.close(c1(inp(1, 3, 5)), F.conv1d(inp(1, 3, 5), c1.weight), 0)
    assert.are.equal("Conv1d(3, 2, kernel_size=(3,), stride=(1,), bias=False)", tostring(c1))
    assert.are.equal("MaxPool2d(kernel_size=2, stride=2, padding=0, dilation=1, ceil_mode=False)", tostring(nn.MaxPool2d(2)))
    assert.are.equal("AdaptiveAvgPool2d(output_size=(2, 3))", tostring(nn.AdaptiveAvgPool2d({ 2, 3 })))
  end)

  it("initialize conv weights and biases in PyTorch's bounds", function()
    local c = nn.Conv2d(8, 16, 3)
    local bound = 1 / math.sqrt(8 * 9)     -- kaiming_uniform(a=sqrt(5)) and the bias both give 1/sqrt(fan_in)
    assert.is_true(c.weight:abs():max():item() <= bound + 1e-7)
    assert.is_true(c.weight:abs():max():item() > 0.9 * bound)
    assert.is_true(c.bias:abs():max():item() <= bound + 1e-7)
  end)

  it("BatchNorm2d tracks running statistics in training and uses them in eval", function()
    local bn = nn.BatchNorm2d(3, { dtype = "float64" })
    local x = inp(4, 3, 2, 2)
    local y = bn(x)
    H.close(y:sum(), F.batch_norm(x, nil, nil, bn.weight, bn.bias, { training = true }):sum(), 1e-12)
    H.close(bn.running_mean, { 0.0179718994, -0.0157933652, 0.0117898237 }, 1e-9)
    assert.are.equal(1, bn.num_batches_tracked:item())
    local sd, keys = bn:state_dict()
    assert.are.same({ "weight", "bias", "running_mean", "running_var", "num_batches_tracked" }, keys)
    bn:eval()
    local before = bn.running_mean:clone()
    bn(x)
    H.close(bn.running_mean, before, 0)
    H.raises(function() bn(tide.zeros(2, 3)) end, "BatchNorm2d: expected a 4-D input, got [2,3]")
  end)

  it("train a tiny CNN: the loss goes down", function()
    tide.manual_seed(3)
    local m = nn.Sequential(nn.Conv2d(1, 4, 3, { padding = 1 }), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
      nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    local x, y = tide.randn(12, 1, 8, 8), tide.long({ 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3 })
    local opt = tide.optim.SGD(m:parameters(), { lr = 0.1, momentum = 0.9 })
    local first, last
    for step = 1, 30 do
      local loss = tide.nn.functional.cross_entropy(m(x), y)
      opt:zero_grad(); loss:backward(); opt:step()
      first = first or loss:item(); last = loss:item()
    end
    assert.is_true(last < 0.5 * first, ("loss %g -> %g"):format(first, last))
  end)
end)
