--[[
examples/char_lstm.lua -- a character-level LSTM language model trained on
the King James Bible (Debian packages bible-kjv-text and bible-kjv, whose
`bible` program prints the text): an embedding, a 2-layer nn.LSTM and a
linear head predict the next character of random 64-character windows
(Adam, gradient clipping). It prints train and validation loss (nats per
character), then samples text with top-k sampling, carrying the LSTM's state
{h, c} from character to character (one step per character: the model never
re-reads its context).

  luajit examples/char_lstm.lua [--steps 500] [--batch 32] [--seq 64] [--embed 64]
      [--hidden 256] [--layers 2] [--dropout 0] [--lr 3e-3] [--eval-every 100]
      [--sample 400] [--prompt "And God said"] [--top-k 5] [--temperature 0.8]
      [--text FILE] [--seed 0] [--compile 0|1] [--bench N] [--device cpu|opencl]

--help lists the options. --compile 1 runs each training step (forward,
backward, clipping, Adam) as one tide.compile'd function: one fused kernel
per LSTM step for the gate math. --bench N times N training steps (after 3
warm-up steps) and prints the median. `make lstm` installs the packages and
runs it.

Top-k sampling: the k most likely characters (tide's topk), renormalized;
the draw itself is tide.multinomial on tide's random stream, so --seed makes
the sample reproducible.
--]]
package.path = "./lua/?.lua;./lua/?/init.lua;./examples/lib/?.lua;" .. package.path
local tide = require "tide"
local chartext = require "chartext"         -- the text, its vocabulary and batches (examples/lib/chartext.lua)
local nn, F, data = tide.nn, tide.nn.functional, tide.data

-- -- Options --------------------------------------------------------------------------------

local opt = tide.cmdline.parse(arg, {
  usage = "luajit examples/char_lstm.lua [options]",
  about = "A character-level LSTM language model on the King James Bible (bible-kjv): trains, samples with top-k.",
  { "steps", 500, "training steps" },
  { "batch", 32, "sequences per batch" },
  { "seq", 64, "characters per sequence (backpropagation through time)" },
  { "embed", 64, "character embedding width" },
  { "hidden", 256, "LSTM hidden size" },
  { "layers", 2, "LSTM layers" },
  { "dropout", 0, "dropout between LSTM layers" },
  { "lr", 3e-3, "learning rate (Adam)" },
  { "eval-every", 100, "steps between evaluations" },
  { "sample", 400, "characters to sample at the end" },
  { "prompt", "And God said", "start of the sample" },
  { "top-k", 5, "sample from the k most likely characters" },
  { "temperature", 0.8, "sampling temperature" },
  { "text", "", "train on this text file instead of the Bible" },
  { "seed", 0, "random seed" },
  { "compile", 0, "1: run each training step through tide.compile" },
  { "bench", 0, "N: time N training steps (after 3 warm-up steps) and exit" },
  { "device", "cpu", "cpu, opencl or opencl:N" },
})
tide.manual_seed(opt.seed)

-- -- Data ------------------------------------------------------------------------------------------

local text, vocab, train, val = chartext.load(opt.text)
-- random windows: x (B, T) and the next characters y (B, T)
local batch = chartext.batcher(opt.batch, opt.seq, opt.device)

-- -- Model -----------------------------------------------------------------------------------------

local CharLSTM = nn.Module:extend("CharLSTM")
function CharLSTM:__init(V, E, H, L, p)
  self.embed = nn.Embedding(V, E)
  self.lstm = nn.LSTM(E, H, { num_layers = L, batch_first = true, dropout = p })
  self.head = nn.Linear(H, V)
end
-- idx (B, T) of 1-based ids, state {h, c} or nil -> logits (B, T, V), the new state
function CharLSTM:forward(idx, state)
  local out, st = self.lstm(self.embed(idx), state)
  return self.head(out), st
end

local model = CharLSTM(vocab.size, opt.embed, opt.hidden, opt.layers, opt.dropout):to(opt.device)
local nparams = 0
for _, p in ipairs(model:parameters()) do nparams = nparams + p:numel() end
print(("model: embedding %d, LSTM %d x %d, %d parameters%s"):format(opt.embed, opt.layers, opt.hidden, nparams,
  opt.device ~= "cpu" and (", on " .. opt.device) or ""))

local optim = tide.optim.Adam(model:parameters(), { lr = opt.lr })

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

local function train_step(x, y)
  local loss = loss_of(x, y)
  optim:zero_grad(); loss:backward()
  nn.utils.clip_grad_norm_(model:parameters(), 1.0)
  optim:step()
  return loss
end
if opt.compile ~= 0 then train_step = tide.compile(train_step, { name = "train_step" }) end

if opt.bench > 0 then
  for _ = 1, 3 do train_step(batch(train)) end
  local t = {}
  for k = 1, opt.bench do
    local x, y = batch(train)
    local t0 = tide.progress.clock(); train_step(x, y):item(); t[k] = tide.progress.clock() - t0
  end
  table.sort(t)
  print(("char_lstm train step  tide %s  threads=%d  median %.1f ms  min %.1f  max %.1f  (%d steps)"):format(
    opt.compile ~= 0 and "compiled" or "eager", tide.get_num_threads(), t[math.floor(opt.bench / 2) + 1] * 1e3,
    t[1] * 1e3, t[opt.bench] * 1e3, opt.bench))
  os.exit(0)
end

-- -- Training --------------------------------------------------------------------------------------

print(("step 0: val loss %.4f"):format(estimate(val, 4)))
local t0 = tide.progress.clock()
local bar = tide.progress.bar(opt.steps, { desc = "train", every = 10 })
for step = 1, opt.steps do
  local loss = train_step(batch(train))
  bar:update(1, { loss = loss:item() })
  if step % opt["eval-every"] == 0 or step == opt.steps then
    bar:close()
    print(("step %d: train loss %.4f, val loss %.4f (%.0f s)"):format(step, estimate(train, 4), estimate(val, 4),
      tide.progress.clock() - t0))
    if step < opt.steps then bar = tide.progress.bar(opt.steps - step, { desc = "train", every = 10 }) end
  end
end

-- -- Sampling with top-k, one LSTM step per character ------------------------------------------------

-- a character drawn from the k most likely of the logits row (V), scaled by the temperature
local function top_k(logits, k, temperature)
  local v, idx = logits:topk(math.min(k, logits:size(1)))      -- the k largest and their 1-based indices
  return idx[tide.multinomial((v / temperature):softmax(1), 1):item()]:item()   -- tide's random stream: --seed decides
end

local function sample(prompt, n)
  model:eval()
  local out = {}
  tide.no_grad(function()
    -- the prompt in one call; then each new character is one step from the carried state
    local logits, state = model(vocab:encode(prompt):view(1, -1):to(opt.device))
    local last = logits[{ 1, -1 }]
    for _ = 1, n do
      local c = top_k(last:cpu(), opt["top-k"], opt.temperature)
      out[#out + 1] = c
      logits, state = model(tide.long({ { c } }):to(opt.device), state)
      last = logits[{ 1, 1 }]
    end
  end)
  return prompt .. vocab:decode(out)
end
print(("sample (top-k %d, temperature %.2f):\n%s"):format(opt["top-k"], opt.temperature, sample(opt.prompt, opt.sample)))
