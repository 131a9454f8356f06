#!/bin/bash
# Fit one model per recording with a SLURM job array: task k fits every 8th file from the k-th.
# dynid reads SLURM_ARRAY_TASK_ID/_MIN/_COUNT itself (as --shard I/N), so every task gets a
# disjoint share of the sorted inputs and together they cover all of them. --resume makes a
# resubmitted array (after a timeout, a node failure or a fixed bad file) skip the finished
# models, redo truncated ones and retry failed ones. Exit 1 from a task means some of its inputs
# failed (one line each in its .err file); the others were written.
#
#   sbatch examples/slurm_array.sh recordings/ models/
#
#SBATCH --job-name=dynid-fit
#SBATCH --array=1-8
#SBATCH --cpus-per-task=2
#SBATCH --time=01:00:00
#SBATCH --output=logs/dynid-%A_%a.out
#SBATCH --error=logs/dynid-%A_%a.err

set -euo pipefail
data=${1:?usage: sbatch slurm_array.sh DATA_DIR MODEL_DIR}
models=${2:?usage: sbatch slurm_array.sh DATA_DIR MODEL_DIR}

# One worker per allocated CPU; dynid gives each worker cores/jobs BLAS and torch threads.
exec dynid fit "$data" --each --model var --resume \
    --jobs "${SLURM_CPUS_PER_TASK:-1}" \
    -o "$models/{stem}.{model}.dynid" --json
