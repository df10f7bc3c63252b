-- The REPL (lua/tide/repl.lua) of the tide command, driven through a real
-- terminal: tmux runs build/tide in a pane, the spec types into it and reads
-- the screen. Auto-print, multi-line input, errors, completion, help, %time,
-- Ctrl-C in a loop of tensor ops and in an interpreted Lua loop, and the
-- history file across two sessions.
local ffi = require "ffi"
local clock = require("tide.progress").clock

pcall(ffi.cdef, "int usleep(unsigned int usec);")
local function sleep(s) ffi.C.usleep(math.floor(s * 1e6)) end

local build = os.getenv("TIDE_BUILD") or "build"
local bin = build:sub(1, 1) == "/" and build .. "/tide" or os.getenv("PWD") .. "/" .. build .. "/tide"
local tmpdir = os.tmpname()
os.remove(tmpdir)
os.execute("mkdir -p " .. tmpdir)

local function sh(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local out = p:read("*a")
  local ok = p:close()
  return out, ok
end

-- A tmux server of our own (its socket under tmpdir) with one pane running cmd.
local nsess = 0
local function session(env)
  nsess = nsess + 1
  local s = { sock = ("%s/tmux%d"):format(tmpdir, nsess) }
  local vars = { "INPUTRC=/dev/null", "HOME=" .. tmpdir, "TIDE_HISTORY=" .. (env and env.history or "") }
  local cmd = ("exec env %s %s"):format(table.concat(vars, " "), bin)
  local out = sh(("tmux -S %s -f /dev/null new-session -d -x 150 -y 50 %q"):format(s.sock, cmd))
  assert(out == "", "tmux: " .. out)
  function s.tmux(args) return sh(("tmux -S %s %s"):format(s.sock, args)) end
  function s.type(text) s.tmux(("send-keys -l %q"):format(text)) end
  function s.keys(...) s.tmux("send-keys " .. table.concat({ ... }, " ")) end
  function s.line(text) s.type(text); s.keys("Enter") end
  function s.screen() return (s.tmux("capture-pane -p -J -S -"):gsub("%s+$", "")) end
  -- wait until the screen matches pattern (plain text unless `pat`) after `from`
  -- characters of it; returns the screen and the time it took
  function s.wait(what, timeout, pat, from)
    local t0 = clock()
    repeat
      local scr = s.screen()
      if scr:find(what, (from or 0) + 1, not pat) then return scr, clock() - t0 end
      sleep(0.01)
    until clock() - t0 > (timeout or 5)
    error(("timed out waiting for %q; the screen:\n%s"):format(what, s.screen()), 2)
  end
  function s.kill() s.tmux("kill-server") end
  return s
end

-- the number of prompts on the screen (each completed entry adds one)
local function prompts(scr)
  local n = 0
  for l in scr:gmatch("[^\n]*") do if l:match("^> ") or l == ">" then n = n + 1 end end
  return n
end

-- type a line and wait for its output and the next prompt
local function enter(s, text, want, timeout)
  local before = #s.screen()
  local n = prompts(s.screen())
  s.line(text)
  local t0 = clock()
  while prompts(s.screen()) <= n do
    if clock() - t0 > (timeout or 5) then error(("no prompt after %q:\n%s"):format(text, s.screen()), 2) end
    sleep(0.01)
  end
  local scr = s.screen()
  local out = scr:sub(math.min(before, #scr) + 1)
  if want then assert(out:find(want, 1, true), ("%q: expected %q in the output:\n%s"):format(text, want, scr)) end
  return out
end

describe("the REPL", function()
  local s
  setup(function()
    assert(sh("tmux -V"):match("^tmux"), "tmux is needed (scripts/install-deps.sh installs it)")
    assert(io.open(bin), bin .. " is missing: run make")
    s = session()
    s.wait("\n>", 10)
  end)
  -- one teardown (busted keeps only the last one a block registers: the
  -- session's tmux server outlived the run when there were two)
  teardown(function()
    if s then s.kill() end
    os.execute(("rm -rf %q"):format(tmpdir))
  end)

  it("prints results: tensors, sizes as [2, 3], tables one level deep", function()
    enter(s, "x = tide.ones(2, 3)")
    enter(s, "x", "tensor([[1., 1., 1.],")
    enter(s, "x:size()", "[2, 3]")
    assert.matches("%[2, 3%]%s+3", enter(s, "x.shape, x:size(2)"))     -- (tmux shows the tab as spaces)
    enter(s, "{1, 2, a = 3, s = 'q'}", '{1, 2, a = 3, s = "q"}')
    enter(s, "nil", "nil")
    local out = enter(s, "y = 5")
    assert.is_nil(out:find("nil"))                        -- a statement prints nothing
  end)

  it("continues a statement while it is incomplete", function()
    s.line("for i = 1, 2 do")
    s.wait("\n>>")
    s.line("print(i * 10)")
    enter(s, "end", "10\n20")
    s.line("t = {")
    s.line("  7,")
    enter(s, "}")
    enter(s, "#t", "1")
  end)

  it("prints an error with its position and keeps going", function()
    enter(s, "x + tide.ones(4)", "stdin:1: add: shapes [2,3] and [4] cannot be broadcast")
    enter(s, "local function f() error('deep') end f()", "stdin:1: deep")
    enter(s, "x:sum()", "tensor(6.)")
  end)

  it("completes globals, fields and tensor methods with Tab", function()
    s.type("tide.zeros_l"); s.keys("Tab")
    s.wait("> tide.zeros_like")
    s.keys("C-u")
    s.type("x:resh"); s.keys("Tab")
    s.wait("> x:reshape")
    s.keys("C-u")
    s.type("x:ma"); s.keys("Tab", "Tab")
    local scr = s.wait("x:matmul")
    assert.matches("x:max", scr, 1, true)
    s.keys("C-u")
    s.type("tide.n"); s.keys("Tab", "Tab")
    scr = s.wait("tide.nn")                               -- a lazily loaded submodule
    s.keys("C-u")
    enter(s, "1")
  end)

  it("shows help for ?name and help(x), and times %time expr", function()
    enter(s, "?tide.zeros", "A tensor of zeros")
    enter(s, "?x:matmul", "Tensor:matmul(b) -> Tensor")
    enter(s, "help(tide.nn.Linear)", "nn.Linear(in_features, out_features")
    local out = enter(s, "%time x:sum()", "tensor(6.)")
    assert.matches("time: [%d.]+ [mu]?s", out)
  end)

  it("stops a loop of tensor ops on Ctrl-C within 0.5 s, globals intact", function()
    enter(s, "n = 0; y = tide.randn(10)")
    s.line("for i = 1, 1e9 do y = y + 1; n = n + 1 end")
    sleep(0.3)
    local from = #s.screen()
    local t0 = clock()
    s.keys("C-c")
    s.wait("stdin:1: interrupted\n>", 5, false, from)                     -- the message, then the prompt
    local dt = clock() - t0
    if os.getenv("TIDE_SPEC_VERBOSE") then io.stderr:write(("\nCtrl-C to prompt: %.0f ms\n"):format(dt * 1e3)) end
    assert(dt < 0.5, ("Ctrl-C took %.3f s to come back to the prompt"):format(dt))
    assert.matches("true%s+10", enter(s, "n > 100, y:numel()"))
    -- a pure-Lua loop with no tensor op (it calls a C function, which the hook set by Ctrl-C sees)
    s.line("k = 0; while true do k = k + 1; debug.getinfo(1, 'l') end")
    sleep(0.3)
    from = #s.screen()
    s.keys("C-c")
    s.wait("interrupted", 2, false, from)
    enter(s, "k > 0", "true")
    -- Ctrl-C at the prompt drops the line being typed
    s.type("this is not run"); s.keys("C-c")
    s.wait("^C")
    enter(s, "1 + 1", "2")
  end)

describe("history", function()
  it("is kept across sessions in TIDE_HISTORY, multi-line statements whole", function()
    local hist = tmpdir .. "/hist"
    local a = session { history = hist }
    a.wait("\n>", 10)
    enter(a, "hist_v = 41")
    a.line("for i = 1, 2 do")
    a.line("hist_v = hist_v + 1")
    enter(a, "end")
    a.keys("C-d")
    local t0 = clock()
    while a.tmux("has-session") == "" and clock() - t0 < 5 do sleep(0.02) end
    a.kill()
    local f = assert(io.open(hist))
    local text = f:read("*a")
    f:close()
    assert.matches("hist_v = 41", text, 1, true)
    assert.matches("for i = 1, 2 do\nhist_v = hist_v + 1\nend", text, 1, true)

    local b = session { history = hist }
    b.wait("\n>", 10)
    b.keys("Up", "Up")
    b.wait("> hist_v = 41")
    b.keys("Enter")
    b.wait("\n>", 5, false, #b.screen() - 2)
    b.keys("Up", "Up")                                   -- the for statement, whole
    b.wait("> for i = 1, 2 do\nhist_v = hist_v + 1\nend")
    b.keys("Enter")
    sleep(0.05)
    enter(b, "hist_v", "43")
    b.kill()
  end)
end)
end)

describe("completion candidates (tide.complete)", function()
  local c = require "tide.complete"
  local tide = require "tide"
  teardown(function() _G.spec_lin, _G.spec_t, _G.spec_opt = nil, nil, nil end)
  it("list methods of modules, optimizers and tensors, registered fields, lazy submodules", function()
    _G.spec_lin = tide.nn.Linear(2, 3)
    _G.spec_t = tide.ones(2)
    _G.spec_opt = tide.optim.SGD(_G.spec_lin:parameters(), { lr = 0.1 })
    assert.same({ "spec_lin:parameters" }, c.candidates("spec_lin:param"))
    assert.same({ "spec_lin.weight" }, c.candidates("spec_lin.wei"))           -- a registered parameter
    assert.same({ "spec_opt:zero_grad" }, c.candidates("spec_opt:zero"))
    assert.same({ "spec_t:matmul" }, c.candidates("spec_t:matm"))
    assert.same({ "spec_t.shape" }, c.candidates("spec_t.sha"))                -- a property
    local found = false
    _G.spec_tide = tide
    for _, n in ipairs(c.candidates("spec_tide.n")) do found = found or n == "spec_tide.nn" end
    _G.spec_tide = nil
    assert.is_true(found)
    assert.same({ "function" }, c.candidates("functio"))                       -- a keyword
    assert.same({}, c.candidates("spec_nothing.x"))
  end)
end)
