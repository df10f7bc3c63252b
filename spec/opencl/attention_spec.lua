-- Fused scaled_dot_product_attention on the OpenCL device (opencl/cl_attn.c):
-- flash attention forward (key tiles in local memory, online softmax) and its
-- backward (rows kernel: lse, D and dq; keys kernel: dk and dv) equal the
-- CPU's fused op, causal or not, in the layouts a GPT uses, with O(T) memory.
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
  local got = { grads(d[1], d[2], d[3], opts, d[4]) }
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

  it("masks and dropout compose from matmul and softmax on the device, as on the CPU", function()
    tide.manual_seed(8)
    local q, k, v = tide.randn(2, 6, 8), tide.randn(2, 9, 8), tide.randn(2, 9, 4)
    local bm = tide.rand(6, 9):gt(0.3)
    local fm = tide.randn(2, 6, 9)
    for _, m in ipairs({ bm, fm }) do
      local want = F.scaled_dot_product_attention(q, k, v, { attn_mask = m })
      local d = H.to_opencl({ q, k, v, m })
      H.agree(F.scaled_dot_product_attention(d[1], d[2], d[3], { attn_mask = d[4] }), want, 2e-5, "mask", 2e-5)
    end
  end)

  it("a head size past what the kernel keeps in registers composes instead", function()
    tide.manual_seed(9)
    local q, k, v = tide.randn(1, 5, 300), tide.randn(1, 7, 300), tide.randn(1, 7, 3)
    local want = F.scaled_dot_product_attention(q, k, v, { is_causal = true })
    local d = H.to_opencl({ q, k, v })
    H.agree(F.scaled_dot_product_attention(d[1], d[2], d[3], { is_causal = true }), want, 2e-5, "D = 300", 2e-5)
  end)
end)
