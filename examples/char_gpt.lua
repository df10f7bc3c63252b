--[[
examples/char_gpt.lua -- a nanoGPT-style character transformer trained on the
King James Bible (Debian packages bible-kjv-text and bible-kjv, whose `bible`
program prints the text): token + position embeddings, pre-LayerNorm blocks
with causal self-attention and a GELU MLP, AdamW with weight decay on matrices
only, linear warmup then cosine decay, gradient clipping. Prints train and
validation loss, writes a checkpoint, resumes from it, and samples text through
tide.multinomial (temperature, optional top-k; seeded by --seed via tide.manual_seed).

  luajit examples/char_gpt.lua [--steps 300] [--batch 16] [--block 64] [--layers 4]
      [--heads 4] [--dim 128] [--lr 3e-3] [--warmup 30] [--eval-every 100]
      [--ckpt char_gpt.ckpt] [--resume 1] [--sample 300] [--prompt "And God said"]
      [--temperature 0.8] [--top-k 0] [--text FILE] [--seed 0] [--bench N] [--compile 1]
      [--device cpu|opencl|opencl:N]

--help lists the options. --steps is the total step count: with --resume 1 the
checkpoint's steps count toward it (a checkpoint already there trains nothing).
--bench N times N training steps (after 5 warm-up steps) and prints the median
step time instead of training (bench/RESULTS.md, workload W3). --compile 1
runs each training step (forward, backward, clipping, AdamW update) as one
tide.compile'd function. --device opencl trains and samples on the OpenCL
device: the model and each batch are moved there (compiled steps run there
as OpenCL kernels printed from the kernel IR).

Run it from the checkout (or with LUA_PATH set as in the README); `make gpt`
installs the packages and runs a short configuration.
--]]
package.path = "./lua/?.lua;./lua/?/init.lua;./examples/lib/?.lua;" .. package.path
local tide = require "tide"
local chartext = require "chartext"         -- the text, its vocabulary and batches (examples/lib/chartext.lua)
local nn, F, data = tide.nn, tide.nn.functional, tide.data

-- -- Options --------------------------------------------------------------------------------

local opt = tide.cmdline.parse(arg, {
  usage = "luajit examples/char_gpt.lua [options]",
  about = "A character-level GPT on the King James Bible (bible-kjv): trains, checkpoints, samples.",
  { "steps", 300, "total training steps; with --resume the checkpoint's steps count toward it" },
  { "batch", 16, "sequences per batch" },
  { "block", 64, "context length in characters" },
  { "layers", 4, "transformer blocks" },
  { "heads", 4, "attention heads" },
  { "dim", 128, "embedding width" },
  { "lr", 3e-3, "peak learning rate (AdamW)" },
  { "warmup", 30, "linear warm-up steps, then cosine decay" },
  { "eval-every", 100, "steps between evaluations and checkpoints" },
  { "ckpt", "char_gpt.ckpt", "checkpoint file" },
  { "resume", 0, "1: continue from --ckpt" },
  { "sample", 300, "characters to sample at the end" },
  { "prompt", "And God said", "start of the sample" },
  { "temperature", 0.8, "sampling temperature" },
  { "top-k", 0, "sample among the k most likely characters (0: all)" },
  { "text", "", "train on this text file instead of the Bible" },
  { "seed", 0, "random seed" },
  { "bench", 0, "N: time N training steps (after 5 warm-up steps) and exit" },
  { "compile", 0, "1: run each training step through tide.compile" },
  { "device", "cpu", "cpu, opencl or opencl:N" },
})
tide.manual_seed(opt.seed)

-- -- Data ------------------------------------------------------------------------------------------

local text, vocab, train, val = chartext.load(opt.text)
-- random windows: x (B, T) and the next characters y (B, T)
local batch = chartext.batcher(opt.batch, opt.block, opt.device)

-- -- Model -----------------------------------------------------------------------------------------

local Block = nn.Module:extend("Block")
function Block:__init(d, h)
  self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
  self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
  self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
  self.heads = h
end
-- x (B, T, D)
function Block:forward(x)
  local B, T, D = x:size(1), x:size(2), x:size(3)
  local h = self.heads
  local hd = D / h
  local qkv = self.qkv(self.ln1(x)):split(D, 3)
  local function heads(t) return t:reshape(B, T, h, hd):transpose(2, 3) end     -- (B, h, T, hd)
  -- causal attention, one fused op: softmax(q k^T / sqrt(hd), future masked) v
  local y = F.scaled_dot_product_attention(heads(qkv[1]), heads(qkv[2]), heads(qkv[3]), { is_causal = true })
  y = y:transpose(2, 3):reshape(B, T, D)
  x = x + self.proj(y)
  return x + self.out(F.gelu(self.fc(self.ln2(x))))
end

local GPT = nn.Module:extend("GPT")
function GPT:__init(V, T, d, L, h)
  self.tok, self.pos = nn.Embedding(V, d), nn.Embedding(T, d)
  local blocks = {}
  for _ = 1, L do blocks[#blocks + 1] = Block(d, h) end
  self.blocks = nn.ModuleList(blocks)
  self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, V)
  self:apply(function(m)
    if m.__name == "Linear" or m.__name == "Embedding" then nn.init.normal_(m.weight, 0, 0.02) end
    if m.__name == "Linear" and m.bias ~= nil then nn.init.zeros_(m.bias) end
  end)
end
-- idx (B, T) of 1-based ids -> logits (B, T, V)
function GPT:forward(idx)
  local T = idx:size(2)
  local on = { device = idx.device }
  local pos = tide.arange(1, T + 1, on)
  local x = self.tok(idx) + self.pos(pos)
  for _, b in ipairs(self.blocks) do x = b(x) end
  return self.head(self.ln_f(x))
end

local model = GPT(vocab.size, opt.block, opt.dim, opt.layers, opt.heads):to(opt.device)
if opt.device ~= "cpu" then print(("device: %s (%s)"):format(opt.device, tide.opencl.device_name())) end
local nparams = 0
for _, p in ipairs(model:parameters()) do nparams = nparams + p:numel() end
print(("model: %d layers, %d heads, %d dims, %d parameters"):format(opt.layers, opt.heads, opt.dim, nparams))

-- weight decay on matrices only (embeddings and Linear weights), as nanoGPT
local decay, no_decay = {}, {}
for _, p in ipairs(model:parameters()) do
  if p:dim() >= 2 then decay[#decay + 1] = p else no_decay[#no_decay + 1] = p end
end
local optim = tide.optim.AdamW({ { params = decay, weight_decay = 0.1 }, { params = no_decay, weight_decay = 0 } },
  { lr = opt.lr, betas = { 0.9, 0.95 } })
local S = tide.optim.lr_scheduler
local sched = S.SequentialLR(optim, { schedulers = {
  S.LinearLR(optim, { start_factor = 0.01, end_factor = 1, total_iters = opt.warmup }),
  S.CosineAnnealingLR(optim, { T_max = math.max(1, opt.steps - opt.warmup), eta_min = opt.lr / 10 }) },
  milestones = { opt.warmup } })

local function loss_of(x, y)
  local logits = model(x)
  return F.cross_entropy(logits:view(-1, vocab.size), y:view(-1))
end

local function estimate(split, n)
  model:eval()
  local s = 0
  tide.no_grad(function() for _ = 1, n do s = s + loss_of(batch(split)):item() end end)
  model:train()
  return s / n
end

-- one training step on a batch; with --compile 1 traced, fused and compiled
-- (the scheduler's learning rate is a Lua number that changes every step: it
-- becomes a kernel argument after the second step instead of recompiling)
local function train_step(x, y)
  local loss = loss_of(x, y)
  optim:zero_grad(); loss:backward()
  tide.nn.utils.clip_grad_norm_(model:parameters(), 1.0)
  optim:step()
  return loss
end
if opt.compile ~= 0 then train_step = tide.compile(train_step, { name = "train_step" }) end

if opt.bench > 0 then
  for _ = 1, 5 do train_step(batch(train)); sched:step() end
  local t = {}
  for k = 1, opt.bench do
    local t0 = tide.progress.clock(); train_step(batch(train)); sched:step(); t[k] = tide.progress.clock() - t0
  end
  table.sort(t)
  print(("W3 train step  tide %s (Lua)  threads=%d  median %.1f ms  min %.1f  max %.1f  (%d steps)"):format(
    opt.compile ~= 0 and "compiled" or "eager", tide.get_num_threads(), t[math.floor(opt.bench / 2) + 1] * 1e3, t[1] * 1e3, t[opt.bench] * 1e3, opt.bench))
  os.exit(0)
end

-- -- Training, checkpoint, resume ---------------------------------------------------------------------

-- --steps is the total: a resumed run trains the steps the checkpoint lacks
local step = 0
if opt.resume ~= 0 then
  step = tide.checkpoint.resume(opt.ckpt, { model = model, optimizer = optim, scheduler = sched })
  print(("resumed from %s at step %d"):format(opt.ckpt, step))
  if step >= opt.steps then
    print(("the checkpoint is already at step %d and --steps %d is the total step count: nothing to train "
      .. "(pass --steps N with N > %d to train more)"):format(step, opt.steps, step))
  end
end
local bar = step < opt.steps and
  tide.progress.bar(opt.steps - step, { desc = "train", every = math.max(1, math.floor(opt["eval-every"] / 2)) })
while step < opt.steps do
  local loss = train_step(batch(train))
  sched:step()
  step = step + 1
  bar:update(1, { loss = loss:item() })
  if step % opt["eval-every"] == 0 or step == opt.steps then
    bar:close()
    print(("step %d: train loss %.4f, val loss %.4f, lr %.2e"):format(step, estimate(train, 5), estimate(val, 5),
      sched:get_last_lr()[1]))
    tide.checkpoint.save(opt.ckpt, { model = model, optimizer = optim, scheduler = sched, step = step })
    if step < opt.steps then
      bar = tide.progress.bar(opt.steps - step, { desc = "train", every = math.max(1, math.floor(opt["eval-every"] / 2)) })
    end
  end
end

-- -- Sampling ------------------------------------------------------------------------------------------

-- Each next character is drawn by tide.multinomial from the softmax of the last
-- logits divided by the temperature, among the top_k most likely ones (tide.topk)
-- when top_k > 0, on tide's RNG: --seed repeats it.
local function sample(prompt, n, temperature, top_k)
  model:eval()
  local ctx = vocab:encode(prompt):totable()
  local out = {}
  tide.no_grad(function()
    for _ = 1, n do
      local lo = math.max(1, #ctx - opt.block + 1)
      local window = { unpack(ctx, lo) }
      local logits = model(tide.tensor({ window }, { dtype = "int64", device = opt.device }))
      local l = (logits[{ 1, -1 }] / temperature):float():cpu()
      local pick
      if top_k > 0 and top_k < l:size(1) then          -- among the k largest (1-based indices)
        local v, idx = l:topk(top_k)
        pick = idx[tide.multinomial(v:softmax(-1), 1):item()]:item()
      else
        pick = tide.multinomial(l:softmax(-1), 1):item()
      end
      ctx[#ctx + 1] = pick
      out[#out + 1] = pick
    end
  end)
  return prompt .. vocab:decode(out)
end
tide.manual_seed(opt.seed)
print(("sample (temperature %.2f, top-k %d):\n%s"):format(opt.temperature, opt["top-k"],
  sample(opt.prompt, opt.sample, opt.temperature, opt["top-k"])))
