-- Code generators (jit/cg_*.c): builds the C driver spec/jit/cg_test.c, which
-- compiles hand-built kernels through libgccjit and checks them against plain
-- C loops, then checks the disk cache across processes and its validation.
local B = os.getenv("TIDE_BUILD") or "build"
local LIBS = io.popen("make -s print-libs"):read("*l")
local exe = B .. "/cg_test"

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("*a")
  local ok, _, rc = p:close()
  return out, (ok and 0 or rc)
end

local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p " .. d))
  return d
end

-- run the driver with TIDE_CACHE_DIR=dir; returns output and the stats table
local function run(dir, extra)
  local out, rc = sh(("TIDE_CACHE_DIR=%s %s %s"):format(dir, exe, extra or ""))
  local st = {}
  for k, v in out:gmatch("([%w_]+)=([%d%.]+)") do st[k] = tonumber(v) end
  return out, rc, st
end

local function assert_all_ok(out, rc)
  local n = 0
  for line in out:gmatch("[^\n]+") do
    if line:match("^not ok") then error(line, 2) end
    if line:match("^ok %d+") then n = n + 1 end
  end
  assert(n >= 100, "too few test lines:\n" .. out)
  assert(rc == 0, "driver failed:\n" .. out)
end

local function only_file(dir, pat)
  local out = sh("ls " .. dir)
  for f in out:gmatch("[^\n]+") do if f:match(pat) then return dir .. "/" .. f end end
end

describe("cg (libgccjit code generators)", function()
  local dir

  setup(function()
    local out, rc = sh(("cc -O1 -Iruntime -Ijit spec/jit/cg_test.c %s/libtide.a %s -o %s"):format(B, LIBS, exe))
    assert(rc == 0, "cannot build the driver:\n" .. out)
    dir = tmpdir()
  end)

  teardown(function() if dir then os.execute("rm -rf " .. dir) end end)

  it("compiles every kernel kind and matches the C reference", function()
    local out, rc, st = run(dir)
    assert_all_ok(out, rc)
    assert.are.equal(1, st.compiles)
    assert.are.equal(0, st.disk_loads)
  end)

  it("a second process loads the batch from the disk cache", function()
    local out, rc, st = run(dir)
    assert_all_ok(out, rc)
    assert.are.equal(0, st.compiles)
    assert.are.equal(1, st.disk_loads)
  end)

  it("a truncated shared object is detected and rebuilt", function()
    local so = assert(only_file(dir, "%.so$"))
    assert(os.execute(("truncate -s 2000 %s"):format(so)))
    local out, rc, st = run(dir)
    assert_all_ok(out, rc)
    assert.are.equal(1, st.compiles)
    out, rc, st = run(dir)
    assert_all_ok(out, rc)
    assert.are.equal(0, st.compiles)
  end)

  it("a corrupted shared object of the right size is detected and rebuilt", function()
    local so = assert(only_file(dir, "%.so$"))
    assert(os.execute(("printf 'garbage!' | dd of=%s bs=1 seek=4096 conv=notrunc status=none"):format(so)))
    local out, rc, st = run(dir)
    assert_all_ok(out, rc)
    assert.are.equal(1, st.compiles)
  end)

  it("a shared object without its meta file is never loaded", function()
    os.remove(assert(only_file(dir, "%.meta$")))
    local out, rc, st = run(dir)
    assert_all_ok(out, rc)
    assert.are.equal(1, st.compiles)
    assert.are.equal(0, st.disk_loads)
  end)

  it("an unusable cache dir compiles in memory; TIDE_CACHE_DIR= disables the cache", function()
    local out, rc, st = run("/proc/tide-no-such-dir")
    assert_all_ok(out, rc)
    assert.are.equal(1, st.compiles)
    out, rc, st = run("")
    assert_all_ok(out, rc)
    assert.are.equal(1, st.compiles)
  end)

  it("prints C text that gcc compiles", function()
    local src = dir .. "/kernels.c"
    local out, rc = run(dir, "csrc " .. src)
    assert_all_ok(out, rc)
    local cout, crc = sh(("cc -std=gnu11 -O2 -march=x86-64-v3 -Wno-psabi -c %s -o %s/kernels.o"):format(src, dir))
    assert(crc == 0, "C text does not compile:\n" .. cout)
  end)
end)
