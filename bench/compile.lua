--[[
bench/compile.lua -- tide.compile against tide eager (and, through bench/run.sh,
against the hand-written C loops of bench/c_fuse.c and PyTorch eager). One part
per process, chosen with --only:
  w1        W1: y = sin(x)^2 + cos(x)^2 on --n float32 values (default 2^24).
            fwd: the function compiled vs eager. fwd+bwd: x requires grad, the
            function computes y:sum():backward() inside and returns y; x.grad
            is set to nil before every call (inside the timed call, as the
            PyTorch peer does), so every call does the same work.
  w8        W8: softmax over (4096, 4096) and layer_norm over (8192, 1024) with
            weight and bias (eps 1e-5); fwd, and fwd+bwd of (y * g):sum() with
            a fixed random g, the backward inside the compiled function (x,
            and for layer_norm weight and bias, require grad; .grad = nil first).
  mlp       W2/W3-style training step: MLP 784-512-512-10 (ReLU), batch 128,
            cross_entropy, Adam(lr 1e-3) as the peer; zero_grad + forward + backward +
            step, the whole step compiled vs the same step eager, and vs
            only the model compiled (tide.compile(model): its backward ahead
            of time, loss/backward()/step eager around it).
  mlp-cold  compile latency of that step: the first call minus the steady-state
            call time, in a fresh process. --phase cold expects an empty
            TIDE_CACHE_DIR (it must compile); --phase disk runs a second process
            on the same directory (tide.jit.stats().compiles must stay 0).
  jsonl     convert the JSON lines of the PyTorch peers (../shared/peers
            scripts, $PEERS_JSONL) in --file into records.
  report    print the tables of the records in --file (round-prefixed, as
            bench/run.sh writes them) with the ratios taken within a round.
--device opencl runs w1 and w8 on the OpenCL device (compiled: kernels printed
as OpenCL C; every timed call waits for the device's queue).
Every call is timed alone (--reps timed calls after --warmup untimed ones).
Records go to $BENCH_OUT (appended; TSV: case peer threads median min max reps
bytes, times in seconds); a human line per case goes to stdout. Correctness is
checked every run: compiled outputs and gradients against eager.
  TIDE_NUM_THREADS=2 luajit bench/compile.lua --only w1 [--reps 20]
--]]
local root = (arg and arg[0] or ""):match("^(.*)/bench/[^/]*$") or "."
package.path = root .. "/lua/?.lua;" .. root .. "/lua/?/init.lua;" .. package.path

-- -- Options -----------------------------------------------------------------------------

local opt = { only = "w1", reps = 20, warmup = 3, n = 2 ^ 24, phase = "cold", file = "", device = "cpu" }
do
  local i = 1
  while arg and arg[i] do
    local k = arg[i]:match("^%-%-(.+)$")
    if k and opt[k] ~= nil and arg[i + 1] then
      opt[k] = tonumber(arg[i + 1]) or arg[i + 1]; i = i + 2
    else
      io.stderr:write("usage: luajit bench/compile.lua --only w1|w8|mlp|mlp-cold|jsonl|report ",
        "[--reps N] [--warmup N] [--n N] [--phase cold|disk] [--file path] [--device cpu|opencl]\n")
      os.exit(2)
    end
  end
end

package.path = root .. "/bench/?.lua;" .. package.path
local records = require "records"
local median = records.median

local function write_record(case, peer, threads, med, lo, hi, reps, bytes)
  local path = os.getenv("BENCH_OUT")
  if path then
    local f = assert(io.open(path, "a"))
    f:write(("%s\t%s\t%d\t%.9f\t%.9f\t%.9f\t%d\t%.0f\n"):format(case, peer, threads, med, lo, hi, reps, bytes))
    f:close()
  end
end

-- -- The report (no tide needed) ------------------------------------------------------------

local CASES = {   -- case -> description, bytes an ideal kernel moves (per call)
  w1_fwd = "W1 fwd: y = sin(x)^2 + cos(x)^2, 2^24 float32 (8 B/elem)",
  w1_fwdbwd = "W1 fwd+bwd: y and dx = dy/dx (12 B/elem)",
  sm_fwd = "W8 softmax (4096, 4096) fwd (8 B/elem)",
  sm_fwdbwd = "W8 softmax fwd+bwd of (y*g):sum() (16 B/elem)",
  ln_fwd = "W8 layer_norm (8192, 1024) fwd (8 B/elem)",
  ln_fwdbwd = "W8 layer_norm fwd+bwd of (y*g):sum() (16 B/elem)",
  copy = "STREAM copy, 256 MiB arrays (8 B/elem)",
  triad = "STREAM triad, 256 MiB arrays (12 B/elem)",
  mlp_step = "MLP 784-512-512-10 training step, batch 128",
  mlp_compile = "compile latency of the MLP step (first call - steady call)",
}
local ORDER = { "w1_fwd", "w1_fwdbwd", "sm_fwd", "sm_fwdbwd", "ln_fwd", "ln_fwdbwd", "copy", "triad",
                "mlp_step", "mlp_compile" }

if opt.only == "report" then
  local order = records.read(opt.file)
  local function find(case, prefix, th)
    for _, g in ipairs(order) do
      if g.case == case and g.threads == th and g.peer:sub(1, #prefix) == prefix then return g end
    end
  end
  -- ratio a/b of the round medians (f maps the two medians), median and range over rounds
  local function ratio(a, b, f)
    if not (a and b) then return nil end
    local rs = {}
    for r, ma in pairs(a.by_round) do
      local mb = b.by_round[r]
      if mb then rs[#rs + 1] = f(ma, mb) end
    end
    if #rs == 0 then return nil end
    table.sort(rs)
    return median(rs), rs[1], rs[#rs], #rs
  end
  local function rstr(m, lo, hi, n) return ("%.2fx (rounds %.2f-%.2f, n=%d)"):format(m, lo, hi, n) end
  local function verdict(ok) return ok and "met" or "**missed**" end
  local ths = records.thread_counts(order)
  for _, th in ipairs(ths) do
    print(("#### threads=%d\n"):format(th))
    print("| case | peer | median ms | min ms | max ms | GB/s (median) | rounds x calls |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for _, case in ipairs(ORDER) do
      for _, g in ipairs(order) do
        if g.case == case and g.threads == th then
          local m = median(g.meds)
          print(("| %s | %s | %.3f | %.3f | %.3f | %s | %d x %d |"):format(case, g.peer, m * 1e3, g.lo * 1e3,
            g.hi * 1e3, g.work > 0 and ("%.2f"):format(g.work / m / 1e9) or "-", #g.meds,
            math.floor(g.reps / #g.meds + 0.5)))
        end
      end
    end
    print()
    local bw = {}
    for _, k in ipairs { "copy", "triad" } do
      local c = find(k, "C loop", th)
      if c then bw[k] = c end
    end
    for _, case in ipairs(ORDER) do
      local comp, eager = find(case, "tide.compile", th), find(case, "tide eager", th)
      local torch, cl = find(case, "torch eager", th), find(case, "C loop", th)
      local tr = function(a, b) return b / a end     -- speed-up of a over b
      if comp and case ~= "copy" and case ~= "triad" then
        local m, lo, hi, n = ratio(comp, eager, tr)
        if m then print(("* %s: tide.compile vs tide eager: %s faster"):format(case, rstr(m, lo, hi, n))) end
        m, lo, hi, n = ratio(comp, torch, tr)
        if m then
          local target = case == "w1_fwd" and 1.5 or case == "w1_fwdbwd" and 3 or nil
          print(("* %s: tide.compile vs PyTorch eager: **%s** faster%s"):format(case, rstr(m, lo, hi, n),
            target and (" (target >= %gx: %s)"):format(target, verdict(m >= target)) or ""))
        end
        m, lo, hi, n = ratio(comp, cl, function(a, b) return a / b end)
        if m then
          print(("* %s: tide.compile time / C loop time: **%s**%s"):format(case, rstr(m, lo, hi, n),
            case == "w1_fwd" and (" (target <= 1.3x: %s)"):format(verdict(m <= 1.3)) or ""))
        end
        if comp.work > 0 then
          for _, k in ipairs { "copy", "triad" } do
            m, lo, hi, n = ratio(comp, bw[k], function(a, b) return (comp.work / a) / (bw[k].work / b) end)
            if m then
              local w8 = case:match("^sm_") or case:match("^ln_")
              print(("* %s: tide.compile GB/s / C %s GB/s: **%.0f%%** (rounds %.0f-%.0f%%, n=%d)%s"):format(case, k,
                m * 100, lo * 100, hi * 100, n, w8 and (" (target >= 80%%: %s)"):format(verdict(m >= 0.8)) or ""))
            end
          end
        end
      end
    end
    for _, g in ipairs(order) do
      if g.case == "mlp_compile" and g.threads == th then
        print(("* mlp_compile, %s: median %.0f ms (min %.0f, max %.0f; %d processes)"):format(g.peer,
          median(g.meds) * 1e3, g.lo * 1e3, g.hi * 1e3, #g.meds))
      end
    end
    print()
  end
  os.exit(0)
end

-- PyTorch peers' JSON lines -> records (the case names used here)
if opt.only == "jsonl" then
  local map = { ["W1\0fwd"] = "w1_fwd", ["W1\0fwd+bwd"] = "w1_fwdbwd", ["W8\0softmax 4096x4096"] = "sm_fwd",
                ["W8\0layer_norm 8192x1024"] = "ln_fwd", ["W2\0train step"] = "mlp_step" }
  local f = io.open(opt.file)
  if f then
    for line in f:lines() do
      local function s(k) return line:match('"' .. k .. '": "([^"]*)"') end
      local function n(k) return tonumber(line:match('"' .. k .. '": ([-%d.e+]+)')) end
      local case = map[(s("workload") or "") .. "\0" .. (s("case") or "")]
      if case then
        write_record(case, s("peer"), n("threads"), n("median_ms") * 1e-3, n("min_ms") * 1e-3, n("max_ms") * 1e-3,
          n("reps"), n("bytes") or 0)
      end
    end
    f:close()
  end
  os.exit(0)
end

-- -- Measurements ------------------------------------------------------------------------------

local tide = require "tide"
local F = tide.nn.functional
local clock = tide.progress.clock
local threads = tide.get_num_threads()

local DEV = opt.device ~= "cpu"
local function time_calls(fn, reps, warmup)
  if DEV then local f = fn; fn = function() local r = f(); tide.C.td_opencl_finish(); return r end end
  for _ = 1, warmup or opt.warmup do fn() end
  collectgarbage("collect")
  local t = {}
  for r = 1, reps do
    local t0 = clock()
    fn()
    t[r] = clock() - t0
  end
  return t
end

local function record(case, peer, t, bytes)
  local med = median(t)
  local lo, hi = math.min(unpack(t)), math.max(unpack(t))
  write_record(case, peer, threads, med, lo, hi, #t, bytes)
  print(("%-12s %-34s t=%d median %9.3f ms  min %9.3f  max %9.3f%s"):format(case, peer, threads, med * 1e3,
    lo * 1e3, hi * 1e3, bytes > 0 and ("  %6.2f GB/s"):format(bytes / med / 1e9) or ""))
end

local function maxdiff(a, b) return (a:detach() - b:detach()):abs():max():item() end
local function check(what, d, tol)
  print(("  check %-40s max |diff| = %.3g (tolerance %g)"):format(what, d, tol))
  if not (d <= tol) then error(("compile.lua: %s: max |diff| %g above %g"):format(what, d, tol), 0) end
end

local COMPILED, EAGER = "tide.compile", "tide eager"
if DEV then COMPILED, EAGER = "tide.compile (" .. opt.device .. ")", "tide eager (" .. opt.device .. ")" end
-- a tensor on the benchmark's device
local function on(t) return DEV and t:to(opt.device) or t end

if opt.only == "w1" then
  local N = opt.n
  tide.manual_seed(0)
  local x = on(tide.randn(N))
  local function fwd(v) return v:sin() ^ 2 + v:cos() ^ 2 end
  local function fwdbwd(v)
    local y = v:sin() ^ 2 + v:cos() ^ 2
    y:sum():backward()
    return y
  end
  local cfwd, cfb = tide.compile(fwd, { name = "w1_fwd" }), tide.compile(fwdbwd, { name = "w1_fwdbwd" })

  check("w1 fwd: compiled vs eager", maxdiff(cfwd(x), fwd(x)), 1e-6)
  record("w1_fwd", COMPILED, time_calls(function() return cfwd(x) end, opt.reps), 8 * N)
  record("w1_fwd", EAGER, time_calls(function() return fwd(x) end, opt.reps), 8 * N)

  local xc, xe = x:clone():requires_grad_(), x:clone():requires_grad_()
  local yc, ye = cfb(xc), fwdbwd(xe)
  check("w1 fwd+bwd: y compiled vs eager", maxdiff(yc, ye), 1e-6)
  check("w1 fwd+bwd: |dx| compiled (exact: 0)", xc.grad:abs():max():item(), 1e-6)
  check("w1 fwd+bwd: |dx| eager (exact: 0)", xe.grad:abs():max():item(), 1e-6)
  record("w1_fwdbwd", COMPILED, time_calls(function() xc.grad = nil; return cfb(xc) end, opt.reps), 12 * N)
  record("w1_fwdbwd", EAGER, time_calls(function() xe.grad = nil; return fwdbwd(xe) end, opt.reps), 12 * N)
  assert(cfwd:variants() == 1 and cfb:variants() == 1, "w1: more than one compiled variant")

elseif opt.only == "w8" then
  tide.manual_seed(0)
  local R, C, LR, LC = 4096, 4096, 8192, 1024
  local x, g = on(tide.randn(R, C)), on(tide.randn(R, C))
  local xl, gl, w, b = on(tide.randn(LR, LC)), on(tide.randn(LR, LC)), on(tide.randn(LC)), on(tide.randn(LC))

  local function sm(v) return v:softmax(-1) end
  local function sm_fb(v, gg)
    local y = v:softmax(-1)
    ;(y * gg):sum():backward()
    return y
  end
  local function ln(v, ww, bb) return F.layer_norm(v, { LC }, ww, bb, 1e-5) end
  local function ln_fb(v, ww, bb, gg)
    local y = F.layer_norm(v, { LC }, ww, bb, 1e-5)
    ;(y * gg):sum():backward()
    return y
  end
  local csm, csm_fb = tide.compile(sm, { name = "sm_fwd" }), tide.compile(sm_fb, { name = "sm_fwdbwd" })
  local cln, cln_fb = tide.compile(ln, { name = "ln_fwd" }), tide.compile(ln_fb, { name = "ln_fwdbwd" })
  local SM, LN = 2 * R * C * 4, 2 * LR * LC * 4 + 2 * LC * 4
  local SMB, LNB = 4 * R * C * 4, 4 * LR * LC * 4 + 4 * LC * 4

  check("softmax fwd: compiled vs eager", maxdiff(csm(x), sm(x)), 1e-6)
  record("sm_fwd", COMPILED, time_calls(function() return csm(x) end, opt.reps), SM)
  record("sm_fwd", EAGER, time_calls(function() return sm(x) end, opt.reps), SM)

  local xc, xe = x:clone():requires_grad_(), x:clone():requires_grad_()
  check("softmax fwd+bwd: y compiled vs eager", maxdiff(csm_fb(xc, g), sm_fb(xe, g)), 1e-6)
  check("softmax fwd+bwd: dx compiled vs eager", maxdiff(xc.grad, xe.grad), 1e-5)
  record("sm_fwdbwd", COMPILED, time_calls(function() xc.grad = nil; return csm_fb(xc, g) end, opt.reps), SMB)
  record("sm_fwdbwd", EAGER, time_calls(function() xe.grad = nil; return sm_fb(xe, g) end, opt.reps), SMB)
  xc, xe = nil, nil

  check("layer_norm fwd: compiled vs eager", maxdiff(cln(xl, w, b), ln(xl, w, b)), 1e-5)
  record("ln_fwd", COMPILED, time_calls(function() return cln(xl, w, b) end, opt.reps), LN)
  record("ln_fwd", EAGER, time_calls(function() return ln(xl, w, b) end, opt.reps), LN)

  local xlc, wc, bc = xl:clone():requires_grad_(), w:clone():requires_grad_(), b:clone():requires_grad_()
  local xle, we, be = xl:clone():requires_grad_(), w:clone():requires_grad_(), b:clone():requires_grad_()
  check("layer_norm fwd+bwd: y compiled vs eager", maxdiff(cln_fb(xlc, wc, bc, gl), ln_fb(xle, we, be, gl)), 1e-5)
  check("layer_norm fwd+bwd: dx compiled vs eager", maxdiff(xlc.grad, xle.grad), 1e-4)
  check("layer_norm fwd+bwd: dweight compiled vs eager", maxdiff(wc.grad, we.grad) / (we.grad:abs():max():item() + 1), 1e-4)
  check("layer_norm fwd+bwd: dbias compiled vs eager", maxdiff(bc.grad, be.grad) / (be.grad:abs():max():item() + 1), 1e-4)
  record("ln_fwdbwd", COMPILED, time_calls(function()
    xlc.grad, wc.grad, bc.grad = nil, nil, nil
    return cln_fb(xlc, wc, bc, gl)
  end, opt.reps), LNB)
  record("ln_fwdbwd", EAGER, time_calls(function()
    xle.grad, we.grad, be.grad = nil, nil, nil
    return ln_fb(xle, we, be, gl)
  end, opt.reps), LNB)

elseif opt.only == "mlp" or opt.only == "mlp-cold" then
  local nn = tide.nn
  -- compile_model: only the model is compiled (its backward ahead of time);
  -- the loss, backward() and the optimizer step run eagerly around it
  local function make(compile_model)
    tide.manual_seed(0)
    local model = nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
    local optim = tide.optim.Adam(model:parameters(), { lr = 1e-3 })
    local fwd = compile_model and tide.compile(model, { name = "mlp_model" }) or model
    local function step(x, y)
      optim:zero_grad()
      local loss = F.cross_entropy(fwd(x), y)
      loss:backward()
      optim:step()
      return loss
    end
    return step
  end
  tide.manual_seed(1)
  local x, y = tide.randn(128, 784), tide.randint(1, 11, { 128 })
  local cstep = tide.compile(make(), { name = "mlp_step" })

  if opt.only == "mlp-cold" then
    -- the first calls one by one (compiles counted after each), then the steady state
    local first, ncomp = {}, {}
    for i = 1, 3 do
      local t0 = clock()
      cstep(x, y)
      first[i] = clock() - t0
      local st = tide.jit.stats()
      ncomp[i] = st.compiles + st.disk_loads        -- variants built or loaded so far
    end
    local steady = median(time_calls(function() return cstep(x, y) end, opt.reps, 2))
    local st = tide.jit.stats()
    print(("mlp-cold phase=%s: calls 1-3 %.1f / %.1f / %.1f ms, steady %.3f ms; variants built after each call %d / %d / %d"
      .. " (compiles + disk loads) stats: compiles %d, disk loads %d, kernels %d, variants %d"):format(opt.phase, first[1] * 1e3,
      first[2] * 1e3, first[3] * 1e3, steady * 1e3, ncomp[1], ncomp[2], ncomp[3], st.compiles, st.disk_loads,
      st.kernels, cstep:variants()))
    if opt.phase == "disk" and st.compiles ~= 0 then
      error(("compile.lua: mlp-cold --phase disk: %d compiles (expected 0: the disk cache)"):format(st.compiles), 0)
    end
    if opt.phase == "cold" and st.compiles == 0 then
      error("compile.lua: mlp-cold --phase cold compiled nothing (TIDE_CACHE_DIR not empty?)", 0)
    end
    -- the latency: every call that had to compile (or load from the disk cache), minus a steady call
    local lat = first[1] - steady
    for i = 2, 3 do if ncomp[i] > ncomp[i - 1] then lat = lat + first[i] - steady end end
    local peer = opt.phase == "disk" and "tide.compile, disk cache (2nd process)"
      or "tide.compile, cold (empty cache, fresh process)"
    write_record("mlp_compile", peer, threads, lat, lat, lat, 1, 0)
    print(("mlp_compile  %-34s t=%d %.1f ms"):format(peer, threads, lat * 1e3))
  else
    local estep, mstep = make(), make(true)
    local lc, le, lm = cstep(x, y), estep(x, y), mstep(x, y)
    for _ = 1, 3 do lc, le, lm = cstep(x, y), estep(x, y), mstep(x, y) end
    check("mlp step: loss after 4 steps, compiled vs eager", math.abs(lc:item() - le:item()), 1e-4)
    check("mlp step: loss after 4 steps, compiled model vs eager", math.abs(lm:item() - le:item()), 1e-4)
    record("mlp_step", COMPILED, time_calls(function() return cstep(x, y) end, opt.reps * 10, 10), 0)
    record("mlp_step", EAGER, time_calls(function() return estep(x, y) end, opt.reps * 10, 10), 0)
    record("mlp_step", "tide.compile(model), backward ahead of time", time_calls(function() return mstep(x, y) end, opt.reps * 10, 10), 0)
  end
else
  io.stderr:write("compile.lua: unknown --only " .. tostring(opt.only) .. "\n")
  os.exit(2)
end
