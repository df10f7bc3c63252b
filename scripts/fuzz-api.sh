#!/bin/sh
# The API fuzzer (spec/fuzz/run.lua; FUZZING.md): the environment of
# scripts/run-tests.sh (caches in the build dir, OpenCL on PoCL's CPU device),
# then the run. make fuzz passes FUZZ_SECONDS and FUZZ_SEED through the environment.
cd "$(dirname "$0")/.."
export TIDE_NUM_THREADS="${TIDE_NUM_THREADS:-2}"
case "${TIDE_BUILD:-build}" in /*) bdir="${TIDE_BUILD}" ;; *) bdir="$PWD/${TIDE_BUILD:-build}" ;; esac
export TIDE_CACHE_DIR="${TIDE_CACHE_DIR-$bdir/jit-cache}"
export OCL_ICD_VENDORS="${OCL_ICD_VENDORS-/etc/OpenCL/vendors/pocl.icd}"
export POCL_DEVICES="${POCL_DEVICES-pthread}" POCL_MAX_PTHREAD_COUNT="${POCL_MAX_PTHREAD_COUNT-2}"
export POCL_CACHE_DIR="${POCL_CACHE_DIR-$bdir/pocl-cache}"
# under ASan (LD_PRELOAD): a size too big returns NULL as malloc does (ASan aborts on
# it by default) and nothing over 2 GiB is allocated (a child has no address-space
# limit under ASan: filling such a tensor would pass for a hang)
case "${LD_PRELOAD:-}" in *asan*)
  export ASAN_OPTIONS="allocator_may_return_null=1:max_allocation_size_mb=2048:detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" ;;
esac
exec luajit spec/fuzz/run.lua "$@"
