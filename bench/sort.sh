#!/bin/sh
# bench/sort.sh -- sort and topk on 2^24 float32 (issue 17): tide (bench/sort.lua)
# and PyTorch (bench/peers_extra/sort.py) in alternating rounds, same threads.
# Usage: sh bench/sort.sh [rounds = 3] [reps = 3] [threads = 2]; figures in bench/RESULTS.md.
rounds=${1:-3}; reps=${2:-3}; T=${3:-2}
PY=${TORCH_PYTHON:-/work/venv-torch/bin/python}
# PyTorch as bench/run.sh runs it: its best kernels, passive OpenMP waiting, tuned malloc
CAP=avx2
grep -qw avx512f /proc/cpuinfo && CAP=avx512
TORCH_ENV="ATEN_CPU_CAPABILITY=$CAP OMP_WAIT_POLICY=PASSIVE MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736"
for r in $(seq 1 "$rounds"); do
  TIDE_NUM_THREADS=$T luajit bench/sort.lua "$reps" | sed "s/^/round $r tide\t/"
  env OMP_NUM_THREADS=$T $TORCH_ENV $PY bench/peers_extra/sort.py --threads "$T" --reps "$reps" | sed "s/^/round $r torch\t/"
done
