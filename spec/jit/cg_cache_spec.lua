-- The kernel disk cache (jit/cg_cache.c) on a hostile filesystem, from child
-- processes: a compile killed mid-way leaves a temp file the next process
-- removes, FIFOs named like cache files are misses (never opened blocking), a
-- TIDE_CACHE_DIR longer than any fixed buffer is used whole, and an unusable
-- directory compiles in memory with one warning.
local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end
-- output and exit status of a shell command (LuaJIT's popen close gives no status)
local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("*a")
  p:close()
  return out:gsub("rc=%d+\n$", ""), tonumber(out:match("rc=(%d+)\n$"))
end
local function tmpdir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p " .. d))
  return d
end
local function listdir(d)
  local t = {}
  for n in sh("ls -A " .. sh_quote(d)):gmatch("[^\n]+") do t[#t + 1] = n end
  table.sort(t)
  return t
end

-- a child that compiles one small function; prints "ok <value> compiles=N disk_loads=N"
local CHILD = [[
local tide = require "tide"
local f = tide.compile(function(x) return (x * 2 + 1):sin() end)
local y = f(tide.ones(4))
local f2 = tide.compile(function(x) return (x * 3 - 1):cos() end)
local z = f2(tide.ones(4))
local s = tide.jit.stats()
print(("ok %.4f %.4f compiles=%d disk_loads=%d"):format(y[1]:item(), z[1]:item(), s.compiles, s.disk_loads))
]]
local WANT = ("ok %.4f %.4f"):format(math.sin(3), math.cos(2))
local script = os.tmpname()
do local f = assert(io.open(script, "w")); f:write(CHILD); f:close() end

-- run the child with env (a table) and an optional sh prefix; output, exit code
local function child(env, pre, code)
  local vars = { "LUA_PATH=" .. sh_quote(package.path) }
  for k, v in pairs(env) do vars[#vars + 1] = k .. "=" .. sh_quote(v) end
  local file = script
  if code then file = os.tmpname(); local f = assert(io.open(file, "w")); f:write(code); f:close() end
  local cmd = ("%s%s exec luajit %s"):format(pre and (pre .. "; ") or "", table.concat(vars, " "), sh_quote(file))
  local out, rc = sh("timeout 60 sh -c " .. sh_quote(cmd))
  if code then os.remove(file) end
  return out, rc
end
local function stats(out)
  return tonumber(out:match("compiles=(%d+)")), tonumber(out:match("disk_loads=(%d+)"))
end
local function dead_pid() local p = io.popen("sh -c 'echo $$'"); local n = tonumber(p:read("*l")); p:close(); return n end
local function hostname()
  local p = io.popen("hostname"); local h = p:read("*l") or ""; p:close()
  return (h:gsub("[^%w%.]", "_"))
end

describe("the kernel disk cache", function()
  local dir
  before_each(function() dir = tmpdir() end)
  after_each(function() os.execute("rm -rf " .. sh_quote(dir)) end)
  teardown(function() os.remove(script) end)

  it("a compile killed mid-way leaves a temp file that the next process removes", function()
    -- an `as` first on PATH that kills its parent: the child dies inside libgccjit
    local bin, tmp = tmpdir(), tmpdir()
    local f = assert(io.open(bin .. "/as", "w"))
    f:write("#!/bin/sh\nkill -9 $PPID\nexit 1\n")
    f:close()
    os.execute("chmod +x " .. bin .. "/as")
    -- compiles in the process itself (TIDE_CG_FORK=0): the process dies with its compile
    local out, rc = child({ TIDE_CACHE_DIR = dir, TMPDIR = tmp, PATH = bin .. ":" .. os.getenv("PATH"), TIDE_CG_FORK = "0" })
    assert.is_true(rc ~= 0 and not out:find("ok "), "the child was not killed: " .. out)
    -- by default a compile runs in a forked process: its death is an error the program sees, the
    -- build is tried again for x86-64-v3 on an AVX-512 host, and nothing is left in the cache
    local dir2 = tmpdir()
    local out2, rc2 = child({ TIDE_CACHE_DIR = dir2, TMPDIR = tmp, PATH = bin .. ":" .. os.getenv("PATH") },
      nil, 'local ok, e = pcall(require("tide").compile(function(x) return x * 2 end), require("tide").ones(2)); print(ok, e)')
    os.execute("rm -rf " .. sh_quote(bin) .. " " .. sh_quote(tmp))
    assert.are.equal(0, rc2, out2)
    assert.truthy(out2:find("false", 1, true) and out2:find("libgccjit crashed compiling", 1, true), out2)
    assert.are.equal(0, #listdir(dir2), table.concat(listdir(dir2), " "))
    os.execute("rm -rf " .. sh_quote(dir2))
    local left = listdir(dir)
    assert.are.equal(1, #left, table.concat(left, " "))
    assert.truthy(left[1]:match("^%.tmp%-%x+%-" .. hostname():gsub("%p", "%%%0") .. "%-%d+%-%w+$"), left[1])
    out = child({ TIDE_CACHE_DIR = dir })
    assert.truthy(out:find(WANT, 1, true), out)
    for _, n in ipairs(listdir(dir)) do assert.is_nil(n:match("^%.tmp"), "left: " .. n) end
  end)

  it("removes only temp files of this host's dead processes, and any older than a day", function()
    local h, pid, hash = hostname(), dead_pid(), "0123456789abcdef"
    local gone = { (".tmp-%s-%s-%d-AbC123"):format(hash, h, pid), ".tmp-" .. hash .. "-old999" }
    local kept = { (".tmp-%s-%s-1-AbC123"):format(hash, h),                 -- pid 1 is alive
                   (".tmp-%s-otherhost-%d-AbC123"):format(hash, pid),        -- another host's, recent
                   ".tmp-" .. hash .. "-new999" }                             -- an older tide's, recent
    for _, n in ipairs(gone) do os.execute("touch " .. sh_quote(dir .. "/" .. n)) end
    for _, n in ipairs(kept) do os.execute("touch " .. sh_quote(dir .. "/" .. n)) end
    os.execute("touch -d '2 days ago' " .. sh_quote(dir .. "/" .. gone[2]))
    local out = child({ TIDE_CACHE_DIR = dir })
    assert.truthy(out:find(WANT, 1, true), out)
    local have = {}
    for _, n in ipairs(listdir(dir)) do have[n] = true end
    for _, n in ipairs(gone) do assert.is_nil(have[n], n .. " was not removed") end
    for _, n in ipairs(kept) do assert.is_true(have[n], n .. " was removed") end
  end)

  it("a FIFO named like a cache file is a miss with a warning, never a hang", function()
    local out = child({ TIDE_CACHE_DIR = dir })
    assert.truthy(out:find(WANT, 1, true), out)
    local files = listdir(dir)
    assert.are.equal(4, #files, table.concat(files, " "))
    -- the first batch's meta and the second's .so become FIFOs
    local meta, so
    for _, n in ipairs(files) do
      if n:match("%.meta$") and not meta then meta = n end
    end
    for _, n in ipairs(files) do
      if n:match("%.so$") and n:sub(1, 16) ~= meta:sub(1, 16) then so = n end
    end
    for _, n in ipairs { meta, so } do
      os.remove(dir .. "/" .. n)
      assert(os.execute("mkfifo " .. sh_quote(dir .. "/" .. n)))
    end
    local rc
    out, rc = child({ TIDE_CACHE_DIR = dir })
    assert.are.equal(0, rc, out)
    assert.truthy(out:find(WANT, 1, true), out)
    assert.truthy(out:find(meta .. " in the kernel cache is not a regular file; it is ignored (a cache miss)", 1, true), out)
    assert.truthy(out:find(so .. " in the kernel cache is not a regular file", 1, true), out)
    assert.are.same({ 2, 0 }, { stats(out) })
    -- both were rebuilt as regular files: the next process loads everything
    out = child({ TIDE_CACHE_DIR = dir })
    assert.are.same({ 0, 2 }, { stats(out) })
  end)

  it("uses a TIDE_CACHE_DIR of any length (no fixed buffer truncates it)", function()
    local long = dir
    for i = 1, 7 do long = long .. "/" .. ("d%d"):format(i) .. ("x"):rep(200) end    -- > 1400 characters
    assert.is_true(#long > 1400)
    local out = child({ TIDE_CACHE_DIR = long })
    assert.truthy(out:find(WANT, 1, true), out)
    assert.are.equal(4, #listdir(long), "the cache files are not in the long directory")
    out = child({ TIDE_CACHE_DIR = long })
    assert.are.same({ 0, 2 }, { stats(out) })
    -- nothing was written where its first 1023 characters point (the old fixed buffer)
    local parent = long:sub(1, 1023):match("^(.*)/")
    assert.are.same({ long:sub(#parent + 2):match("^[^/]+") }, listdir(parent))
  end)

  it("a missing, uncreatable or read-only directory compiles in memory with one warning", function()
    local file = dir .. "/a-file"
    os.execute("touch " .. sh_quote(file))
    local cases = { file .. "/cache", "/proc/tide-no-such-dir" }
    local ro = dir .. "/ro"
    os.execute("mkdir -p " .. ro)
    local mounted = os.execute("mount -t tmpfs -o ro,size=64k tmpfs " .. sh_quote(ro) .. " 2>/dev/null")
    if mounted == true or mounted == 0 then cases[#cases + 1] = ro end
    for _, d in ipairs(cases) do
      local out, rc = child({ TIDE_CACHE_DIR = d })
      assert.are.equal(0, rc, out)
      assert.truthy(out:find(WANT, 1, true), out)
      assert.are.same({ 2, 0 }, { stats(out) })
      local _, nwarn = out:gsub("the kernel cache directory " .. d:gsub("%p", "%%%0") .. " cannot be used", "")
      assert.are.equal(1, nwarn, out)
      assert.truthy(out:find("compiled kernels are kept in memory only", 1, true), out)
    end
    if mounted == true or mounted == 0 then os.execute("umount " .. sh_quote(ro)) end
    -- TIDE_CACHE_DIR= turns the disk cache off, silently
    local out = child({ TIDE_CACHE_DIR = "" })
    assert.truthy(out:find(WANT, 1, true), out)
    assert.is_nil(out:find("cannot be used", 1, true), out)
  end)
end)
