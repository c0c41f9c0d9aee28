#!/usr/bin/env bash
# Multi-GPU (one node) or multi-node DDP training of the memory encoder.
#
# One node, all its GPUs (Lightning starts one process per GPU):
#   train/launch_ddp.sh
# Several nodes: run this on every node with the same MASTER_ADDR/MASTER_PORT and its NODE_RANK:
#   MASTER_ADDR=node0 MASTER_PORT=29500 NUM_NODES=2 NODE_RANK=0 train/launch_ddp.sh   # on node0
#   MASTER_ADDR=node0 MASTER_PORT=29500 NUM_NODES=2 NODE_RANK=1 train/launch_ddp.sh   # on node1
# Extra arguments go to LightningCLI, e.g. `train/launch_ddp.sh --trainer.max_epochs 4`.
set -euo pipefail
cd "$(dirname "$0")/.."
export MASTER_ADDR="${MASTER_ADDR:-127.0.0.1}" MASTER_PORT="${MASTER_PORT:-29500}" NODE_RANK="${NODE_RANK:-0}"
PYTHON="${PYTHON:-python}"
exec "$PYTHON" train/fit.py encoder -c encoder/ddp \
  --trainer.num_nodes "${NUM_NODES:-1}" --trainer.devices "${GPUS_PER_NODE:--1}" "$@"
