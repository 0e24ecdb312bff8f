#!/bin/bash
# One node's harness runner in a multi-node Slurm job (tools/slurm/multinode.sbatch starts it on every node with
# srun): Slurm's variables become the harness's, then `python -m harness run PLATFORM-OPTIONS --out OUT/node<k>`.
#   SLURM_NNODES       -> HARNESS_NNODES
#   SLURM_NODEID       -> HARNESS_NODE_RANK
#   SLURM_JOB_NODELIST -> HARNESS_MASTER_ADDR, its first host (scontrol show hostnames), unless already set
#   SLURM_JOB_ID       -> HARNESS_MASTER_PORT, 20000 + JOB_ID % 20000, unless already set: one port per job, the same
#                         on every node
# Usage: node.sh PLATFORM [harness run options]
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: node.sh PLATFORM [harness run options]" >&2; exit 2; }
platform=$1; shift
: "${SLURM_NNODES:?not in a Slurm job step: run through tools/slurm/multinode.sbatch}"
: "${SLURM_NODEID:?not in a Slurm job step: run through tools/slurm/multinode.sbatch}"
export HARNESS_NNODES="$SLURM_NNODES"
export HARNESS_NODE_RANK="$SLURM_NODEID"
if [ -z "${HARNESS_MASTER_ADDR:-}" ]; then
    HARNESS_MASTER_ADDR="$(scontrol show hostnames "${SLURM_JOB_NODELIST:?}" | head -n 1)"
    export HARNESS_MASTER_ADDR
fi
export HARNESS_MASTER_PORT="${HARNESS_MASTER_PORT:-$((20000 + ${SLURM_JOB_ID:-0} % 20000))}"
out="${HARNESS_SLURM_OUT:-runs/slurm-${SLURM_JOB_ID:-job}}/node${SLURM_NODEID}"
exec "${HARNESS_PYTHON:-.venv/bin/python}" -m harness run --platform "$platform" --out "$out" "$@"
