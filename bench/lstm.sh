#!/bin/sh
# bench/lstm.sh -- nn.LSTM (seq 64, batch 32, input and hidden 256, float32)
# forward and forward+backward: tide eager, tide compiled and PyTorch (with
# and without oneDNN), one process each, back to back in every round (the ratios are taken within a
# round: the machine is shared and noisy), then the medians over the rounds.
#   sh bench/lstm.sh                        5 rounds at 2 threads
#   BENCH_ROUNDS=3 BENCH_PY=/path/to/python sh bench/lstm.sh
# Environment: TIDE_BUILD (./build), BENCH_ROUNDS (5), BENCH_THREADS (2),
# BENCH_PY (the Python with torch; default python3), BENCH_DIR ($TIDE_BUILD/bench).
# Results: bench/RESULTS.md, "LSTM (issue 17)".
set -e
cd "$(dirname "$0")/.."
BUILD=${TIDE_BUILD:-$PWD/build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
ROUNDS=${BENCH_ROUNDS:-5}
THREADS=${BENCH_THREADS:-2}
PY=${BENCH_PY:-python3}
DIR=${BENCH_DIR:-$BUILD/bench}
mkdir -p "$DIR"
REC=$DIR/lstm.tsv
: > "$REC"
export TIDE_BUILD=$BUILD TIDE_NUM_THREADS=$THREADS
# PyTorch as bench/run.sh runs it (bench/torch_env.sh)
. bench/torch_env.sh
HAVE_TORCH=0
$PY -c 'import torch' 2>/dev/null && HAVE_TORCH=1
[ $HAVE_TORCH = 1 ] || echo "bench/lstm.sh: no torch for $PY; the PyTorch peer is skipped (set BENCH_PY)"
r=1
while [ $r -le "$ROUNDS" ]; do
  luajit bench/lstm.lua --modes eager | sed "s/^/$r\t/" >> "$REC"
  luajit bench/lstm.lua --modes compiled | sed "s/^/$r\t/" >> "$REC"
  [ $HAVE_TORCH = 0 ] || env $TORCH_ENV $PY bench/peers/lstm.py --threads "$THREADS" |
    sed "s/^/$r\t/" >> "$REC"
  r=$((r + 1))
done
# the table: medians over rounds of each median, and of the per-round ratios
# tide / PyTorch (oneDNN's LSTM) and tide / PyTorch without oneDNN (ATen's own)
awk -F'\t' '
  { key = $3 "\t" $4; v[key, $1] = $5; keys[key] = 1; if ($4 == "pytorch") tv = $9 }
  function median(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  function ratio(w, m, peer,   r, k, b) { k = 0
    for (r = 1; r <= '"$ROUNDS"'; r++) if ((w "\t" m, r) in v && (w "\t" peer, r) in v) b[++k] = v[w "\t" m, r] / v[w "\t" peer, r]
    return k ? sprintf("%.2fx", median(b, k)) : "" }
  END {
    printf "%-18s %-15s %10s %12s %14s\n", "LSTM 64x32x256", "mode", "median ms", "/ PyTorch", "/ PyTorch-nat."
    split("forward forward+backward", ws, " ")
    split("eager compiled pytorch pytorch-native", ms, " ")
    for (w = 1; w <= 2; w++) for (m = 1; m <= 4; m++) {
      key = ws[w] "\t" ms[m]; if (!(key in keys)) continue
      n = 0; delete a
      for (r = 1; r <= '"$ROUNDS"'; r++) if ((key, r) in v) a[++n] = v[key, r]
      t = m <= 2
      printf "%-18s %-15s %10.1f %12s %14s\n", ws[w], ms[m], median(a, n), t ? ratio(ws[w], ms[m], "pytorch") : "",
        t ? ratio(ws[w], ms[m], "pytorch-native") : ""
    }
    if (tv) print "PyTorch " tv
  }' "$REC"
