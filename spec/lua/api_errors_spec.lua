-- Errors a user can trigger name the function and point at the user's line
-- (issue: reliability; found by the API fuzzer, spec/fuzz/). Before these fixes
-- each case below raised a raw Lua/FFI error from inside lua/tide/ ("attempt to
-- index local 'idx'", "cannot convert 'nil' to 'uint64_t'", ...), or an error
-- with no position at all.
local tide = require "tide"
local H = require "helper"
local F, nn = tide.nn.functional, tide.nn

-- f must call tide as a statement (a tail call would drop this file's frame)
local function raises_here(f, ...)
  local ok, err = pcall(f)
  assert(not ok, "expected an error, got none")
  err = tostring(err)
  assert(not err:find("lua/tide/", 1, true), "the error points into tide: " .. err)
  assert(err:find("^[^\n]*api_errors_spec%.lua:%d+: "), "the error does not point at the caller's line: " .. err)
  for _, s in ipairs { ... } do
    assert(err:find(s, 1, true), ("error %q does not contain %q"):format(err, s))
  end
  return err
end

describe("error positions", function()
  it("an error inside tide's own no_grad block points at the user's call", function()
    raises_here(function() nn.init.normal_(tide.randn(1, 3):expand(2, 3)) end, "copy_:", "same memory")
    raises_here(function() nn.init.uniform_(tide.randn(2):expand(3, 2), 0, 1) end, "copy_:")
  end)
  it("an error after a tail call in the user's function points at the call of no_grad", function()
    raises_here(function() tide.no_grad(function(x) return x:item() end, tide.randn(3)) end,
      "item: a tensor with 3 elements")
  end)
  it("an error after a tail call inside a profiled function points at the profile call", function()
    raises_here(function() tide.profiler.profile(function(x) return x:item() end, nil, tide.randn(3)) end, "item: a tensor with 3 elements")
    raises_here(function() tide.profiler.record_function("f", function(x) return x:item() end, tide.randn(2)) end, "item:")
  end)
  it("an error after a tail call inside a compiled function points at the compiled call", function()
    local c = tide.compile(function(x) return x:item() end)
    raises_here(function() c(tide.randn(3)) end, "item")
  end)
end)

describe("function arguments", function()
  it("no_grad, enable_grad, inference_mode, gradcheck and apply want a function", function()
    raises_here(function() tide.no_grad(1) end, "bad argument #1 to 'no_grad' (function expected, got number)")
    raises_here(function() tide.enable_grad({}) end, "bad argument #1 to 'enable_grad' (function expected, got table)")
    raises_here(function() tide.autograd.inference_mode(nil) end, "bad argument #1 to 'inference_mode' (function expected, got nil)")
    raises_here(function() tide.autograd.gradcheck(7, { tide.randn(2, { dtype = "float64", requires_grad = true }) }) end,
      "bad argument #1 to 'gradcheck' (function expected, got number)")
    raises_here(function() tide.autograd.gradcheck(function(x) return x * 2 end, 3) end,
      "bad argument #2 to 'gradcheck' (Tensor or table of inputs expected, got number)")
    raises_here(function() nn.Linear(2, 2):apply(5) end, "bad argument #2 to 'apply' (function expected, got number)")
  end)
  it("a callable table passes", function()
    local f = setmetatable({}, { __call = function(_, x) return x * 2 end })
    assert.are.equal(4, tide.no_grad(f, tide.tensor(2)):item())
  end)
end)

describe("tensor arguments", function()
  it("raise in Lua's wording instead of indexing a non-tensor", function()
    local ds = tide.data.TensorDataset(tide.randn(4, 2))
    raises_here(function() ds:get_batch(true) end, "bad argument #1 to 'get_batch' (Tensor expected, got boolean)")
    raises_here(function() tide.data.split(false, 0.5) end, "bad argument #1 to 'split' (Tensor expected, got boolean)")
    raises_here(function() F.conv2d(tide.randn(1, 2, 5, 5), tide.randn(3, 2, 3, 3), {}) end,
      "bad argument #3 to 'conv2d' (Tensor or nil expected, got table)")
    raises_here(function() F.batch_norm(tide.randn(4, 3), nil, "x") end,
      "bad argument #3 to 'batch_norm' (Tensor or nil expected, got string)")
    raises_here(function() F.batch_norm(tide.randn(4, 3), tide.zeros(3), nil, nil, nil, { training = true }) end,
      "batch_norm: running_mean and running_var must be given together")
    raises_here(function() F.adaptive_avg_pool2d(tide.randn(1, 2, 5, 5), { {}, 2 }) end,
      "adaptive_avg_pool2d: output_size must be a positive integer or a pair of them, got {table, 2}")
    raises_here(function() nn.MaxPool2d(2, { padding = 1 })(tide.rand(1, 1, 4, 4):gt(0.5)) end,
      "max_pool2d: bool input is not supported")
    raises_here(function() F.max_pool2d(true, 2, { padding = 1 }) end, "bad argument #1 to 'max_pool2d' (Tensor expected, got boolean)")
    raises_here(function() nn.Flatten()(5) end, "bad argument #1 to 'Flatten' (Tensor expected, got number)")
  end)
  it("a table given to a BatchNorm layer raises (it read a NULL tensor: SIGSEGV)", function()
    local out, rc = H.child([[
local tide = require "tide"
local ok, err = pcall(function() tide.nn.BatchNorm2d(2)({ {} }) end)
print(ok, err)]], nil, 60)
    assert(rc == 0, ("child exited with %s:\n%s"):format(tostring(rc), out))
    assert(out:find("bad argument #1 to 'BatchNorm2d' (Tensor expected, got table)", 1, true), out)
  end)
end)

describe("Tensor methods called through tide.Tensor", function()
  it("check their receiver", function()
    local T = tide.Tensor
    raises_here(function() T.dim(5) end, "bad argument #1 to 'dim' (Tensor expected, got number)")
    raises_here(function() T.numel({}) end, "bad argument #1 to 'numel' (Tensor expected, got table)")
    raises_here(function() T.size(true) end, "bad argument #1 to 'size' (Tensor expected, got boolean)")
    raises_here(function() T.stride("x", 1) end, "bad argument #1 to 'stride' (Tensor expected, got string)")
    raises_here(function() T.float(nil) end, "bad argument #1 to 'float' (Tensor expected, got nil)")
    raises_here(function() T.to(3, "float64") end, "bad argument #1 to 'to' (Tensor expected, got number)")
    raises_here(function() T.totable({}) end, "bad argument #1 to 'totable' (Tensor expected, got table)")
    raises_here(function() T.item(1) end, "bad argument #1 to 'item' (Tensor expected, got number)")
    raises_here(function() T.zero_(1) end, "bad argument #1 to 'zero_' (Tensor expected, got number)")
    raises_here(function() T.fill_({}, 1) end, "bad argument #1 to 'fill_' (Tensor expected, got table)")
    raises_here(function() T.copy_(2, tide.randn(2)) end, "bad argument #1 to 'copy_' (Tensor expected, got number)")
    raises_here(function() T.requires_grad_(1) end, "bad argument #1 to 'requires_grad_' (Tensor expected, got number)")
    raises_here(function() T.free(1) end, "bad argument #1 to 'free' (Tensor expected, got number)")
    local x = tide.randn(2)
    x:free()
    x:free()          -- freeing twice stays fine
    raises_here(function() T.dim(x) end, "bad argument #1 to 'dim' (Tensor expected, got freed Tensor)")
  end)
end)

describe("printing", function()
  it("a tensor with a dim longer than 2^53 prints (the summary loop never ended: i + 1 == i)", function()
    local out, rc = H.child([[
local tide = require "tide"
print(tide.zeros(1, { dtype = "uint8" }):expand({ 2 ^ 62 }))]], nil, 30)
    assert(rc == 0, ("child exited with %s:\n%s"):format(tostring(rc), out))
    assert(out:find("tensor([0, 0, 0,  ..., 0, 0, 0], dtype=uint8)", 1, true), out)
  end)
end)

describe("hangs", function()
  it("matrix_exp of a matrix with inf returns (its scaling loop ran 'inf' times)", function()
    local out, rc = H.child([[
local tide = require "tide"
local A = tide.tensor({ { 1, math.huge }, { 0, 1 } })
local E = tide.nn.utils.matrix_exp(A)
print("nan", E:ne(E):sum():item())]], nil, 30)
    assert(rc == 0, ("child exited with %s:\n%s"):format(tostring(rc), out))
    assert(out:find("nan%s+%d"), out)
  end)
end)

describe("number arguments", function()
  it("where and masked_fill take a Tensor or a number", function()
    local c = tide.randn(3):gt(0)
    raises_here(function() tide.where(c, {}, 1) end, "bad argument #2 to 'where' (Tensor or number expected, got table)")
    raises_here(function() tide.where(c, 1, "x") end, "bad argument #3 to 'where' (Tensor or number expected, got string)")
    raises_here(function() tide.randn(3):masked_fill(c, "x") end, "bad argument #3 to 'masked_fill' (Tensor or number expected, got string)")
    assert.are.same({ 1, 1, 1 }, tide.where(tide.ones(3):gt(0), true, 0):totable())
  end)
  it("the runtime setters check their values", function()
    raises_here(function() tide.set_rng_state({}) end, "set_rng_state: seed must be an integer")
    raises_here(function() tide.set_rng_state(5) end, "bad argument #1 to 'set_rng_state'")
    raises_here(function() tide.set_rng_state({ seed = 1, offset = -1 }) end, "set_rng_state: offset")
    raises_here(function() tide.set_num_threads("x") end, "bad argument #1 to 'set_num_threads' (positive integer expected, got string)")
    raises_here(function() tide.set_num_threads(2 ^ 40) end, "bad argument #1 to 'set_num_threads'")
    raises_here(function() tide.set_default_dtype(nil) end, "bad argument #1 to 'set_default_dtype' (dtype expected, got nil)")
    local st = tide.get_rng_state()
    tide.set_rng_state(st)
    tide.set_rng_state({ seed = 3, offset = 0 })
  end)
  it("arange, stack, one_hot, to, opencl check their arguments", function()
    raises_here(function() tide.arange(0, false) end, "bad argument #2 to 'arange' (number expected, got boolean)")
    raises_here(function() tide.arange(nil) end, "bad argument #1 to 'arange' (number expected, got nil)")
    raises_here(function() tide.stack({ tide.randn(2) }, "x") end, "bad argument #2 to 'stack' (integer dim expected, got string)")
    raises_here(function() tide.one_hot(tide.long { 1, 2 }, true) end, "bad argument #2 to 'one_hot'")
    raises_here(function() tide.randn(2):to({}) end, "bad argument #2 to 'to' (dtype, device or Tensor expected, got nil)")
    raises_here(function() tide.randn(2):opencl(true) end, "bad argument #2 to 'opencl' (device index expected, got boolean)")
    raises_here(function() nn.Linear(2, 2):opencl({}) end, "bad argument #2 to 'opencl' (device index expected, got table)")
  end)
  it("comparing a one-element bool tensor with a number compares 0/1", function()
    assert.is_true(tide.tensor(true) < 2)
    assert.is_false(tide.tensor(false) >= tide.tensor(0.5))
  end)
  it("nn.init, randperm, data.split, Flatten check numbers", function()
    raises_here(function() nn.init.uniform_(tide.randn(2), 0, {}) end, "bad argument #3 to 'uniform_' (number expected, got table)")
    raises_here(function() nn.init.normal_(tide.randn(2), "x") end, "bad argument #2 to 'normal_' (number expected, got string)")
    raises_here(function() nn.init.xavier_uniform_(tide.randn(2, 2), {}) end, "bad argument #2 to 'xavier_uniform_' (number expected, got table)")
    raises_here(function() tide.data.randperm("x") end, "bad argument #1 to 'randperm'")
    raises_here(function() tide.data.randperm(5, {}) end, "bad argument #2 to 'randperm' (integer seed expected, got table)")
    raises_here(function() tide.data.split(tide.randn(4), "x") end, "bad argument #2 to 'split' (number expected, got string)")
    raises_here(function() nn.Flatten("x") end, "bad argument #1 to 'Flatten' (integer start_dim expected, got string)")
    raises_here(function() F.embedding(tide.long { 1 }, tide.randn(3, 2), { padding_idx = "x" }) end,
      "bad argument #3 to 'embedding' (integer padding_idx expected, got string)")
  end)
  it("randperm of a huge n raises instead of filling a Lua table for minutes", function()
    raises_here(function() tide.data.randperm(2 ^ 31) end, "randperm: n = 2147483648 is too large")
  end)
  it("LambdaLR's function must return a number", function()
    local opt = tide.optim.SGD(nn.Linear(2, 2):parameters(), { lr = 0.1 })
    local s = tide.optim.LambdaLR(opt, { lr_lambda = function(e) if e > 0 then return nil end return 1 end })
    raises_here(function() s:step() end, "LambdaLR: lr_lambda 1 returned a nil for epoch 1, expected a number")
  end)
  it("a progress bar checks its options and values", function()
    raises_here(function() tide.progress.bar(10, { every = "x" }) end, "bar: every must be a positive integer")
    raises_here(function() tide.progress.bar(10, { out = 1 }) end, "bar: out must be a file")
    local b = tide.progress.bar(10, { out = { write = function() end, flush = function() end } })
    raises_here(function() b:update({}) end, "bad argument #2 to 'update' (number of steps expected, got table)")
    raises_here(function() b:update(1, 5) end, "bad argument #3 to 'update' (table of named values expected, got number)")
    raises_here(function() b:update(1, { loss = "x" }) end, "update: value 'loss' must be a number, got string")
    b:update(1, { loss = 0.5 })
  end)
end)

describe("string and table arguments", function()
  it("CharVocab, default_collate and DataLoader check what they are given", function()
    local v = tide.data.CharVocab("hello")
    raises_here(function() v:encode(12) end, "bad argument #1 to 'encode' (string expected, got number)")
    raises_here(function() v:decode(true) end, "bad argument #1 to 'decode' (Tensor or table of ids expected, got boolean)")
    raises_here(function() tide.data.default_collate(nil) end, "bad argument #1 to 'default_collate' (non-empty list of samples expected, got nil)")
    raises_here(function() tide.data.DataLoader({ len = 1, get = 2 }) end, "bad argument #1 to 'DataLoader'")
    raises_here(function() tide.data.TensorDataset(nil, tide.randn(4)) end, "bad argument #1 to 'TensorDataset' (Tensor expected, got nil)")
    local ds = tide.data.TensorDataset(tide.randn(4, 2))
    raises_here(function() tide.data.DataLoader(ds, { collate_fn = 1 }) end, "DataLoader: collate_fn must be a function, got number")
    raises_here(function() tide.data.DataLoader(ds, { seed = 0.5 }) end, "DataLoader: seed must be an integer, got 0.5")
    local odd = { len = function() return "many" end, get = function() return 1 end }
    raises_here(function() tide.data.DataLoader(odd):len() end, "DataLoader: dataset:len() must return a non-negative integer, got many")
  end)
  it("cmdline.parse checks its tables", function()
    raises_here(function() tide.cmdline.parse({}, nil) end, "bad argument #2 to 'parse' (table of options expected, got nil)")
    raises_here(function() tide.cmdline.parse(5, {}) end, "bad argument #1 to 'parse' (table of arguments expected, got number)")
    raises_here(function() tide.cmdline.parse({}, { 3 }) end, "parse: option 1 must be {name, default, help} with a string name, got number")
    raises_here(function() tide.cmdline.parse({ 1 }, {}) end, "parse: argument 1 is a number, not a string")
    assert.are.equal(2, tide.cmdline.parse({ "--n", "2" }, { { "n", 1, "count" } }).n)
  end)
  it("checkpoint.save and resume check their parts", function()
    local path = os.tmpname()
    raises_here(function() tide.checkpoint.save(path, { model = 1 }) end, "save: model must be an object with :state_dict(), got number")
    raises_here(function() tide.checkpoint.save(path, { loader = true }) end, "save: loader must be a DataLoader, got boolean")
    tide.checkpoint.save(path, { model = nn.Linear(2, 2) })
    raises_here(function() tide.checkpoint.resume(path, 3) end, "bad argument #2 to 'resume' (table expected, got number)")
    raises_here(function() tide.checkpoint.resume(path, { model = {} }) end, "resume: model must be an object with :load_state_dict()")
    os.remove(path)
  end)
  it("load_state_dict checks entries it reads through __index", function()
    local sd = setmetatable({}, { __index = function() return 1 end })
    raises_here(function() nn.Linear(2, 2):load_state_dict(sd, { strict = false }) end,
      "load_state_dict: entry \"weight\" is a number, expected a Tensor")
  end)
  it("spectral_norm and a profiler report check their numbers", function()
    raises_here(function() nn.utils.spectral_norm(nn.Linear(2, 2), { n_power_iterations = "x" }) end,
      "spectral_norm: n_power_iterations must be a positive integer below 2^31, got x")
    raises_here(function() nn.utils.spectral_norm(nn.Linear(2, 2), { n_power_iterations = math.huge }) end,
      "spectral_norm: n_power_iterations must be a positive integer")
    raises_here(function() nn.utils.spectral_norm(nn.Linear(2, 2), { eps = {} }) end, "spectral_norm: eps must be a number, got table")
    local report = tide.profiler.profile(function() return tide.randn(2) + 1 end)
    raises_here(function() report:table({ limit = "x", print = false }) end, "table: limit must be a non-negative integer, got x")
  end)
  it("is_parametrized of a non-module is false", function()
    assert.is_false(nn.utils.is_parametrized(function() end))
    assert.is_false(nn.utils.is_parametrized(3, "weight"))
  end)
  it("weight_norm and Module.new want modules", function()
    raises_here(function() nn.utils.weight_norm(3) end, "bad argument #1 to 'weight_norm' (Module expected, got number)")
    raises_here(function() nn.utils.orthogonal(coroutine.create(print)) end, "bad argument #1 to 'orthogonal' (Module expected, got thread)")
    raises_here(function() nn.utils.register_parametrization(5, "weight", nn.Identity()) end,
      "bad argument #1 to 'register_parametrization' (Module expected, got number)")
    raises_here(function() nn.Linear(2, 2):new() end, "bad argument #1 to 'new' (module class expected, got table)")
  end)
  it("in-place index ops, a norm's eps, huge sizes (API fuzzer, seeds 2121-2124)", function()
    raises_here(function() tide.Tensor.index_fill_(false, 1, tide.long { 1 }, 0) end,
      "bad argument #1 to 'index_fill_' (Tensor expected, got boolean)")
    raises_here(function() tide.Tensor.index_copy_(-1.5, 1, tide.long { 1 }, tide.randn(1)) end,
      "bad argument #1 to 'index_copy_' (Tensor expected, got number)")
    raises_here(function() tide.index_put_(2 ^ 63, { tide.long { 1 } }, tide.randn(1)) end,
      "bad argument #1 to 'index_put_' (Tensor expected, got number)")
    raises_here(function() tide.repeat_interleave(tide.randn(4), tide.rand(4):gt(0.5)) end,
      "repeat_interleave: repeats must be an integer tensor, got bool")
    raises_here(function() tide.repeat_interleave(tide.randn(2), tide.long { 2 ^ 40, 1 }) end,
      "repeat_interleave: the counts add up to 1099511627777, above 2^27")
    raises_here(function() F.gaussian_nll_loss(tide.randn(3), tide.randn(3), tide.rand(3):gt(0.5)) end,
      "gaussian_nll_loss: var must be a floating-point tensor, got bool")
    raises_here(function() tide.masked_scatter_(false, tide.ones(1):gt(0), tide.randn(1)) end,
      "bad argument #1 to 'masked_scatter_' (Tensor expected, got boolean)")
    raises_here(function() F.rms_norm(tide.randn(2, 2), 2, nil, nn.Linear(2, 2)) end,
      "bad argument #4 to 'rms_norm' (number eps expected, got table)")
    raises_here(function() F.layer_norm(tide.randn(2, 2), 2, nil, nil, {}) end,
      "bad argument #5 to 'layer_norm' (number eps expected, got table)")
    -- each of these ran Lua out of memory (or for hours) before
    raises_here(function() nn.Upsample({ size = 1e15 })(tide.randn(2, 1, 4, 3)) end,
      "interpolate: output size 1000000000000000 along dim 3 needs a 1000000000000000 x 4 resampling matrix")
    raises_here(function() tide.randperm(2 ^ 32) end, "randperm: n = 4294967296 is above 2^27")
    raises_here(function() nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, { dim_feedforward = 8 }), 2 ^ 31) end,
      "TransformerEncoder: num_layers = 2147483648 is more than 65536")
    raises_here(function() nn.RNN(3, 3, { num_layers = 2 ^ 31 }) end, "RNN: num_layers = 2147483648 is more than 65536 layers")
  end)
end)
