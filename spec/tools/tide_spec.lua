-- The tide command (tools/tide.c, lua/tide/cmd.lua): -e with the tide global,
-- a script with `arg` as luajit sets it, stdin as a script, -i (then the
-- REPL), -l, --version, --help, errors and exit statuses, and running from
-- another directory with no environment variables.
local build = os.getenv("TIDE_BUILD") or "build"
local bin = build:sub(1, 1) == "/" and build .. "/tide" or os.getenv("PWD") .. "/" .. build .. "/tide"

local function run(args, stdin)
  local tmp = os.tmpname()
  local cmd = ("%s %s >%s 2>&1"):format(bin, args, tmp)
  local input = tmp .. ".in"
  local f = io.open(input, "w"); f:write(stdin or ""); f:close()
  cmd = cmd .. " <" .. input
  local ok, how, code = os.execute(cmd)
  f = io.open(tmp); local out = f:read("*a"); f:close(); os.remove(tmp); os.remove(input)
  -- LuaJIT's os.execute returns the raw wait status
  local status = type(ok) == "number" and math.floor(ok / 256) or (ok and 0 or code)
  return out, status
end

local function script(text)
  local p = os.tmpname() .. ".lua"
  local f = io.open(p, "w"); f:write(text); f:close()
  return p
end

describe("the tide command", function()
  setup(function() assert(io.open(bin), bin .. " is missing: run make") end)

  it("runs -e code with the tide global loaded", function()
    local out, st = run([[-e "print(tide.ones(2, 3):sum():item(), tide.zeros(2, 3):size())"]])
    assert.equal(0, st)
    assert.equal("6\t[2, 3]\n", out)
  end)

  it("runs a script with arg as luajit sets it", function()
    local p = script("print(select('#', ...), ...) print(arg[0], arg[1], arg[2], arg[-1] ~= nil, arg[3])\n"
      .. "print(tide, require('tide').ones(1):item())")
    local out, st = run(("%s one 'two words'"):format(p))
    os.remove(p)
    assert.equal(0, st)
    assert.equal(("2\tone\ttwo words\n%s\tone\ttwo words\ttrue\tnil\nnil\t1\n"):format(p), out)
    -- options before the script land below arg[0]
    p = script("print(arg[-2], arg[-1], arg[0] ~= nil, arg[1])")
    out = run(("-e 'x = 1' %s a"):format(p))
    os.remove(p)
    assert.equal("-e\tx = 1\ttrue\ta\n", out)
  end)

  it("runs standard input as a script when it is not a terminal", function()
    local out, st = run("", "print(1 + 1)")
    assert.equal(0, st); assert.equal("2\n", out)
    out = run("- x y", "print(...)")
    assert.equal("x\ty\n", out)
  end)

  it("enters the REPL after a script with -i", function()
    local p = script("answer = 42")
    local out, st = run(("-i %s"):format(p), "print(answer + 1)\nanswer\n")
    os.remove(p)
    assert.equal(0, st)
    assert.matches("43", out, 1, true)
    assert.matches("\n?> 42\n", out) -- the REPL printed the global the script set
  end)

  it("loads a library with -l", function()
    local out = run([[-l tide.doc -e "print(type(_G['tide.doc'].help_text))"]])
    assert.equal("function\n", out)
  end)

  it("reports errors with a traceback and a non-zero status", function()
    local out, st = run([[-e "local function f() error('boom') end f()"]])
    assert.equal(1, st)
    assert.matches("^tide: %(command line%):1: boom\nstack traceback:", out)
    assert.matches("in function 'f'", out, 1, true)
    local p = script("local x = tide_nothing.y")
    out, st = run(p)
    os.remove(p)
    assert.equal(1, st)
    assert.matches("attempt to index global 'tide_nothing'", out, 1, true)
    out, st = run("--no-such-option")
    assert.equal(1, st)
    assert.matches("unknown option '--no-such-option'", out, 1, true)
    out, st = run("-e")
    assert.equal(1, st)
    assert.matches("option '-e' needs an argument", out, 1, true)
    out, st = run("/nonexistent/script.lua")
    assert.equal(1, st)
    assert.matches("cannot open /nonexistent/script.lua", out, 1, true)
  end)

  it("prints --version and --help", function()
    local out, st = run("--version")
    assert.equal(0, st)
    assert.matches("^tide 0%.1%.0", out)
    assert.matches("\nLuaJIT 2%.1", out)
    assert.matches("\nlibgccjit %d+%.%d+%.%d+\n", out)
    assert.matches("\nOpenCL: ", out)                          -- a device or "none"
    out = run("-h")
    assert.matches("^usage: tide %[options%] %[script %[args%.%.%.%]%]", out)
    assert.matches("-i ", out, 1, true)
  end)

  it("finds its modules and library from its own path, from any directory, without TIDE_ variables", function()
    local tmp = os.tmpname()
    local ok = os.execute(("cd /tmp && env -u TIDE_BUILD -u TIDE_HOME -u TIDE_LIB LUA_PATH= %s -e %q >%s 2>&1 </dev/null")
      :format(bin, "io.write(tide.arange(4):sum():item())", tmp))
    local f = io.open(tmp); local out = f:read("*a"); f:close(); os.remove(tmp)
    assert.equal("6", out)
    assert.is_true(ok == 0 or ok == true)
  end)

  it("uses the libtide it is linked with, found through a relative LD_LIBRARY_PATH (one runtime)", function()
    -- a copy (another file) of the library in a relative directory: the Lua
    -- side must load that one, not the build dir's too
    local dir = os.tmpname(); os.remove(dir)
    local parent, name = dir:match("^(.*)/([^/]+)$")
    assert(os.execute(("mkdir -p %s && cp %s/libtide.so %s/libtide.so.0"):format(dir, build, dir)))
    local tmp = os.tmpname()
    local code = 'local f = io.open("/proc/self/maps"); local seen = {}; '
      .. 'for p in f:read("*a"):gmatch("%S+libtide[^\\n]*") do seen[p] = true end; f:close(); '
      .. 'for p in pairs(seen) do print(p) end; print(tide.ones(2):sum():item())'
    os.execute(("cd %s && LD_LIBRARY_PATH=%s %s -e %q >%s 2>&1 </dev/null"):format(parent, name, bin, code, tmp))
    local f = io.open(tmp); local out = f:read("*a"); f:close()
    os.remove(tmp); os.execute("rm -rf " .. dir)
    local libs = {}
    for l in out:gmatch("[^\n]*libtide[^\n]*") do libs[#libs + 1] = l end
    assert.equal(1, #libs, out)
    assert.matches(dir .. "/libtide.so.0", libs[1], 1, true)
    assert.matches("\n2\n?$", out)
  end)

  it("prints --version with no OpenCL platform", function()
    local out, st = run("--version", nil)
    assert.equal(0, st)
    local tmp = os.tmpname()
    os.execute(("OCL_ICD_VENDORS=/nonexistent %s --version >%s 2>&1 </dev/null"):format(bin, tmp))
    local f = io.open(tmp); out = f:read("*a"); f:close(); os.remove(tmp)
    assert.matches("\nOpenCL: none\n?$", out)
  end)
end)
