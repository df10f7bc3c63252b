-- examples/char_lstm.lua end to end on a tiny configuration (README.md as the
-- text): it trains, evaluates and samples with top-k, eagerly and with
-- --compile 1, and the sample is the same for the same --seed.
local function run(cmd)
  local tmp = os.tmpname()
  local ok, _, code = os.execute(("%s >%s 2>&1 </dev/null"):format(cmd, tmp))
  local f = io.open(tmp); local out = f:read("*a"); f:close(); os.remove(tmp)
  local status = type(ok) == "number" and math.floor(ok / 256) or (ok and 0 or code)
  return out, status
end

describe("examples/char_lstm.lua", function()
  it("trains, evaluates and samples with top-k, eager and compiled", function()
    local base = "luajit examples/char_lstm.lua --text README.md --steps 4 --batch 2 --seq 6 --embed 8 --hidden 8 "
      .. "--layers 2 --eval-every 2 --sample 30 --top-k 3 --seed 5"
    local out, st = run(base)
    assert(st == 0, out)
    assert.matches("step 4: train loss [%d.]+, val loss [%d.]+", out)
    local sample = out:match("sample %(top%-k 3, temperature 0%.80%):\n(.*)$")
    assert(sample and sample:find("^And God said") and #sample >= 30, out)
    local again = run(base)
    assert.equal(sample, again:match("sample %(top%-k 3, temperature 0%.80%):\n(.*)$"), "same seed, same sample")
    out, st = run(base .. " --compile 1")
    assert(st == 0, out)
    assert.matches("step 4: train loss [%d.]+, val loss [%d.]+", out)
  end)
end)
