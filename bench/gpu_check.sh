#!/usr/bin/env bash
# The prepared check for a lent GPU (bench/gpu_check.py says what it runs): at most 8 minutes on an H100,
# one JSON, $OUT/gpu_check.json. Without CUDA it writes {"skipped": REASON} and exits 0.
#
# The packages the GPU machine lacks travel as wheels in .whl/ (bench/gpu_env.sh). With the device tool:
#     bash bench/gpu_wheels.sh                       # here, once
#     run(command="bash bench/gpu_check.sh", carry=[".whl"], timeout_s=540)
# Arguments pass through to bench/gpu_check.py (--sections equivalence speed, --mixers ...).
set -uo pipefail
OUT=${OUT:-${TMPDIR:-/tmp}/statetrack-gpu-check}
source "$(dirname "$0")/gpu_env.sh"
exec timeout -k 10 480 "$PY" bench/gpu_check.py --out "$OUT/gpu_check.json" --budget "${BUDGET:-450}" "$@"
