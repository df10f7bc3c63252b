-- examples/embed: a C program embedding LuaJIT and tide feeds a Lua model
-- script its own arrays (td_from_blob, no copy), reads the fitted weights
-- from its array, and sees every release callback run once the Lua state
-- closes (the program checks them and exits 1 otherwise).
local B = os.getenv("TIDE_BUILD") or "build"

-- output and exit status (LuaJIT's pclose gives no status: the shell prints it)
local function sh(cmd)
  local p = io.popen("(" .. cmd .. ") 2>&1; echo \"__rc=$?\"")
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("__rc=(%d+)%s*$"))
  return (out:gsub("__rc=%d+%s*$", "")), rc
end

-- (not under make test-asan: the program would need the ASan runtime loaded first)
local describe = require("helper").asan and pending or describe

describe("examples/embed", function()
  it("builds with make and runs: weights through the host's arrays, releases at close", function()
    local out, rc = sh(("make -s B=%s %s/embed_host"):format(B, B))
    assert.are.equal(0, rc, out)
    out, rc = sh(("cd /tmp && %s/embed_host"):format(B:sub(1, 1) == "/" and B or os.getenv("PWD") .. "/" .. B))
    assert.are.equal(0, rc, out)
    local w1, w2, w3, b = out:match("w = (%S+) (%S+) (%S+), b = (%S+)")
    assert.is_truthy(w1, out)
    assert.is_true(math.abs(tonumber(w1) - 1.5) < 0.05 and math.abs(tonumber(w2) + 2) < 0.05
      and math.abs(tonumber(w3) - 0.5) < 0.05 and math.abs(tonumber(b) - 0.25) < 0.05, out)
    assert.is_truthy(out:find("released before close: 0", 1, true), out)
    assert.is_truthy(out:find("released after close: 4 of 4", 1, true), out)
    local err = tonumber(out:match("max |prediction %- y| = (%S+)"))
    assert.is_true(err ~= nil and err < 0.05, out)
  end)
end)
