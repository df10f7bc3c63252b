#!/bin/sh
# bench/pair.sh LUA PY -- a tide benchmark script and its PyTorch peer, one process
# each, back to back in every round (ratios taken within a round: the machine is
# shared and noisy), then per workload the medians over the rounds and the median
# of the per-round ratios. PyTorch runs as bench/run.sh runs it (its AVX-512
# kernels, passive OpenMP waiting, glibc malloc tuned not to return memory). Each script prints "workload<TAB>impl<TAB>ms" lines.
#   BENCH_PY=/work/venv-torch/bin/python sh bench/pair.sh bench/einsum.lua bench/peers_torch2/einsum.py
# Environment: TIDE_BUILD (./build), BENCH_ROUNDS (5), BENCH_THREADS (2),
# BENCH_PY (the Python with torch; default python3).
set -e
cd "$(dirname "$0")/.."
lua=$1; py=$2
BUILD=${TIDE_BUILD:-$PWD/build}
ROUNDS=${BENCH_ROUNDS:-5}
THREADS=${BENCH_THREADS:-2}
PY=${BENCH_PY:-python3}
REC=$(mktemp)
trap 'rm -f "$REC"' EXIT
export TIDE_BUILD=$BUILD TIDE_NUM_THREADS=$THREADS
. bench/torch_env.sh
HAVE_TORCH=0
"$PY" -c 'import torch' 2>/dev/null && HAVE_TORCH=1
[ $HAVE_TORCH = 1 ] || echo "bench/pair.sh: no torch for $PY; the PyTorch peer is skipped (set BENCH_PY)"
r=1
while [ $r -le "$ROUNDS" ]; do
  luajit "$lua" | sed "s/^/$r\t/" >> "$REC"
  [ $HAVE_TORCH = 0 ] || env $TORCH_ENV "$PY" "$py" --threads "$THREADS" |
    sed "s/^/$r\t/" >> "$REC"
  r=$((r + 1))
done
awk -F'\t' -v R="$ROUNDS" '
  { v[$2, $3, $1] = $4; if (!($2 in seen)) { seen[$2] = 1; order[++nw] = $2 } }
  function median(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  END {
    printf "%-20s %10s %12s %16s\n", "workload", "tide ms", "PyTorch ms", "tide / PyTorch"
    for (k = 1; k <= nw; k++) {
      w = order[k]; n = m = q = 0; delete a; delete b; delete c
      for (r = 1; r <= R; r++) {
        if ((w, "tide", r) in v) a[++n] = v[w, "tide", r]
        if ((w, "pytorch", r) in v) { b[++m] = v[w, "pytorch", r]; if ((w, "tide", r) in v) c[++q] = v[w, "tide", r] / v[w, "pytorch", r] }
      }
      printf "%-20s %10.2f %12s %16s\n", w, median(a, n), m ? sprintf("%.2f", median(b, m)) : "-",
        q ? sprintf("%.2fx", median(c, q)) : "-"
    }
  }' "$REC"
