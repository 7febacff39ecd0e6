#!/usr/bin/env bash
# Fetch, here, the wheels bench/gpu_check.sh installs on the GPU machine (Python 3.12, x86-64, no network
# there): the versions this project's virtualenv uses, and fla-core (the cuda extra). Into .whl/ (ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \
    pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
    typing-extensions==4.16.0 fla-core==0.6.0
ls -la .whl
