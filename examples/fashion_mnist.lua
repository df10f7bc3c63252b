--[[
examples/fashion_mnist.lua -- train an MLP or a small CNN on Fashion-MNIST
(Debian package dataset-fashion-mnist: IDX files under
/usr/share/datasets/fashion-mnist), eagerly, with tide.nn, tide.optim and
tide.data; prints the loss, the time per epoch and the test accuracy.

  luajit examples/fashion_mnist.lua [--model mlp|cnn] [--epochs N] [--batch-size N]
                                    [--lr X] [--limit N] [--seed N] [--compile 1]
                                    [--device cpu|opencl|opencl:N]

(run from the checkout, or with LUA_PATH set as in the README; `make fashion`
installs the dataset package when missing). --limit trains on the first N
images only, for a quick run. --compile 1 runs each training step (forward,
backward and the optimizer update) as one tide.compile'd function.
--device opencl trains on the OpenCL device: the model and each batch are
moved there (the data stays on the CPU); compiled steps run there as
OpenCL kernels printed from the kernel IR (matmuls through CLBlast).
--]]
package.path = "./lua/?.lua;./lua/?/init.lua;" .. package.path
local tide = require "tide"
local nn, F, data = tide.nn, tide.nn.functional, tide.data

-- -- Options --------------------------------------------------------------------------------

local opt = tide.cmdline.parse(arg, {
  usage = "luajit examples/fashion_mnist.lua [options]",
  about = "Trains an MLP or a small CNN on Fashion-MNIST (Debian's dataset-fashion-mnist).",
  { "model", "mlp", "mlp or cnn" },
  { "epochs", 3, "passes over the training set" },
  { "batch-size", 128, "images per batch" },
  { "lr", 1e-3, "learning rate (Adam)" },
  { "limit", 0, "N: train on the first N images only (0: all)" },
  { "seed", 0, "random seed" },
  { "compile", 0, "1: run each training step through tide.compile" },
  { "device", "cpu", "cpu, opencl or opencl:N" },
  { "dir", "/usr/share/datasets/fashion-mnist", "the dataset's directory" },
})
tide.manual_seed(opt.seed)

-- -- Data: uint8 images scaled to [0, 1] and standardized, 1-based labels ----------------------

local function load(split)
  local images = data.read_idx(("%s/%s-images-idx3-ubyte.gz"):format(opt.dir, split))
  local labels = data.read_idx(("%s/%s-labels-idx1-ubyte.gz"):format(opt.dir, split))
  local x = (images:float() / 255 - 0.2860) / 0.3530            -- Fashion-MNIST mean and std
  return x:view(-1, 1, 28, 28), labels:long() + 1
end

local ok, err = pcall(function()
  local f = assert(io.open(opt.dir .. "/train-images-idx3-ubyte.gz", "rb")); f:close()
end)
if not ok then
  io.stderr:write("Fashion-MNIST not found in " .. opt.dir .. ": apt-get install dataset-fashion-mnist (or make fashion)\n")
  os.exit(1)
end

local Xtr, Ytr = load("train")
local Xte, Yte = load("t10k")
if opt.limit > 0 then Xtr, Ytr = Xtr:narrow(1, 1, opt.limit), Ytr:narrow(1, 1, opt.limit) end
local loader = data.DataLoader(data.TensorDataset(Xtr, Ytr), { batch_size = opt["batch-size"], shuffle = true, seed = opt.seed })

-- -- Model ------------------------------------------------------------------------------------------

local model
if opt.model == "mlp" then
  model = nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
elseif opt.model == "cnn" then
  model = nn.Sequential(
    nn.Conv2d(1, 16, 3, { padding = 1 }), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),    -- 16 x 14 x 14
    nn.Conv2d(16, 32, 3, { padding = 1 }), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),   -- 32 x 7 x 7
    nn.Flatten(), nn.Linear(32 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10))
else
  error("--model must be mlp or cnn, got " .. tostring(opt.model))
end
model:to(opt.device)
print(model)
if opt.device ~= "cpu" then print(("device: %s (%s)"):format(opt.device, tide.opencl.device_name())) end
local optim = tide.optim.Adam(model:parameters(), { lr = opt.lr })

local function accuracy(X, Y)
  model:eval()
  local correct = 0
  tide.no_grad(function()
    for b = 1, X:size(1), 1000 do
      local n = math.min(1000, X:size(1) - b + 1)
      local _, pred = model(X:narrow(1, b, n):to(opt.device)):max(2)
      correct = correct + pred:eq(Y:narrow(1, b, n):to(opt.device)):sum():item()
    end
  end)
  model:train()
  return correct / X:size(1)
end

-- -- Training ---------------------------------------------------------------------------------------------

-- one training step; with --compile 1 it is traced, fused and compiled (the
-- last, smaller batch of an epoch gets a variant for its size, once, whose
-- kernels are mostly those of the full batches: sizes are run-time values)
local function train_step(x, y)
  local loss = F.cross_entropy(model(x), y)
  optim:zero_grad()
  loss:backward()
  optim:step()
  return loss
end
if opt.compile ~= 0 then train_step = tide.compile(train_step, { name = "train_step" }) end

local acc
for epoch = 1, opt.epochs do
  local t0 = tide.progress.clock()
  local bar = tide.progress.bar(loader:len(), { desc = ("epoch %d"):format(epoch) })
  for x, y in loader:batches() do
    local loss = train_step(x:to(opt.device), y:to(opt.device))
    bar:update(1, { loss = loss:item() })
  end
  bar:close()
  local dt = tide.progress.clock() - t0
  acc = accuracy(Xte, Yte)
  print(("epoch %d: %.1f s, test accuracy %.2f%%"):format(epoch, dt, 100 * acc))
end
print(("final test accuracy (%s): %.2f%%"):format(opt.model, 100 * acc))
