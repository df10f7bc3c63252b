-- Fused scaled_dot_product_attention on the OpenCL device (opencl/cl_attn.c):
-- flash attention forward (key tiles in local memory, online softmax) and its
-- backward (rows kernel: lse, D and dq; keys kernel: dk and dv) equal the
-- CPU's fused op, causal or not, bool and float masks (read in place, broadcast),
-- in the layouts a GPT uses, with O(T) memory.
-- Skipped without an OpenCL device.
local tide = require "tide"
local H = require "helper"
local F = tide.nn.functional

local function grads(q, k, v, opts, g)
  local qq, kk, vv = q:detach():requires_grad_(), k:detach():requires_grad_(), v:detach():requires_grad_()
  local o = F.scaled_dot_product_attention(qq, kk, vv, opts)
  o:backward(g)
  return o, qq.grad, kk.grad, vv.grad
end

-- forward and the three gradients on the device against the CPU
local function check(q, k, v, opts, tol, what)
  local g = tide.randn(q:size(), { dtype = q.dtype })
  local gs = g:size(); gs[#gs] = v:size(-1)
  g = tide.randn(gs, { dtype = q.dtype })
  local want = { grads(q, k, v, opts, g) }
  local d = H.to_opencl({ q, k, v, g })
  local dopts = {}
  for key, x in pairs(opts) do dopts[key] = tide.is_tensor(x) and x:to("opencl") or x end
  local got = { grads(d[1], d[2], d[3], dopts, d[4]) }
  for i, name in ipairs({ "out", "dq", "dk", "dv" }) do H.agree(got[i], want[i], tol, what .. ": " .. name, tol) end
end

H.describe_cl("fused attention on OpenCL", function()
  it("forward and backward equal the CPU's, causal or not, float32 and float64", function()
    tide.manual_seed(11)
    for _, dt in ipairs({ tide.float32, tide.float64 }) do
      local tol = dt == tide.float32 and 2e-5 or 1e-12
      for _, causal in ipairs({ false, true }) do
        local o = { is_causal = causal }
        check(tide.randn(2, 3, 37, 16, { dtype = dt }), tide.randn(2, 3, 37, 16, { dtype = dt }),
              tide.randn(2, 3, 37, 16, { dtype = dt }), o, tol, ("%s causal=%s T=37"):format(dt, causal))
        -- queries and keys of different lengths, Dv != D, one batch dim, a scale
        check(tide.randn(4, 5, 24, { dtype = dt }), tide.randn(4, 70, 24, { dtype = dt }),
              tide.randn(4, 70, 8, { dtype = dt }), { is_causal = causal, scale = 0.3 }, tol,
              ("%s causal=%s Tq=5 Tk=70"):format(dt, causal))
        check(tide.randn(70, 3, { dtype = dt }), tide.randn(9, 3, { dtype = dt }), tide.randn(9, 5, { dtype = dt }),
              o, tol, ("%s causal=%s no batch dims"):format(dt, causal))
      end
    end
  end)

  it("reads the heads of a (B, T, h, hd) tensor where they are (the GPT's transposed layout)", function()
    tide.manual_seed(3)
    local B, T, h, hd = 2, 45, 4, 32
    local x = tide.randn(B, T, 3 * h * hd)
    local function heads(t) return t:view(B, T, h, hd):transpose(2, 3) end
    local q, k, v = x:narrow(3, 1, h * hd), x:narrow(3, h * hd + 1, h * hd), x:narrow(3, 2 * h * hd + 1, h * hd)
    check(heads(q), heads(k), heads(v), { is_causal = true }, 2e-5, "transposed heads")
    check(heads(q):contiguous(), heads(k), heads(v):contiguous(), {}, 2e-5, "mixed layouts")
  end)

  it("is one fused kernel (two for the backward), with O(T) memory: no (T, T) scores", function()
    tide.manual_seed(5)
    local T, D = 1024, 32
    local q = tide.randn(1, 2, T, D, { device = "opencl" }):requires_grad_()
    local k = tide.randn(1, 2, T, D, { device = "opencl" }):requires_grad_()
    local v = tide.randn(1, 2, T, D, { device = "opencl" }):requires_grad_()
    local _ = (q + k + v):sum():item()
    collectgarbage(); collectgarbage()
    tide.reset_peak_memory_stats()
    local live0 = tide.memory_stats().opencl.live
    local report = tide.profiler.profile(function()
      local o = F.scaled_dot_product_attention(q, k, v, { is_causal = true })
      o:sum():backward()
      return q.grad:sum():item()
    end)
    local peak = tide.memory_stats().opencl.peak - live0
    -- out, its gradient, dq dk dv, a little scratch: far below one (T, T) float matrix per head (8 MiB)
    assert.is_true(peak < 3 * 2 * T * D * 4 * 4, "peak " .. peak)
    local names = {}
    for _, e in ipairs(report.events) do names[e.name] = (names[e.name] or 0) + 1 end
    assert.equal(1, names.sdpa_fwd)
    assert.equal(1, names.sdpa_bwd_rows)
    assert.equal(1, names.sdpa_bwd_keys)
    assert.is_nil(names.matmul)
    assert.is_nil(names.softmax)
  end)

  it("a gradient of the gradient (create_graph) recomposes p on the device, causal included", function()
    tide.manual_seed(4)
    local function gg(q, k, v)
      local o = F.scaled_dot_product_attention(q, k, v, { is_causal = true })
      local dq = tide.autograd.grad({ (o * o):sum() }, { q }, { create_graph = true })[1]
      return tide.autograd.grad({ (dq * dq):sum() }, { k })[1]
    end
    local q, k, v = tide.randn(2, 7, 8, { dtype = tide.float64 }), tide.randn(2, 9, 8, { dtype = tide.float64 }),
      tide.randn(2, 9, 4, { dtype = tide.float64 })
    local want = gg(q:requires_grad_(), k:requires_grad_(), v:requires_grad_())
    local d = H.to_opencl({ q, k, v })
    H.agree(gg(d[1], d[2], d[3]), want, 1e-10, "d/dk of |dq|^2", 1e-10)
  end)

  it("bool and float masks are fused on the device (read in place, broadcast) and equal the CPU's composition", function()
    tide.manual_seed(8)
    local q, k, v = tide.randn(2, 3, 6, 8), tide.randn(2, 3, 9, 8), tide.randn(2, 3, 9, 4)
    -- (a key mask per batch entry broadcast over heads and queries: padding)
    local masks = { tide.rand(6, 9):gt(0.3), tide.randn(3, 6, 9), tide.rand(2, 1, 1, 9):gt(0.5),
                    tide.randn(2, 3, 6, 9) }
    masks[1]:select(2, 1):fill_(true)                  -- no row wholly masked (NaN gradients on the CPU)
    masks[3]:select(4, 1):fill_(true)
    for i, m in ipairs(masks) do
      check(q, k, v, { attn_mask = m }, 2e-5, "mask " .. i)
    end
    -- one fused kernel, no matmul or softmax
    local d = H.to_opencl({ q, k, v, masks[1] })
    local report = tide.profiler.profile(function()
      return F.scaled_dot_product_attention(d[1], d[2], d[3], { attn_mask = d[4] }):sum():item()
    end)
    local names = {}
    for _, e in ipairs(report.events) do names[e.name] = true end
    assert.truthy(names.sdpa_fwd)
    assert.is_nil(names.matmul)
    -- a wholly masked row is NaN, as softmax over -inf
    local m = tide.ones(6, 9, { dtype = tide.bool }); m:select(1, 2):fill_(false)
    local want = F.scaled_dot_product_attention(q, k, v, { attn_mask = m })
    H.agree(F.scaled_dot_product_attention(d[1], d[2], d[3], { attn_mask = m:to("opencl") }), want, 2e-5, "masked row", 2e-5)
    assert.is_true(want[1][1][2][1]:item() ~= want[1][1][2][1]:item())
  end)

  it("the op with a mask on the CPU (a direct call) computes the same formula", function()
    local core, tensor = require "tide.core", require "tide.tensor"
    tide.manual_seed(6)
    local q, k, v, g = tide.randn(2, 5, 4), tide.randn(2, 7, 4), tide.randn(2, 7, 3), tide.randn(2, 5, 3)
    for _, m in ipairs({ tide.rand(5, 7):gt(0.2), tide.randn(2, 5, 7) }) do
      local qq, kk, vv = q:clone():requires_grad_(), k:clone():requires_grad_(), v:clone():requires_grad_()
      local want = F.scaled_dot_product_attention(qq, kk, vv, { attn_mask = m, scale = 0.4 })
      want:backward(g)
      local at = tensor.attrs(); at.s[0] = 0.4
      local o = tensor.opn(core.OP.sdpa, { q, k, v, m }, at)
      at = tensor.attrs(); at.s[0] = 0.4
      local all = tensor.opn(core.OP.sdpa_backward, { q, k, v, g, m }, at)
      local ref = tide.cat({ qq.grad:reshape(-1), kk.grad:reshape(-1), vv.grad:reshape(-1) })
      assert.is_true((o - want:detach()):abs():max():item() < 1e-6)
      assert.is_true((all - ref):abs():max():item() < 1e-5)
    end
    local at = tensor.attrs(); at.i[0] = 1
    local ok, err = pcall(tensor.opn, core.OP.sdpa, { q, k, v, tide.ones(5, 7) }, at)
    assert.is_false(ok)
    assert.truthy(tostring(err):find("is_causal and a mask cannot both be given", 1, true), err)
    ok, err = pcall(tensor.opn, core.OP.sdpa, { q, k, v, tide.ones(4, 7) }, tensor.attrs())
    assert.truthy(tostring(err):find("mask [4,7] cannot be broadcast to the scores", 1, true), err)
  end)

  it("dropout and a mask that requires grad compose from matmul and softmax on the device", function()
    tide.manual_seed(8)
    local q, k, v = tide.randn(2, 6, 8), tide.randn(2, 9, 8), tide.randn(2, 9, 4)
    local fm = tide.randn(2, 6, 9)
    local d = H.to_opencl({ q, k, v, fm })
    local dm = d[4]:requires_grad_()
    local o = F.scaled_dot_product_attention(d[1], d[2], d[3], { attn_mask = dm })
    o:sum():backward()
    local cm = fm:clone():requires_grad_()
    F.scaled_dot_product_attention(q, k, v, { attn_mask = cm }):sum():backward()
    H.agree(dm.grad, cm.grad, 2e-5, "mask grad", 2e-5)
  end)

  it("a head size past what the kernel keeps in registers composes instead", function()
    tide.manual_seed(9)
    local q, k, v = tide.randn(1, 5, 300), tide.randn(1, 7, 300), tide.randn(1, 7, 3)
    local want = F.scaled_dot_product_attention(q, k, v, { is_causal = true })
    local d = H.to_opencl({ q, k, v })
    H.agree(F.scaled_dot_product_attention(d[1], d[2], d[3], { is_causal = true }), want, 2e-5, "D = 300", 2e-5)
  end)
end)
