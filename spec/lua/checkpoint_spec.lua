-- tide.checkpoint: a run interrupted and resumed from its checkpoint continues
-- with exactly the losses of the uninterrupted run (model, AdamW state, cosine
-- schedule, shuffled DataLoader order, dropout's RNG); mismatched resumes error.
local tide = require "tide"
local H = require "helper"
local nn, F = tide.nn, tide.nn.functional

local function setup()
  tide.manual_seed(11)
  local X = tide.randn(40, 6)
  local Y = X:narrow(2, 1, 2):sum(2):gt(0):long() + 1
  local model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2))
  local opt = tide.optim.AdamW(model:parameters(), { lr = 0.05 })
  local sched = tide.optim.lr_scheduler.CosineAnnealingLR(opt, { T_max = 6 })
  local loader = tide.data.DataLoader(tide.data.TensorDataset(X, Y), { batch_size = 8, shuffle = true, seed = 3 })
  return model, opt, sched, loader
end

local function epoch(model, opt, sched, loader, losses)
  for x, y in loader:batches() do
    local loss = F.cross_entropy(model(x), y)
    opt:zero_grad(); loss:backward(); opt:step()
    losses[#losses + 1] = loss:item()
  end
  sched:step()
end

describe("checkpoint", function()
  it("resumes exactly where the run stopped", function()
    local path = os.tmpname()
    local ref = {}
    do
      local m, o, s, l = setup()
      for _ = 1, 4 do epoch(m, o, s, l, ref) end
    end
    local got = {}
    do
      local m, o, s, l = setup()
      for _ = 1, 2 do epoch(m, o, s, l, got) end
      tide.checkpoint.save(path, { model = m, optimizer = o, scheduler = s, loader = l, step = 2, extra = { note = "half" } })
    end
    tide.manual_seed(999)                              -- a different RNG state, restored by resume
    local m, o, s, l = setup()
    tide.randn(100)
    local step, extra = tide.checkpoint.resume(path, { model = m, optimizer = o, scheduler = s, loader = l })
    assert.are.equal(2, step); assert.are.equal("half", extra.note)
    for _ = 3, 4 do epoch(m, o, s, l, got) end
    os.remove(path)
    assert.are.equal(#ref, #got)
    for i = 1, #ref do assert.are.equal(ref[i], got[i], "loss " .. i) end
  end)

  it("refuses a resume whose parts do not match the checkpoint", function()
    local path = os.tmpname()
    local m, o = setup()
    tide.checkpoint.save(path, { model = m, step = 1 })
    H.raises(function() tide.checkpoint.resume(path, { model = m, optimizer = o }) end,
      "has no optimizer state but the call passes one")
    tide.save({ w = tide.zeros(2) }, path)
    H.raises(function() tide.checkpoint.resume(path, { model = m }) end, "is not a tide checkpoint")
    os.remove(path)
  end)
end)
