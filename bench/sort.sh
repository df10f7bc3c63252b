#!/bin/sh
# bench/sort.sh -- sort and topk on 2^24 float32 (issue 17): tide (bench/sort.lua)
# and PyTorch (bench/peers_extra/sort.py) in alternating rounds, same threads.
# Usage: sh bench/sort.sh [rounds = 3] [reps = 3] [threads = 2]; figures in bench/RESULTS.md.
rounds=${1:-3}; reps=${2:-3}; T=${3:-2}
PY=${TORCH_PYTHON:-/work/venv-torch/bin/python}
cd "$(dirname "$0")/.."
. bench/torch_env.sh      # PyTorch as bench/run.sh runs it
for r in $(seq 1 "$rounds"); do
  TIDE_NUM_THREADS=$T luajit bench/sort.lua "$reps" | sed "s/^/round $r tide\t/"
  env OMP_NUM_THREADS=$T $TORCH_ENV $PY bench/peers_extra/sort.py --threads "$T" --reps "$reps" | sed "s/^/round $r torch\t/"
done
