-- The Lua library on OpenCL tensors (PoCL's CPU device in the tests): printing,
-- creation with {device=}, moves between devices, modules and optimizers on the
-- device (a few training steps equal the CPU's), checkpoints, tide.compile's
-- eager fallback, and the device errors. Skipped when no OpenCL device exists.
local tide = require "tide"
local H = require "spec.helper"
local nn, F = tide.nn, tide.nn.functional

local CL = { device = "opencl" }

local function on_cl(x)
  assert.is_true(tide.is_tensor(x))
  assert.equal(1, x.device_type)
  assert.truthy(x.device:match("^opencl:%d+$"), x.device)
end

-- a small MLP with fixed weights (seeded) on the CPU
local function mlp()
  tide.manual_seed(5)
  return nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
end

-- n steps of cross_entropy training on device; returns the losses and the model
local function train(device, make_opt, n)
  local model = mlp()
  local opt = make_opt(model:parameters())     -- built before the move: it keeps the same handles
  model:to(device)
  tide.manual_seed(9)
  local X, Y = tide.randn(16, 6), tide.randint(1, 4, { 16 })
  X, Y = X:to(device), Y:to(device)
  local losses = {}
  for i = 1, n do
    local loss = F.cross_entropy(model(X), Y)
    opt:zero_grad(); loss:backward(); opt:step()
    losses[i] = loss:item()
  end
  return losses, model, opt
end

H.describe_cl("tide on OpenCL #opencl", function()
  local dev

  setup(function()
    dev = tide.zeros(1, CL).device          -- "opencl:N", the device the process opened
  end)

  describe("tide.opencl", function()
    it("reports the device", function()
      assert.is_true(tide.opencl.is_available())
      assert.is_true(tide.opencl.device_count() >= 1)
      assert.equal("string", type(tide.opencl.device_name()))
      assert.is_true(#tide.opencl.device_name() > 0)
      assert.equal(dev, "opencl:" .. tide.opencl.current_device())
    end)
  end)

  describe("printing", function()
    it("summarizes a long device tensor from its corners only, as the CPU prints it", function()
      local d = "device='" .. dev .. "'"
      -- an expanded [2^62]: only the shown elements are copied to the host (was 'empty: ... too large')
      local big = tide.expand(tide.tensor(7, { dtype = tide.int64, device = "opencl" }), { 2 ^ 62 })
      assert.equal("tensor([7, 7, 7,  ..., 7, 7, 7], " .. d .. ")", tostring(big))
      tide.manual_seed(3)
      for _, shape in ipairs { { 50, 40, 3 }, { 2000 }, { 3, 400 }, { 10, 3 } } do
        local a = tide.randn(shape)
        local on = tostring(a:to("opencl")):gsub(",%s*" .. d:gsub("%p", "%%%0") .. "%)$", ")")   -- the suffix may wrap
        assert.equal(tostring(a), on)
      end
    end)

    it("prints like PyTorch prints a CUDA tensor", function()
      local d = "device='" .. dev .. "'"
      assert.equal("tensor([1.5000, 2.0000], " .. d .. ")", tostring(tide.tensor({ 1.5, 2 }, CL)))
      assert.equal("tensor([[1, 2],\n        [3, 4]], " .. d .. ")", tostring(tide.long({ { 1, 2 }, { 3, 4 } }, CL)))
      assert.equal("tensor([1., 2.], " .. d .. ", dtype=float64)",
        tostring(tide.tensor({ 1, 2 }, { device = "opencl", dtype = "float64" })))
      assert.equal("tensor([ True, False], " .. d .. ")", tostring(tide.tensor({ true, false }, CL)))
      assert.equal("tensor(3.5000, " .. d .. ")", tostring(tide.tensor(3.5, CL)))
      assert.equal("tensor([], " .. d .. ")", tostring(tide.zeros(0, CL)))
      assert.equal("tensor([1., 1.], " .. d .. ", requires_grad=True)",
        tostring(tide.ones(2, { device = "opencl", requires_grad = true })))
      local x = tide.ones(2, { device = "opencl", requires_grad = true })
      assert.equal("tensor([2., 2.], " .. d .. ", grad_fn=<MulBackward0>)", tostring(x * 2))
      -- views print their own elements
      local m = tide.arange(6, CL):view(2, 3)
      assert.equal("tensor([[0, 3],\n        [1, 4],\n        [2, 5]], " .. d .. ")", tostring(m:t()))
    end)

    it("summarizes large tensors and wraps the suffix like PyTorch", function()
      local s = tostring(tide.arange(2000, { device = "opencl", dtype = "float32" }))
      assert.equal("tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.9970e+03, 1.9980e+03,\n"
        .. "        1.9990e+03], device='" .. dev .. "')", s)
    end)

    it("still prints traced tensors inside tide.compile as <traced>", function()
      local seen
      local f = tide.compile(function(x) local y = x * 2; seen = tostring(y); return y end)
      H.close(f(tide.ones(3)), { 2, 2, 2 }, 0)
      assert.equal("tensor(<traced [3]>)", seen)
    end)
  end)

  describe("creation with {device=}", function()
    it("makes every kind of tensor on the device with the CPU's values", function()
      local cases = {
        { function(o) return tide.zeros(2, 3, o) end },
        { function(o) return tide.ones({ 2, 3 }, o) end },
        { function(o) return tide.full({ 2, 2 }, 7.5, o) end },
        { function(o) return tide.arange(1, 10, 2, o) end },
        { function(o) return tide.linspace(0, 1, 5, o) end },
        { function(o) return tide.eye(3, o) end },
        { function(o) return tide.tensor({ { 1, 2 }, { 3, 4 } }, o) end },
        { function(o) return tide.rand(4, 5, o) end, true },
        { function(o) return tide.randn(4, 5, o) end, true },
        { function(o) return tide.randint(0, 10, { 6 }, o) end, true },
      }
      for i, c in ipairs(cases) do
        if c[2] then tide.manual_seed(42) end
        local want = c[1]({})
        if c[2] then tide.manual_seed(42) end
        local got = c[1]({ device = "opencl" })
        on_cl(got)
        assert.equal(want.dtype, got.dtype)
        assert.same(want:size(), got:size())
        H.close(got:cpu(), want, 0, "case " .. i)
      end
      local e = tide.empty(3, { device = "opencl:" .. tide.opencl.current_device(), dtype = "float64" })
      on_cl(e)
      assert.equal(tide.float64, e.dtype)
    end)

    it("sets requires_grad on the device tensor, a leaf", function()
      local w = tide.randn(3, { device = "opencl", requires_grad = true })
      on_cl(w)
      assert.is_true(w.requires_grad)
      assert.is_true(w.is_leaf)
      ;(w * w):sum():backward()
      on_cl(w.grad)
      H.close(w.grad:cpu(), (w:cpu() * 2), 1e-6)
    end)

    it("*_like functions follow their argument's device unless told", function()
      local x = tide.randn(2, 3, CL)
      for _, name in ipairs { "zeros_like", "ones_like", "empty_like", "rand_like", "randn_like" } do
        on_cl(tide[name](x))
        assert.equal("cpu", tide[name](x, { device = "cpu" }).device)
        assert.equal("cpu", tide[name](tide.zeros(2)).device)
      end
      on_cl(tide.full_like(x, 3))
      H.close(tide.full_like(x, 3):cpu(), tide.full({ 2, 3 }, 3), 0)
      on_cl(tide.randint_like(x, 5))
      on_cl(tide.tensor(x))
      assert.equal("cpu", tide.tensor(x, { device = "cpu" }).device)
      H.close(tide.tensor(x, { device = "cpu" }), x:cpu(), 0)
    end)

    it("rejects an unknown device by name", function()
      H.raises(function() tide.zeros(3, { device = "cuda" }) end, "zeros: unknown device 'cuda'", "opencl:N")
      H.raises(function() tide.tensor({ 1 }, { device = "gpu" }) end, "tensor: unknown device 'gpu'")
      H.raises(function() tide.ones_like(tide.zeros(1), { device = "opencl1" }) end, "ones_like: unknown device 'opencl1'")
      H.raises(function() tide.zeros(2):to("cuda:0") end, "to: unknown device 'cuda:0'")
    end)
  end)

  describe("moving tensors", function()
    it("to and cpu round trips keep values, dtypes and shapes", function()
      for _, dt in ipairs { "float32", "float64", "int64", "int32", "uint8", "bool" } do
        local x = tide.tensor({ { 0, 1, 2 }, { 3, 4, 5 } }, { dtype = dt })
        local y = x:to("opencl")
        on_cl(y)
        assert.equal(x.dtype, y.dtype)
        H.close(y:cpu(), x, 0, dt)
        H.close(y:to("cpu"), x, 0, dt)
        H.close(x:opencl():cpu(), x, 0, dt)
      end
      local x = tide.randn(3, 4)
      assert.equal(x, x:to("cpu"))                        -- nothing to do: the same tensor
      local y = x:to("opencl")
      assert.equal(y, y:to("opencl"))
      H.close(y:t():cpu(), x:t(), 0)                      -- a transposed view
      H.close(y:narrow(2, 2, 2):cpu(), x:narrow(2, 2, 2), 0)
      H.close(x:t():to("opencl"):cpu(), x:t(), 0)         -- a CPU view moved
      H.close(tide.tensor(2.5):to("opencl"):cpu(), tide.tensor(2.5), 0)
      assert.same({ { 1, 2 }, { 3, 4 } }, tide.tensor({ { 1, 2 }, { 3, 4 } }, CL):totable())
      assert.equal(4, tide.tensor({ { 1, 2 }, { 3, 4 } }, CL)[2][2]:item())
    end)

    it("changes device and dtype in one to()", function()
      local x = tide.tensor({ 1.5, -2 })
      local a = x:to("opencl", "float64")
      on_cl(a)
      assert.equal(tide.float64, a.dtype)
      local b = x:to({ device = "opencl", dtype = tide.int64 })
      on_cl(b)
      assert.equal(tide.int64, b.dtype)
      H.close(b:cpu(), { 1, -2 }, 0)
      local c = a:to({ device = "cpu", dtype = "float32" })
      assert.equal("cpu", c.device)
      assert.equal(tide.float32, c.dtype)
      local d = x:to(tide.zeros(1, { device = "opencl", dtype = "float64" }))   -- like another tensor
      on_cl(d)
      assert.equal(tide.float64, d.dtype)
    end)

    it("copy_ and fill_ work across devices", function()
      local z = tide.zeros(2, 3, CL)
      z:copy_(tide.tensor({ { 1, 2, 3 }, { 4, 5, 6 } }))
      H.close(z:cpu(), { { 1, 2, 3 }, { 4, 5, 6 } }, 0)
      local c = tide.zeros(2, 3)
      c:copy_(z)
      H.close(c, { { 1, 2, 3 }, { 4, 5, 6 } }, 0)
      z:fill_(2.5)
      H.close(z:cpu(), tide.full({ 2, 3 }, 2.5), 0)
      z:zero_()
      H.close(z:cpu(), tide.zeros(2, 3), 0)
      z[2] = 7
      z[{ 1, { 2, 3 } }] = tide.tensor({ 8, 9 })
      H.close(z:cpu(), { { 0, 8, 9 }, { 7, 7, 7 } }, 0)
      H.close(z[z:gt(7.5)]:cpu(), { 8, 9 }, 0)             -- a bool mask on the device
    end)
  end)

  describe("modules and optimizers", function()
    it("Module:to moves parameters and buffers in place, keeping the handles", function()
      local m = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3))
      local w = m[1].weight
      local before = w:clone()
      assert.equal(m, m:to("opencl"))
      assert.equal(w, m[1].weight)                        -- the same handle ...
      on_cl(w)                                           -- ... now on the device
      assert.is_true(w.requires_grad and w.is_leaf)
      H.close(w:cpu(), before, 0)
      for _, b in ipairs(m:buffers()) do on_cl(b) end
      assert.equal(tide.int64, m[2].num_batches_tracked.dtype)
      on_cl(m(tide.randn(5, 4, CL)))
      m:cpu()
      assert.equal("cpu", w.device)
      m:opencl()
      on_cl(w)
      m:to("opencl", "float64")
      on_cl(w)
      assert.equal(tide.float64, w.dtype)
      assert.equal(tide.int64, m[2].num_batches_tracked.dtype)   -- only floating tensors convert
      m:to({ device = "cpu", dtype = tide.float32 })
      assert.equal("cpu", w.device)
      assert.equal(tide.float32, w.dtype)
    end)

    it("moves gradients along and layers take {device=}", function()
      local m = nn.Linear(3, 2)
      m(tide.randn(4, 3)):sum():backward()
      local g = m.weight.grad:clone()
      m:to("opencl")
      on_cl(m.weight.grad)
      H.close(m.weight.grad:cpu(), g, 0)
      local l = nn.Linear(3, 2, { device = "opencl" })
      on_cl(l.weight)
      on_cl(l.bias)
      assert.is_true(l.weight.requires_grad)
    end)

    it("SGD with momentum trains an MLP on OpenCL as on the CPU", function()
      local sgd = function(p) return tide.optim.SGD(p, { lr = 0.1, momentum = 0.9 }) end
      local lc, mc = train("cpu", sgd, 4)
      local lg, mg, opt = train("opencl", sgd, 4)
      H.close(lg, lc, 1e-5, "losses")
      for i, p in ipairs(mg:parameters()) do
        on_cl(p)
        H.close(p:cpu(), mc:parameters()[i], 1e-5, "parameter " .. i)
      end
      for _, st in pairs(opt.state) do on_cl(st.momentum_buffer) end
    end)

    it("AdamW trains an MLP on OpenCL as on the CPU, its state on the device", function()
      local adamw = function(p) return tide.optim.AdamW(p, { lr = 0.01 }) end
      local lc, mc = train("cpu", adamw, 4)
      local lg, mg, opt = train("opencl", adamw, 4)
      H.close(lg, lc, 1e-5, "losses")
      for i, p in ipairs(mg:parameters()) do H.close(p:cpu(), mc:parameters()[i], 1e-5, "parameter " .. i) end
      local n = 0
      for _, st in pairs(opt.state) do on_cl(st.exp_avg); on_cl(st.exp_avg_sq); n = n + 1 end
      assert.equal(4, n)
    end)

    it("optimizer state follows a model moved after some steps", function()
      local model = mlp()
      local opt = tide.optim.Adam(model:parameters(), { lr = 0.01 })
      local X, Y = tide.randn(8, 6), tide.randint(1, 4, { 8 })
      local function step(x, y)
        local loss = F.cross_entropy(model(x), y)
        opt:zero_grad(); loss:backward(); opt:step()
        return loss:item()
      end
      step(X, Y)
      model:to("opencl")
      step(X:to("opencl"), Y:to("opencl"))
      for _, st in pairs(opt.state) do
        on_cl(st.exp_avg)
        assert.equal(2, st.step)
      end
    end)

    it("losses and functional ops run on device tensors", function()
      tide.manual_seed(3)
      local x = tide.randn(4, 3)
      local t = tide.long({ 1, 3, 2, 3 })
      local w = tide.tensor({ 1.0, 2.0, 0.5 })
      local xg, tg, wg = x:to("opencl"), t:to("opencl"), w:to("opencl")
      local function both(f, tol)
        local a, b = f(x, t, w), f(xg, tg, wg)
        on_cl(b)
        H.close(b:cpu(), a, tol or 1e-5)
      end
      both(function(a, b, c) return F.cross_entropy(a, b, { weight = c, label_smoothing = 0.1 }) end)
      both(function(a, b) return F.cross_entropy(a, b, { ignore_index = 3 }) end)
      both(function(a, b) return F.nll_loss(a:log_softmax(2), b, { reduction = "sum" }) end)
      both(function(a) return F.mse_loss(a, a:tanh()) end)
      both(function(a) return F.binary_cross_entropy_with_logits(a, a:sigmoid():detach()) end)
      both(function(a) return F.binary_cross_entropy(a:sigmoid(), a:gt(0):float()) end)
      both(function(a) return F.kl_div(a:log_softmax(2), a:softmax(2), { reduction = "batchmean" }) end)
      both(function(_, b) return tide.one_hot(b, 3) end)
      both(function(a) return F.layer_norm(a, 3) end)
      both(function(a) return F.dropout(a, 0.5, false) end)
      -- dropout's mask is drawn on the CPU: the same seed, the same mask
      tide.manual_seed(1); local dc = F.dropout(x, 0.5)
      tide.manual_seed(1); local dg = F.dropout(xg, 0.5)
      on_cl(dg)
      H.close(dg:cpu(), dc, 1e-6)
    end)
  end)

  describe("checkpoints", function()
    local dir
    setup(function() dir = os.tmpname(); os.remove(dir); os.execute("mkdir -p " .. dir) end)
    teardown(function() os.execute("rm -rf " .. dir) end)

    it("saves a device model's state_dict and loads it anywhere", function()
      local m = mlp():to("opencl")
      local path = dir .. "/m.safetensors"
      tide.save(m:state_dict(), path)                   -- copied to the CPU to be written
      local sd = tide.load(path)
      assert.equal("cpu", sd["0.weight"].device)
      H.close(sd["0.weight"], m[1].weight:cpu(), 0)
      local sdg = tide.load(path, { device = "opencl" })   -- map_location
      on_cl(sdg["2.bias"])
      H.close(sdg["2.bias"]:cpu(), m[3].bias:cpu(), 0)
      -- a CPU checkpoint into a model on the device, and a device one into a CPU model
      local m2 = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3)):to("opencl")
      m2:load_state_dict(sd)
      on_cl(m2[1].weight)
      H.close(m2[1].weight:cpu(), m[1].weight:cpu(), 0)
      local m3 = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3))
      m3:load_state_dict(m:state_dict())
      assert.equal("cpu", m3[1].weight.device)
      H.close(m3[1].weight, m[1].weight:cpu(), 0)
      -- a tensor on its own
      tide.save(tide.arange(5, CL), dir .. "/t.safetensors")
      H.close(tide.load(dir .. "/t.safetensors"), { 0, 1, 2, 3, 4 }, 0)
      H.raises(function() tide.load(path, { device = "cuda" }) end, "load: unknown device 'cuda'")
    end)

    it("checkpoint.save and resume work for a model and optimizer on the device", function()
      local path = dir .. "/run.ckpt"
      local _, m, opt = train("opencl", function(p) return tide.optim.AdamW(p, { lr = 0.01 }) end, 2)
      tide.checkpoint.save(path, { model = m, optimizer = opt, step = 2 })
      local m2 = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Linear(12, 3)):to("opencl")
      local opt2 = tide.optim.AdamW(m2:parameters(), { lr = 0.01 })
      assert.equal(2, tide.checkpoint.resume(path, { model = m2, optimizer = opt2 }))
      for i, p in ipairs(m2:parameters()) do
        on_cl(p)
        H.close(p:cpu(), m:parameters()[i]:cpu(), 0)
        local st = opt2.state[p]
        on_cl(st.exp_avg)
        H.close(st.exp_avg:cpu(), opt.state[m:parameters()[i]].exp_avg:cpu(), 0)
      end
    end)
  end)

  describe("tide.compile", function()
    it("compiles a function on OpenCL tensors into OpenCL kernels, silently", function()
      local f = tide.compile(function(x, y) return (x * y + 1):sum() end, { name = "cl_fn" })
      local x, y = tide.randn(5, CL), tide.randn(5, CL)
      local err, r1 = H.stderr_of(f, x, y)
      local err2, r2 = H.stderr_of(f, x, y)
      on_cl(r1)
      H.close(r1:cpu(), (x:cpu() * y:cpu() + 1):sum(), 1e-5)
      H.close(r2:cpu(), r1:cpu(), 0)
      assert.equal("", err)
      assert.equal("", err2)
      assert.equal(1, f:variants())
      local text = f:explain(x, y)
      assert.truthy(text:find("kernel void k_", 1, true) and text:find("get_local_id", 1, true), text:sub(1, 2000))
    end)

    it("compiles parameters on the device too, refuses mixed devices, and never hides other errors", function()
      local m = nn.Linear(3, 2):to("opencl")
      local x = tide.randn(4, 3, CL)
      local g = tide.compile(function() return m(x):sum() end, { name = "cl_upvalues" })
      local err, r = H.stderr_of(g)
      assert.equal("", err)
      on_cl(r)
      H.close(r:cpu(), m(x):sum():cpu(), 1e-5)
      local mix = tide.compile(function(a, b) return a:sum() + b:sum() end, { name = "cl_mixed" })
      H.raises(function() mix(tide.randn(3), tide.randn(3, CL)) end, "tensors on cpu", "move them to one device")
      local h = tide.compile(function(a) return m(a) end, { name = "cl_bad" })
      H.raises(function() H.stderr_of(h, tide.randn(4, 5, CL)) end, "linear:", "[4,5]")
    end)
  end)

  describe("profiler", function()
    it("shows the kernels and eager steps of a compiled function on the device", function()
      local P = tide.profiler
      local f = tide.compile(function(a, w) return (a:matmul(w):sin() * 2 + 1):sum(1) end, { name = "cl_prof" })
      local a, w = tide.randn(8, 16, CL), tide.randn(16, 4, CL)
      f(a, w)
      local rep = P.profile(function() return f(a, w):cpu() end)
      local function count(pred) local n = 0; for _, e in ipairs(rep.events) do if pred(e) then n = n + 1 end end; return n end
      assert.is_true(count(function(e) return e.kind == "kernel" and e.name:find("^k_") end) >= 1)
      assert.is_true(count(function(e) return e.kind == "op" and e.name == "matmul" end) >= 1)
    end)
  end)

  describe("errors", function()
    it("an op mixing devices names both", function()
      local a, b = tide.ones(3, CL), tide.ones(3)
      local err = H.raises(function() return a + b end, "add:", "different devices")
      assert.truthy(err:find("opencl", 1, true) and err:find("cpu", 1, true), err)
      H.raises(function() return tide.ones(2, 3):matmul(tide.ones(3, 2, CL)) end, "matmul:", "opencl", "cpu")
      local m = nn.Linear(3, 2):to("opencl")
      H.raises(function() return m(tide.ones(1, 3)) end, "opencl", "cpu")
    end)

    it("unknown device strings are errors", function()
      H.raises(function() tide.ones(2):to("opencl:x") end, "to: unknown device 'opencl:x'")
      H.raises(function() nn.Linear(2, 2):to("cuda") end, "to: unknown device 'cuda'")
      H.raises(function() tide.zeros(2, { device = 1 }) end, "zeros: unknown device '1'")
    end)
  end)
end)
