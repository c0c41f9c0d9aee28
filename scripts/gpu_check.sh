#!/usr/bin/env bash
# One GPU check in under 8 minutes, everything it measured in one JSON (bench/experiments/gpu_check.py has the parts):
#   tests     the tests marked gpu (pytest -m gpu on the files of tests/ that carry the marker)
#   encoders  texts/s of every encoder backend: torch, onnx, int8, int8_vnni(_ffn) on the CPU; torch, fp16,
#             bf16 on the GPU, for MiniLM and, when the [large] extra's parts are installed, all-mpnet-base-v2
#   faiss     FaissRetriever on the GPU against the CPU index over the same vectors: build, queries/s, recall@10
#   pipeline  memnets run -c pipeline/large (pipeline/gpu without the large backbone's parts), bf16-mixed
#             where the GPU has bf16, the encoder trained GPU_CHECK_EPOCHS epochs (default 3)
# Each part runs under its own time limit and is reported as ok, failed, timed out or skipped; the pipeline
# gets what is left of GPU_CHECK_BUDGET_S (default 430 s: with every limit reached and each part's 10 s to
# stop, 8 minutes). Without a CUDA GPU the GPU parts are skipped, saying so here and in the JSON, and the
# CPU parts run.
#
#   bash scripts/gpu_check.sh [OUT.json]      default gpu_check.json; PYTHON=... (default .venv/bin/python)
#   GPU_CHECK_TINY=1 bash scripts/gpu_check.sh   sizes of seconds (the slow test's)
set -uo pipefail
OUT=$(realpath -m "${1:-gpu_check.json}")  # before the cd: a relative OUT is the caller's
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-$([ -x .venv/bin/python ] && echo .venv/bin/python || echo python3)}
BUDGET=${GPU_CHECK_BUDGET_S:-430}
EPOCHS=${GPU_CHECK_EPOCHS:-3}
TINY=$([ "${GPU_CHECK_TINY:-0}" = 1 ] && echo --tiny || true)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
STARTED=$(date +%s)
WORK=$(mktemp -d -t memnets-gpu-check-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# part NAME LIMIT_S: python -m bench.experiments.gpu_check NAME under a time limit (timeout signals the part's whole
# process group: its pytest or memnets children too); its exit status and seconds in WORK/NAME.status.json
part() {
    local name=$1 limit=$2 begin code
    echo "=== gpu_check: $name (at most ${limit} s)"
    begin=$(date +%s)
    timeout --kill-after=10 "$limit" "$PYTHON" -m bench.experiments.gpu_check "$name" --work "$WORK" --epochs "$EPOCHS" $TINY
    code=$?
    [ "$code" = 124 ] || [ "$code" = 137 ] && echo "gpu_check: $name ran out of its ${limit} s"
    printf '{"exit_code": %d, "seconds": %d, "limit_s": %d}\n' "$code" "$(($(date +%s) - begin))" "$limit" \
        >"$WORK/$name.status.json"
}

part probe 60
if ! [ -f "$WORK/probe.json" ]; then
    echo "gpu_check: the probe failed (is $PYTHON an environment with memnets' dev extra?)" >&2
    exit 1
fi
part tests 75
part encoders 150
part faiss 45
left=$((STARTED + BUDGET - $(date +%s)))
if [ "$left" -lt 30 ]; then left=30; fi
part pipeline "$left"
"$PYTHON" -m bench.experiments.gpu_check assemble --work "$WORK" --out "$OUT" --started "$STARTED"
