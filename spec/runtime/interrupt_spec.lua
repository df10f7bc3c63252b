-- Interrupts (runtime/rt_signal.c): td_interrupt() makes the next op fail with
-- "interrupted" and clears itself; a backward pass runs to its end first; a
-- traced call that is interrupted leaves no trace active; SIGINT through
-- td_interrupt_catch sets the same request; random asynchronous interrupts
-- during training steps (eager and compiled) leave everything usable.
local tide = require "tide"
local ffi = require "ffi"
local C = tide.C

ffi.cdef [[
int kill(int pid, int sig);
int getpid(void);
typedef void (*tide_spec_sighandler)(int);
tide_spec_sighandler signal(int signum, tide_spec_sighandler handler);
struct tide_spec_itv { long interval_s, interval_us, value_s, value_us; };
int setitimer(int which, const struct tide_spec_itv *new, struct tide_spec_itv *old);
]]

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

describe("interrupts", function()
  after_each(function() C.td_interrupt_pending(1) end)

  it("make the next op fail once with 'interrupted'", function()
    local x = tide.ones(3)
    C.td_interrupt()
    assert.equal(1, C.td_interrupt_pending(0))
    local e = err_of(function() return x + 1 end)
    assert.matches("interrupted$", e)
    assert.matches("interrupt_spec.lua:%d+:", e)        -- at the user's line
    assert.equal(0, C.td_interrupt_pending(0))
    assert.equal(2, (x + 1)[1]:item())                 -- cleared: the next op runs
    C.td_interrupt()
    assert.matches("interrupted$", err_of(function() x:add_(1) end))   -- in place (td_op_out)
    C.td_interrupt()
    assert.matches("interrupted$", err_of(function() return x:max(1) end))   -- td_op_aux
    assert.equal(1, x[1]:item())
  end)

  it("td_interrupt_pending(1) reads and clears", function()
    C.td_interrupt()
    assert.equal(1, C.td_interrupt_pending(1))
    assert.equal(0, C.td_interrupt_pending(1))
  end)

  it("let a backward pass finish, then stop the next op", function()
    local w = tide.randn(4, 3, { requires_grad = true })
    local loss = (tide.randn(5, 4):matmul(w):relu() + 1):sum()
    C.td_interrupt()
    loss:backward()                                    -- runs to its end
    assert.equal(12, w.grad:numel())                   -- (reading .grad runs no op)
    assert.matches("interrupted$", err_of(function() return w * 2 end))
    assert.is_true(w.grad:abs():sum():item() < math.huge)
  end)

  it("end a traced call without leaving a trace active", function()
    local calls = 0
    local f = tide.compile(function(x)
      calls = calls + 1
      if calls == 2 then C.td_interrupt() end
      return (x * 2):exp():sum()
    end)
    local x = tide.randn(8)
    local want = (x * 2):exp():sum():item()
    assert.near(want, f(x):item(), 1e-4 * math.abs(want))
    assert.matches("interrupted$", err_of(f, x))
    assert.equal(0, C.td_is_tracing())
    assert.near(want, f(x):item(), 1e-4 * math.abs(want))
  end)

  it("turn SIGINT into the request with td_interrupt_catch, and restore the handler", function()
    assert.equal(0, C.td_interrupt_catch(1))
    ffi.C.kill(ffi.C.getpid(), 2)
    assert.equal(1, C.td_interrupt_pending(1))
    -- a second SIGINT while the first is pending goes to the previous handler (here: ignore)
    local prev = ffi.C.signal(2, ffi.cast("tide_spec_sighandler", 1))   -- SIG_IGN, as the "previous" one
    ffi.C.signal(2, prev)                                              -- (ours again)
    assert.equal(0, C.td_interrupt_catch(0))
    local ign = ffi.C.signal(2, ffi.cast("tide_spec_sighandler", 1))
    assert.equal(0, C.td_interrupt_catch(1))                           -- previous = SIG_IGN now
    ffi.C.kill(ffi.C.getpid(), 2)
    ffi.C.kill(ffi.C.getpid(), 2)                                      -- pending: chained to SIG_IGN, not fatal
    assert.equal(1, C.td_interrupt_pending(1))
    ffi.C.kill(ffi.C.getpid(), 2)                                      -- the handler was handed back: ignored
    assert.equal(0, C.td_interrupt_pending(1))
    assert.equal(0, C.td_interrupt_catch(0))
    ffi.C.signal(2, ign)
    -- the previous handler is back: ignore SIGINT, check it is not ours
    local old = ffi.C.signal(2, ffi.cast("tide_spec_sighandler", 1))   -- SIG_IGN
    ffi.C.kill(ffi.C.getpid(), 2)
    ffi.C.signal(2, old)
    assert.equal(0, C.td_interrupt_pending(1))
  end)

  it("survive random asynchronous interrupts in training steps, eager and compiled", function()
    local nn, F = tide.nn, tide.nn.functional
    tide.manual_seed(3)
    local model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    local opt = tide.optim.AdamW(model:parameters(), { lr = 1e-3 })
    local x, y = tide.randn(8, 16), tide.randint(1, 5, { 8 })
    local function step()
      local loss = F.cross_entropy(model(x), y)
      opt:zero_grad(); loss:backward(); opt:step()
      return loss
    end
    -- SIGALRM from a one-shot timer calls td_interrupt (a void(void) function
    -- called as a handler: the int argument is ignored on x86-64)
    local old = ffi.C.signal(14, ffi.cast("tide_spec_sighandler", C.td_interrupt))
    local it = ffi.new("struct tide_spec_itv")
    local seen = 0
    math.randomseed(7)
    for _, f in ipairs { step, tide.compile(step) } do
      for _ = 1, 40 do
        it.value_us = math.random(1, 2000)
        ffi.C.setitimer(0, it, nil)
        for _ = 1, 10 do
          local ok, e = pcall(f)
          if not ok then
            assert.matches("interrupted$", tostring(e))
            seen = seen + 1
          end
        end
        assert.equal(0, C.td_is_tracing())
        assert.is_true(tide.is_grad_enabled())
      end
    end
    it.value_us = 0
    ffi.C.setitimer(0, it, nil)
    ffi.C.signal(14, old)
    C.td_interrupt_pending(1)
    assert.is_true(seen > 0)
    local l = step():item()
    assert.is_true(l == l and l < math.huge)
  end)
end)
