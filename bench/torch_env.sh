# bench/torch_env.sh -- sourced by the bench scripts: TORCH_ENV, PyTorch at its
# best on this machine. AVX-512 kernels if the CPU has them
# (ATEN_CPU_CAPABILITY=avx512 dies with SIGILL on a CPU without them), glibc
# told to keep big blocks on the heap (without it every large result is a
# fresh mmap and its page faults), passive OpenMP waiting. Debian's torch calls
# the same OpenBLAS as tide, which picks its AVX2 kernels on AMD Zen 4/5: both
# get its AVX-512 kernels there (tide asks for them itself).
# Use: `. bench/torch_env.sh; env $TORCH_ENV python ...`
CAP=avx2 CORE=Haswell
grep -qw avx512f /proc/cpuinfo && CAP=avx512 CORE=SkylakeX
TORCH_ENV="ATEN_CPU_CAPABILITY=$CAP OPENBLAS_CORETYPE=$CORE OMP_WAIT_POLICY=PASSIVE MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736"
