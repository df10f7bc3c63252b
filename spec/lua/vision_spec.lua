-- The vision layers of the breadth issue (tide.nn.convt, tide.nn.norm,
-- tide.nn.activation): the functional forms against PyTorch's values
-- (spec/ref/vision_reference.lua, written by spec/ref/vision_reference.py) with
-- float64 gradcheck, compiled == eager and OpenCL == CPU (spec/ref_walk.lua);
-- then the layers: PyTorch's parameter shapes and names, forward through the
-- functional form, running statistics, dropout's masks, and clear errors.
local tide = require "tide"
local H = require "helper"
local nn, F = tide.nn, tide.nn.functional

require("ref_walk")(dofile("spec/ref/vision_reference.lua"), "vision layers against PyTorch")

local function sizes(m)
  local s = {}
  for k, v in pairs(m:state_dict()) do s[k] = v:size() end
  return s
end

describe("vision layers", function()
  it("ConvTranspose2d/1d and Conv3d have PyTorch's weight layout and call the functional form", function()
    local m = nn.ConvTranspose2d(4, 6, { 3, 2 }, { stride = 2, padding = 1, output_padding = 1, groups = 2 }):double()
    assert.same({ weight = { 4, 3, 3, 2 }, bias = { 6 } }, sizes(m))
    local x = tide.randn({ 2, 4, 5, 5 }, { dtype = tide.float64 })
    local y = m(x)
    assert.same({ 2, 6, 10, 9 }, y:size())
    H.close(y, F.conv_transpose2d(x, m.weight, m.bias, { stride = 2, padding = 1, output_padding = 1, groups = 2 }), 1e-12)
    -- output_size picks the output_padding, as PyTorch's forward(x, output_size)
    assert.same({ 2, 6, 9, 8 }, m(x, { 9, 8 }):size())
    H.raises(function() return m(x, { 12, 8 }) end, "ConvTranspose2d: output_size 12 in spatial dim 1 is out of the reachable range 9..10")
    local m1 = nn.ConvTranspose1d(2, 3, 4, { bias = false })
    assert.same({ weight = { 2, 3, 4 } }, sizes(m1))
    assert.same({ 1, 3, 8 }, m1(tide.randn(1, 2, 5)):size())
    local m3 = nn.Conv3d(2, 4, 3, { padding = 1 })
    assert.same({ weight = { 4, 2, 3, 3, 3 }, bias = { 4 } }, sizes(m3))
    assert.same({ 1, 4, 3, 4, 5 }, m3(tide.randn(1, 2, 3, 4, 5)):size())
    assert.equal("ConvTranspose2d(4, 6, kernel_size=(3, 2), stride=(2, 2), padding=(1, 1), output_padding=(1, 1), groups=2)",
      tostring(m))
  end)

  it("float32 transposed convolution trains: gradients of x, weight and bias", function()
    local m = nn.ConvTranspose2d(3, 2, 4, { stride = 2, padding = 1 })
    local x = tide.randn(2, 3, 5, 5):requires_grad_()
    local y = m(x)
    assert.same({ 2, 2, 10, 10 }, y:size())
    y:pow(2):sum():backward()
    assert.same({ 3, 2, 4, 4 }, m.weight.grad:size())
    assert.same({ 2 }, m.bias.grad:size())
    assert.same({ 2, 3, 5, 5 }, x.grad:size())
    -- dL/dx is conv2d of dL/dy (the transposed conv's adjoint)
    local gy = (y * 2):detach()
    H.close(x.grad, F.conv2d(gy, m.weight:detach(), nil, { stride = 2, padding = 1 }), 1e-4)
  end)

  it("GroupNorm, InstanceNorm and LocalResponseNorm", function()
    local g = nn.GroupNorm(2, 4)
    assert.same({ weight = { 4 }, bias = { 4 } }, sizes(g))
    local x = tide.randn(3, 4, 5)
    H.close(g(x), F.group_norm(x, 2), 1e-6)
    assert.equal("GroupNorm(2, 4, eps=1e-05, affine=True)", tostring(g))
    local inorm = nn.InstanceNorm1d(4, { track_running_stats = true, affine = true })
    assert.same({ weight = { 4 }, bias = { 4 }, running_mean = { 4 }, running_var = { 4 }, num_batches_tracked = {} }, sizes(inorm))
    local y = inorm(x)
    H.close(y:mean(3), tide.zeros(3, 4), 1e-5)
    assert.equal(1, inorm.num_batches_tracked:item())
    -- running mean: 0.9 * 0 + 0.1 * the batch mean of the instance means
    H.close(inorm.running_mean, x:mean(3):mean(1) * 0.1, 1e-6)
    inorm:eval()
    local ye = inorm(x)
    H.close(ye, (x - inorm.running_mean:view(1, 4, 1)) / (inorm.running_var:view(1, 4, 1) + 1e-5):sqrt(), 1e-5)
    -- unbatched input: one image
    local i2 = nn.InstanceNorm2d(2)
    assert.same({ 2, 3, 3 }, i2(tide.randn(2, 3, 3)):size())
    assert.same({}, sizes(i2))
    local l = nn.LocalResponseNorm(3, { alpha = 0.1 })
    H.close(l(x), F.local_response_norm(x, 3, { alpha = 0.1 }), 1e-6)
  end)

  it("PReLU, activations, Upsample and pixel shuffles as layers", function()
    local p = nn.PReLU({ num_parameters = 3 })
    assert.same({ weight = { 3 } }, sizes(p))
    H.close(p.weight, { 0.25, 0.25, 0.25 }, 0)
    local x = tide.tensor({ { -4, 2, -1 } })
    H.close(p(x), { { -1, 2, -0.25 } }, 1e-7)
    H.close(nn.Hardtanh()(tide.tensor { -3, 0.5, 3 }), { -1, 0.5, 1 }, 0)
    assert.equal("Softplus(beta=1.0, threshold=20.0)", tostring(nn.Softplus()))
    assert.equal("Hardtanh(min_val=-1.0, max_val=1.0)", tostring(nn.Hardtanh()))
    assert.equal("Upsample(scale_factor=2.0, mode='bilinear')", tostring(nn.Upsample({ scale_factor = 2, mode = "bilinear" })))
    assert.same({ 1, 1, 4, 6 }, nn.Upsample({ scale_factor = 2 })(tide.ones(1, 1, 2, 3)):size())
    assert.same({ 1, 2, 4, 4 }, nn.PixelShuffle(2)(tide.ones(1, 8, 2, 2)):size())
    assert.same({ 1, 8, 2, 2 }, nn.PixelUnshuffle(2)(tide.ones(1, 2, 4, 4)):size())
  end)

  it("Dropout1d/2d zero whole channels; AlphaDropout keeps mean and variance", function()
    tide.manual_seed(7)
    local x = tide.ones(4, 16, 3, 5)
    local y = nn.Dropout2d(0.5)(x)
    local per = y:sum({ 3, 4 }):reshape(-1):totable()
    local zeros = 0
    for _, v in ipairs(per) do
      assert(v == 0 or math.abs(v - 30) < 1e-5, "a channel is neither dropped nor kept whole: " .. v)
      if v == 0 then zeros = zeros + 1 end
    end
    assert(zeros > 10 and zeros < 54, "dropped channels: " .. zeros)
    local d1 = nn.Dropout1d(0.25)
    d1:eval()
    H.close(d1(tide.ones(2, 3, 4)), tide.ones(2, 3, 4), 0)
    local a = F.alpha_dropout(tide.randn(200000), 0.2, true)
    assert(math.abs(a:mean():item()) < 0.02, "mean " .. a:mean():item())
    assert(math.abs(a:std():item() - 1) < 0.02, "std " .. a:std():item())
    local ad = nn.AlphaDropout(0.2)
    ad:eval()
    H.close(ad(tide.ones(3)), { 1, 1, 1 }, 0)
  end)

  it("MaxPool1d, AvgPool1d, AdaptiveMaxPool2d and EmbeddingBag as layers", function()
    local x = tide.randn(2, 3, 8)
    local y, i = nn.MaxPool1d(2, { return_indices = true })(x)
    H.close(y, F.max_pool1d(x, 2), 0)
    H.close(x:gather(3, i), y, 0)          -- indices are positions in L
    H.close(nn.AvgPool1d(4)(x), x:view(2, 3, 2, 4):mean(4), 1e-6)
    local img = tide.randn(2, 3, 7, 5)
    local v, k = nn.AdaptiveMaxPool2d({ 3, 2 }, { return_indices = true })(img)
    H.close(v, F.adaptive_max_pool2d(img, { 3, 2 }), 0)
    H.close(img:reshape(2, 3, 35):gather(3, k:reshape(2, 3, 6)), v:reshape(2, 3, 6), 0)
    local bag = nn.EmbeddingBag(6, 3, { mode = "sum" })
    assert.same({ weight = { 6, 3 } }, sizes(bag))
    local got = bag(tide.long { 1, 2, 6, 6 }, tide.long { 1, 3 })
    H.close(got, tide.stack({ bag.weight[1] + bag.weight[2], bag.weight[6] * 2 }), 1e-6)
    -- a bag of the padding index alone is zeros; the padding row starts at zero
    local pb = nn.EmbeddingBag(4, 2, { mode = "mean", padding_idx = 2 })
    H.close(pb.weight[2], { 0, 0 }, 0)
    H.close(pb(tide.long { { 2, 2 }, { 1, 2 } }), tide.stack({ tide.zeros(2), pb.weight[1] }), 1e-6)
    -- trains: gradients reach the bag's rows
    bag(tide.long { { 1, 3 } }):sum():backward()
    H.close(bag.weight.grad:sum(2), { 3, 0, 3, 0, 0, 0 }, 0)
    -- compiled with offsets as an input: new offsets give new bags
    local c = tide.compile(function(i, o) return F.embedding_bag(i, bag.weight:detach(), o) end)
    H.close(c(tide.long { 1, 2, 3 }, tide.long { 1, 2 }), F.embedding_bag(tide.long { 1, 2, 3 }, bag.weight:detach(), tide.long { 1, 2 }), 1e-6)
    H.close(c(tide.long { 1, 2, 3 }, tide.long { 1, 3 }), F.embedding_bag(tide.long { 1, 2, 3 }, bag.weight:detach(), tide.long { 1, 3 }), 1e-6)
  end)

  it("bad input gives errors naming the op and the values", function()
    H.raises(function() return F.max_pool1d(tide.ones(2, 3, 4, 5), 2) end, "max_pool1d: expected a 2-D or 3-D input (N, C, L), got [2,3,4,5]")
    H.raises(function() return F.avg_pool1d(tide.ones(2, 3, 4), 0) end, "bad argument #2 to 'avg_pool1d'")
    H.raises(function() return F.adaptive_max_pool2d(tide.ones(2, 3), 2) end, "adaptive_max_pool2d: expected a 3-D or 4-D input")
    H.raises(function() return F.adaptive_max_pool2d(tide.ones(1, 1, 4, 5), 2 ^ 60) end,
      "adaptive_max_pool2d: size overflows int64 (output {1152921504606846976, 1152921504606846976} of input [1,1,4,5])")
    H.raises(function() return F.embedding_bag(tide.long { 1, 2 }, tide.ones(3, 2)) end,
      "embedding_bag: a 1-D input needs offsets")
    H.raises(function() return F.embedding_bag(tide.long { 1, 2 }, tide.ones(3, 2), tide.long { 2 }) end,
      "embedding_bag: offsets must start at 1")
    H.raises(function() return F.embedding_bag(tide.long { { 1, 2 } }, tide.ones(3, 2), nil, { mode = "max", per_sample_weights = tide.ones(1, 2) }) end,
      "embedding_bag: per_sample_weights only go with mode 'sum', got mode 'max'")
    H.raises(function() return nn.EmbeddingBag(3, 2, { mode = "median" }) end, "EmbeddingBag: mode must be 'sum', 'mean' or 'max', got median")
    H.raises(function() return F.conv_transpose2d(tide.ones(1, 3, 4, 4), tide.ones(2, 1, 3, 3)) end,
      "conv_transpose2d: input [1,3,4,4] with 1 groups needs weight (3, Cout/groups, k...)")
    H.raises(function() return F.conv_transpose2d(tide.ones(1, 2, 4, 4), tide.ones(2, 1, 3, 3), nil, { stride = 2, output_padding = 2 }) end,
      "conv_transpose2d: output_padding {2, 2} must be smaller than stride {2, 2} or dilation {1, 1}")
    H.raises(function() return F.conv_transpose2d(tide.ones(4, 4), tide.ones(2, 1, 3, 3)) end,
      "conv_transpose2d: expected a 3-D or 4-D input")
    H.raises(function() return F.conv_transpose2d(tide.ones(1, 2, 1, 1), tide.ones(2, 1, 1, 1), nil, { padding = 1 }) end,
      "conv_transpose2d: input [1,2,1,1] gives an output of size -1 in spatial dim 1")
    H.raises(function() return F.conv_transpose1d(tide.ones(1, 2, 4), tide.ones(2, 1, 3, 3)) end,
      "conv_transpose1d: weight must be a 3-D tensor (Cin, Cout/groups, k), got [2,1,3,3]")
    H.raises(function() return F.conv3d(tide.ones(1, 2, 2, 4, 4), tide.ones(1, 2, 3, 1, 1)) end,
      "conv3d: the depth 3 kernel (dilation 1) does not fit the padded depth 2")
    H.raises(function() return nn.ConvTranspose2d(3, 4, 3, { groups = 2 }) end,
      "ConvTranspose2d: in_channels 3 and out_channels 4 must be divisible by groups 2")
    H.raises(function() return F.group_norm(tide.ones(2, 5, 3), 2) end,
      "group_norm: 5 channels of input [2,5,3] are not divisible by num_groups 2")
    H.raises(function() return nn.GroupNorm(2, 4)(tide.ones(2, 3, 3)) end, "GroupNorm: expected an input (N, 4, ...), got [2,3,3]")
    H.raises(function() return F.instance_norm(tide.ones(2, 3, 1)) end,
      "instance_norm: expected more than 1 spatial element when training, got input [2,3,1]")
    H.raises(function() return nn.InstanceNorm2d(3)(tide.ones(2, 3)) end, "InstanceNorm2d: expected a 3-D or 4-D input, got [2,3]")
    H.raises(function() return F.local_response_norm(tide.ones(2, 3), 2) end, "local_response_norm: expected an input (N, C, ...) of 3 or more dims")
    H.raises(function() return F.prelu(tide.ones(2, 4), tide.ones(3)) end,
      "prelu: weight of 3 entries needs an input with 3 channels (dim 2), got [2,4]")
    H.raises(function() return nn.Dropout2d(1.5) end, "Dropout2d: probability has to be between 0 and 1, but got 1.5")
    H.raises(function() return F.dropout2d(tide.ones(2, 3)) end, "dropout2d: expected a 3-D or 4-D input, got [2,3]")
    H.raises(function() return nn.Hardtanh({ min_val = 1, max_val = 0 }) end, "Hardtanh: max_val 0 must be greater than min_val 1")
    H.raises(function() return nn.ELU({ alpah = 1 }) end, "ELU: unknown option 'alpah'")
  end)
end)

-- The fused transposed convolution (jit/jit_conv.c td_conv_transpose2d) against
-- the composite (matmul + fold; F.fused = false): values and gradients across
-- strides, padding, output_padding, dilation, groups, 1x1 kernels and the
-- flipped-kernel path (stride 1, 32+ channels a group), float32 and float64;
-- float64 gradcheck to the second order (the create_graph backward composes ops).
describe("fused conv_transpose2d", function()
  local A = tide.autograd
  local composite, run = H.composite, H.value_and_grads
  local TOL = { float32 = 2e-4, float64 = 1e-10 }
  -- name, N, Cin, H, W, Cout, kh, kw, opts
  local cases = {
    { "4x4 stride 2 padding 1", 2, 3, 5, 6, 4, 4, 4, { stride = 2, padding = 1 } },
    { "output_padding, (2, 3) stride", 2, 4, 4, 3, 6, 3, 2, { stride = { 2, 3 }, padding = { 1, 0 }, output_padding = { 1, 2 } } },
    { "groups 2, dilation 2", 1, 4, 5, 5, 6, 3, 3, { groups = 2, dilation = 2, padding = 1 } },
    { "1x1", 3, 5, 4, 4, 2, 1, 1, {} },
    { "stride 1, 32 channels (flipped path)", 2, 8, 6, 5, 32, 3, 3, { padding = 1 } },
  }
  for _, dt in ipairs { tide.float32, tide.float64 } do
    for _, c in ipairs(cases) do
      it(dt.name .. " " .. c[1], function()
        local name, N, Cin, Hh, W, Cout, kh, kw, opts = unpack(c)
        local g = opts.groups or 1
        tide.manual_seed(5)
        local x = tide.randn(N, Cin, Hh, W, { dtype = dt }):requires_grad_()
        local w = (tide.randn(Cin, Cout / g, kh, kw, { dtype = dt }) * 0.3):requires_grad_()
        local b = tide.randn(Cout, { dtype = dt }):requires_grad_()
        local f = function() return F.conv_transpose2d(x, w, b, opts) end
        local yf, gf = run(f, { x, w, b })
        local yc, gc = composite(run, f, { x, w, b })
        H.close(yf, yc, TOL[dt.name], name .. ": y")
        for i = 1, 3 do H.close(gf[i], gc[i], TOL[dt.name] * 10, name .. ": gradient " .. i) end
      end)
    end
  end

  it("runs no unfold, matmul or fold", function()
    local x = tide.randn(2, 4, 5, 5):requires_grad_()
    local w = tide.randn(4, 3, 3, 3):requires_grad_()
    local rep = tide.profiler.profile(function()
      F.conv_transpose2d(x, w, nil, { stride = 2 }):backward(tide.randn(2, 3, 11, 11))
    end)
    local names = {}
    for _, e in ipairs(rep.events) do
      assert(e.name ~= "unfold" and e.name ~= "matmul" and e.name ~= "fold", e.name)
      names[e.name] = true
    end
    assert(names.conv_transpose2d, "the fused op ran")
  end)

  it("gradcheck in float64, first and second order", function()
    local x, w, b = H.rand64({ 2, 2, 3, 4 }), H.rand64({ 2, 3, 3, 2 }), H.rand64({ 3 })
    local opts = { padding = 1, stride = { 2, 1 }, output_padding = { 1, 0 } }
    H.gradcheck(function(a, ww, bb) return F.conv_transpose2d(a, ww, bb, opts) end, { x, w, b })
    tide.manual_seed(12)
    local v = tide.randn(F.conv_transpose2d(x, w, b, opts):size(), { dtype = tide.float64 })
    H.gradcheck(function(a, ww, bb)
      return A.enable_grad(function()
        return unpack(A.grad({ (F.conv_transpose2d(a, ww, bb, opts) * v):sum() }, { a, ww, bb }, { create_graph = true }))
      end)
    end, { x, w, b })
  end)
end)
