-- tide from 4 OS threads at once (spec/runtime/threads_test.c): C API calls on
-- distinct tensors against libtide.a, results checked, then the same under
-- ThreadSanitizer (a TSan build of the runtime in build-tsan/) with no report;
-- and 4 lua_States, one per thread, each with tide loaded.
local B = os.getenv("TIDE_BUILD") or "build"
local LIBS = io.popen("make -s print-libs"):read("*l")
local SRC = "spec/runtime/threads_test.c"

-- output and exit status (LuaJIT's popen close gives no status)
local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("*a")
  p:close()
  return out:gsub("rc=%d+\n$", ""), tonumber(out:match("rc=(%d+)\n$"))
end
local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function build(exe, flags, lib, libs)
  local out, rc = sh(("cc -O1 -g -Iruntime %s %s %s %s -o %s"):format(flags, SRC, lib or "", libs, exe))
  assert(rc == 0, "cannot build " .. exe .. ":\n" .. out)
end

local function assert_ok(out, rc)
  assert.is_nil(out:find("ThreadSanitizer", 1, true), out)
  assert.is_nil(out:find("not ok", 1, true), out)
  assert.truthy(out:find("^ok %d+ checks, 0 failed") or out:find("\nok %d+ checks, 0 failed"), out)
  assert.are.equal(0, rc, out)
end

describe("threads", function()
  it("4 threads of C API calls on distinct tensors give the right results", function()
    local exe = B .. "/threads_test"
    build(exe, "", B .. "/libtide.a", LIBS)
    assert_ok(sh(exe .. " 20"))
  end)

  -- the sanitizer pass (make test-asan) has its own build: this one runs in make test
  local it_tsan = os.getenv("SAN") == "1" and pending or it
  it_tsan("the same calls under ThreadSanitizer: no data race, no lock-order problem", function()
    local out, rc = sh("make -s -j2 SAN=thread B=build-tsan build-tsan/libtide.a")
    assert(rc == 0, "cannot build the TSan runtime:\n" .. out)
    local exe = "build-tsan/threads_test"
    build(exe, "-fsanitize=thread", "build-tsan/libtide.a", LIBS .. " -fsanitize=thread")
    assert_ok(sh("TSAN_OPTIONS='second_deadlock_stack=1' " .. exe .. " 4"))
  end)

  it("4 lua_States, one per thread, each running tide", function()
    local exe = B .. "/threads_test_lua"
    local lj = io.popen("pkg-config --cflags --libs luajit"):read("*l")
    -- (LIBS brings the sanitizer flags of a sanitizer build: the driver then loads its runtime first)
    build(exe, "-DTHREADS_LUA", nil, lj .. " " .. LIBS)
    assert_ok(sh(("TIDE_BUILD=%s LUA_PATH=%s %s 10"):format(sh_quote(B), sh_quote(package.path), exe)))
  end)
end)
