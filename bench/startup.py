"""Start-up time of the command line: how long each light command takes in a fresh interpreter, and
which heavy packages it imports.

    python bench/startup.py                      # this checkout's code, 10 runs per command
    python bench/startup.py --src ../other/src   # another checkout's code (e.g. before a change)
    python bench/startup.py --json out.json

Each command runs ``--runs`` times as ``python -m statetrack.cli ARGS`` (output to /dev/null); the
table gives the median and the fastest wall time, the median CPU time (user + system: the wall time an
idle machine would show, as start-up is single-threaded), and the heavy packages ``-X importtime`` saw.
The target (docs/benchmarks.md): ``--version`` and ``train --help`` under 0.3 s on an idle 2-core
machine. Wall times depend on the load: run it under ``flock /work/notes/cpu.lock`` or on an idle
machine, and read the load average printed first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

#: the commands a newcomer runs first, and that must not wait for torch
COMMANDS = [
    ["--version"],
    ["--help"],
    ["train", "--help"],
    ["eval", "--help"],
    ["models"],
    ["tasks"],
    ["groups"],
    ["oracle", "--layers", "mamba,s4d", "--task", "parity"],
    # mistyped names: said before torch loads (exit 2, one line)
    ["train", "--layers", "mamab"],
    ["train", "--layers", "rnn", "--task", "partiy"],
    ["reproduce", "khavari2025-parit"],
]
#: the packages that take long to import, or that only some commands need
HEAVY = (
    "torch",
    "numpy",
    "matplotlib",
    "safetensors",
    "tokenizers",
    "ray",
    "triton",
    "fla",
    "sympy",
    "pydantic",
    "rich",
    "yaml",
)
#: the target of docs/benchmarks.md, seconds
TARGET = 0.3


def heavy_imports(cmd: list[str], env: dict) -> list[str]:
    """The heavy top-level packages that ``-X importtime`` reports for one run of ``cmd``."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "statetrack.cli", *cmd],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    seen = set()
    for line in p.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", line)
        if m and m.group(1).split(".")[0] in HEAVY:
            seen.add(m.group(1).split(".")[0])
    return sorted(seen)


def wall_times(cmd: list[str], env: dict, runs: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (user + system) seconds of each run. On a busy machine the CPU time is the better
    estimate of the wall time on an idle one: start-up runs on one core and waits for nothing else."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "statetrack.cli", *cmd],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--src", default=None, help="the src/ folder whose statetrack to time (default: the installed)"
    )
    p.add_argument("--runs", type=int, default=10, help="runs per command")
    p.add_argument("--json", default=None, help="also write the rows to this file")
    a = p.parse_args(argv)
    env = {**os.environ, "COLUMNS": "100", "OMP_NUM_THREADS": "1"}
    if a.src:
        env["PYTHONPATH"] = os.path.abspath(a.src)
    load = os.getloadavg()
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores; python "
        f"{sys.version.split()[0]}; code: {a.src or 'installed'}"
    )
    t0 = time.perf_counter()
    for _ in range(a.runs):
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=False)
    bare = (time.perf_counter() - t0) / a.runs
    print(f"a bare interpreter ('python -c pass'): {bare:.3f} s")
    rows = []
    print(f"{'command':<40} {'wall: median':>12} {'fastest':>8} {'CPU: median':>12}  heavy imports")
    for cmd in COMMANDS:
        times, cpu = wall_times(cmd, env, a.runs)
        heavy = heavy_imports(cmd, env)
        rows.append(
            {
                "command": " ".join(cmd),
                "median_s": statistics.median(times),
                "min_s": min(times),
                "cpu_median_s": statistics.median(cpu),
                "runs": a.runs,
                "heavy_imports": heavy,
            }
        )
        print(
            f"{' '.join(cmd):<40} {statistics.median(times):>12.3f} {min(times):>8.3f} "
            f"{statistics.median(cpu):>12.3f}  {', '.join(heavy) or '-'}"
        )
    load = os.getloadavg()
    print(f"load average at the end {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(
                {"load_average": list(os.getloadavg()), "bare_interpreter_s": bare, "rows": rows}, f, indent=1
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
