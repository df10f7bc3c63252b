--[[
tide.nn.convt -- transposed convolutions and the 3-D convolution: the
functions F.conv_transpose1d, F.conv_transpose2d, F.conv3d and the layers
nn.ConvTranspose1d, nn.ConvTranspose2d, nn.Conv3d, with PyTorch's shapes and
weight layouts (a PyTorch state_dict loads as is).

conv_transpose2d is the input gradient of conv2d. On the CPU outside traces
(F.fused) it is td_conv_transpose2d (jit/jit_conv.c): conv2d's backward-data
kernel forward with the bias added as it stores, and backward conv2d's forward
kernel for dx and its weight-gradient kernel for dw over one padded copy of the
gradient, whose pass also sums db (runtime/rt_convmk.c, rt_convgemm.c; no
unfolded matrix in memory). Elsewhere (tide.compile, OpenCL, F.fused = false) the composite: with
x (N, Cin, H, W) and weight (Cin, Cout/g, kh, kw), per group the columns
W_g^T x_g (Cout/g*kh*kw, H*W) summed back into the output plane by fold
(col2im), whose gradient the table ops' rules give (unfold of dY and a matmul
for x, i.e. conv2d's forward; the product of x with dY's windows for the
weight). The output size is
  (H - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1.

conv3d, float32 on the CPU outside traces with eager_isa x86-64-v4 (F.fused,
TIDE_CONV_BLAS unset), is td_conv3d (jit/jit_conv.c): rt_convmk.c's register
tiles extended by a depth axis, forward and backward (dx, dw, db), with no
create_graph form (an error that names F.fused = false). Elsewhere it is a
composite over conv2d: the kD depth slices that meet each output depth are
gathered into the channels (x (N, C, D, H, W) -> (N*OD, g*kD*C/g, H, W), kD
copies of the input) and one grouped conv2d with the weight's depth taps
moved into its channels does the rest; memory is kD times the input's.
--]]
local tide = require "tide"
local core = require "tide.core"
local args = require "tide.args"
local raise, is_tensor = core.raise, core.is_tensor
local nn = require "tide.nn"        -- the module being built: init.lua requires this file at its end
local F, init = nn.functional, nn.init

local shape = require("tide.tensor").shape_str   -- "[2,3]"
local params = core.ffi.new("int64_t[8]")
local params3 = core.ffi.new("int64_t[9]")
local v4 = core.ffi.string(core.C.td_eager_isa()) == "x86-64-v4"
local function conv_blas()
  local e = os.getenv("TIDE_CONV_BLAS")
  return e ~= nil and e ~= "" and e:sub(1, 1) ~= "0"
end

-- an int or a list of n ints -> a list of n ints (name the argument in errors)
local function tuple(fname, v, n, argn, what, min)
  local t
  if args.is_int(v) then
    t = {}
    for i = 1, n do t[i] = v end
  elseif type(v) == "table" and not is_tensor(v) and #v == n then
    t = {}
    for i = 1, n do
      if not args.is_int(v[i]) then args.argerr(argn, fname, ("integer or %d integers %s"):format(n, what), v) end
      t[i] = v[i]
    end
  else
    args.argerr(argn, fname, ("integer or %d integers %s"):format(n, what), v)
  end
  for i = 1, n do
    if t[i] < min then
      raise(("%s: %s must be >= %d, got {%s}"):format(fname, what, min, table.concat(t, ", ")))
    end
  end
  return t
end

local function opt_tensor(v, n, fname)
  if v ~= nil and (not is_tensor(v) or v.p == nil) then args.argerr(n, fname, "Tensor or nil", v) end
  return v
end

-- -- conv_transpose ---------------------------------------------------------------------------

-- the geometry shared by the 1-D and 2-D forms: x (N, Cin, H, W), w (Cin, Cout/g, kh, kw)
local function convt2d(fname, x, w, b, o)
  local g = o.groups
  local N, Cin, H, W = unpack(x:size())
  local Ci, Og, kh, kw = unpack(w:size())
  if Ci ~= Cin or Cin % g ~= 0 then
    raise(("%s: input %s with %d groups needs weight (%d, Cout/groups, k...) with %d divisible by groups, got weight %s")
      :format(fname, shape(x), g, Cin, Cin, shape(w)))
  end
  local Cout = Og * g
  if b ~= nil and (b:dim() ~= 1 or b:size(1) ~= Cout) then
    raise(("%s: bias must be 1-D of size %d (out_channels), got %s"):format(fname, Cout, shape(b)))
  end
  local st, pd, dl, op = o.stride, o.padding, o.dilation, o.output_padding
  local k = { kh, kw }
  local out = {}
  for i = 1, 2 do
    if op[i] >= st[i] and op[i] >= dl[i] then
      raise(("%s: output_padding {%s} must be smaller than stride {%s} or dilation {%s}"):format(fname,
        table.concat(op, ", "), table.concat(st, ", "), table.concat(dl, ", ")))
    end
    local HW = i == 1 and H or W
    out[i] = (HW - 1) * st[i] - 2 * pd[i] + dl[i] * (k[i] - 1) + op[i] + 1
    if out[i] < 1 then
      raise(("%s: input %s gives an output of size %d in spatial dim %d (stride %d, padding %d, kernel %d)")
        :format(fname, shape(x), out[i], i, st[i], pd[i], k[i]))
    end
  end
  if N * Cin * H * W == 0 or Og == 0 then
    local y = tide.zeros({ N, Cout, out[1], out[2] }, { dtype = x.dtype, device = x.device })
    if b ~= nil then y = y + b:view(1, Cout, 1, 1) end
    return y
  end
  -- the fused kernel (jit/jit_conv.c td_conv_transpose2d: conv2d's backward-data kernel forward,
  -- its forward and weight-gradient kernels backward) on the CPU outside traces
  if F._fused_ok(x, w, b) then
    for i, v in ipairs { st[1], st[2], pd[1], pd[2], dl[1], dl[2], out[1], out[2] } do params[i - 1] = v end
    return core.wrap(core.C.td_conv_transpose2d(x.p, w.p, b and b.p, params, g))
  end
  -- columns of each group: W_g^T (Og*kh*kw, Cin/g) @ x_g (Cin/g, H*W); fold sums them into the plane
  local Cg, K = Cin / g, Og * kh * kw
  local cols = w:reshape(g, Cg, K):transpose(2, 3):matmul(x:reshape(N, g, Cg, H * W))   -- (N, g, K, H*W)
  -- fold's output is the padded plane cropped by padding; output_padding extends it at the end
  local y = tide.col2im(cols:reshape(N, g * K, H * W), { out[1], out[2] }, k,
    { stride = st, padding = pd, dilation = dl })
  if b ~= nil then y = y + b:view(1, Cout, 1, 1) end
  return y
end

local function convt_opts(fname, opts, nd)
  opts = args.opts(fname, opts, "stride padding output_padding groups dilation", 4)
  local g = opts.groups or 1
  if not args.is_int(g) or g < 1 then args.argerr(4, fname, "positive integer groups", g) end
  return {
    stride = tuple(fname, opts.stride or 1, nd, 4, "stride", 1),
    padding = tuple(fname, opts.padding or 0, nd, 4, "padding", 0),
    output_padding = tuple(fname, opts.output_padding or 0, nd, 4, "output_padding", 0),
    dilation = tuple(fname, opts.dilation or 1, nd, 4, "dilation", 1),
    groups = g,
  }
end

-- the spatial dims of o's lists, with a leading 1 (or 0) for the 1-D form's row
local function lift(o)
  return { stride = { 1, o.stride[1] }, padding = { 0, o.padding[1] }, dilation = { 1, o.dilation[1] },
    output_padding = { 0, o.output_padding[1] }, groups = o.groups }
end

--- F.conv_transpose2d(x, weight[, bias][, {stride = 1, padding = 0, output_padding = 0, groups = 1, dilation = 1}]) -> Tensor
--- Transposed 2-D convolution (the input gradient of conv2d) of x (N, Cin, H, W) with weight (Cin, Cout/groups, kh, kw); a 3-D x (Cin, H, W) is one image.
function F.conv_transpose2d(x, w, b, opts)
  local fname = "conv_transpose2d"
  local o = convt_opts(fname, opts, 2)
  args.tensor(x, 1, fname)
  opt_tensor(b, 3, fname)
  if not is_tensor(w) or w:dim() ~= 4 then
    raise(("%s: weight must be a 4-D tensor (Cin, Cout/groups, kh, kw), got %s"):format(fname,
      is_tensor(w) and shape(w) or type(w)))
  end
  if x:dim() == 3 then return convt2d(fname, x:unsqueeze(1), w, b, o):squeeze(1) end
  if x:dim() ~= 4 then raise(("%s: expected a 3-D or 4-D input (N, C, H, W), got %s"):format(fname, shape(x))) end
  return convt2d(fname, x, w, b, o)
end

--- F.conv_transpose1d(x, weight[, bias][, opts]) -> Tensor
--- Transposed 1-D convolution of x (N, Cin, L) with weight (Cin, Cout/groups, k); opts as conv_transpose2d; a 2-D x (Cin, L) is one sequence.
function F.conv_transpose1d(x, w, b, opts)
  local fname = "conv_transpose1d"
  local o = convt_opts(fname, opts, 1)
  args.tensor(x, 1, fname)
  opt_tensor(b, 3, fname)
  if not is_tensor(w) or w:dim() ~= 3 then
    raise(("%s: weight must be a 3-D tensor (Cin, Cout/groups, k), got %s"):format(fname,
      is_tensor(w) and shape(w) or type(w)))
  end
  if x:dim() == 2 then return convt2d(fname, x:unsqueeze(1):unsqueeze(3), w:unsqueeze(3), b, lift(o)):squeeze(3):squeeze(1) end
  if x:dim() ~= 3 then raise(("%s: expected a 2-D or 3-D input (N, C, L), got %s"):format(fname, shape(x))) end
  return convt2d(fname, x:unsqueeze(3), w:unsqueeze(3), b, lift(o)):squeeze(3)
end

-- -- conv3d -----------------------------------------------------------------------------------

--- F.conv3d(x, weight[, bias][, {stride = 1, padding = 0, dilation = 1, groups = 1}]) -> Tensor
--- 3-D convolution of x (N, C, D, H, W) with weight (O, C/groups, kd, kh, kw): float32 on x86-64-v4 by the register tiles (td_conv3d; no create_graph, use F.fused = false), else one grouped conv2d over the gathered depth taps (bench/RESULTS.md).
function F.conv3d(x, w, b, opts)
  local fname = "conv3d"
  opts = args.opts(fname, opts, "stride padding dilation groups", 4)
  args.tensor(x, 1, fname)
  opt_tensor(b, 3, fname)
  if not is_tensor(w) or w:dim() ~= 5 then
    raise(("%s: weight must be a 5-D tensor (O, C/groups, kd, kh, kw), got %s"):format(fname,
      is_tensor(w) and shape(w) or type(w)))
  end
  if x:dim() == 4 then return F.conv3d(x:unsqueeze(1), w, b, opts):squeeze(1) end
  if x:dim() ~= 5 then raise(("%s: expected a 4-D or 5-D input (N, C, D, H, W), got %s"):format(fname, shape(x))) end
  local g = opts.groups or 1
  if not args.is_int(g) or g < 1 then args.argerr(4, fname, "positive integer groups", g) end
  local st = tuple(fname, opts.stride or 1, 3, 4, "stride", 1)
  local pd = tuple(fname, opts.padding or 0, 3, 4, "padding", 0)
  local dl = tuple(fname, opts.dilation or 1, 3, 4, "dilation", 1)
  local N, C, D, H, W = unpack(x:size())
  local O, Cg, kd, kh, kw = unpack(w:size())
  if C % g ~= 0 or O % g ~= 0 or Cg * g ~= C then
    raise(("%s: input %s with %d groups needs weight (O, %d, kd, kh, kw) and O divisible by %d, got weight %s")
      :format(fname, shape(x), g, C % g == 0 and C / g or -1, g, shape(w)))
  end
  local Dp = D + 2 * pd[1]
  local OD = math.floor((Dp - dl[1] * (kd - 1) - 1) / st[1]) + 1
  if OD < 1 then
    raise(("%s: the depth %d kernel (dilation %d) does not fit the padded depth %d of input %s")
      :format(fname, kd, dl[1], Dp, shape(x)))
  end
  -- the register tiles (td_conv3d): float32, x86-64-v4, at most 64 stride phases (rt_convmk.c's dX)
  if v4 and x.dtype == tide.float32 and st[1] * st[2] * st[3] <= 64 and F._fused_ok(x, w, b) and not conv_blas() then
    for i, v in ipairs { st[1], st[2], st[3], pd[1], pd[2], pd[3], dl[1], dl[2], dl[3] } do params3[i - 1] = v end
    return core.wrap(core.C.td_conv3d(x.p, w.p, b and b.p, params3, g))
  end
  if pd[1] > 0 then x = F.pad(x, { 0, 0, 0, 0, pd[1], pd[1] }) end
  -- index (OD*kd): depth od*stride + t*dilation (0-based) for output od and tap t
  local ix = {}
  for od = 0, OD - 1 do
    for t = 0, kd - 1 do ix[#ix + 1] = od * st[1] + t * dl[1] + 1 end
  end
  local idx = tide.tensor(ix, { dtype = tide.int64, device = x.device })
  local xs = x:index_select(3, idx):reshape(N, g, Cg, OD, kd, H, W)    -- (N, g, Cg, OD, kd, H, W)
  xs = xs:permute(1, 4, 2, 5, 3, 6, 7):reshape(N * OD, g * kd * Cg, H, W)
  -- weight (O, Cg, kd, kh, kw) -> (O, kd*Cg, kh, kw): group gi's input channels are (tap, channel)
  local w2 = w:permute(1, 3, 2, 4, 5):reshape(O, kd * Cg, kh, kw)
  local y = F.conv2d(xs, w2, b, { stride = { st[2], st[3] }, padding = { pd[2], pd[3] },
    dilation = { dl[2], dl[3] }, groups = g })                       -- (N*OD, O, OH, OW)
  local OH, OW = y:size(3), y:size(4)
  return y:reshape(N, OD, O, OH, OW):permute(1, 3, 2, 4, 5)
end

-- -- The layers -------------------------------------------------------------------------------

local pytuple = nn._pytuple

local U = require "tide.nn.layer_util"
local param, posint = U.param, U.posint

-- A convolution layer class: transposed (weight (in, out/g, k...)) or not
-- (weight (out, in/g, k...)); nd spatial dims; fn the functional form.
local function conv_layer(name, nd, transposed, fn)
  local L = nn.Module:extend(name)
  nn[name] = L
  local keys = "stride padding dilation groups bias dtype device" .. (transposed and " output_padding" or "")
  function L:__init(cin, cout, k, opts)
    opts = args.opts(name, opts, keys, 4)
    self.in_channels, self.out_channels = posint(name, cin, 1, "in_channels"), posint(name, cout, 2, "out_channels")
    self.kernel_size = tuple(name, k, nd, 3, "kernel_size", 1)
    self.stride = tuple(name, opts.stride or 1, nd, 4, "stride", 1)
    self.padding = tuple(name, opts.padding or 0, nd, 4, "padding", 0)
    self.dilation = tuple(name, opts.dilation or 1, nd, 4, "dilation", 1)
    if transposed then self.output_padding = tuple(name, opts.output_padding or 0, nd, 4, "output_padding", 0) end
    self.groups = opts.groups or 1
    if not args.is_int(self.groups) or self.groups < 1 or cin % self.groups ~= 0 or cout % self.groups ~= 0 then
      raise(("%s: in_channels %d and out_channels %d must be divisible by groups %s"):format(name, cin, cout,
        tostring(self.groups)))
    end
    local s = transposed and { cin, cout / self.groups } or { cout, cin / self.groups }
    for _, v in ipairs(self.kernel_size) do s[#s + 1] = v end
    self.weight = param(s, opts)
    if opts.bias ~= false then self.bias = param({ cout }, opts) else self:register_parameter("bias", nil) end
    self:reset_parameters()
  end
  -- PyTorch's: kaiming_uniform(a=sqrt(5)) of the weight (its fan_in is weight:size(2) * prod(k)),
  -- bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))
  function L:reset_parameters()
    init.kaiming_uniform_(self.weight, math.sqrt(5))
    if self.bias ~= nil then
      local fan_in = self.weight:size(2)
      for _, v in ipairs(self.kernel_size) do fan_in = fan_in * v end
      local bound = fan_in > 0 and 1 / math.sqrt(fan_in) or 0
      init.uniform_(self.bias, -bound, bound)
    end
  end
  function L:forward(x, output_size)
    local o = { stride = self.stride, padding = self.padding, dilation = self.dilation, groups = self.groups }
    if transposed then
      o.output_padding = self.output_padding
      if output_size ~= nil then o.output_padding = self:_output_padding(x, output_size) end
    end
    if nd == 1 then
      for _, key in ipairs { "stride", "padding", "dilation", "output_padding" } do if o[key] then o[key] = o[key][1] end end
    end
    return fn(x, self.weight, self.bias, o)
  end
  if transposed then
    -- the output_padding that makes the output output_size (its last nd entries), as PyTorch's
    function L:_output_padding(x, size)
      args.tensor(x, 1, name)
      if type(size) ~= "table" or #size < nd then
        raise(("%s: output_size must list at least the %d spatial sizes, got %s"):format(name, nd, tostring(size)))
      end
      local op = {}
      for i = 1, nd do
        local want = size[#size - nd + i]
        local inn = x:size(x:dim() - nd + i)
        local min = (inn - 1) * self.stride[i] - 2 * self.padding[i] + self.dilation[i] * (self.kernel_size[i] - 1) + 1
        op[i] = want - min
        if op[i] < 0 or op[i] >= math.max(self.stride[i], self.dilation[i]) then
          raise(("%s: output_size %d in spatial dim %d is out of the reachable range %d..%d"):format(name, want, i, min,
            min + math.max(self.stride[i], self.dilation[i]) - 1))
        end
      end
      return op
    end
  end
  function L:extra_repr()
    local s = ("%d, %d, kernel_size=%s, stride=%s"):format(self.in_channels, self.out_channels,
      pytuple(self.kernel_size), pytuple(self.stride))
    local function nonzero(t) for _, v in ipairs(t) do if v ~= 0 then return true end end end
    local function nonone(t) for _, v in ipairs(t) do if v ~= 1 then return true end end end
    if nonzero(self.padding) then s = s .. ", padding=" .. pytuple(self.padding) end
    if transposed and nonzero(self.output_padding) then s = s .. ", output_padding=" .. pytuple(self.output_padding) end
    if nonone(self.dilation) then s = s .. ", dilation=" .. pytuple(self.dilation) end
    if self.groups ~= 1 then s = s .. ", groups=" .. self.groups end
    if self.bias == nil then s = s .. ", bias=False" end
    return s
  end
  return L
end

--- nn.ConvTranspose2d(in_channels, out_channels, kernel_size[, {stride = 1, padding = 0, output_padding = 0, groups = 1, bias = true, dilation = 1, dtype, device}])
--- Transposed 2-D convolution over (N, C, H, W); weight (in, out/groups, kh, kw) as PyTorch's; forward(x[, output_size]).
conv_layer("ConvTranspose2d", 2, true, F.conv_transpose2d)
--- nn.ConvTranspose1d(in_channels, out_channels, kernel_size[, opts])
--- Transposed 1-D convolution over (N, C, L); opts as ConvTranspose2d.
conv_layer("ConvTranspose1d", 1, true, F.conv_transpose1d)
--- nn.Conv3d(in_channels, out_channels, kernel_size[, {stride = 1, padding = 0, dilation = 1, groups = 1, bias = true, dtype, device}])
--- 3-D convolution over (N, C, D, H, W) (F.conv3d).
conv_layer("Conv3d", 3, false, F.conv3d)

return F
