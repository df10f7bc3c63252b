#!/bin/sh
# bench/setup-torch.sh -- a Python virtual environment with PyPI's torch 2.x for
# the PyTorch 2.x bench peers (bench/peers_torch2/); `make bench` uses it when it
# exists. Never run by make test (it downloads ~1-4 GB). Debian's python3-torch
# (1.13, the /usr/bin/python3 peers) stays as it is.
#   sh bench/setup-torch.sh            the venv in $TORCH_VENV, default build/venv-torch
#   TORCH_VENV=/path sh bench/setup-torch.sh
#   TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu sh bench/setup-torch.sh   (CPU-only wheels)
# An existing venv whose python imports torch is kept (prints its version).
set -e
cd "$(dirname "$0")/.."
DIR=${TORCH_VENV:-build/venv-torch}
if [ -x "$DIR/bin/python" ] && "$DIR/bin/python" -c 'import torch' 2>/dev/null; then
  echo "bench: $DIR has torch $("$DIR/bin/python" -c 'import torch; print(torch.__version__)')"
  exit 0
fi
sh scripts/install-deps.sh bench-torch
python3 -m venv "$DIR"
"$DIR/bin/pip" install --quiet --upgrade pip
if [ -n "$TORCH_INDEX_URL" ]; then
  "$DIR/bin/pip" install --quiet --index-url "$TORCH_INDEX_URL" torch
  "$DIR/bin/pip" install --quiet numpy
else
  "$DIR/bin/pip" install --quiet torch numpy
fi
echo "bench: $DIR has torch $("$DIR/bin/python" -c 'import torch; print(torch.__version__)')"
