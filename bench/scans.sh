#!/bin/sh
# bench/scans.sh -- cumsum of 2^24 float32 values (one row of 2^24; 4096 rows of
# 4096): tide (bench/scans.lua) and PyTorch (bench/peers/scans.py) through
# bench/pair.sh (one process each, back to back in every round, ratios taken
# within a round, medians over the rounds).
#   sh bench/scans.sh                        5 rounds at 2 threads
#   BENCH_ROUNDS=3 BENCH_PY=/work/venv-torch/bin/python sh bench/scans.sh
# Environment: as bench/pair.sh (TIDE_BUILD, BENCH_ROUNDS, BENCH_THREADS, BENCH_PY).
# Results: bench/RESULTS.md, "Scans (issue 17)".
exec sh "$(dirname "$0")/pair.sh" bench/scans.lua bench/peers/scans.py
