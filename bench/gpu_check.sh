#!/usr/bin/env bash
# The prepared check for a lent GPU (bench/gpu_check.py says what it runs): at most 8 minutes on an H100,
# one JSON, $OUT/gpu_check.json. Without CUDA it writes {"skipped": REASON} and exits 0.
#
# The packages the GPU machine lacks travel as wheels in .whl/ (bench/gpu_wheels.sh fetches them here,
# where PyPI is reachable): pydantic and its parts, fla-core. With the device tool:
#     bash bench/gpu_wheels.sh                       # here, once
#     run(command="bash bench/gpu_check.sh", carry=[".whl"], timeout_s=540)
# Arguments pass through to bench/gpu_check.py (--sections equivalence speed, --mixers ...).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-${TMPDIR:-/tmp}/statetrack-gpu-check}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
if ls .whl/*.whl >/dev/null 2>&1 && ! "$PY" -c "import pydantic, fla" 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/statetrack-site \
        .whl/*.whl || { echo "gpu_check: installing the carried wheels failed"; exit 2; }
    export PYTHONPATH=/tmp/statetrack-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
exec timeout -k 10 480 "$PY" bench/gpu_check.py --out "$OUT/gpu_check.json" --budget "${BUDGET:-450}" "$@"
