-- td_from_blob from C (spec/runtime/blob_test.c): tensors over the host's
-- memory with a release callback, run under ASan+UBSan and under valgrind.
-- Either catches tide freeing or caching memory it does not own; the driver
-- checks the callback runs exactly once, after the last view, and never on
-- a failed call.
local B = os.getenv("TIDE_BUILD") or "build"
local LIBS = io.popen("make -s print-libs"):read("*l")

-- output and exit status (LuaJIT's pclose gives no status: the shell prints it)
local function sh(cmd)
  local p = io.popen("(" .. cmd .. ") 2>&1; echo \"__rc=$?\"")
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("__rc=(%d+)%s*$"))
  return (out:gsub("__rc=%d+%s*$", "")), rc
end

local function build(exe, flags)
  local out, rc = sh(("gcc -g -O1 %s -Iruntime spec/runtime/blob_test.c %s/libtide.a %s -o %s")
    :format(flags, B, LIBS, exe))
  assert(rc == 0, "build failed:\n" .. out)
end

describe("td_from_blob from C", function()
  it("is clean under ASan and UBSan", function()
    local exe = B .. "/blob_test_asan"
    build(exe, "-fsanitize=address,undefined -fno-omit-frame-pointer")
    local supp = os.tmpname()
    local f = io.open(supp, "w"); f:write("leak:libgccjit.so\n"); f:close()
    local out, rc = sh(("LSAN_OPTIONS=suppressions=%s UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 %s")
      :format(supp, exe))
    os.remove(supp)
    assert.are.equal(0, rc, out)
    assert.is_truthy(out:find("^ok\n"), out)
  end)

  -- (not under make test-asan: valgrind cannot run a program built with ASan)
  local it_valgrind = require("helper").asan and pending or it
  it_valgrind("is clean under valgrind", function()
    assert.is_truthy(sh("command -v valgrind"):find("valgrind"), "valgrind is needed: make deps")
    local exe = B .. "/blob_test"
    build(exe, "")
    local out, rc = sh("valgrind -q --error-exitcode=9 --leak-check=full --errors-for-leak-kinds=definite " .. exe)
    assert.are.equal(0, rc, out)
    assert.is_truthy(out:find("ok\n", 1, true), out)
  end)
end)
