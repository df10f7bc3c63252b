#!/bin/sh
# Install the Debian packages tide needs (and any named as arguments), only those missing. Runs as root on a
# fresh Debian 12 (apt only); prints nothing when everything is present.
set -e
# extra packages as arguments (datasets for examples), or a group: bench-torch = python3-venv
# and pip (bench/setup-torch.sh), fuzz = clang 14 and
# its libFuzzer runtime, libclang-rt-14-dev (make fuzz-loaders only; make test does not
# need the runtime)
EXTRA=""
for a in "$@"; do
  case "$a" in fuzz) EXTRA="$EXTRA clang-14 libclang-rt-14-dev" ;;
    bench-torch) EXTRA="$EXTRA python3-venv python3-pip" ;;   # bench/setup-torch.sh: a venv for PyPI's torch
    *) EXTRA="$EXTRA $a" ;; esac
done
PKGS="gcc make pkg-config binutils libc6-dev libgccjit-12-dev luajit libluajit-5.1-dev lua-busted \
ocl-icd-opencl-dev opencl-headers pocl-opencl-icd libclblast-dev libopenblas-dev liblapacke-dev qemu-user clang \
libreadline8 tmux valgrind love xvfb xauth zip $EXTRA"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "tide: missing Debian packages:$missing" >&2
  echo "tide: run as root, or: sudo apt-get install -y$missing" >&2
  exit 1
fi
echo "tide: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
