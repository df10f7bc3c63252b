--[[
bench/clblast_tune.lua -- a CLBlast SGEMM tuning sweep without CLBlast's tuners
(Debian ships none, and nothing can be installed on the GPU machine): at most
20 Xgemm parameter sets, each set through CLBlastOverrideParameters
(td_opencl_gemm_params), checked against the untuned result and timed on a
4096^3 product; the best is kept per device name.
  luajit bench/clblast_tune.lua [--n 4096] [--reps 10] [--write bench/clblast_xgemm.tsv]
With --write, the file's line for this device ("name<TAB>params<TAB>TFLOP/s")
is replaced (atomically) when the best set beats the untuned parameters;
tide applies it in every process that sets TIDE_CLBLAST_TUNING to that file
(bench/gpu.sh does). Xgemm is CLBlast's indirect GEMM, used from
XGEMM_MIN_INDIRECT_SIZE (~576 on most devices) up.

The sets: CLBlast's constraints (MWG % (MDIMC VWM) = 0, NWG % (NDIMC VWN) = 0,
MWG % (MDIMA VWM) = 0, NWG % (NDIMB VWN) = 0, KWG % (MDIMC NDIMC / MDIMA) = 0,
KWG % (MDIMC NDIMC / NDIMB) = 0, KWG % KWI = 0) over work-groups of 16x16 and
8x8 / 32x8 threads, 64- and 128-wide tiles, vector widths 2 to 8, with local
memory caching of A and B on (GPUs) and off.
--]]
local tide = require "tide"
local ffi = require "ffi"
local C = tide.C

local opt = { n = 4096, reps = 10 }
local i = 1
while arg and arg[i] do
  local a = arg[i]
  if a == "--n" or a == "--reps" then opt[a:sub(3)] = tonumber(arg[i + 1]); i = i + 2
  elseif a == "--write" then opt.write = arg[i + 1]; i = i + 2
  else io.stderr:write("usage: luajit bench/clblast_tune.lua [--n N] [--reps R] [--write file.tsv]\n"); os.exit(2) end
end

local NAMES = { "GEMMK", "KREG", "KWG", "KWI", "MDIMA", "MDIMC", "MWG", "NDIMB", "NDIMC", "NWG", "SA", "SB",
                "STRM", "STRN", "VWM", "VWN" }
local function text(p)
  local t = {}
  for _, k in ipairs(NAMES) do t[#t + 1] = ("%s=%d"):format(k, p[k]) end
  return table.concat(t, " ")
end
local function valid(p)
  return p.MWG % (p.MDIMC * p.VWM) == 0 and p.NWG % (p.NDIMC * p.VWN) == 0 and p.MWG % (p.MDIMA * p.VWM) == 0
    and p.NWG % (p.NDIMB * p.VWN) == 0 and p.KWG % ((p.MDIMC * p.NDIMC) / p.MDIMA) == 0
    and p.KWG % ((p.MDIMC * p.NDIMC) / p.NDIMB) == 0 and p.KWG % p.KWI == 0
end

-- the candidates, most promising for a large NVIDIA GPU first; at most 20 valid ones
local sets = {}
local function add(t)
  local p = { GEMMK = 0, KREG = 1, KWI = 2, SA = 1, SB = 1, STRM = 0, STRN = 0 }
  for k, v in pairs(t) do p[k] = v end
  if valid(p) and #sets < 20 then sets[#sets + 1] = p end
end
for _, wg in ipairs { { 16, 16 }, { 8, 8 }, { 32, 8 } } do
  for _, tile in ipairs { { 128, 128 }, { 64, 128 }, { 128, 64 }, { 64, 64 } } do
    for _, vw in ipairs { { 4, 4 }, { 2, 4 }, { 8, 4 } } do
      add { MDIMC = wg[1], NDIMC = wg[2], MDIMA = wg[1], NDIMB = wg[2], MWG = tile[1], NWG = tile[2],
            KWG = 32, VWM = vw[1], VWN = vw[2] }
    end
  end
end
add { MDIMC = 16, NDIMC = 16, MDIMA = 16, NDIMB = 16, MWG = 64, NWG = 64, KWG = 16, VWM = 2, VWN = 2, SA = 0, SB = 0 }

print(("# device: %s; %d Xgemm sets; sgemm %d, %d reps each"):format(tide.opencl.device_name(), #sets, opt.n, opt.reps))
local n = opt.n
tide.manual_seed(0)
local a, b = tide.randn(n, n, { device = "opencl" }), tide.randn(n, n, { device = "opencl" })
local function run(reps)
  local r = a:matmul(b)
  tide.opencl.synchronize()
  local t0 = tide.progress.clock()
  for _ = 1, reps do r = a:matmul(b) end
  tide.opencl.synchronize()
  return (tide.progress.clock() - t0) / reps, r
end
local t0, ref = run(opt.reps)
local base = 2 * n ^ 3 / t0 / 1e12
print(("untuned        %8.2f TFLOP/s"):format(base))
local scale = ref:abs():max():item()
local best, bestp = base, nil
for k, p in ipairs(sets) do
  local s = text(p)
  if C.td_opencl_gemm_params(s) ~= 0 then
    print(("set %2d refused: %s"):format(k, ffi.string(C.td_last_error())))
  else
    local ok, t, r = pcall(run, opt.reps)
    if not ok then print(("set %2d failed: %s"):format(k, tostring(t)))
    else
      local err = (r - ref):abs():max():item() / scale
      local tf = 2 * n ^ 3 / t / 1e12
      print(("set %2d %8.2f TFLOP/s  rel.diff %.1e  %s"):format(k, tf, err, s))
      if err < 1e-4 and tf > best then best, bestp = tf, s end
    end
  end
end
print(bestp and ("best: %.2f TFLOP/s (untuned %.2f): %s"):format(best, base, bestp) or "best: the untuned parameters")

if opt.write and bestp then
  local name = tide.opencl.device_name()
  local lines = {}
  local f = io.open(opt.write)
  if f then
    for l in f:lines() do if l:sub(1, #name + 1) ~= name .. "\t" then lines[#lines + 1] = l end end
    f:close()
  end
  lines[#lines + 1] = ("%s\t%s\t%.2f"):format(name, bestp, best)
  require("tide.serialize").write_atomic("clblast_tune", opt.write, { table.concat(lines, "\n") .. "\n" })
  print("written: " .. opt.write)
end
