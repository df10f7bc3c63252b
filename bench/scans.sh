#!/bin/sh
# bench/scans.sh -- cumsum of 2^24 float32 values (one row of 2^24; 4096 rows of
# 4096): tide (bench/scans.lua) and PyTorch (bench/peers/scans.py), one process
# each, back to back in every round (ratios taken within a round: the machine is
# shared and noisy), then the medians over the rounds.
#   sh bench/scans.sh                        5 rounds at 2 threads
#   BENCH_ROUNDS=3 BENCH_PY=/work/venv-torch/bin/python sh bench/scans.sh
# Environment: TIDE_BUILD (./build), BENCH_ROUNDS (5), BENCH_THREADS (2),
# BENCH_PY (the Python with torch; default python3), BENCH_DIR ($TIDE_BUILD/bench).
# Results: bench/RESULTS.md, "Scans (issue 17)".
set -e
cd "$(dirname "$0")/.."
BUILD=${TIDE_BUILD:-$PWD/build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
ROUNDS=${BENCH_ROUNDS:-5}
THREADS=${BENCH_THREADS:-2}
PY=${BENCH_PY:-python3}
DIR=${BENCH_DIR:-$BUILD/bench}
mkdir -p "$DIR"
REC=$DIR/scans.tsv
: > "$REC"
export TIDE_BUILD=$BUILD TIDE_NUM_THREADS=$THREADS
CAP=avx2
grep -qw avx512f /proc/cpuinfo && CAP=avx512
HAVE_TORCH=0
$PY -c 'import torch' 2>/dev/null && HAVE_TORCH=1
[ $HAVE_TORCH = 1 ] || echo "bench/scans.sh: no torch for $PY; the PyTorch peer is skipped (set BENCH_PY)"
r=1
while [ $r -le "$ROUNDS" ]; do
  luajit bench/scans.lua | sed "s/^/$r\t/" >> "$REC"
  [ $HAVE_TORCH = 0 ] || env ATEN_CPU_CAPABILITY=$CAP OMP_WAIT_POLICY=PASSIVE $PY bench/peers/scans.py --threads "$THREADS" 2>/dev/null |
    sed "s/^/$r\t/" >> "$REC"
  r=$((r + 1))
done
# medians over rounds of each implementation's median, and of the per-round ratios tide / PyTorch (time)
awk -F'\t' '
  { v[$2 "\t" $3, $1] = $4; w[$2] = 1 }
  function median(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  END {
    printf "%-18s %12s %12s %16s\n", "workload", "tide ms", "PyTorch ms", "tide / PyTorch"
    split("cumsum 1x2^24|cumsum 4096x4096", ws, "|")
    for (k = 1; k <= 2; k++) {
      n = 0; m = 0; q = 0; delete a; delete b; delete c
      for (r = 1; r <= '"$ROUNDS"'; r++) {
        if ((ws[k] "\ttide", r) in v) a[++n] = v[ws[k] "\ttide", r]
        if ((ws[k] "\tpytorch", r) in v) { b[++m] = v[ws[k] "\tpytorch", r]
          if ((ws[k] "\ttide", r) in v) c[++q] = v[ws[k] "\ttide", r] / v[ws[k] "\tpytorch", r] }
      }
      printf "%-18s %12.1f %12s %16s\n", ws[k], median(a, n), m ? sprintf("%.1f", median(b, m)) : "", q ? sprintf("%.2fx", median(c, q)) : ""
    }
  }' "$REC"
