#!/usr/bin/env bash
# The next N cells of the GPU queue (bench/gpu_queue.yaml), each with its seeds as concurrent processes,
# within LIMIT seconds (default 500); one JSON per cell in $OUT, to copy into docs/results/gpu-queue/ and
# commit (docs/gpu.md, "The queue"). Without CUDA it says so and exits 0.
#
#     run(command="bash bench/gpu_queue.sh 1", carry=[".whl"], timeout_s=560)
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_queue: skipped: torch.cuda.is_available() is False on this machine"
    exit 0
fi
limit=${LIMIT:-500}
exec timeout -k 20 "$limit" "$PY" bench/gpu_queue.py run --next "${1:-1}" --out "$OUT" --budget $((limit - 40))
