#!/bin/sh
# bench/handles_ab.sh -- the per-op cost of `c = a + b` on 1-element float32
# tensors from Lua with each kind of tensor handle (userdata through the handle
# shim, the default; cdata with ffi.gc: TIDE_HANDLES=ffi), the same op from C
# (no handle), and PyTorch's per-op cost from Python, run interleaved: each
# round runs every peer once, one process each, in a rotating order, so that
# a noisy machine loads them alike. Prints each round and the medians.
#   sh bench/handles_ab.sh                  7 rounds, 1e6 ops per loop, 5 loops per process
#   ROUNDS=11 OPS=500000 sh bench/handles_ab.sh
#   PY=/work/venv-torch/bin/python sh bench/handles_ab.sh   PyTorch from another Python
# Environment: TIDE_BUILD (./build), TIDE_NUM_THREADS (2), ROUNDS (7), OPS (1000000), PY
set -e
cd "$(dirname "$0")/.."
BUILD=${TIDE_BUILD:-$PWD/build}
case $BUILD in /*) ;; *) BUILD=$PWD/$BUILD ;; esac
ROUNDS=${ROUNDS:-7}
OPS=${OPS:-1000000}
T=${TIDE_NUM_THREADS:-2}
PY=${PY:-/usr/bin/python3}
DIR=$BUILD/bench
mkdir -p "$DIR"
gcc -O2 -Iruntime bench/c_op.c "$BUILD/libtide.a" $(make -s print-libs) -o "$DIR/c_op"
HAVE_TORCH=0
$PY -c 'import torch' 2>/dev/null && HAVE_TORCH=1
CAP=avx2; grep -qw avx512f /proc/cpuinfo && CAP=avx512
export TIDE_BUILD=$BUILD TIDE_NUM_THREADS=$T

ns() { sed -n 's/.* median *\([0-9.]*\) ns\/op.*/\1/p' | head -1; }
peer() {
  case $1 in
    userdata) env -u TIDE_HANDLES luajit bench/eager_ops.lua --only op --ops "$OPS" --reps 5 | ns ;;
    ffi)      TIDE_HANDLES=ffi luajit bench/eager_ops.lua --only op --ops "$OPS" --reps 5 | ns ;;
    c)        "$DIR/c_op" "$OPS" 5 | ns ;;
    torch)    ATEN_CPU_CAPABILITY=$CAP OMP_WAIT_POLICY=PASSIVE MALLOC_MMAP_THRESHOLD_=4294967296 \
                MALLOC_TRIM_THRESHOLD_=68719476736 $PY bench/peers/op_overhead.py --threads "$T" --ops "$OPS" --reps 5 | ns ;;
  esac
}
PEERS="userdata ffi c"
[ $HAVE_TORCH = 1 ] && PEERS="$PEERS torch"
echo "# per-op cost of c = a + b (1 element, float32), ns/op, threads=$T, $OPS ops x 5 loops per process; load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "round $PEERS"
OUT=$DIR/handles_ab.tsv
: > "$OUT"
r=1
while [ $r -le "$ROUNDS" ]; do
  line="$r"
  set -- $PEERS
  k=$(( (r - 1) % $# ))             # rotate the order
  while [ $k -gt 0 ]; do first=$1; shift; set -- "$@" "$first"; k=$((k - 1)); done
  for p in "$@"; do v=$(peer "$p"); echo "$r $p $v" >> "$OUT"; done
  for p in $PEERS; do line="$line $(awk -v r=$r -v p=$p '$1==r && $2==p {print $3}' "$OUT")"; done
  echo "$line"
  r=$((r + 1))
done
echo "# medians over rounds (load after: $(cut -d' ' -f1-3 /proc/loadavg))"
for p in $PEERS; do
  awk -v p=$p '$2==p {print $3}' "$OUT" | sort -n | awk -v p=$p '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf "%-9s median %7.1f ns/op  (min %.1f, max %.1f, %d rounds)\n", p, m, v[1], v[NR], NR}'
done
if [ $HAVE_TORCH = 1 ]; then
  for p in userdata ffi; do
    awk -v p=$p '$2==p{u[$1]=$3} $2=="torch"{t[$1]=$3} END {for (r in u) if (r in t) print t[r]/u[r]}' "$OUT" | sort -n |
      awk -v p=$p '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf "torch/%s per round: median %.2fx (min %.2f, max %.2f)\n", p, m, v[1], v[NR]}'
  done
fi
