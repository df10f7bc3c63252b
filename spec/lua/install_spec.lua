-- `make install` puts a working library where a host finds it: the installed
-- Lua modules load the installed libtide.so and cdef, away from the checkout.

describe("make install", function()
  it("installs a library that loads and computes outside the checkout", function()
    local build = os.getenv("TIDE_BUILD") or "build"
    local dest = os.tmpname()
    os.remove(dest)
    local ok = os.execute(("make -s install B=%q DESTDIR=%q >/dev/null"):format(build, dest))
    assert.is_true(ok == 0 or ok == true, "make install failed")
    local prefix = dest .. "/usr/local"
    local lua = prefix .. "/share/lua/5.1"
    local script = [[local tide = require "tide"; io.write(tostring(tide.arange(6):view(2, 3):sum(2):totable()[2]))]]
    local cmd = ("cd /tmp && env -u TIDE_BUILD -u TIDE_HOME -u TIDE_LIB LUA_PATH=%q LD_LIBRARY_PATH=%q luajit -e %q 2>&1")
      :format(lua .. "/?.lua;" .. lua .. "/?/init.lua;;", prefix .. "/lib", script)
    local p = io.popen(cmd)
    local out = p:read("*a")
    p:close()
    os.execute(("rm -rf %q"):format(dest))
    assert.are.equal("12", out)
  end)
end)
