-- The examples' command lines (tide.cmdline): every example answers --help
-- with its options, rejects an unknown option with status 2, and
-- char_gpt.lua's --steps is the total with --resume (a checkpoint already
-- past it trains nothing and says so).
local function run(cmd)
  local tmp = os.tmpname()
  local ok, _, code = os.execute(("%s >%s 2>&1 </dev/null"):format(cmd, tmp))
  local f = io.open(tmp); local out = f:read("*a"); f:close(); os.remove(tmp)
  local status = type(ok) == "number" and math.floor(ok / 256) or (ok and 0 or code)
  return out, status
end

local examples = {}
do
  local p = io.popen("ls examples/*.lua")
  for f in p:lines() do examples[#examples + 1] = f end
  p:close()
end

describe("the examples", function()
  it("answer --help with their options", function()
    assert.is_true(#examples >= 4)
    for _, e in ipairs(examples) do
      local out, st = run("luajit " .. e .. " --help")
      assert(st == 0, e .. " --help: status " .. tostring(st) .. "\n" .. out)
      assert(out:find("^usage: luajit " .. e:gsub("%p", "%%%0")), e .. " --help:\n" .. out)
      assert(out:find("\n  --help  ", 1, true) or out:find("\n  --help ", 1, true), e .. " --help:\n" .. out)
    end
    local out = run("luajit examples/char_gpt.lua --help")
    assert.matches("\n  %-%-steps +total training steps; with %-%-resume the checkpoint's steps count toward it %[300%]", out)
  end)

  it("reject an unknown option or a bad number with status 2", function()
    local out, st = run("luajit examples/fashion_mnist.lua --epoch 3")
    assert.equal(2, st)
    assert.matches("^unknown option '%-%-epoch'\nusage:", out)
    out, st = run("luajit examples/char_gpt.lua --steps many")
    assert.equal(2, st)
    assert.matches("option --steps needs a number, got 'many'", out, 1, true)
    out, st = run("luajit examples/char_gpt.lua --steps")
    assert.equal(2, st)
    assert.matches("option --steps needs a value", out, 1, true)
  end)

  it("char_gpt: --steps is the total with --resume", function()
    local ckpt = os.tmpname()
    local base = ("luajit examples/char_gpt.lua --text README.md --layers 1 --dim 16 --heads 2 --block 8 --batch 2 "
      .. "--eval-every 3 --warmup 1 --sample 5 --ckpt %s"):format(ckpt)
    local out, st = run(base .. " --steps 3")
    assert(st == 0, out)
    assert.matches("step 3: train loss", out, 1, true)
    -- already at step 3: nothing to train, a clear note, still samples
    out, st = run(base .. " --steps 2 --resume 1")
    assert(st == 0, out)
    assert.matches("resumed from .* at step 3\nthe checkpoint is already at step 3 and %-%-steps 2 is the total step count: "
      .. "nothing to train", out)
    assert.is_nil(out:find("train 1/", 1, true))
    assert.matches("sample (temperature", out, 1, true)
    -- one more step to reach the total
    out, st = run(base .. " --steps 4 --resume 1")
    os.remove(ckpt)
    assert(st == 0, out)
    assert.matches("train 1/1", out, 1, true)
    assert.matches("step 4: train loss", out, 1, true)
  end)
end)
