-- tide.save's files on a hostile filesystem: temp files left by killed saves are
-- cleaned by the next save, a full disk (RLIMIT_FSIZE, or a small tmpfs when
-- this process may mount one) raises and keeps the old file, sizes the loaders
-- cannot read back are refused, and files on network filesystems are read, not
-- mapped.
local tide = require "tide"
local H = require "spec.helper"
local ffi = require "ffi"

pcall(ffi.cdef, [[
int spec_flock(int fd, int op) __asm__("flock");
int spec_open(const char *path, int flags, int mode) __asm__("open");
int spec_close(int fd) __asm__("close");
]])

local dir = os.tmpname()
os.remove(dir)
os.execute("mkdir -p " .. dir)
local function P(name) return dir .. "/" .. name end
local function read(path) local f = io.open(path, "rb"); if not f then return nil end local s = f:read("*a"); f:close() return s end
local function touch(path) local f = assert(io.open(path, "wb")); f:write("partial"); f:close() end
local function exists(path) local f = io.open(path, "rb"); if f then f:close() end return f ~= nil end
local function listdir(d)
  local p = io.popen("ls -A " .. (d or dir)); local s = p:read("*a"); p:close()
  local t = {}
  for n in s:gmatch("[^\n]+") do t[#t + 1] = n end
  return t
end
local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- the pid of a process that has exited (and been reaped)
local function dead_pid()
  local p = io.popen("sh -c 'echo $$'")
  local pid = tonumber(p:read("*l"))
  p:close()
  return pid
end

-- run a Lua script in a child luajit through sh, with shell commands before it
-- (ulimit, trap); returns its output and exit status
local function child(pre, script)
  local path = os.tmpname()
  local f = assert(io.open(path, "w")); f:write(script); f:close()
  local cmd = ("%s; LUA_PATH=%s exec luajit %s 2>&1"):format(pre, sh_quote(package.path), sh_quote(path))
  local p = io.popen("sh -c " .. sh_quote(cmd) .. " 2>&1; echo \"rc=$?\"")
  local out = p:read("*a")
  p:close()
  os.remove(path)
  return out:gsub("rc=(%d+)\n$", ""), tonumber(out:match("rc=(%d+)\n$"))
end

local function same(a, b)
  assert.are.equal(tostring(a.dtype), tostring(b.dtype))
  assert.are.same(a:size(), b:size())
  assert.are.same(a:totable(), b:totable())
end

describe("tide.save on a hostile filesystem", function()
  after_each(function() os.execute("rm -rf " .. dir .. "/*") end)
  teardown(function() os.execute("rm -rf " .. dir) end)

  it("a save killed mid-write leaves a temp file that the next save removes", function()
    local target = P("m.safetensors")
    tide.save({ w = tide.ones(4) }, target)
    local old = read(target)
    -- the child dies by SIGXFSZ (its default action) writing past a 4 KiB limit
    local out, rc = child("ulimit -f 8", [[
      local tide = require "tide"
      tide.save({ w = tide.randn(100000) }, ]] .. ("%q"):format(target) .. [[)
      print("saved")]])
    assert.is_true(rc ~= 0 and not out:find("saved"), "the child was not killed: " .. out)
    assert.are.equal(old, read(target))
    local left = listdir()
    assert.are.equal(2, #left, "expected the target and one temp file: " .. table.concat(left, " "))
    local tmp
    for _, n in ipairs(left) do if n ~= "m.safetensors" then tmp = n end end
    assert.truthy(tmp:match("^m%.safetensors%.tmp%.%d+%.1$"), tmp)
    tide.save({ w = tide.zeros(2) }, target)
    assert.are.same({ "m.safetensors" }, listdir())
    same(tide.load(target).w, tide.zeros(2))
  end)

  it("cleans only its own path's temp files of dead processes that no one holds", function()
    local pid = dead_pid()
    local names = {
      gone = { ("m.st.tmp.%d"):format(pid), ("m.st.tmp.%d.3"):format(pid) },         -- old and new form, dead pid
      kept = { "m.st.tmp.1.1",                        -- pid 1 is alive
               ("other.st.tmp.%d.1"):format(pid),     -- another path's
               ("m.st.tmp.%d.x"):format(pid),         -- not a name save makes
               ("m.st.tmp.%d.2"):format(pid) },       -- locked below: a writer on another host
    }
    for _, group in pairs(names) do for _, n in ipairs(group) do touch(P(n)) end end
    local fd = ffi.C.spec_open(P(names.kept[4]), 0, 0)
    assert.is_true(fd >= 0)
    assert.are.equal(0, ffi.C.spec_flock(fd, 2))
    tide.save(tide.ones(3), P("m.st"))
    ffi.C.spec_close(fd)
    for _, n in ipairs(names.gone) do assert.is_false(exists(P(n)), n .. " was not removed") end
    for _, n in ipairs(names.kept) do assert.is_true(exists(P(n)), n .. " was removed") end
    same(tide.load(P("m.st")), tide.ones(3))
  end)

  it("a full disk (RLIMIT_FSIZE) raises a clear error and keeps the old file", function()
    local target = P("full.safetensors")
    tide.save({ w = tide.ones(4) }, target)
    local old = read(target)
    -- SIGXFSZ ignored: the write past the limit fails with EFBIG instead of killing
    local out = child("ulimit -f 8; trap '' XFSZ", [[
      local tide = require "tide"
      local ok, err = pcall(tide.save, { w = tide.randn(100000) }, ]] .. ("%q"):format(target) .. [[)
      print(ok, err)
      local ok2, err2 = pcall(tide.save_npy, tide.randn(100000), ]] .. ("%q"):format(target .. ".npy") .. [[)
      print(ok2, err2)]])
    assert.truthy(out:find("false\tsave: " .. target .. ": write failed: File too large (the file at that path, if any, is unchanged)", 1, true), out)
    assert.truthy(out:find("false\tsave_npy: " .. target .. ".npy: write failed: File too large", 1, true), out)
    assert.are.equal(old, read(target))
    assert.are.same({ "full.safetensors" }, listdir())
  end)

  local mnt = dir .. "-tmpfs"
  local mounted = os.execute("mkdir -p " .. mnt .. " && mount -t tmpfs -o size=256k tmpfs " .. mnt .. " 2>/dev/null")
  mounted = mounted == true or mounted == 0
  local it_tmpfs = mounted and it or pending
  it_tmpfs("a full disk (a 256 KiB tmpfs: ENOSPC) raises a clear error and keeps the old file", function()
    local target = mnt .. "/full.safetensors"
    tide.save({ w = tide.ones(4) }, target)
    local old = read(target)
    local ok, err = pcall(tide.save, { w = tide.randn(200000) }, target)
    assert.is_false(ok)
    assert.truthy(err:find("save: " .. target .. ": write failed: No space left on device", 1, true), err)
    assert.are.equal(old, read(target))
    assert.are.same({ "full.safetensors" }, listdir(mnt))
    tide.save({ w = tide.zeros(3) }, target)        -- the space was given back
    same(tide.load(target).w, tide.zeros(3))
  end)
  if mounted then teardown(function() os.execute("umount " .. mnt .. "; rmdir " .. mnt) end)
  else os.execute("rmdir " .. mnt) end

  it("refuses sizes the loaders could not read back (a size-0 tensor with a 2^62 dim)", function()
    local x = tide.zeros(0, 2 ^ 62)
    H.raises(function() tide.save({ a = { x } }, P("big.safetensors")) end,
      "save: the tensor at 'a.1' has shape [0, 4611686018427387904]: a file cannot hold it")
    H.raises(function() tide.save_npy(x, P("big.npy")) end, "save_npy: the tensor has shape [0, 4611686018427387904]")
    assert.are.same({}, listdir())
    -- the largest size that can: saved and loaded back
    tide.save(tide.zeros(0, 2 ^ 53), P("ok.safetensors"))
    assert.are.same({ 0, 2 ^ 53 }, tide.load(P("ok.safetensors")):size())
    tide.save_npy(tide.zeros(2 ^ 53, 0), P("ok.npy"))
    assert.are.same({ 2 ^ 53, 0 }, tide.load_npy(P("ok.npy")):size())
  end)

  it("maps files on local filesystems and reads those on network ones; mmap=true/false choose", function()
    local S = require "tide.serialize"
    local x = { a = tide.randn(300, 200) }
    tide.save(x, P("m.safetensors"))
    local fd = ffi.C.spec_open(P("m.safetensors"), 0, 0)
    assert.is_nil(S.network_fs(fd))             -- /tmp is local here
    ffi.C.spec_close(fd)
    local function mapped()
      local f = io.open("/proc/self/maps"); local m = f:read("*a"); f:close()
      return m:find(P("m.safetensors"), 1, true) ~= nil
    end
    for _, case in ipairs { { nil, true }, { true, true }, { false, false } } do
      local y = tide.load(P("m.safetensors"), { mmap = case[1] })
      assert.are.equal(case[2], mapped(), "mmap = " .. tostring(case[1]))
      same(y.a, x.a)
      y = nil
      collectgarbage(); collectgarbage()
    end
    H.raises(function() tide.load(P("m.safetensors"), { mmap = "yes" }) end, "load", "mmap")
  end)
end)
