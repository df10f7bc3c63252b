#!/bin/sh
# bench/run.sh -- run every tide benchmark next to its peers and print the
# tables recorded in bench/RESULTS.md (`make bench` calls it after building).
#   sh bench/run.sh                   3 rounds at 2 threads (~4 min)
#   BENCH_ROUNDS=1 sh bench/run.sh    quicker, noisier
#   BENCH_THREADS="2 1" sh bench/run.sh  each round at 2, then 1 thread
#   BENCH_PARTS=compile sh bench/run.sh  only the tide.compile part (BENCH_PARTS="eager compile torch2" is the default)
#   BENCH_PARTS=torch2 sh bench/run.sh   only issue 16's eager workloads (bench/eager_work.lua) beside PyTorch 2.x
#     eager and torch.compile (bench/peers_torch2/eager_work.py, in the venv of bench/setup-torch.sh:
#     $TORCH_VENV, default build/venv-torch; BENCH_TORCH_COMPILE=0 skips torch.compile) and Debian's
#     torch 1.13 when /usr/bin/python3 has it; round 1 also trains one epoch of the CNN example on each
#     side (Fashion-MNIST, make fashion installs it; BENCH_CNN=0 skips it)
# Each round runs, one process each: the per-op benchmarks (tide from Lua, the
# same op from C, tide from Lua with LuaJIT's default GC step multiplier (200) for comparison,
# PyTorch from Python), then the bandwidth ones (C loop with
# OpenMP, tide, PyTorch, and tide alternating call by call with the C loop in
# one process), then tide.compile (bench/compile.lua: W1 sin^2+cos^2 and W8
# softmax / layer_norm compiled and eager, the hand-written C loops and STREAM
# copy/triad of bench/c_fuse.c, PyTorch; the MLP step compiled, eager, PyTorch,
# and its compile latency cold and from the disk cache). Peers of one round run
# back to back, so the ratios are taken within a round. Records (TSV) go to
# $BENCH_DIR/records.tsv (eager part) and $BENCH_DIR/compile.tsv (compile part).
# Environment: TIDE_BUILD (default ./build), BENCH_THREADS ("2"), BENCH_ROUNDS (3),
# BENCH_OPS (ops per timed loop, 1000000), BENCH_DIR ($TIDE_BUILD/bench),
# BENCH_PARTS ("eager compile").
set -e
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${TIDE_BUILD:-$ROOT/build}
case $BUILD in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
THREADS=${BENCH_THREADS:-2}
ROUNDS=${BENCH_ROUNDS:-3}
OPS=${BENCH_OPS:-1000000}
DIR=${BENCH_DIR:-$BUILD/bench}
PARTS=${BENCH_PARTS:-eager compile torch2}
PY=/usr/bin/python3
mkdir -p "$DIR"
REC=$DIR/records.tsv
CREC=$DIR/compile.tsv
WREC=$DIR/work.tsv
: > "$REC"
: > "$CREC"
: > "$WREC"
has_part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

[ -f "$BUILD/libtide.a" ] || { echo "bench: $BUILD/libtide.a not found; run 'make' first" >&2; exit 1; }
gcc -O3 -march=native -fopenmp bench/c_loops.c -o "$DIR/c_loops"
gcc -O3 -march=native -fopenmp -shared -fPIC -DC_LOOPS_LIB bench/c_loops.c -o "$DIR/libc_loops.so"
gcc -O2 -Iruntime bench/c_op.c "$BUILD/libtide.a" $(make -s print-libs) -o "$DIR/c_op"
gcc -O3 -march=native -ffast-math -fopenmp bench/c_fuse.c -lmvec -lm -o "$DIR/c_fuse"

# A clean threading/allocator environment; each peer gets its own settings below.
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS OPENBLAS_CORETYPE OPENBLAS_L2_SIZE MKL_NUM_THREADS OMP_WAIT_POLICY GOMP_SPINCOUNT \
      MALLOC_MMAP_THRESHOLD_ MALLOC_TRIM_THRESHOLD_ MALLOC_TOP_PAD_ ATEN_CPU_CAPABILITY TIDE_CACHE_LIMIT
export TIDE_BUILD=$BUILD

# PyTorch at its best on this machine (TORCH_ENV; CAP, CORE)
. bench/torch_env.sh
HAVE_TORCH=0
[ -x $PY ] && $PY -c 'import torch' 2>/dev/null && HAVE_TORCH=1
[ $HAVE_TORCH = 1 ] || echo "bench: no torch for $PY (Debian python3-torch); PyTorch 1.13 peers skipped"
TORCH_VENV=${TORCH_VENV:-$BUILD/venv-torch}
case $TORCH_VENV in /*) ;; *) TORCH_VENV=$ROOT/$TORCH_VENV ;; esac
T2PY=$TORCH_VENV/bin/python
HAVE_TORCH2=0
if has_part torch2; then
  [ -x "$T2PY" ] && "$T2PY" -c 'import torch' 2>/dev/null && HAVE_TORCH2=1
  [ $HAVE_TORCH2 = 1 ] || echo "bench: no PyTorch 2.x in $TORCH_VENV (sh bench/setup-torch.sh makes it); its peers skipped"
fi
CNN_DIR=/usr/share/datasets/fashion-mnist
HAVE_CNN=0
[ "${BENCH_CNN:-1}" != 0 ] && [ -f $CNN_DIR/train-images-idx3-ubyte.gz ] && HAVE_CNN=1

echo "== machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs," \
     "$(awk '/MemTotal/ {printf "%.1f GiB", $2/1048576}' /proc/meminfo), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== threads=$THREADS rounds=$ROUNDS ops/loop=$OPS; OpenBLAS kernels: $CORE; PyTorch env: $TORCH_ENV"

run() {  # run <round> <command...>: records of the command get the round number
  r=$1; shift
  BENCH_OUT=$DIR/round.tsv "$@"
  [ -f "$DIR/round.tsv" ] && awk -v r="$r" '{ print r "\t" $0 }' "$DIR/round.tsv" >> "$REC"
  rm -f "$DIR/round.tsv"
}
crun() {  # crun <round> <command...>: the same, into the compile part's records
  r=$1; shift
  BENCH_OUT=$DIR/round.tsv "$@"
  [ -f "$DIR/round.tsv" ] && awk -v r="$r" '{ print r "\t" $0 }' "$DIR/round.tsv" >> "$CREC"
  rm -f "$DIR/round.tsv"
}
wrun() {  # wrun <round> <command...>: the same, into the eager workloads' records
  r=$1; shift
  BENCH_OUT=$DIR/round.tsv "$@"
  [ -f "$DIR/round.tsv" ] && awk -v r="$r" '{ print r "\t" $0 }' "$DIR/round.tsv" >> "$WREC"
  rm -f "$DIR/round.tsv"
}
tpeer() {  # tpeer <round> <script in bench/peers> <args...>: a shared PyTorch peer (JSON lines) as records
  r=$1; shift
  rm -f "$DIR/peers.jsonl"
  (cd bench/peers && env $TORCH_ENV PEERS_JSONL="$DIR/peers.jsonl" $PY "$@")
  crun "$r" luajit bench/compile.lua --only jsonl --file "$DIR/peers.jsonl"
  rm -f "$DIR/peers.jsonl"
}

r=1
while [ $r -le "$ROUNDS" ]; do
  for T in $THREADS; do
    echo "== round $r/$ROUNDS, threads=$T"
    if has_part eager; then
      run $r env TIDE_NUM_THREADS=$T luajit bench/eager_ops.lua --only op --ops "$OPS" --reps 5 --breakdown
      run $r env TIDE_NUM_THREADS=$T "$DIR/c_op" "$OPS" 5
      run $r env TIDE_NUM_THREADS=$T luajit bench/eager_ops.lua --only op --ops "$OPS" --reps 5 --stepmul 200
      [ $HAVE_TORCH = 1 ] && (cd bench/peers && run $r env $TORCH_ENV $PY op_overhead.py --threads $T --ops "$OPS" --reps 5)
      run $r env OMP_NUM_THREADS=$T OMP_WAIT_POLICY=PASSIVE "$DIR/c_loops" 16777216 50
      run $r env TIDE_NUM_THREADS=$T luajit bench/eager_ops.lua --only bw --bw-reps 50
      run $r env TIDE_NUM_THREADS=$T OMP_NUM_THREADS=$T OMP_WAIT_POLICY=PASSIVE \
        luajit bench/eager_ops.lua --only pair --clib "$DIR/libc_loops.so" --bw-reps 30
      [ $HAVE_TORCH = 1 ] && (cd bench/peers && run $r env $TORCH_ENV $PY add_sum.py --threads $T --reps 50)
    fi
    if has_part compile; then
      echo "== round $r/$ROUNDS, threads=$T: tide.compile"
      crun $r env OMP_NUM_THREADS=$T OMP_WAIT_POLICY=PASSIVE "$DIR/c_fuse" 16777216 30
      crun $r env TIDE_NUM_THREADS=$T luajit bench/compile.lua --only w1 --reps 20
      [ $HAVE_TORCH = 1 ] && tpeer $r w1_fuse.py --threads $T --peers torch --target-s 1
      crun $r env TIDE_NUM_THREADS=$T luajit bench/compile.lua --only w8 --reps 20
      [ $HAVE_TORCH = 1 ] && tpeer $r w8_softmax.py --threads $T --peers torch --target-s 1
      [ $HAVE_TORCH = 1 ] && (cd bench/peers_extra && crun $r env $TORCH_ENV $PY w8_backward.py --threads $T --target-s 1)
      crun $r env TIDE_NUM_THREADS=$T luajit bench/compile.lua --only mlp --reps 20
      [ $HAVE_TORCH = 1 ] && tpeer $r w2_mlp.py --threads $T --target-s 1
      CACHE=$(mktemp -d)   # compile latency: a fresh process on an empty cache, then one on the filled cache
      crun $r env TIDE_NUM_THREADS=$T TIDE_CACHE_DIR="$CACHE" luajit bench/compile.lua --only mlp-cold --phase cold
      crun $r env TIDE_NUM_THREADS=$T TIDE_CACHE_DIR="$CACHE" luajit bench/compile.lua --only mlp-cold --phase disk
      rm -rf "$CACHE"
    fi
    if has_part torch2; then
      echo "== round $r/$ROUNDS, threads=$T: eager workloads beside PyTorch 2.x"
      wrun $r env TIDE_NUM_THREADS=$T luajit bench/eager_work.lua --reps 10
      [ $HAVE_TORCH2 = 1 ] && wrun $r env $TORCH_ENV "$T2PY" bench/peers_torch2/eager_work.py --threads $T --reps 10 \
        --compile "${BENCH_TORCH_COMPILE:-1}"
      [ $HAVE_TORCH = 1 ] && wrun $r env $TORCH_ENV $PY bench/peers_torch2/eager_work.py --threads $T --reps 10 --compile 0
      if [ $r = 1 ] && [ $HAVE_CNN = 1 ]; then
        wrun $r env TIDE_NUM_THREADS=$T luajit bench/eager_work.lua --only cnn
        [ $HAVE_TORCH2 = 1 ] && wrun $r env $TORCH_ENV "$T2PY" bench/peers_torch2/eager_work.py --threads $T --only cnn
      fi
    fi
  done
  r=$((r + 1))
done
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
if has_part eager; then
  echo
  luajit bench/report.lua "$REC"
fi
if has_part compile; then
  echo
  luajit bench/compile.lua --only report --file "$CREC"
fi
if has_part torch2; then
  echo
  luajit bench/work_report.lua "$WREC"
fi
