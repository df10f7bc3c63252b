-- examples/love in LÖVE 11 (Debian's love), headless under xvfb-run: the game
-- trains for 300 frames with tide found from the checkout and no environment
-- variables, the loss falls, every frame is drawn and the screenshot is kept
-- under build/love/; then the layouts a game ships with: tide copied into the
-- game's folder (tide/ and build/), a .love archive (declarations read through
-- love.filesystem, the libraries beside the archive), and the one error naming
-- the paths tried when the library is missing.
local build = os.getenv("TIDE_BUILD") or "build"
local cwd = os.getenv("PWD")
local abs_build = build:sub(1, 1) == "/" and build or cwd .. "/" .. build

local function sh(cmd)
  local p = io.popen("(" .. cmd .. ") 2>&1; echo \"__rc=$?\"")
  local out = p:read("*a")
  p:close()
  local rc = tonumber(out:match("__rc=(%d+)%s*$"))
  return (out:gsub("__rc=%d+%s*$", "")), rc
end

local function read(p)
  local f = io.open(p, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

-- run a game headless, away from the checkout, with no tide variables
local function love(game, args)
  return sh(("cd /tmp && env -u TIDE_BUILD -u TIDE_HOME -u TIDE_LIB -u LUA_PATH -u LUA_CPATH timeout 300 "
    .. "xvfb-run -a love %s %s"):format(game, args))
end

local function summary(dir)
  local t = {}
  for k, v in (read(dir .. "/summary.txt") or ""):gmatch("(%S+) (%S+)") do t[k] = tonumber(v) or v end
  return t
end

-- a game folder holding the example and a copy of tide (tide/ and build/)
local function game_copy(dir, with_libs)
  assert(os.execute(("mkdir -p %s/build && cp examples/love/*.lua %s/ && cp -r lua/tide %s/tide && "
    .. "cp %s/tide_cdef.lua %s/build/"):format(dir, dir, dir, abs_build, dir)))
  if with_libs then
    assert(os.execute(("cp %s/libtide.so %s/tide_handle.so %s/build/"):format(abs_build, abs_build, dir)))
  end
end

-- (not under make test-asan: LÖVE would need the ASan runtime loaded first)
local describe = require("helper").asan and pending or describe

describe("examples/love under LÖVE, headless", function()
  setup(function()
    assert(sh("command -v love && command -v xvfb-run && command -v zip"):find("zip"), "love, xvfb-run and zip are needed: make deps")
  end)

  it("trains for 300 frames: the loss falls, every frame is drawn, a screenshot", function()
    local out = abs_build .. "/love"
    sh("rm -rf " .. out)
    local log, rc = love(cwd .. "/examples/love", "--frames 300 --out " .. out)
    assert.are.equal(0, rc, log)
    local s = summary(out)
    assert.are.equal(300, s.frames, log)
    assert.are.equal("userdata", s.handles, "the handle shim loads in LÖVE's LuaJIT")
    local losses = {}
    for l in (read(out .. "/loss.txt") or ""):gmatch("%d+ (%S+)\n") do losses[#losses + 1] = tonumber(l) end
    assert.are.equal(300, #losses)
    local function mean(a, b) local m = 0 for i = a, b do m = m + losses[i] end return m / (b - a + 1) end
    assert.is_true(mean(271, 300) < 0.25 * mean(1, 30), ("loss %g -> %g"):format(mean(1, 30), mean(271, 300)))
    assert.is_true(s.accuracy > 0.9, log)
    local png = read(out .. "/screenshot.png")
    assert.is_truthy(png and png:sub(1, 8) == "\137PNG\r\n\26\n", "screenshot.png is a PNG")
    assert.is_true(#png > 10000, "the screenshot has content")
  end)

  it("finds tide copied into the game's folder", function()
    local root = os.tmpname(); os.remove(root)
    game_copy(root .. "/game", true)
    local out = root .. "/out"
    local log, rc = love(root .. "/game", "--frames 3 --out " .. out)
    sh("rm -rf " .. root)
    assert.are.equal(0, rc, log)
    assert.matches("tide spirals: 300 points", log)
  end)

  it("runs from a .love archive with the libraries beside it", function()
    local root = os.tmpname(); os.remove(root)
    game_copy(root .. "/game", false)
    local _, zrc = sh(("cd %s/game && zip -q -r ../spirals.love . && cp %s/libtide.so %s/tide_handle.so %s/")
      :format(root, abs_build, abs_build, root))
    assert.are.equal(0, zrc)
    local log, rc = love(root .. "/spirals.love", "--frames 3 --out " .. root .. "/out")
    local s = summary(root .. "/out")
    assert.are.equal(0, rc, log)
    assert.are.equal(3, s.frames, log)
    assert.are.equal("userdata", s.handles, log)
    -- without the library: one error that names the paths tried, and exit status 1
    sh(("rm %s/libtide.so"):format(root))
    log, rc = love(root .. "/spirals.love", "--frames 3 --out " .. root .. "/out2")
    sh("rm -rf " .. root)
    assert.are.equal(1, rc, log)
    assert.matches("tide: cannot find libtide%.so; tried: [^\n]*" .. (root:gsub("%p", "%%%0")) .. "/libtide%.so", log)
  end)
end)
