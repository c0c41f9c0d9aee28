#!/usr/bin/env bash
# Create .venv with torch and memnets (editable, with its test tools). Idempotent.
#
# CPU (default): torch==2.13.0, the CPU build (a plain `torch` from PyPI is a multi-GB CUDA build).
# GPU: TORCH_SPEC=torch bash scripts/setup.sh   (on Linux, PyPI's default torch is the CUDA build),
#      then for GPU FAISS: .venv/bin/pip uninstall -y faiss-cpu && .venv/bin/pip install -e '.[gpu]'
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "$TORCH_SPEC"
.venv/bin/python -m pip install -q -e ".[dev]"
.venv/bin/python -c "import torch, memnets; print(f'memnets {memnets.__version__} with torch {torch.__version__} (CUDA available: {torch.cuda.is_available()})')"
