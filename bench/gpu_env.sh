# Sourced by the scripts for a lent GPU (gpu_check.sh, gpu_study.sh): the packages the GPU machine lacks
# travel as wheels in .whl/ (bench/gpu_wheels.sh fetches them where PyPI is reachable) and are installed
# under /tmp; the project's sources go on PYTHONPATH. Sets PY and OUT (default: a folder under TMPDIR).
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-${TMPDIR:-/tmp}/statetrack-gpu}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
if ls .whl/*.whl >/dev/null 2>&1 && ! "$PY" -c "import pydantic, fla" 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/statetrack-site \
        .whl/*.whl || { echo "installing the carried wheels failed"; exit 2; }
    export PYTHONPATH=/tmp/statetrack-site${PYTHONPATH:+:$PYTHONPATH}
fi
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
