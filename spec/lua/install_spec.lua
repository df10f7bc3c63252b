-- `make install` into a temporary PREFIX, then tide used from there only, as a
-- user would: the files and links (versioned libtide.so with its SONAME,
-- libtide.a, tide.pc, the header, the Lua modules with tide/cdef.lua, the tide
-- command, the docs), the README's C example built exactly as the README says
-- (its code blocks are read from README.md) through pkg-config, examples/embed
-- built against the install, `require "tide"` with only LUA_PATH pointing at
-- share/lua/5.1 (no TIDE_* variables, away from the checkout), the installed
-- `tide -e`, and `make uninstall` leaving no file behind.
local build = os.getenv("TIDE_BUILD") or "build"
local cwd = os.getenv("PWD")

-- output and exit status (LuaJIT's pclose gives no status: the shell prints it)
local function sh(cmd)
  local p = io.popen("(" .. cmd .. ") 2>&1; echo \"__rc=$?\"")
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("__rc=(%d+)%s*$"))
  return (out:gsub("__rc=%d+%s*$", "")), rc
end

-- a command run away from the checkout, with no tide variables in its environment
local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end
local function outside(env, cmd)
  return sh(("cd %s && env -u TIDE_BUILD -u TIDE_HOME -u TIDE_LIB %s sh -c %s"):format(os.getenv("TMPDIR") or "/tmp",
    env, quote(cmd)))
end

local function read(p)
  local f = assert(io.open(p, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

-- the fenced block of README.md that starts with `first` (its first line), and the block after it
local function readme_blocks(first)
  local text = read("README.md")
  local blocks = {}
  for lang, body in text:gmatch("\n```(%w*)\n(.-)\n```") do blocks[#blocks + 1] = { lang = lang, body = body } end
  for i, b in ipairs(blocks) do
    if b.body:sub(1, #first) == first then return b, blocks[i + 1] end
  end
end

-- (not under make test-asan: programs built against an ASan libtide, and LÖVE,
-- would need the ASan runtime loaded first; this is packaging, not memory safety)
local describe = require("helper").asan and pending or describe

describe("make install into a temporary PREFIX", function()
  local root, prefix, pc_env, lib_env

  setup(function()
    root = os.tmpname()
    os.remove(root)
    prefix = root .. "/usr"
    local out, rc = sh(("make -s install B=%s PREFIX=%s"):format(build, prefix))
    assert(rc == 0, "make install failed:\n" .. out)
    pc_env = "PKG_CONFIG_PATH=" .. prefix .. "/lib/pkgconfig"
    lib_env = "LD_LIBRARY_PATH=" .. prefix .. "/lib"
  end)

  teardown(function() if root then sh("rm -rf " .. root) end end)

  it("installs the versioned library with its SONAME, tide.pc and the rest", function()
    local version = read("runtime/tide.h"):match('#define TIDE_VERSION "([^"]+)"')
    local major = version:match("^(%d+)")
    local lib = prefix .. "/lib/"
    assert.are.equal("libtide.so." .. version, (sh("readlink " .. lib .. "libtide.so." .. major):gsub("\n", "")))
    assert.are.equal("libtide.so." .. major, (sh("readlink " .. lib .. "libtide.so"):gsub("\n", "")))
    assert.matches("SONAME%)%s+Library soname: %[libtide%.so%." .. major .. "%]", sh("readelf -d " .. lib .. "libtide.so"))
    for _, p in ipairs { "lib/libtide.a", "lib/lua/5.1/tide_handle.so", "include/tide.h", "bin/tide", "share/lua/5.1/tide/init.lua",
      "share/lua/5.1/tide/cdef.lua", "share/lua/5.1/tide/nn/init.lua", "share/doc/tide/README.md",
      "share/doc/tide/api.md" } do
      assert.is_truthy(io.open(prefix .. "/" .. p), p .. " is not installed")
    end
    local out, rc = sh(pc_env .. " pkg-config --modversion tide")
    assert.are.equal(0, rc, out)
    assert.are.equal(version, (out:gsub("\n", "")))
    out = sh(pc_env .. " pkg-config --cflags --libs tide")
    assert.matches("%-I" .. prefix:gsub("%p", "%%%0") .. "/include", out)
    assert.matches("%-ltide", out)
    assert.matches("%-lopenblas", sh(pc_env .. " pkg-config --static --libs tide"))
  end)

  it("builds and runs the README's C example exactly as the README says", function()
    local code, cmds = readme_blocks("/* host.c")
    assert.is_truthy(code, "README.md has no code block starting with /* host.c")
    local line = cmds and cmds.body:match("\n(cc host%.c[^\n]*)") or cmds and cmds.body:match("^(cc host%.c[^\n]*)")
    assert.is_truthy(line, "the block after host.c has no line starting with 'cc host.c'")
    assert.matches("pkg%-config %-%-cflags %-%-libs tide", line)
    local dir = root .. "/readme"
    sh("mkdir -p " .. dir)
    local f = io.open(dir .. "/host.c", "w"); f:write(code.body, "\n"); f:close()
    local out, rc = outside(pc_env .. " " .. lib_env, "cd " .. dir .. " && " .. line)
    assert.are.equal(0, rc, line .. "\n" .. out)
    assert.matches("sum = %-?[%d.e+-]+", out)
  end)

  it("builds and runs the README's td_from_blob example", function()
    local code = readme_blocks("/* blob.c")
    assert.is_truthy(code, "README.md has no code block starting with /* blob.c")
    local dir = root .. "/readme-blob"
    sh("mkdir -p " .. dir)
    local f = io.open(dir .. "/blob.c", "w"); f:write(code.body, "\n"); f:close()
    local out, rc = outside(pc_env .. " " .. lib_env,
      "cd " .. dir .. " && cc blob.c $(pkg-config --cflags --libs tide) -o blob && ./blob")
    assert.are.equal(0, rc, out)
    assert.are.equal("out[1][2] = 403.429\nreleased out\nreleased in\n", out)
  end)

  it("runs examples/embed built against the install with pkg-config", function()
    local lua = prefix .. "/share/lua/5.1"
    local env = ("%s %s LUA_PATH='%s/?.lua;%s/?/init.lua;;'"):format(pc_env, lib_env, lua, lua)
    local out, rc = outside(env, ("cc %s/examples/embed/host.c $(pkg-config --cflags --libs tide luajit) "
      .. "-ldl -lm -o %s/embed_host && %s/embed_host %s/examples/embed/model.lua"):format(cwd, root, root, cwd))
    assert.are.equal(0, rc, out)
    assert.is_truthy(out:find("released after close: 4 of 4", 1, true), out)
  end)

  it("loads with require \"tide\" from share/lua/5.1 with no TIDE_* variables", function()
    local lua = prefix .. "/share/lua/5.1"
    local script = [[local tide = require "tide"; io.write(tostring(tide.arange(6):view(2, 3):sum(2):totable()[2]),
      " ", require("tide.core").libpath, " ", require("tide.core").handles)]]
    local out, rc = outside(("LUA_PATH='%s/?.lua;%s/?/init.lua;;'"):format(lua, lua), "luajit -e " .. quote(script))
    assert.are.equal(0, rc, out)
    local v, libpath, handles = out:match("^(%S+) (%S+) (%S+)$")
    assert.are.equal("userdata", handles, "the handle shim is found in lib/lua/5.1")
    assert.are.equal("12", v, out)
    assert.are.equal(prefix .. "/lib", (libpath:gsub("/share/lua/5%.1/%.%./%.%./%.%./lib", "/lib"):match("^(.*)/[^/]+$")))
  end)

  it("runs the installed tide command", function()
    local out, rc = outside("", prefix .. "/bin/tide -e " .. quote('print(tide.ones(2, 3):sum():item(), require("tide.core").libpath)'))
    assert.are.equal(0, rc, out)
    local v, libpath = out:match("^(%S+)%s+(%S+)")
    assert.are.equal("6", v, out)
    assert.matches("^" .. prefix:gsub("%p", "%%%0") .. "/bin/%.%./lib/libtide%.so", libpath)
  end)

  it("make uninstall removes every file install put there", function()
    local dest = root .. "/uninst"
    local out, rc = sh(("make -s install B=%s PREFIX=%s"):format(build, dest))
    assert.are.equal(0, rc, out)
    assert.is_true(tonumber(sh("find " .. dest .. " -type f | wc -l"):match("%d+")) > 30)
    out, rc = sh(("make -s uninstall B=%s PREFIX=%s"):format(build, dest))
    assert.are.equal(0, rc, out)
    assert.are.equal("", sh(("find %s -type f -o -type l"):format(dest)))
    assert.is_nil(io.open(dest .. "/share/lua/5.1/tide"), "tide's own directories are removed")
  end)

  it("DESTDIR stages the same tree under a root", function()
    local dest = root .. "/stage"
    local out, rc = sh(("make -s install B=%s PREFIX=/opt/tide DESTDIR=%s"):format(build, dest))
    assert.are.equal(0, rc, out)
    assert.is_truthy(io.open(dest .. "/opt/tide/lib/libtide.so.0"))
    assert.matches("prefix=/opt/tide\n", read(dest .. "/opt/tide/lib/pkgconfig/tide.pc"))
    sh(("make -s uninstall B=%s PREFIX=/opt/tide DESTDIR=%s"):format(build, dest))
    assert.are.equal("", sh(("find %s -type f -o -type l"):format(dest)))
  end)
end)
