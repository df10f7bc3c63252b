--[[
fuzz.hints -- what the API fuzzer passes to each function: argument kinds (the
tokens of fuzz.gen) for the functions whose arguments need structure (shapes,
dims of the tensor before them, options tables). A function without a hint is
still fuzzed: its argument kinds come from its parameter names (fuzz.targets);
a new op gets fuzzed by adding its line here, or by nothing at all when its
parameter names say enough.
Keys: "T.<method>" (Tensor methods: the receiver a0 is a tensor unless `self`
says otherwise; @0 refers to it), "tide.<fn>", "F.<fn>", "nn.<Class>" (ctor
args, then `fwd` for the forward call), "nn.Module.<method>", "optim.<Class>",
"optim.Optimizer.<method>", "optim.LRScheduler.<method>", "data.<fn>", ...
Fields: args (tokens), self (receiver token), pre (source lines before the
arguments; %TMP% is the fuzzer's scratch directory), fwd (forward tokens),
post (source lines after the call; the object made is `o`).
--]]
local H = {}

local TENSOR_OPTS = "opts{dtype=dtype,device=device,requires_grad=bool}"
local red = { "one{dims@0|nil|dim@0}", "one{bool|nil|opts{keepdim=bool}}" }
local binop = { "one{tl@0|t|num|bool}" }
-- a 4-D (N, C, H, W) input, often valid
local img = "one{=tide.randn(1, 2, 5, 5)|=tide.randn(2, 1, 4, 3)|t}"
local win = "opts{stride=pair,padding=pair,dilation=pair}"

-- -- Tensor methods -------------------------------------------------------------------------------

for _, n in ipairs { "add", "sub", "mul", "div", "pow", "minimum", "maximum", "eq", "ne", "lt", "le", "gt", "ge",
  "logical_and", "logical_or", "multiply", "divide", "subtract", "greater", "less", "equal_elems",
  "atan2", "hypot", "fmod", "remainder" } do
  H["T." .. n] = { args = binop }
  H["T." .. n .. "_"] = { args = binop }
end
for _, n in ipairs { "sum", "mean", "prod", "logsumexp", "argmax", "argmin", "amax", "amin" } do H["T." .. n] = { args = red } end
H["T.max"] = { args = { "one{dim@0|dims@0|tl@0|nil}", "one{bool|nil}" } }
H["T.min"] = H["T.max"]
H["T.var"] = { args = { "one{dims@0|nil|dim@0}", "one{bool|opts{correction=num,unbiased=bool,keepdim=bool}}" } }
H["T.std"] = H["T.var"]
H["T.norm"] = { args = { "one{lit{\"fro\"|\"nuc\"|\"inf\"|2|1|0|-1|math.huge|0.5}|num|str|nil}", "one{dims@0|nil|dim@0}", "one{bool|nil}" } }
H["T.softmax"] = { args = { "dim@0" } }
H["T.log_softmax"] = { args = { "dim@0" } }
H["T.backward"] = { self = "one{=(tide.randn(3, {requires_grad = true}) * 2):sum()|=(tide.randn(2, 3, {requires_grad = true}) * 2)|t}",
  args = { "one{nil|tl@0|num}", "opts{retain_graph=bool,create_graph=bool}" } }
local mmarg = "one{t|tf|=tide.randn(a0.ndim > 0 and a0:size(-1) or 3, 2):to(a0.dtype)|=tide.randn(a0.ndim > 0 and a0:size(-1) or 3):to(a0.dtype)}"
for _, n in ipairs { "matmul", "mm", "bmm", "dot", "mv", "outer", "ger" } do H["T." .. n] = { args = { mmarg } } end
H["T.addmm"] = { self = "one{=tide.randn(2, 4)|t}",
  args = { "one{=tide.randn(2, 3)|t}", "one{=tide.randn(3, 4)|t}", "opts{beta=num,alpha=num}" } }
H["T.chunk"] = { args = { "int", "dim@0" } }
H["T.split"] = { args = { "one{int|=a0.ndim > 0 and {1, a0:size(1) - 1} or {1}|lit{{}|{1, 2}|{0/0}|{-1, 3}}}", "dim@0" } }
H["T.clamp"] = { args = { "one{num|nil|opts{min=num,max=num}}", "one{num|nil}" } }
H["T.clip"] = H["T.clamp"]
H["T.clamp_"] = H["T.clamp"]
H["T.copy_"] = { args = { "one{tl@0|t|num|bool}" } }
H["T.fill_"] = { args = { "one{num|bool|t}" } }
H["T.expand"] = { args = { "one{shape@0|=a0:size()|lit{{2, -1}|{-1}|{2^62}|{3, 0}|{2, 2, 2}}}" } }
for _, n in ipairs { "expand_as", "view_as", "reshape_as" } do H["T." .. n] = { args = { "one{t|tl@0}" } } end
H["T.view"] = { args = { "shape@0" } }
H["T.reshape"] = { args = { "shape@0" } }
H["T.flatten"] = { args = { "one{dim@0|nil}", "one{dim@0|nil}" } }
H["T.unflatten"] = { args = { "dim@0", "one{lit{{-1}|{1, -1}|{2, -1}|{-1, -1}|{0/0}|{2^63, 1}|{0, -1}}|shape}" } }
H["T.gather"] = { args = { "dim@0", "one{ti@0|=tide.randint(1, 3, a0:size())}" } }
H["T.index_select"] = { args = { "dim@0", "ti@0" } }
for _, n in ipairs { "scatter_add", "scatter_add_", "index_add", "index_add_" } do
  H["T." .. n] = { args = { "dim@0", "one{ti@0|=tide.randint(1, 3, a0:size())}", "one{tl@0|t}" } }
end
H["T.gelu"] = { args = { "one{nil|lit{\"tanh\"|\"none\"|\"x\"}|opts{approximate=str}}" } }
H["T.masked_fill"] = { args = { "one{=a0:gt(0)|tb}", "one{num|t}" } }
H["T.masked_fill_"] = H["T.masked_fill"]
H["T.narrow"] = { args = { "dim@0", "int", "int" } }
H["T.slice"] = { args = { "dim@0", "one{int|nil}", "one{int|nil}", "one{int|nil}" } }
H["T.select"] = { args = { "dim@0", "int" } }
H["T.permute"] = { args = { "one{perm@0|dims@0}" } }
H["T.requires_grad_"] = { args = { "one{bool|nil}" } }
H["T.size"] = { args = { "one{dim@0|nil}" } }
H["T.stride"] = H["T.size"]
H["T.squeeze"] = { args = { "one{nil|dim@0}" } }
H["T.unsqueeze"] = { args = { "dim@0" } }
H["T.transpose"] = { args = { "dim@0", "dim@0" } }
H["T.to"] = { args = { "one{dtype|device|t|opts{dtype=dtype,device=device}}", "one{nil|dtype}" } }
H["T.type"] = { args = { "one{nil|dtype}" } }
H["T.opencl"] = { args = { "one{nil|int}" } }
H["T.where"] = { self = "tb", args = { "one{t|num}", "one{t|num}" } }
H["T.item"] = { self = "one{t|=tide.randn(1)|=tide.tensor(3)}" }

-- the Tensor's fields (x.shape, x.grad = g) and operators
H["T.set.grad"] = { args = { "one{tl@0|nil|t}" } }
H["T.set.requires_grad"] = { args = { "one{bool|nil|num}" } }
H["T.__index"] = { args = { "one{int|lit{{1}|{{1, 2}}|{{}, 2}|{{1, 2, 0}}|\":\"|{\":\"}|{{-1, 1}}|{2^63}|{{1, 2^63}}|{1, 1, 1, 1, 1, 1, 1, 1, 1}}|ti@0|=a0:gt(0)|tb|str|any}" } }
H["T.__newindex"] = { args = { H["T.__index"].args[1], "one{num|tl@0|t|bool|any}" } }
for _, n in ipairs { "__add", "__sub", "__mul", "__div", "__pow", "__lt", "__le" } do H["T." .. n] = { args = { "one{tl@0|t|num|any}" } } end

-- -- tide.* -------------------------------------------------------------------------------------

for _, n in ipairs { "empty", "zeros", "ones", "rand", "randn" } do
  H["tide." .. n] = { args = { "one{shape|size}", "size*", TENSOR_OPTS } }
  H["tide." .. n .. "_like"] = { args = { "t", TENSOR_OPTS } }
end
H["tide.full"] = { args = { "shape", "num", TENSOR_OPTS } }
H["tide.full_like"] = { args = { "t", "num", TENSOR_OPTS } }
H["tide.randint"] = { args = { "int", "one{int|=a1 + 3}", "shape", "opts{dtype=dtype,device=device}" } }
H["tide.randint_like"] = { args = { "t", "int", "one{int|=a2 + 3}", "opts{dtype=dtype,device=device}" } }
H["tide.arange"] = { args = { "num", "one{num|nil}", "one{num|nil}", "opts{dtype=dtype,device=device}" } }
H["tide.linspace"] = { args = { "num", "num", "size", "opts{dtype=dtype,device=device}" } }
H["tide.eye"] = { args = { "size", "one{size|nil}", "opts{dtype=dtype,device=device}" } }
H["tide.tensor"] = { args = {
  "one{lit{{1, 2}|{{1, 2}, {3, 4}}|{}|{{}}|{true, false}|{1, {2}}|{2^64}|{0/0}|{1e300}|5|true|{{{{{{{{{1}}}}}}}}}|{1, \"x\"}}|t}",
  TENSOR_OPTS } }
H["tide.where"] = { args = { "one{tb|t}", "one{tl@1|t|num}", "one{tl@1|t|num}" } }
for _, n in ipairs { "cat", "concat", "concatenate", "stack" } do H["tide." .. n] = { args = { "tlist", "one{dim|nil}" } } end
H["tide.embedding"] = { args = { "ti", "one{=tide.randn(5, 3)|t}" } }
H["tide.one_hot"] = { args = { "one{ti|t}", "one{int|nil}" } }
H["tide.im2col"] = { args = { img, "pair", win } }
H["tide.col2im"] = { args = { "one{=tide.randn(1, 8, 9)|=tide.randn(1, 4, 16)|t}", "pair", "pair", win } }
H["tide.set_default_dtype"] = { args = { "dtype" } }
H["tide.manual_seed"] = { args = { "num" } }
H["tide.set_rng_state"] = { args = { "one{=tide.get_rng_state()|lit{{}|{seed = -1, offset = 2^64}|{seed = \"x\", offset = 0}}|any}" } }
H["tide.set_num_threads"] = { args = { "lit{1|2|0|-1|65|2^31|0/0|\"x\"|nil}" } }
for _, n in ipairs { "no_grad", "enable_grad", "inference_mode" } do H["tide." .. n] = { args = { "fn", "t*" } } end
H["tide.set_grad_enabled"] = { args = { "one{bool|any}" } }
H["tide.is_tensor"] = { args = { "any" } }
H["tide.from_blob"] = { skip = "takes a raw pointer and sizes: reading past the memory is the caller's to avoid, as with ffi.cast (spec/lua/blob_spec.lua checks its arguments)" }
H["tide.from_ptr"] = { args = { "one{=t.p|=require(\"ffi\").new(\"int[2]\")|=require(\"ffi\").cast(\"td_tensor *\", nil)|any}" } }
H["tide.compile"] = { args = { "fn", "opts{fallback=lit{\"eager\"|\"error\"|\"x\"},name=one{str|any},dynamic=one{bool|any}}" },
  post = { "local c1, c2 = tide.randn(3, 4), tide.randn(4, 3)", "print(o(c1, c2))", "print(o(tide.randn(0, 4), c2))",
    -- a call that yields inside a coroutine never resumed: its trace must not stay on
    "local co = coroutine.create(function() return o(c1, c2) end); print(coroutine.resume(co)); co = nil" } }
H["tide.save"] = { args = { "one{t|=({a = tide.randn(2), b = {c = tide.randn(3), n = 1}})|=({tide.randn(0, 2^62)})|lit{{}|1|\"x\"}|any}", "path" } }
H["tide.load"] = { pre = { "pcall(tide.save, {w = tide.randn(2, 3), b = {tide.randn(2)}}, \"%TMP%/f.safetensors\")" },
  args = { "path", "opts{mmap=bool,device=device,dtype=dtype}" } }
H["tide.save_npy"] = { args = { "t", "path" } }
H["tide.load_npy"] = { pre = { "pcall(tide.save_npy, tide.randn(2, 3), \"%TMP%/f.npy\")" }, args = { "path" } }

-- -- tide.nn.functional ------------------------------------------------------------------------

H["F.linear"] = { args = { "one{tf|=tide.randn(4, 3)}", "one{=tide.randn(2, a1.ndim > 0 and a1:size(-1) or 3)|t}", "one{nil|=tide.randn(2)|t}" } }
H["F.bilinear"] = { args = { "one{=tide.randn(5, 3)|tf}", "one{=tide.randn(5, 4)|tf}", "one{=tide.randn(2, 3, 4)|t}", "one{nil|=tide.randn(2)|t}" } }
H["F.embedding"] = { args = { "ti", "one{=tide.randn(5, 3)|t}", "opts{padding_idx=int}" } }
H["F.layer_norm"] = { args = { "tf", "one{=a1.ndim > 0 and a1:size(-1) or 1|shape|int}", "one{nil|tf}", "one{nil|tf}", "one{nil|num}" } }
H["F.rms_norm"] = { args = { "tf", "one{=a1.ndim > 0 and a1:size(-1) or 1|shape|int}", "one{nil|tf}", "one{nil|num}" } }
H["F.dropout"] = { args = { "t", "prob", "one{nil|bool}" } }
H["F.leaky_relu"] = { args = { "t", "one{num|nil}" } }
H["F.gelu"] = H["T.gelu"] and { args = { "t", H["T.gelu"].args[1] } }
H["F.softmax"] = { args = { "t", "dim@1" } }
H["F.log_softmax"] = { args = { "t", "dim@1" } }
H["F.scaled_dot_product_attention"] = { args = { "one{=tide.randn(2, 3, 4)|tf}", "one{=tide.randn(2, 5, 4)|tl@1}", "one{=tide.randn(2, 5, 6)|tl@1}",
  "opts{attn_mask=one{=tide.rand(3, 5):gt(0.5)|=tide.randn(3, 5)|t},is_causal=bool,scale=num,dropout_p=prob}" } }
H["F.conv2d"] = { args = { img, "one{=tide.randn(3, 2, 3, 3)|=tide.randn(2, 1, 2, 2)|t}", "one{nil|=tide.randn(3)|t}",
  "opts{stride=pair,padding=pair,dilation=pair,groups=int}" } }
H["F.conv1d"] = { args = { "one{=tide.randn(1, 2, 5)|t}", "one{=tide.randn(3, 2, 3)|t}", "one{nil|=tide.randn(3)|t}",
  "opts{stride=int,padding=int,dilation=int,groups=int}" } }
H["F.max_pool2d"] = { args = { img, "pair", "opts{stride=pair,padding=pair,dilation=pair,ceil_mode=bool,return_indices=bool}" } }
H["F.avg_pool2d"] = { args = { img, "pair", "opts{stride=pair,padding=pair,ceil_mode=bool,count_include_pad=bool}" } }
H["F.adaptive_avg_pool2d"] = { args = { img, "pair" } }
H["F.batch_norm"] = { args = { "one{=tide.randn(4, 3)|=tide.randn(2, 3, 2, 2)|tf}", "one{nil|=tide.zeros(3)|t}", "one{nil|=tide.ones(3)|t}",
  "one{nil|=tide.ones(3)|t}", "one{nil|=tide.zeros(3)|t}", "opts{training=bool,momentum=num,eps=num}" } }
local cls_in, cls_tg = "one{=tide.randn(4, 3)|=tide.randn(2, 3, 5)|tf}", "one{=tide.randint(1, 4, {4})|=tide.randint(1, 4, {2, 5})|ti|tf}"
H["F.cross_entropy"] = { args = { cls_in, cls_tg, "opts{weight=one{=tide.rand(3)|t},ignore_index=int,reduction=str,label_smoothing=prob}" } }
H["F.nll_loss"] = { args = { cls_in, cls_tg, "opts{weight=one{=tide.rand(3)|t},ignore_index=int,reduction=str}" } }
for _, n in ipairs { "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss" } do
  H["F." .. n] = { args = { "tf", "one{tlf@1|t}", "opts{reduction=str,beta=num,delta=num}" } }
end
H["F.binary_cross_entropy"] = { args = { "one{=tide.rand(4)|tf}", "one{=tide.rand(4)|tlf@1}", "opts{weight=t,reduction=str}" } }
H["F.binary_cross_entropy_with_logits"] = { args = { "tf", "one{tlf@1|t}", "opts{weight=t,pos_weight=t,reduction=str}" } }
H["F.kl_div"] = { args = { "tf", "one{tlf@1|t}", "opts{reduction=str,log_target=bool}" } }

-- -- tide.nn: modules (constructed, then called) -------------------------------------------------

local layer_opts = "opts{bias=bool,dtype=dtype,device=device}"
H["nn.Linear"] = { args = { "size", "size", layer_opts }, fwd = { "one{=tide.randn(2, a1)|t}" } }
H["nn.Bilinear"] = { args = { "size", "size", "size", layer_opts }, fwd = { "=tide.randn(2, a1)", "=tide.randn(2, a2)" } }
H["nn.Embedding"] = { args = { "size", "size", "opts{padding_idx=int,dtype=dtype,device=device}" },
  fwd = { "one{=tide.randint(1, a1 + 1, {2, 3})|ti|t}" } }
H["nn.Embedding.from_pretrained"] = { static = true, args = { "one{=tide.randn(4, 3)|t}", "opts{freeze=bool,padding_idx=int}" } }
local norm_shape = "one{size|shape|lit{{}|{0}|{2, 3}}}"
local norm_in = "one{=tide.randn(2, type(a1) == 'number' and a1 or 3)|tf}"
H["nn.LayerNorm"] = { args = { norm_shape, "opts{eps=num,elementwise_affine=bool,bias=bool,dtype=dtype,device=device}" }, fwd = { norm_in } }
H["nn.RMSNorm"] = { args = { norm_shape, "opts{eps=num,elementwise_affine=bool,dtype=dtype,device=device}" }, fwd = { norm_in } }
H["nn.Dropout"] = { args = { "one{prob|nil}" }, fwd = { "t" } }
H["nn.Flatten"] = { args = { "one{dim|nil}", "one{dim|nil}" }, fwd = { "t" } }
H["nn.LeakyReLU"] = { args = { "one{num|nil}" }, fwd = { "t" } }
H["nn.GELU"] = { args = { "one{nil|lit{\"tanh\"|\"none\"}|opts{approximate=str}}" }, fwd = { "t" } }
H["nn.Softmax"] = { args = { "dim" }, fwd = { "t" } }
H["nn.LogSoftmax"] = H["nn.Softmax"]
for _, n in ipairs { "ReLU", "Tanh", "Sigmoid", "SiLU", "Identity" } do H["nn." .. n] = { args = {}, fwd = { "t" } } end
H["nn.Module"] = { args = {}, fwd = { "t" } }
local conv_opts = "opts{stride=pair,padding=pair,dilation=pair,groups=int,bias=bool,dtype=dtype,device=device}"
H["nn.Conv2d"] = { args = { "size", "size", "pair", conv_opts }, fwd = { "one{=tide.randn(1, a1, 6, 6)|t}" } }
H["nn.Conv1d"] = { args = { "size", "size", "one{size|lit{{3}|{1, 2}}}", "opts{stride=int,padding=int,dilation=int,groups=int,bias=bool,dtype=dtype}" },
  fwd = { "one{=tide.randn(1, a1, 6)|t}" } }
-- valid receivers of their methods (random valid arguments often fail: kernel sizes, groups)
H["nn.Conv1d"].inst = "tide.nn.Conv1d(2, 3, 3)"
H["nn.Conv2d"].inst = "tide.nn.Conv2d(2, 3, 3)"
H["nn.MaxPool2d"] = { args = { "pair", win }, fwd = { img } }
H["nn.AvgPool2d"] = { args = { "pair", "opts{stride=pair,padding=pair}" }, fwd = { img } }
H["nn.AdaptiveAvgPool2d"] = { args = { "pair" }, fwd = { img } }
local bn_opts = "opts{eps=num,momentum=num,affine=bool,track_running_stats=bool,dtype=dtype,device=device}"
H["nn.BatchNorm1d"] = { args = { "size", bn_opts }, fwd = { "one{=tide.randn(4, a1)|=tide.randn(4, a1, 3)|t}" } }
H["nn.BatchNorm2d"] = { args = { "size", bn_opts }, fwd = { "one{=tide.randn(2, a1, 3, 3)|t}" } }
H["nn.Sequential"] = { args = { "one{mod|any}", "one{=tide.nn.ReLU()|mod|any}" }, fwd = { "one{=tide.randn(2, 3)|t}" } }
H["nn.ModuleList"] = { args = { "one{mod|any|=({tide.nn.ReLU(), tide.nn.Linear(2, 2)})}" }, fwd = { "t" } }
H["nn.ModuleDict"] = { args = { "one{=({a = tide.nn.Linear(2, 2)})|=({{\"a\", tide.nn.Linear(2, 2)}})|any}" }, fwd = { "t" } }
H["nn.ModuleList.append"] = { self = "=tide.nn.ModuleList()", args = { "one{mod|any}" } }
H["nn.ModuleList.insert"] = { self = "=tide.nn.ModuleList(tide.nn.ReLU())", args = { "int", "one{mod|any}" } }
H["nn.ModuleList.extend"] = { self = "=tide.nn.ModuleList()", args = { "one{=({tide.nn.ReLU()})|any}" } }
H["nn.ModuleList.extend_list"] = H["nn.ModuleList.extend"]
H["nn.ModuleDict.update"] = { self = "=tide.nn.ModuleDict()", args = { H["nn.ModuleDict"].args[1] } }
for _, n in ipairs { "get", "pop", "contains" } do H["nn.ModuleDict." .. n] = { self = "=tide.nn.ModuleDict({a = tide.nn.ReLU()})", args = { "one{lit{\"a\"|\"b\"|1}|any}" } } end
H["nn.Parameter"] = { args = { "t", "one{nil|bool}" } }

-- methods of any module (the receiver is one of fuzz.gen's modules)
local M = "nn.Module."
H[M .. "add_module"] = { self = "mod", args = { "one{str|lit{\"a.b\"|\"\"|\"weight\"}}", "one{mod|any}" } }
H[M .. "register_module"] = H[M .. "add_module"]
H[M .. "register_buffer"] = { self = "mod", args = { "one{str|lit{\"buf\"}}", "one{t|nil}", "opts{persistent=bool}" } }
H[M .. "register_parameter"] = { self = "mod", args = { "one{str|lit{\"p\"}}", "one{tg|nil|t}" } }
H[M .. "apply"] = { self = "mod", args = { "one{=(function(m) end)|fn}" } }
H[M .. "train"] = { self = "mod", args = { "one{nil|bool|any}" } }
H[M .. "requires_grad_"] = { self = "mod", args = { "one{nil|bool}" } }
H[M .. "load_state_dict"] = { self = "mod", args = { "one{=a0:state_dict()|=tide.nn.Linear(3, 2):state_dict()|lit{{}|{foo = 1}|{[\"weight\"] = 1}}|any}", "opts{strict=bool}" } }
H[M .. "to"] = { self = "mod", args = { "one{dtype|device|opts{dtype=dtype,device=device}}", "one{nil|dtype}" } }
H[M .. "zero_grad"] = { self = "mod", args = { "opts{set_to_none=bool}" } }
H[M .. "forward"] = { self = "mod", args = { "one{=tide.randn(2, 3)|t}" } }
H[M .. "extend"] = { self = "mod", args = { "one{str|any}" } }
H[M .. "new"] = { self = "mod", args = { "any*" } }
H[M .. "opencl"] = { self = "mod", args = { "one{nil|int}" } }

-- -- tide.nn.init, tide.nn.utils ---------------------------------------------------------------

H["init.uniform_"] = { args = { "tf", "one{num|nil}", "one{num|nil}" } }
H["init.normal_"] = H["init.uniform_"]
H["init.constant_"] = { args = { "t", "num" } }
H["init.xavier_uniform_"] = { args = { "tf", "one{num|nil}" } }
H["init.xavier_normal_"] = H["init.xavier_uniform_"]
H["init.kaiming_uniform_"] = { args = { "tf", "one{num|nil}", "one{nil|lit{\"fan_in\"|\"fan_out\"}|str}", "one{nil|str}" } }
H["init.kaiming_normal_"] = H["init.kaiming_uniform_"]
H["init.calculate_gain"] = { args = { "one{str|lit{\"leaky_relu\"|\"tanh\"|\"selu\"}}", "one{nil|num}" } }
local paramsg = "one{=(function() local p = tide.randn(3, {requires_grad = true}); (p * p):sum():backward(); return {p} end)()|params|any}"
H["utils.clip_grad_norm_"] = { args = { paramsg, "num", "one{nil|num|lit{\"inf\"}}", "one{nil|bool}" } }
H["utils.clip_grad_value_"] = { args = { paramsg, "num" } }
H["utils.weight_norm"] = { args = { "one{mod|any}", "opts{name=str,dim=one{int|nil}}" }, post = { "print(o(tide.randn(2, 3)))" } }
H["utils.spectral_norm"] = { args = { "one{mod|any}", "opts{name=str,n_power_iterations=int,eps=num,dim=int}" }, post = { "print(o(tide.randn(2, 3)))" } }

-- -- tide.optim ----------------------------------------------------------------------------------

local opt_post = { "o:zero_grad()", "local p1 = tide.randn(3, {requires_grad = true})", "o:step()" }
local step_post = { "for _, g in ipairs(o.param_groups or {}) do for _, p in ipairs(g.params) do (p * p):sum():backward() end end",
  "o:step()", "o:step()", "print(o:state_dict())" }
H["optim.SGD"] = { args = { paramsg, "opts{lr=num,momentum=num,dampening=num,weight_decay=num,nesterov=bool,maximize=bool}" }, post = step_post }
local betas = "one{lit{{0.9, 0.999}|{1, 0}|{0/0, 0.5}|{0.5}|\"x\"}}"
H["optim.Adam"] = { args = { paramsg, "opts{lr=num,betas=" .. betas .. ",eps=num,weight_decay=num,amsgrad=bool,maximize=bool}" }, post = step_post }
H["optim.AdamW"] = H["optim.Adam"]
H["optim.RMSprop"] = { args = { paramsg, "opts{lr=num,alpha=num,eps=num,weight_decay=num,momentum=num,centered=bool,maximize=bool}" }, post = step_post }
H["optim.Adagrad"] = { args = { paramsg, "opts{lr=num,lr_decay=num,weight_decay=num,initial_accumulator_value=num,eps=num,maximize=bool}" }, post = step_post }
H["optim.NAdam"] = { args = { paramsg, "opts{lr=num,betas=" .. betas .. ",eps=num,weight_decay=num,momentum_decay=num,decoupled_weight_decay=bool,maximize=bool}" }, post = step_post }
H["optim.RAdam"] = { args = { paramsg, "opts{lr=num,betas=" .. betas .. ",eps=num,weight_decay=num,decoupled_weight_decay=bool,maximize=bool}" }, post = step_post }
H["optim.Adadelta"] = { args = { paramsg, "opts{lr=num,rho=num,eps=num,weight_decay=num,maximize=bool}" }, post = step_post }
H["optim.Adamax"] = { args = { paramsg, "opts{lr=num,betas=" .. betas .. ",eps=num,weight_decay=num,maximize=bool}" }, post = step_post }
-- LBFGS steps with a closure that recomputes the loss of its own parameters
local lbfgs_closure = "=function() local s = 0; for _, g in ipairs(o.param_groups or {}) do for _, p in ipairs(g.params) do "
  .. "local l = (p * p):sum(); l:backward(); s = s + l:item() end end; return s end"
H["optim.LBFGS"] = { args = { paramsg, "opts{lr=num,max_iter=int,max_eval=int,tolerance_grad=num,tolerance_change=num,history_size=int,line_search_fn=lit{nil|\"strong_wolfe\"|\"x\"},maximize=bool}" },
  post = { "o:zero_grad()", "print(pcall(o.step, o, function() return 0 end))", "print(o:state_dict())" } }
H["optim.LBFGS"].inst = "tide.optim.LBFGS({tide.randn(3, {requires_grad = true})}, {max_iter = 3})"
H["optim.LBFGS.step"] = { args = { "one{=(function() return tide.zeros(1):sum() end)|nil|fn}" } }
H["optim.Optimizer"] = { skip = "the optimizers' base class: made through optim.SGD, ... (fuzzed there)" }
local O = "optim.Optimizer."
H[O .. "add_param_group"] = { self = "optim", args = { "one{=({params = {tide.randn(2, {requires_grad = true})}})|=({params = {}})|any}" } }
H[O .. "zero_grad"] = { self = "optim", args = { "opts{set_to_none=bool}" } }
H[O .. "step"] = { self = "optim", args = { "one{nil|fn}" } }
H[O .. "load_state_dict"] = { self = "optim", args = { "one{=a0:state_dict()|lit{{}|{state = {}, param_groups = {}}|{state = 1}}|any}" } }
H[O .. "state_dict"] = { self = "optim" }

local sched = "one{optim|any}"
local sched_post = { "o:step()", "o:step()", "print(o:get_last_lr())", "print(o:state_dict())" }
local last = "last_epoch=int"
H["optim.StepLR"] = { args = { sched, "opts{step_size=int,gamma=num," .. last .. "}" }, post = sched_post }
H["optim.MultiStepLR"] = { args = { sched, "opts{milestones=lit{{1, 2}|{}|{2, 1}|{0/0}|1},gamma=num," .. last .. "}" }, post = sched_post }
H["optim.ExponentialLR"] = { args = { sched, "opts{gamma=num," .. last .. "}" }, post = sched_post }
H["optim.CosineAnnealingLR"] = { args = { sched, "opts{T_max=int,eta_min=num," .. last .. "}" }, post = sched_post }
H["optim.LinearLR"] = { args = { sched, "opts{start_factor=num,end_factor=num,total_iters=int," .. last .. "}" }, post = sched_post }
H["optim.ConstantLR"] = { args = { sched, "opts{factor=num,total_iters=int," .. last .. "}" }, post = sched_post }
H["optim.LambdaLR"] = { args = { sched, "opts{lr_lambda=one{fn|=function(e) return 0.5 ^ e end}," .. last .. "}" }, post = sched_post }
H["optim.OneCycleLR"] = { args = { sched, "opts{max_lr=num,total_steps=int,epochs=int,steps_per_epoch=int,pct_start=prob," ..
  "anneal_strategy=lit{\"cos\"|\"linear\"|\"x\"},cycle_momentum=bool,base_momentum=num,max_momentum=num,div_factor=num,final_div_factor=num,three_phase=bool," .. last .. "}" },
  post = sched_post }
H["optim.PolynomialLR"] = { args = { sched, "opts{total_iters=int,power=num," .. last .. "}" }, post = sched_post }
H["optim.CyclicLR"] = { args = { sched, "opts{base_lr=num,max_lr=num,step_size_up=int,step_size_down=int,mode=lit{\"triangular\"|\"triangular2\"|\"exp_range\"|\"x\"},"
  .. "gamma=num,scale_fn=one{fn|=function(x) return 0.5 end},scale_mode=lit{\"cycle\"|\"iterations\"|\"x\"},cycle_momentum=bool,base_momentum=num,max_momentum=num," .. last .. "}" },
  post = sched_post }
H["optim.ReduceLROnPlateau"] = { args = { sched, "opts{mode=lit{\"min\"|\"max\"|\"x\"},factor=num,patience=int,threshold=num,threshold_mode=lit{\"rel\"|\"abs\"|\"x\"},cooldown=int,min_lr=one{num|lit{{0.1}}},eps=num}" },
  post = { "o:step(1)", "o:step(2)", "print(o:get_last_lr())", "print(o:state_dict())" } }
H["optim.ReduceLROnPlateau.step"] = { args = { "one{num|=tide.tensor(1.5)|t|any}" } }
-- valid instances of each scheduler (the receivers of their own methods)
local sgd = "tide.optim.SGD(tide.nn.Linear(2, 2):parameters(), {lr = 0.1})"
for cls, o in pairs { StepLR = "step_size = 2", MultiStepLR = "milestones = {1, 3}", ExponentialLR = "gamma = 0.9",
  CosineAnnealingLR = "T_max = 4", LinearLR = "total_iters = 3", ConstantLR = "factor = 0.5",
  LambdaLR = "lr_lambda = function(e) return 0.9 ^ e end", OneCycleLR = "max_lr = 0.5, total_steps = 10",
  PolynomialLR = "total_iters = 4", CyclicLR = "base_lr = 0.01, max_lr = 0.1, cycle_momentum = false",
  ReduceLROnPlateau = "patience = 1" } do
  H["optim." .. cls].inst = ("tide.optim.%s(%s, {%s})"):format(cls, sgd, o)
end
H["optim.SequentialLR"] = { pre = { "local opt = tide.optim.SGD(tide.nn.Linear(2, 2):parameters(), {lr = 0.1})" },
  args = { "one{=opt|any}", "opts{schedulers=one{=({tide.optim.StepLR(opt, {step_size = 1}), tide.optim.ExponentialLR(opt, {gamma = 0.5})})|lit{{}|{1}}},milestones=lit{{2}|{}|{0}|{2, 3}}," .. last .. "}" },
  post = sched_post }
H["optim.SequentialLR"].inst = ("(function() local o = %s; return tide.optim.SequentialLR(o, {schedulers = "
  .. "{tide.optim.StepLR(o, {step_size = 1}), tide.optim.ExponentialLR(o, {gamma = 0.5})}, milestones = {2}}) end)()"):format(sgd)
H["optim.LRScheduler"] = { skip = "the schedulers' base class: made through optim.StepLR, ... (fuzzed there)" }
local S = "optim.LRScheduler."
local a_sched = "=tide.optim.StepLR(tide.optim.SGD(tide.nn.Linear(2, 2):parameters(), {lr = 0.1}), {step_size = 2})"
H[S .. "step"] = { self = a_sched, args = { "one{nil|int}" } }
H[S .. "load_state_dict"] = { self = a_sched, args = { "one{=a0:state_dict()|lit{{}|{last_epoch = \"x\"}}|any}" } }
for _, n in ipairs { "get_last_lr", "state_dict", "get_lr", "_initial_step" } do H[S .. n] = { self = a_sched } end

-- -- tide.data -----------------------------------------------------------------------------------

H["data.TensorDataset"] = { args = { "one{=tide.randn(4, 2)|t}", "one{=tide.randint(1, 3, {4})|t|nil}" },
  post = { "print(o:len())", "print(o:get(1))", "print(o:get_batch(tide.long({1, 2})))" } }
local ds = "one{=tide.data.TensorDataset(tide.randn(5, 2), tide.randint(1, 3, {5}))|any}"
H["data.DataLoader"] = { args = { ds, "opts{batch_size=int,shuffle=bool,drop_last=bool,seed=int,collate_fn=fn}" },
  post = { "print(o:len())", "for x, y in o:batches() do print(x, y) end" } }
H["data.CharVocab"] = { args = { "one{str|lit{\"hello\"|\"\"}}" }, post = { "print(o:decode(o:encode(\"\")))" } }
H["data.Dataset"] = { skip = "the datasets' base class (a table with :extend()); its :len()/:get() are fuzzed as data.Dataset.*" }
H["data.Dataset.extend"] = { self = "=tide.data.Dataset" }
H["data.Dataset.len"] = { self = "=tide.data.Dataset:extend()" }
H["data.Dataset.get"] = { self = "=tide.data.Dataset:extend()", args = { "int" } }
local tds = "=tide.data.TensorDataset(tide.randn(4, 2), tide.randn(4))"
H["data.TensorDataset.get"] = { self = tds, args = { "one{int|any}" } }
H["data.TensorDataset.get_batch"] = { self = tds, args = { "one{ti|any}" } }
H["data.TensorDataset.len"] = { self = tds }
H["data.TensorDataset.new"] = { static = true, args = { "t*" } }
local dl = "=tide.data.DataLoader(tide.data.TensorDataset(tide.randn(5, 2)), {batch_size = 2})"
H["data.DataLoader.batches"] = { self = dl, post = { "for x in r1 do print(x) end" } }
H["data.DataLoader.len"] = { self = dl }
H["data.DataLoader.new"] = { static = true, args = H["data.DataLoader"].args }
local cv = "=tide.data.CharVocab(\"hello\")"
H["data.CharVocab.encode"] = { self = cv, args = { "one{str|lit{\"hello\"|\"le\"}}" } }
H["data.CharVocab.decode"] = { self = cv, args = { "one{ti|lit{{1, 2}|{0}|{1.5}|{}}|any}" } }
H["data.CharVocab.new"] = { static = true, args = { "str" } }
H["data.default_collate"] = { args = { "one{=({{tide.randn(2), 1}, {tide.randn(2), 2}})|=({tide.randn(2), tide.randn(2)})|=({1, 2.5})|lit{{}|{{}}|{\"x\"}}|tlist|any}" } }
H["data.randperm"] = { args = { "size", "one{int|nil}" } }
H["data.split"] = { args = { "t", "prob" } }
H["data.read_idx"] = { pre = { "local f = io.open(\"%TMP%/f.idx\", \"wb\"); f:write(\"\\0\\0\\8\\1\\0\\0\\0\\3abc\"); f:close()" }, args = { "path" } }

-- -- tide.autograd, compile, progress, checkpoint, opencl ---------------------------------------------

local leaf = "local x = tide.randn(3, {requires_grad = true}); local y = (x * x):sum()"
H["autograd.backward"] = { pre = { leaf }, args = { "one{=y|=x|t|tlist|any}", "one{nil|=tide.tensor(2.0)|t|tlist}", "opts{retain_graph=bool,create_graph=bool}" } }
H["autograd.grad"] = { pre = { leaf }, args = { "one{=y|t|tlist|any}", "one{=x|=({x})|t|tlist|any}",
  "opts{grad_outputs=one{t|nil},retain_graph=bool,create_graph=bool,allow_unused=bool}" } }
H["autograd.gradcheck"] = { args = { "fn", "one{=tide.randn(3, {dtype = \"float64\", requires_grad = true})|t|tlist|any}", "opts{eps=num,atol=num,rtol=num,raise=bool}" } }
for _, n in ipairs { "no_grad", "enable_grad", "inference_mode" } do H["autograd." .. n] = H["tide." .. n] end
H["autograd.detect_anomaly"] = H["tide.no_grad"]
H["autograd.set_grad_enabled"] = H["tide.set_grad_enabled"]
H["jit.compile"] = H["tide.compile"]
H["jit.to_dot"] = { args = { "one{=tide.compile(function(x) return x * 2 end)|any}", "t" } }
local compiled = "=tide.compile(" .. "function(x, y) return (x * 2):sum() end" .. ")"
H["jit.Compiled.explain"] = { self = compiled, args = { "t", "t*" } }
H["jit.Compiled.variants"] = { self = compiled }
H["jit.Compiled"] = { skip = "the class of compiled functions: made by tide.compile (fuzzed there)" }
H["progress.bar"] = { args = { "one{int|nil|any}", "opts{desc=str,every=int,width=int,smoothing=num,tty=bool}" },
  post = { "o:update(1, {loss = 0.5})", "o:update(1)", "o:close()" } }
local bar = "=tide.progress.bar(10, {tty = true})"
H["progress.Bar.update"] = { self = bar, args = { "one{int|nil|any}", "one{nil|lit{{loss = 1}|{loss = 0/0}|{1}|{loss = \"x\"}}|any}" } }
for _, n in ipairs { "line", "render", "close" } do H["progress.Bar." .. n] = { self = bar, args = { "one{nil|bool}" } } end
H["checkpoint.save"] = { args = { "path", "one{=({model = tide.nn.Linear(2, 2), step = 3})|=({optimizer = tide.optim.SGD(tide.nn.Linear(2, 2):parameters(), {lr = 0.1})})|any}" } }
H["checkpoint.resume"] = { pre = { "pcall(tide.checkpoint.save, \"%TMP%/f.ckpt\", {model = tide.nn.Linear(2, 2)})" },
  args = { "path", "one{=({model = tide.nn.Linear(2, 2)})|any}" } }
H["opencl.device_name"] = { args = { "one{nil|int}" } }
-- (argv stays a table without options: a bad command line ends the process by design)
H["cmdline.parse"] = { args = { "lit{{}|{[0] = \"x.lua\"}}", "one{=({{\"n\", 1, \"count\"}, {\"name\", \"a\", \"a name\"}, usage = \"u\"})|lit{{{1, 2}}|{{}}|{\"x\"}}|any}" } }
H["profiler.profile"] = { args = { "fn", "opts{record_shapes=bool}", "t*" } }
H["profiler.record_function"] = { args = { "one{str|lit{\"step\"}}", "fn", "t*" } }

-- -- the recurrent layers and attention (lua/tide/nn/rnn.lua, transformer.lua) ---------------

local rnn_opts = "opts{num_layers=one{lit{1|2}|size},bias=bool,batch_first=bool,dropout=prob,bidirectional=bool,"
  .. "proj_size=one{lit{0}|int},dtype=dtype,device=device}"
local seq_in = "one{=tide.randn(4, 2, a1)|=tide.randn(4, a1)|=tide.randn(2, 4, a1)|t}"
for _, n in ipairs { "LSTM", "GRU", "RNN" } do
  H["nn." .. n] = { args = { "one{lit{3}|size}", "one{lit{4}|size}", n == "RNN" and
    rnn_opts:gsub("}$", ",nonlinearity=one{lit{\"tanh\"|\"relu\"}|str}}") or rnn_opts },
    fwd = { seq_in, n == "LSTM" and "one{nil|=({tide.zeros(1, 2, a2), tide.zeros(1, 2, a2)})|=tide.zeros(1, 2, a2)|any}"
      or "one{nil|=tide.zeros(1, 2, a2)|=tide.zeros(2, 4, a2)|any}" } }
end
H["nn.RNNBase"] = { args = { "one{lit{\"LSTM\"|\"GRU\"|\"RNN_TANH\"|\"RNN_RELU\"}|str}", "one{lit{3}|size}", "one{lit{4}|size}",
  rnn_opts }, fwd = { "one{=tide.randn(4, 2, a2)|t}" }, inst = "tide.nn.LSTM(3, 4)" }
local cell_in = "one{=tide.randn(2, a1)|=tide.randn(a1)|t}"
H["nn.LSTMCell"] = { args = { "one{lit{3}|size}", "one{lit{4}|size}", layer_opts },
  fwd = { cell_in, "one{nil|=({tide.zeros(2, a2), tide.zeros(2, a2)})|=tide.zeros(2, a2)|any}" } }
H["nn.GRUCell"] = { args = { "one{lit{3}|size}", "one{lit{4}|size}", layer_opts }, fwd = { cell_in, "one{nil|=tide.zeros(2, a2)|any}" } }
H["nn.RNNCell"] = { args = { "one{lit{3}|size}", "one{lit{4}|size}", "opts{bias=bool,nonlinearity=one{lit{\"tanh\"|\"relu\"}|str},dtype=dtype}" },
  fwd = { cell_in, "one{nil|=tide.zeros(2, a2)|any}" } }
H["nn.RNNCellBase"] = { args = { "one{lit{3}|size}", "one{lit{4}|size}", "one{bool|any}", "one{lit{4}|int}", "opts{dtype=dtype}" },
  fwd = { "t" }, inst = "tide.nn.GRUCell(3, 4)" }
local mha_fwd = "opts{key_padding_mask=one{=tide.zeros(2, 5):gt(0)|tb|t},need_weights=bool,attn_mask=one{=tide.zeros(3, 5)|"
  .. "=tide.zeros(3, 5):gt(0)|=tide.zeros(4, 3, 5)|t},average_attn_weights=bool,is_causal=bool}"
H["nn.MultiheadAttention"] = { args = { "one{lit{4|8}|size}", "one{lit{1|2}|int}",
  "opts{dropout=prob,bias=bool,add_bias_kv=bool,add_zero_attn=bool,kdim=one{lit{4|3}|size},vdim=one{lit{4|2}|size},batch_first=bool,dtype=dtype}" },
  fwd = { "one{=tide.randn(3, 2, a1)|t}", "one{=tide.randn(5, 2, a1)|t}", "one{=tide.randn(5, 2, a1)|t}", mha_fwd },
  inst = "tide.nn.MultiheadAttention(4, 2)" }
local tf_opts = "opts{dim_feedforward=one{lit{8}|size},dropout=prob,activation=one{lit{\"relu\"|\"gelu\"}|str|fn},"
  .. "layer_norm_eps=num,batch_first=bool,norm_first=bool,bias=bool,dtype=dtype}"
local src4 = "one{=tide.randn(3, 2, 4)|=tide.randn(3, 4)|t}"
local enc_fwd = "one{nil|opts{src_mask=one{=tide.zeros(3, 3)|t},src_key_padding_mask=one{=tide.zeros(2, 3):gt(0)|t},is_causal=bool}|t}"
local dec_fwd = "one{nil|opts{tgt_mask=one{=tide.zeros(3, 3)|t},memory_mask=one{=tide.zeros(3, 5)|t},"
  .. "tgt_key_padding_mask=one{=tide.zeros(2, 3):gt(0)|t},memory_key_padding_mask=one{=tide.zeros(2, 5):gt(0)|t},"
  .. "tgt_is_causal=bool,memory_is_causal=bool}|t}"
H["nn.TransformerEncoderLayer"] = { args = { "one{lit{4}|size}", "one{lit{2}|int}", tf_opts }, fwd = { src4, enc_fwd } }
H["nn.TransformerDecoderLayer"] = { args = { "one{lit{4}|size}", "one{lit{2}|int}", tf_opts },
  fwd = { src4, "one{=tide.randn(5, 2, 4)|t}", dec_fwd } }
H["nn.TransformerEncoder"] = { args = { "one{=tide.nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 8})|mod|any}", "one{lit{1|2}|int}",
  "opts{norm=one{=tide.nn.LayerNorm(4)|mod|any},enable_nested_tensor=bool,mask_check=bool}" },
  fwd = { src4, "one{nil|opts{mask=one{=tide.zeros(3, 3)|t},src_key_padding_mask=one{=tide.zeros(2, 3):gt(0)|t},is_causal=bool}|t}" } }
H["nn.TransformerDecoder"] = { args = { "one{=tide.nn.TransformerDecoderLayer(4, 2, {dim_feedforward = 8})|mod|any}", "one{lit{1|2}|int}",
  "opts{norm=one{=tide.nn.LayerNorm(4)|mod|any}}" }, fwd = { src4, "one{=tide.randn(5, 2, 4)|t}", dec_fwd } }
H["nn.Transformer"] = { args = { "opts{d_model=lit{4},nhead=one{lit{1|2}|int},num_encoder_layers=lit{1},num_decoder_layers=lit{1},"
  .. "dim_feedforward=lit{8},dropout=prob,activation=one{lit{\"relu\"|\"gelu\"}|str},batch_first=bool,norm_first=bool}" },
  fwd = { "one{=tide.randn(5, 2, 4)|t}", src4, "one{nil|opts{tgt_mask=one{=tide.zeros(3, 3)|t},src_key_padding_mask=one{=tide.zeros(2, 5):gt(0)|t}}}" },
  inst = "tide.nn.Transformer({d_model = 4, nhead = 2, num_encoder_layers = 1, num_decoder_layers = 1, dim_feedforward = 8})" }
H["nn.Transformer.generate_square_subsequent_mask"] = { static = true, args = { "one{int|size}", "opts{device=device,dtype=dtype}" } }
local padded = "one{=tide.randn(5, 3, 2)|=tide.randn(3, 5, 2)|t}"
local lengths = "one{lit{{5, 3, 2}|{2, 5, 3}|{0, 1, 2}|{6, 1, 1}|{1}}|=tide.long({5, 2, 2})|t|any}"
H["utils.rnn.pack_padded_sequence"] = { args = { padded, lengths, "opts{batch_first=bool,enforce_sorted=bool}" } }
local packed = "=tide.nn.utils.rnn.pack_padded_sequence(tide.randn(5, 3, 2), {5, 3, 2})"
H["utils.rnn.pad_packed_sequence"] = { args = { "one{" .. packed .. "|t|any}", "opts{batch_first=bool,padding_value=num,total_length=int}" } }
local seqs = "one{=({tide.randn(3, 2), tide.randn(1, 2)})|=({tide.randn(2), tide.randn(4)})|lit{{}}|tlist|any}"
H["utils.rnn.pad_sequence"] = { args = { seqs, "opts{batch_first=bool,padding_value=num,padding_side=one{lit{\"left\"|\"right\"}|str}}" } }
H["utils.rnn.pack_sequence"] = { args = { seqs, "opts{enforce_sorted=bool}" } }
H["utils.rnn.PackedSequence"] = { args = { "one{=tide.randn(6, 2)|t}", "one{lit{{3, 2, 1}|{2, 3}|{}|{0}}|=tide.long({3, 3})|any}",
  "one{nil|=tide.long({2, 1, 3})|ti}", "one{nil|ti}" } }

-- objects that only a function returns: their methods, on one made by `self`
H.objects = {
  ["utils.rnn.PackedSequence"] = { self = packed, methods = { "to", "is_packed" } },
  ["profiler.Report"] = { self = "=(tide.profiler.profile(function() return (tide.randn(3, 4) + 1):sum() end, {record_shapes = true}))",
    methods = { "key_averages", "table", "export_chrome_trace" } },
}
H["profiler.Report.table"] = { self = H.objects["profiler.Report"].self,
  args = { "opts{sort_by=lit{\"self_time\"|\"total_time\"|\"calls\"|\"bytes\"|\"name\"|\"x\"},limit=int,kind=str,print=bool}" } }
H["profiler.Report.export_chrome_trace"] = { self = H.objects["profiler.Report"].self, args = { "path" } }
H["utils.rnn.PackedSequence.to"] = { self = packed, args = { "one{dtype|device|any}" } }
H["utils.rnn.PackedSequence.is_packed"] = { self = packed, args = { "one{any|" .. packed .. "}" } }

-- -- the vision layers (lua/tide/nn/convt.lua, norm.lua, activation.lua) ------------------------

local convt_o = "opts{stride=pair,padding=pair,output_padding=pair,groups=int,dilation=pair}"
H["F.conv_transpose2d"] = { args = { img, "one{=tide.randn(2, 3, 3, 3)|=tide.randn(1, 2, 2, 2)|t}", "one{nil|=tide.randn(3)|t}", convt_o } }
H["F.conv_transpose1d"] = { args = { "one{=tide.randn(1, 2, 5)|t}", "one{=tide.randn(2, 3, 3)|t}", "one{nil|=tide.randn(3)|t}",
  "opts{stride=int,padding=int,output_padding=int,groups=int,dilation=int}" } }
H["F.conv3d"] = { args = { "one{=tide.randn(1, 2, 4, 4, 4)|t}", "one{=tide.randn(3, 2, 2, 2, 2)|t}", "one{nil|=tide.randn(3)|t}",
  "opts{stride=one{int|lit{{1, 2, 1}}},padding=one{int|lit{{1, 0, 1}}},dilation=int,groups=int}" } }
H["F.group_norm"] = { args = { "one{=tide.randn(2, 4, 3)|tf}", "one{lit{1|2|4}|int}", "one{nil|=tide.ones(4)|t}", "one{nil|=tide.zeros(4)|t}", "one{nil|num}" } }
H["F.instance_norm"] = { args = { "one{=tide.randn(2, 3, 4)|tf}", "one{nil|=tide.zeros(3)|t}", "one{nil|=tide.ones(3)|t}",
  "one{nil|=tide.ones(3)|t}", "one{nil|=tide.zeros(3)|t}", "opts{use_input_stats=bool,momentum=num,eps=num}" } }
H["F.local_response_norm"] = { args = { "one{=tide.randn(2, 5, 3)|tf}", "one{lit{2|3}|int}", "opts{alpha=num,beta=num,k=num}" } }
H["F.prelu"] = { args = { "one{=tide.randn(2, 3)|tf}", "one{=tide.full({3}, 0.25)|=tide.full({1}, 0.25)|t}" } }
H["F.dropout1d"] = { args = { "one{=tide.randn(2, 3, 4)|t}", "one{prob|nil}", "one{nil|bool}" } }
H["F.dropout2d"] = { args = { "one{=tide.randn(2, 3, 4, 4)|t}", "one{prob|nil}", "one{nil|bool}" } }
H["F.alpha_dropout"] = { args = { "t", "one{prob|nil}", "one{nil|bool}" } }
local convt_mo = "opts{stride=pair,padding=pair,output_padding=pair,dilation=pair,groups=int,bias=bool,dtype=dtype,device=device}"
H["nn.ConvTranspose2d"] = { args = { "size", "size", "pair", convt_mo }, fwd = { "one{=tide.randn(1, a1, 4, 4)|t}", "one{nil|lit{{8, 8}}|any}" },
  inst = "tide.nn.ConvTranspose2d(2, 3, 3)" }
H["nn.ConvTranspose1d"] = { args = { "size", "size", "one{size|lit{{3}}}", "opts{stride=int,padding=int,output_padding=int,groups=int,bias=bool,dtype=dtype}" },
  fwd = { "one{=tide.randn(1, a1, 5)|t}" }, inst = "tide.nn.ConvTranspose1d(2, 3, 3)" }
H["nn.Conv3d"] = { args = { "size", "size", "one{size|lit{{1, 2, 2}}}", "opts{stride=int,padding=int,dilation=int,groups=int,bias=bool,dtype=dtype}" },
  fwd = { "one{=tide.randn(1, a1, 4, 4, 4)|t}" }, inst = "tide.nn.Conv3d(2, 3, 2)" }
H["nn.GroupNorm"] = { args = { "one{lit{2}|size}", "one{lit{4}|size}", "opts{eps=num,affine=bool,dtype=dtype,device=device}" },
  fwd = { "one{=tide.randn(2, a2, 3)|t}" } }
for _, n in ipairs { "InstanceNorm1d", "InstanceNorm2d" } do
  H["nn." .. n] = { args = { "one{lit{3}|size}", bn_opts }, fwd = { n == "InstanceNorm1d" and "one{=tide.randn(2, a1, 4)|t}" or "one{=tide.randn(2, a1, 3, 3)|t}" } }
end
H["nn.LocalResponseNorm"] = { args = { "one{lit{2|3}|size}", "opts{alpha=num,beta=num,k=num}" }, fwd = { "one{=tide.randn(2, 4, 3)|t}" } }
H["nn.PReLU"] = { args = { "opts{num_parameters=one{lit{1|3}|size},init=num,dtype=dtype}" }, fwd = { "one{=tide.randn(2, 3)|t}" } }
H["nn.ELU"] = { args = { "opts{alpha=num}" }, fwd = { "t" } }
H["nn.CELU"] = H["nn.ELU"]
H["nn.Softplus"] = { args = { "opts{beta=num,threshold=num}" }, fwd = { "t" } }
H["nn.Hardtanh"] = { args = { "opts{min_val=num,max_val=num}" }, fwd = { "t" } }
for _, n in ipairs { "SELU", "Mish", "Hardswish", "Hardsigmoid", "LogSigmoid" } do H["nn." .. n] = { args = {}, fwd = { "t" } } end
H["nn.Softmin"] = { args = { "dim" }, fwd = { "t" } }
H["nn.Upsample"] = { args = { "opts{size=one{size|pair},scale_factor=one{lit{2|1.5}|num},mode=one{lit{\"nearest\"|\"bilinear\"|\"bicubic\"}|str},align_corners=bool}" },
  fwd = { img } }
H["nn.PixelShuffle"] = { args = { "one{lit{2}|size}" }, fwd = { "one{=tide.randn(1, 8, 2, 2)|t}" } }
H["nn.PixelUnshuffle"] = { args = { "one{lit{2}|size}" }, fwd = { "one{=tide.randn(1, 2, 4, 4)|t}" } }
for _, n in ipairs { "Dropout1d", "Dropout2d", "AlphaDropout" } do H["nn." .. n] = { args = { "one{prob|nil}" }, fwd = { "t" } } end

H["F.max_pool1d"] = { args = { "one{=tide.randn(2, 3, 8)|=tide.randn(3, 6)|t}", "one{lit{2|3}|int}", "opts{stride=int,padding=int,dilation=int,return_indices=bool,ceil_mode=bool}" } }
H["F.avg_pool1d"] = { args = { "one{=tide.randn(2, 3, 8)|=tide.randn(3, 6)|t}", "one{lit{2|3}|int}", "opts{stride=int,padding=int,ceil_mode=bool,count_include_pad=bool}" } }
H["F.adaptive_max_pool2d"] = { args = { img, "pair", "one{nil|bool}" } }
local bag_w = "one{=tide.randn(5, 3)|tf}"
H["F.embedding_bag"] = { args = { "one{=tide.long({{1, 2}, {5, 3}})|=tide.long({1, 2, 5})|ti|t}", bag_w, "one{nil|=tide.long({1, 2})|ti}",
  "opts{mode=one{lit{\"sum\"|\"mean\"|\"max\"}|str},per_sample_weights=t,include_last_offset=bool,padding_idx=int}" } }
H["nn.MaxPool1d"] = { args = { "one{lit{2}|size}", "opts{stride=int,padding=int,dilation=int,return_indices=bool}" }, fwd = { "one{=tide.randn(2, 3, 8)|t}" } }
H["nn.AvgPool1d"] = { args = { "one{lit{2}|size}", "opts{stride=int,padding=int}" }, fwd = { "one{=tide.randn(2, 3, 8)|t}" } }
H["nn.AdaptiveMaxPool2d"] = { args = { "pair", "opts{return_indices=bool}" }, fwd = { img } }
H["nn.EmbeddingBag"] = { args = { "one{lit{5}|size}", "one{lit{3}|size}", "opts{mode=one{lit{\"sum\"|\"mean\"|\"max\"}|str},include_last_offset=bool,padding_idx=int,dtype=dtype}" },
  fwd = { "one{=tide.long({{1, 2}, {5, 3}})|=tide.long({1, 2, 5})|ti|t}", "one{nil|=tide.long({1, 2})|ti}", "one{nil|t}" } }
-- -- the losses of tide.nn.losses_extra and the loss modules (lua/tide/nn/loss_modules.lua) ------

local ctc_lp = "one{=tide.randn(5, 2, 4):log_softmax(3)|=tide.randn(5, 4):log_softmax(2)|tf}"
local ctc_tg = "one{=tide.long({{2, 3}, {4, 4}})|=tide.long({2, 3, 4})|=tide.long({5, 0})|ti|tf}"
local ctc_len = "one{lit{{5, 4}|{5}|{6, 1}|{-1, 2}|{}}|=tide.long({5, 5})|int|any}"
local ctc_tlen = "one{lit{{2, 1}|{2, 2}|{3, 0}|{-1, 1}}|=tide.long({2, 1})|int|any}"
local ctc_opts = "opts{blank=one{lit{1|2|0|9}|int},reduction=str,zero_infinity=bool}"
H["F.ctc_loss"] = { args = { ctc_lp, ctc_tg, ctc_len, ctc_tlen, ctc_opts } }
local trip = "opts{margin=num,p=one{lit{1|2|3}|num},eps=num,swap=bool,reduction=str}"
local emb = "one{=tide.randn(3, 4)|=tide.randn(4)|tf}"
H["F.triplet_margin_loss"] = { args = { emb, "one{tlf@1|t}", "one{tlf@1|t}", trip } }
local pm1 = "one{=tide.tensor({1, -1, 1})|=tide.tensor(1)|t}"
H["F.cosine_embedding_loss"] = { args = { emb, "one{tlf@1|t}", pm1, "opts{margin=num,reduction=str}" } }
H["F.margin_ranking_loss"] = { args = { "one{=tide.randn(3)|tf}", "one{tlf@1|t}", pm1, "opts{margin=num,reduction=str}" } }
H["F.poisson_nll_loss"] = { args = { "tf", "one{tlf@1|t}", "opts{log_input=bool,full=bool,eps=num,reduction=str}" } }
H["F.gaussian_nll_loss"] = { args = { "one{=tide.randn(3, 4)|tf}", "one{tlf@1|t}",
  "one{=tide.rand(3, 4)|=tide.rand(3)|=tide.rand(3, 1)|=tide.rand(1, 4)|num|t}", "opts{full=bool,eps=num,reduction=str}" } }
H["F.multilabel_soft_margin_loss"] = { args = { "one{=tide.randn(3, 4)|tf}", "one{tlf@1|t}", "opts{weight=one{=tide.rand(4)|t},reduction=str}" } }
H["F.multi_margin_loss"] = { args = { "one{=tide.randn(3, 4)|=tide.randn(4)|tf}", "one{=tide.long({1, 4, 2})|=tide.long(2)|ti|t}",
  "opts{p=one{lit{1|2|3}|num},margin=num,weight=one{=tide.rand(4)|t},reduction=str}" } }
local loss_fwd = {
  MSELoss = { "tf", "one{tlf@1|t}" }, L1Loss = { "tf", "one{tlf@1|t}" }, SmoothL1Loss = { "tf", "one{tlf@1|t}" },
  HuberLoss = { "tf", "one{tlf@1|t}" }, BCELoss = { "one{=tide.rand(4)|tf}", "one{=tide.rand(4)|tlf@1}" },
  BCEWithLogitsLoss = { "tf", "one{tlf@1|t}" }, KLDivLoss = { "tf", "one{tlf@1|t}" },
  NLLLoss = { cls_in, cls_tg }, CrossEntropyLoss = { cls_in, cls_tg },
  CTCLoss = { ctc_lp, ctc_tg, ctc_len, ctc_tlen }, TripletMarginLoss = { emb, "one{tlf@1|t}", "one{tlf@1|t}" },
  CosineEmbeddingLoss = { emb, "one{tlf@1|t}", pm1 }, MarginRankingLoss = { "one{=tide.randn(3)|tf}", "one{tlf@1|t}", pm1 },
  PoissonNLLLoss = { "tf", "one{tlf@1|t}" }, GaussianNLLLoss = { "one{=tide.randn(3, 4)|tf}", "one{tlf@1|t}", "one{=tide.rand(3, 4)|num|t}" },
  MultiLabelSoftMarginLoss = { "one{=tide.randn(3, 4)|tf}", "one{tlf@1|t}" },
  MultiMarginLoss = { "one{=tide.randn(3, 4)|tf}", "one{=tide.long({1, 4, 2})|ti|t}" },
}
local loss_opts = {
  MSELoss = "opts{reduction=str}", L1Loss = "opts{reduction=str}", SmoothL1Loss = "opts{reduction=str,beta=num}",
  HuberLoss = "opts{reduction=str,delta=num}", BCELoss = "opts{weight=t,reduction=str}",
  BCEWithLogitsLoss = "opts{weight=t,pos_weight=t,reduction=str}", KLDivLoss = "opts{reduction=str,log_target=bool}",
  NLLLoss = "opts{weight=one{=tide.rand(3)|t},ignore_index=int,reduction=str}",
  CrossEntropyLoss = "opts{weight=one{=tide.rand(3)|t},ignore_index=int,reduction=str,label_smoothing=prob}",
  CTCLoss = ctc_opts, TripletMarginLoss = trip, CosineEmbeddingLoss = "opts{margin=num,reduction=str}",
  MarginRankingLoss = "opts{margin=num,reduction=str}", PoissonNLLLoss = "opts{log_input=bool,full=bool,eps=num,reduction=str}",
  GaussianNLLLoss = "opts{full=bool,eps=num,reduction=str}", MultiLabelSoftMarginLoss = "opts{weight=one{=tide.rand(4)|t},reduction=str}",
  MultiMarginLoss = "opts{p=one{lit{1|2}|num},margin=num,weight=one{=tide.rand(4)|t},reduction=str}",
}
for n, fwd in pairs(loss_fwd) do H["nn." .. n] = { args = { loss_opts[n] }, fwd = fwd } end

-- -- Sorting and search (ops_sort.lua) -----------------------------------------------------------

H["T.sort"] = { args = { "one{dim@0|nil|opts{dim=dim@0,descending=bool,stable=bool}}", "one{bool|nil|opts{descending=bool,stable=bool}}" } }
H["T.argsort"] = H["T.sort"]
H["T.topk"] = { args = { "one{=a0.ndim > 0 and math.min(2, a0:size(-1)) or 1|int}", "one{dim@0|nil|opts{dim=dim@0,largest=bool,sorted=bool}}",
  "one{bool|nil}", "one{bool|nil}" } }
H["T.kthvalue"] = { args = { "one{=1|int}", "one{dim@0|nil}", "one{bool|nil}" } }
for _, n in ipairs { "median", "nanmedian", "mode" } do H["T." .. n] = { args = { "one{dim@0|nil}", "one{bool|nil}" } } end
H["T.quantile"] = { self = "one{tf|t}", args = { "one{prob|num|=tide.tensor({0.2, 0.7}, {dtype = a0.dtype})}", "one{dim@0|nil}", "one{bool|nil}",
  "opts{interpolation=lit{\"linear\"|\"lower\"|\"higher\"|\"midpoint\"|\"nearest\"|\"cubic\"}}" } }
H["T.nanquantile"] = H["T.quantile"]
H["T.unique"] = { args = { "opts{sorted=bool,return_inverse=bool,return_counts=bool,dim=one{nil|dim@0}}" } }
H["T.unique_consecutive"] = { args = { "opts{return_inverse=bool,return_counts=bool,dim=one{nil|dim@0}}" } }
H["tide.searchsorted"] = { args = { "one{=tide.tensor({-1, 0, 2, 5})|t}", "one{t|num}", "opts{right=bool,side=lit{\"left\"|\"right\"|\"up\"},out_int32=bool}" } }
H["T.bucketize"] = { args = { "one{=tide.tensor({-1, 0, 2, 5})|t}", "opts{right=bool,out_int32=bool}" } }
H["T.bincount"] = { self = "one{=tide.randint(0, 5, {7})|ti@0|t}", args = { "one{nil|=tide.rand(a0:numel())|t}", "one{int|nil}" } }
H["T.histc"] = { args = { "one{int|nil}", "one{num|nil}", "one{num|nil}" } }
-- -- Scans, indexing, sampling (tide.ops_scan, tide.ops_random) ------------------------------------
for _, n in ipairs { "cumsum", "cumprod" } do H["T." .. n] = { args = { "one{dim@0|int|nil}", "one{nil|opts{dtype=dtype}}" } } end
for _, n in ipairs { "cummax", "cummin", "logcumsumexp" } do H["T." .. n] = { args = { "one{dim@0|int|nil}" } } end
H["T.nonzero"] = { args = { "one{nil|opts{as_tuple=bool}}" } }
H["T.masked_select"] = { args = { "one{tb|=a0:gt(0)|t}" } }
H["T.take_along_dim"] = { args = { "one{ti@0|=tide.randint(1, 3, a0:size())}", "one{dim@0|nil}" } }
H["T.index_fill"] = { args = { "dim@0", "one{ti@0|=tide.long{1}}", "one{num|t}" } }
H["T.index_fill_"] = H["T.index_fill"]
H["T.index_copy"] = { args = { "dim@0", "one{ti@0|=tide.long{1}}", "one{tl@0|t}" } }
H["T.index_copy_"] = H["T.index_copy"]
H["T.index_put"] = { args = { "one{=({tide.long{1}})|=({tide.long{1}, tide.long{2, 1}})|lit{{}}|any}", "one{num|t}", "one{bool|nil}" } }
H["T.index_put_"] = H["T.index_put"]
H["T.masked_scatter"] = { args = { "one{tb|=a0:gt(0)|t}", "one{tl@0|t}" } }
H["T.masked_scatter_"] = H["T.masked_scatter"]
H["T.multinomial"] = { self = "one{=tide.rand(5)|=tide.rand(2, 4)|=tide.tensor({0, 1, -1})|t}",
  args = { "one{int|=2}", "one{nil|opts{replacement=bool}}" } }
H["T.bernoulli"] = { self = "one{=tide.rand(5)|t}", args = { "one{nil|num}" } }
H["tide.normal"] = { args = { "one{t|num}", "one{t|num}", "one{nil|shape}" } }
H["tide.randperm"] = { args = { "one{int|=5}", "opts{dtype=dtype,device=device}" } }
H["T.uniform_"] = { args = { "one{nil|num}", "one{nil|num}" } }
H["T.normal_"] = { args = { "one{nil|num}", "one{nil|num}" } }
H["T.exponential_"] = { args = { "one{nil|num}" } }

return H
