#!/bin/sh
# Run the busted specs under LuaJIT. The last line printed is
# "N passed, N failed, N skipped" (spec/summary.lua); the exit code is busted's.
cd "$(dirname "$0")/.."
export TIDE_NUM_THREADS="${TIDE_NUM_THREADS:-2}"
# compiled kernels go to the build dir, not $HOME (a fresh clone starts cold)
case "${TIDE_BUILD:-build}" in /*) bdir="${TIDE_BUILD}" ;; *) bdir="$PWD/${TIDE_BUILD:-build}" ;; esac
export TIDE_CACHE_DIR="${TIDE_CACHE_DIR-$bdir/jit-cache}"
# OpenCL specs run on PoCL's CPU device, its kernel binaries cached in the build dir
export OCL_ICD_VENDORS="${OCL_ICD_VENDORS-/etc/OpenCL/vendors/pocl.icd}"
export POCL_DEVICES="${POCL_DEVICES-pthread}" POCL_MAX_PTHREAD_COUNT="${POCL_MAX_PTHREAD_COUNT-2}"
export POCL_CACHE_DIR="${POCL_CACHE_DIR-$bdir/pocl-cache}"
exec luajit /usr/bin/busted "$@"
