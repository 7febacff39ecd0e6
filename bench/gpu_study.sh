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
#
# The checkpoints come back packed in one file, $OUT/STUDY.checkpoints.tar (the device tool returns at
# most 8 files), and the report without figures (`statetrack report` draws them from the database).
# FROM=path/STUDY.db continues an earlier call's database: the folder it came back in, carried in the
# working tree (its .checkpoints.tar beside it). Its complete runs are reused by their keys, and this
# call's database holds both calls' runs.
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
if [ -n "${FROM:-}" ]; then
    if [ -L "$FROM" ] || [ ! -f "$FROM" ]; then
        echo "gpu_study: FROM=$FROM is not a database file (a link is not followed)" >&2
        exit 2
    fi
    cp "$FROM" "$OUT/$name.db" || exit 2
    "$PY" - "${FROM%.db}.checkpoints.tar" "$OUT" <<'PY' || exit 2
import sys, tarfile
from pathlib import Path
tar, out = Path(sys.argv[1]), sys.argv[2]
folder = tar.name.removesuffix(".tar")
if tar.is_file() and not tar.is_symlink():
    with tarfile.open(tar) as t:  # the checkpoints alone, as regular files in their folder under OUT
        for m in t.getmembers():
            parts = m.name.split("/")
            if m.isfile() and len(parts) == 2 and parts[0] == folder and parts[1].endswith(".safetensors"):
                t.extract(m, out, filter="data")
PY
fi
# one seed per cell unless the arguments say otherwise (the last --seeds given wins)
timeout -s INT -k 30 "${LIMIT:-480}" "$PY" -m statetrack.cli reproduce "$study" --scale "$scale" --seeds 1 \
    --device "$device" --workers 1 --db "$OUT/$name.db" --out "$OUT/report" --figures '' --force "$@"
rc=$?
if [ -d "$OUT/$name.checkpoints" ]; then
    tar -cf "$OUT/$name.checkpoints.tar" -C "$OUT" "$name.checkpoints" && rm -rf "$OUT/$name.checkpoints"
fi
if [ -f "$OUT/$name.db" ]; then
    "$PY" -m statetrack.cli runs export --db "$OUT/$name.db" --out "$OUT/$name-runs.csv"
fi
exit $rc
