-- make test-asan's leak check is on for the runtime: a tensor that tide itself
-- leaks is reported, whatever scripts/lsan.supp suppresses in the libraries.
-- (Runs under make test-asan only: elsewhere there is no sanitizer to ask.)
local H = require "spec.helper"

local it_asan = H.asan and it or pending
describe("the sanitizer pass", function()
  it_asan("reports a leak of the runtime's own memory, and none for a clean run", function()
    local function run(body)
      local cmd = ("LUA_PATH=%q luajit -e %q 2>&1; echo \"rc=$?\""):format(package.path,
        "local tide = require 'tide'; local x = tide.randn(1000); " .. body .. " os.exit(0, true)")
      local p = io.popen(cmd)
      local out = p:read("*a")
      p:close()
      return out
    end
    local out = run("tide.C.td_retain(x.p)")            -- one reference too many: never freed
    assert.truthy(out:find("ERROR: LeakSanitizer: detected memory leaks", 1, true), out)
    assert.truthy(out:find("in rt_storage_new", 1, true), out)
    assert.is_nil(out:find("rc=0\n", 1, true), out)
    out = run("")
    assert.is_nil(out:find("LeakSanitizer", 1, true), out)
    assert.truthy(out:find("rc=0\n", 1, true), out)
  end)
end)
