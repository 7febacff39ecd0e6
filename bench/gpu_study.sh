#!/usr/bin/env bash
# Part of a study's grid on a lent GPU, within a time limit: the cells the CPU budget cannot fit, at a
# scale the study defines, one seed each unless told. The database, the report and the runs as CSV land
# in $OUT; the runs keep the keys they have in the whole grid (docs/gpu.md, "Declared parts of a
# protocol"), so the database joins a later run of the whole study. Without CUDA it says so and exits 0.
#
#     bash bench/gpu_study.sh STUDY SCALE [reproduce's options: --model LABEL --task LABEL --seeds K ...]
#     run(command="bash bench/gpu_study.sh diag-limits-2026 paper --model AUSSM --task C2",
#         carry=[".whl"], timeout_s=540)
#
# LIMIT (seconds, default 480) bounds the whole; a run it cuts is left 'interrupted' in the database.
# DEVICE=cpu runs the same on the CPU (how the tests check the script).
set -uo pipefail
if [ $# -lt 2 ]; then
    echo "usage: bash bench/gpu_study.sh STUDY SCALE [--model LABEL] [--task LABEL] [--seeds K] ..." >&2
    exit 2
fi
source "$(dirname "$0")/gpu_env.sh"
study=$1 scale=$2
name=$(basename "$study" .yaml)
shift 2
device=${DEVICE:-cuda}
if [ "$device" = cuda ] && ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
    echo "gpu_study: skipped: torch.cuda.is_available() is False on this machine"
    exit 0
fi
# one seed per cell unless the arguments say otherwise (the last --seeds given wins)
timeout -s INT -k 30 "${LIMIT:-480}" "$PY" -m statetrack.cli reproduce "$study" --scale "$scale" --seeds 1 \
    --device "$device" --workers 1 --db "$OUT/$name.db" --out "$OUT/report" --force "$@"
rc=$?
if [ -f "$OUT/$name.db" ]; then
    "$PY" -m statetrack.cli runs export --db "$OUT/$name.db" --out "$OUT/$name-runs.csv"
fi
exit $rc
