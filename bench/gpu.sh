#!/bin/bash
# bench/gpu.sh -- issue 15's GPU check as one prepared run, on the GPU machine
# (see ../shared/gpu/README.md), from a copy of the checkout holding build/
# and .gpu/ (here: make && sh ../shared/gpu/pack.sh):
#   bash bench/gpu.sh            specs, then tide's figures next to PyTorch CUDA's
#   TUNE=1 bash bench/gpu.sh     also the CLBlast SGEMM sweep (bench/clblast_tune.lua,
#                                <= 20 Xgemm parameter sets, the best kept in
#                                bench/clblast_xgemm.tsv by device name), first
#   SPECS=0 bash bench/gpu.sh    figures only
#   bash bench/gpu.sh sgemm add  only these cases (see bench/gpu.lua)
# Writes into $OUT (default /tmp/tide-gpu-out): specs.tap (spec/opencl, TAP),
# tide.txt, torch.txt and table.txt: each case's tide figure, PyTorch's eager
# and torch.compile figures, tide against the best of them and the issue's
# target. Budget: about 8 minutes (specs ~1, tide ~2, torch ~2 with
# torch.compile's own compiles, tuning ~2).
set -u
cd "$(dirname "$0")/.."
export OUT=${OUT:-/tmp/tide-gpu-out}
mkdir -p "$OUT"
[ -f .gpu/run.sh ] && [ -f build/libtide.so ] || {
  echo "bench/gpu.sh: build/ and .gpu/ are needed: run make && sh ../shared/gpu/pack.sh on the Debian machine"; exit 1; }
# the tuned CLBlast parameters apply to every run below (opencl/cl_blas.c reads them)
export TIDE_CLBLAST_TUNING=${TIDE_CLBLAST_TUNING:-$PWD/bench/clblast_xgemm.tsv}

if [ "${TUNE:-0}" = 1 ]; then
  echo "== CLBlast SGEMM sweep"
  timeout 200 bash .gpu/run.sh --lua bench/clblast_tune.lua --write "$TIDE_CLBLAST_TUNING" 2>&1 | tee "$OUT/tune.txt"
fi
if [ "${SPECS:-1}" = 1 ]; then
  echo "== spec/opencl on the device"
  timeout 240 bash .gpu/run.sh spec/opencl 2>&1 | tail -40
fi
echo "== tide"
timeout 240 bash .gpu/run.sh --lua bench/gpu.lua "$@" 2>&1 | tee "$OUT/tide.txt"
echo "== PyTorch"
timeout 240 python3 bench/peers/gpu_torch.py "$@" 2>&1 | tee "$OUT/torch.txt"

# the table: higher is better for GB/s and TFLOP/s, lower for ms and us
awk '
  BEGIN {
    n = split("add w1_eager w1_compiled softmax layer_norm sgemm mlp_step launch sdpa", order, " ")
    target["add"] = ">= 0.8 x torch"; target["softmax"] = ">= 0.8 x best"; target["layer_norm"] = ">= 0.8 x best"
    target["w1_compiled"] = "time <= 1.3 x torch.compile"; target["sgemm"] = ">= 0.8 x cuBLAS"
    target["mlp_step"] = "<= torch eager"; target["launch"] = "<= 10 us"; target["sdpa"] = "<= torch"
  }
  $1 == "RESULT" { fig[$2, $3] = $5; unit[$2] = $6 }
  END {
    printf "%-12s %14s %14s %14s %8s  %s\n", "case", "tide", "torch", "torch.compile", "ratio", "target (issue 15)"
    for (i = 1; i <= n; i++) {
      c = order[i]; if (!((c, "tide") in fig)) continue
      t = fig[c, "tide"]; e = ((c, "torch") in fig) ? fig[c, "torch"] : ""; p = ((c, "torch.compile") in fig) ? fig[c, "torch.compile"] : ""
      best = e; u = unit[c]; low = (u == "ms" || u == "us")
      if (p != "" && (best == "" || (low ? p + 0 < best + 0 : p + 0 > best + 0))) best = p
      r = best == "" ? "-" : sprintf("%.2f", low ? best / t : t / best)
      printf "%-12s %10s %-3s %14s %14s %8s  %s\n", c, t, u, e == "" ? "-" : e, p == "" ? "-" : p, r, target[c]
    }
    print "ratio: tide / best peer (GB/s, TFLOP/s) or best peer / tide (ms, us); >= 1 means tide is at least as fast"
  }' "$OUT/tide.txt" "$OUT/torch.txt" | tee "$OUT/table.txt"
