"""The README runs as written: on a fresh copy of the checkout, ``make demo``'s command, then every ``bash``
block of the README from top to bottom in one shell (the ``make`` block aside), then its ``python`` block. Each
command's wall time is written to STATETRACK_README_TIMES when set (the times the README states).

Slow: the demo and the examples take several minutes on 2 cores."""
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IGNORE = shutil.ignore_patterns(".venv", "runs", ".git", "__pycache__", "*.egg-info", ".pytest_cache",
                                ".mypy_cache", ".ruff_cache")


def blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced block."""
    return [(m[1], m[2]) for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S)]


def commands(body: str) -> list[str]:
    """A bash block's commands: continued lines joined, a here-document kept with its command."""
    out, lines = [], body.splitlines()
    i = 0
    while i < len(lines):
        cmd = lines[i]
        while cmd.endswith("\\"):
            i += 1
            cmd += "\n" + lines[i]
        end = re.search(r"<<'?(\w+)'?", cmd)
        if end:
            while lines[i] != end[1]:
                i += 1
                cmd += "\n" + lines[i]
        if cmd.strip():
            out.append(cmd)
        i += 1
    return out


def demo_command() -> str:
    """The command of the Makefile's demo recipe, as make would run it."""
    text = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", text, re.M)[1]
    return recipe.strip().replace("$(VENV)", ".venv")


def instrumented(cmds: list[str], times: Path) -> str:
    """The commands as one bash script, each as written, followed by a record in ``times``: its start and
    end, and the shell's ``times`` (the CPU seconds of the commands run so far, in the second line)."""
    out = ["set -eo pipefail"]
    for k, c in enumerate(cmds):
        out += ["__t0=$(date +%s.%N)", c, f'{{ echo "$__t0 $(date +%s.%N) {k}"; times; }} >> {times}']
    return "\n".join(out) + "\n"


def _seconds(text: str) -> float:
    """``1m2.500s`` -> 62.5."""
    m, s = text.rstrip("s").split("m")
    return 60 * float(m) + float(s)


def timings(text: str) -> list[tuple[int, float, float]]:
    """(command index, wall seconds, CPU seconds of its processes) from an ``instrumented`` record."""
    lines, out, cpu_before = text.splitlines(), [], 0.0
    for i in range(0, len(lines), 3):
        start, stop, k = lines[i].split()
        cpu = sum(_seconds(x) for x in lines[i + 2].split())
        out.append((int(k), float(stop) - float(start), cpu - cpu_before))
        cpu_before = cpu
    return out


@pytest.mark.slow
def test_readme_runs_as_written(tmp_path):
    clone = tmp_path / "statetrack"
    shutil.copytree(ROOT, clone, ignore=IGNORE)
    (clone / ".venv").symlink_to(Path(sys.prefix))
    env = {**os.environ, "PYTHONPATH": str(clone / "src"), "COLUMNS": "100"}
    env.pop("STATETRACK_PLUGINS", None)
    record = []

    def run(script: str, what: str) -> str:
        times = tmp_path / "times.tsv"
        times.unlink(missing_ok=True)
        t0 = time.time()
        p = subprocess.run(["bash", "-c", script], cwd=clone, env=env, capture_output=True, text=True)
        assert p.returncode == 0, f"{what} failed (exit {p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        if times.exists():
            record.extend((what, k, wall, cpu) for k, wall, cpu in timings(times.read_text()))
        else:
            record.append((what, 0, time.time() - t0, float("nan")))
        return p.stdout

    run(instrumented([demo_command()], tmp_path / "times.tsv"), "make demo")
    readme = (clone / "README.md").read_text()
    bash = [b for lang, b in blocks(readme) if lang == "bash" and not b.startswith("make demo")]
    assert len(bash) >= 4
    # one shell for all the blocks, as a person types them into one terminal
    cmds = [c for body in bash for c in commands(body)]
    out = run(instrumented(cmds, tmp_path / "times.tsv"), "bash")
    assert "impossible (T4)" in out and "identical metrics" in out
    assert (clone / "spectrum.png").is_file() and (clone / "runs/reports/index.html").is_file()
    python = [b for lang, b in blocks(readme) if lang == "python"]
    assert len(python) == 1
    (clone / "readme_api.py").write_text(python[0])
    t0 = time.time()
    p = subprocess.run([str(clone / ".venv/bin/python"), "readme_api.py"], cwd=clone, env=env,
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr[-3000:]
    record.append(("python block", 0, time.time() - t0, float("nan")))
    assert "possible P3 S3 has derived length 2" in p.stdout
    keep = os.environ.get("STATETRACK_README_TIMES")
    if keep:
        with open(keep, "w") as f:
            f.write("   wall s    CPU s  command\n")
            for what, k, secs, cpu in record:
                cmd = cmds[k].splitlines()[0] if what == "bash" else what
                f.write(f"{secs:8.1f} {cpu:8.1f}  {cmd}\n")
