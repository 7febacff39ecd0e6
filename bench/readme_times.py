"""The wall time of every README example, run as the README runs them.

    python bench/readme_times.py                          # writes bench/readme_times.json and prints a table
    python bench/readme_times.py --out /tmp/times.json    # elsewhere (the README's times stay as they are)
    python bench/readme_times.py --readme                 # then: the README's stated times from the JSON

On a fresh copy of this checkout (no runs/, the virtualenv linked, not rebuilt) it runs ``make demo``'s
command, then every ``bash`` block of the README from top to bottom in one shell, then its ``python``
block, as tests/test_readme.py does, and records for each command its wall time and the CPU seconds of its
processes, with the machine (CPU model, cores, Python, torch), the date, the load average before and
after, the 1-minute load average sampled every 30 s while it ran, and its niceness. The README's "(N s)"
comments are these wall times, written by ``readme_time`` (tests/test_readme.py checks that each stated
time is this file's measurement of that command), and its sentence on the machine says how loaded it was.

Times depend on the load: on idle cores the load average printed beside them is near 0; on a shared
machine it says how far from idle they are (the CPU seconds are what idle cores would show, for commands
that run one process).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "readme_times.json"
_IGNORED = shutil.ignore_patterns(
    ".venv", ".git", "__pycache__", "*.egg-info", ".pytest_cache", ".mypy_cache", ".ruff_cache"
)


def IGNORE(folder: str, names: list[str]) -> set[str]:
    """What a copy of the checkout leaves out: caches, the virtualenv, and the results folder runs/ at the
    top (not the package's src/statetrack/runs/)."""
    out = set(_IGNORED(folder, names))
    if Path(folder).resolve() == ROOT and "runs" in names:
        out.add("runs")
    return out


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


def _line(cmd: str) -> str:
    """A command on one line: continued lines joined, a here-document's body left out."""
    lines = cmd.splitlines()
    if "<<" in lines[0]:
        return lines[0]
    return " ".join(l.rstrip("\\").strip() for l in lines)


def key(cmd: str) -> str:
    """A command as the measurements name it: on one line, without its comment."""
    return re.split(r"\s+#\s", _line(cmd), maxsplit=1)[0].strip()


def stated(cmd: str) -> str | None:
    """The time a README command's comment states: its last parenthesis, '(23 s)' -> '23 s' (None: no
    comment, or none that ends in a parenthesis)."""
    parts = re.split(r"\s+#\s", _line(cmd), maxsplit=1)
    m = re.search(r"\(([^()]*)\)\s*$", parts[1]) if len(parts) == 2 else None
    return m[1] if m else None


def readme_time(seconds: float) -> str:
    """A wall time as the README states it: '<1 s', '23 s' (under 2 minutes), '5 min'."""
    if seconds < 1:
        return "<1 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min"


def demo_command(root: Path = ROOT) -> str:
    """The command of the Makefile's demo recipe, as make would run it."""
    text = (root / "Makefile").read_text()
    recipe = re.search(r"^demo:.*\n((?:\t.*\n)+)", text, re.M)[1]
    return recipe.strip().replace("$(VENV)", ".venv")


def readme_commands(text: str) -> list[str]:
    """Every command of the README's bash blocks (the make block aside), in order."""
    bash = [b for lang, b in blocks(text) if lang == "bash" and not b.startswith("make demo")]
    return [c for body in bash for c in commands(body)]


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


def fresh_copy(root: Path, where: Path, venv: Path) -> Path:
    """A copy of the checkout without its runs, its virtualenv linked: the README's starting point."""
    clone = where / "statetrack"
    shutil.copytree(root, clone, ignore=IGNORE)
    (clone / ".venv").symlink_to(venv)
    return clone


def run_readme(clone: Path, env: dict, log=print) -> list[dict]:
    """Run make demo's command, the README's bash blocks and its Python block in ``clone``; one record per
    command: what (``make demo``, the command, ``python block``), wall and CPU seconds."""
    record: list[dict] = []
    readme = (clone / "README.md").read_text()
    times = clone.parent / "times.tsv"

    def shell(cmds: list[str], names: list[str]) -> str:
        times.unlink(missing_ok=True)
        p = subprocess.run(
            ["bash", "-c", instrumented(cmds, times)], cwd=clone, env=env, capture_output=True, text=True
        )
        if p.returncode != 0:
            raise RuntimeError(
                f"a README command failed (exit {p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
            )
        for k, wall, cpu in timings(times.read_text()):
            record.append({"command": names[k], "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)})
            log(f"{wall:8.1f} {cpu:8.1f}  {names[k]}")
        return p.stdout

    shell([demo_command(clone)], ["make demo"])
    cmds = readme_commands(readme)
    out = shell(cmds, [key(c) for c in cmds])
    python = [b for lang, b in blocks(readme) if lang == "python"]
    (clone / "readme_api.py").write_text(python[0])
    t0, c0 = time.time(), os.times()
    p = subprocess.run(
        [str(clone / ".venv/bin/python"), "readme_api.py"], cwd=clone, env=env, capture_output=True, text=True
    )
    if p.returncode != 0:
        raise RuntimeError(f"the README's Python block failed:\n{p.stderr[-3000:]}")
    c1 = os.times()
    wall = time.time() - t0
    cpu = (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)
    record.append({"command": "python block", "wall_s": round(wall, 2), "cpu_s": round(cpu, 2)})
    log(f"{wall:8.1f} {cpu:8.1f}  python block")
    if "impossible (T4)" not in out or "identical metrics" not in out:
        raise RuntimeError("the README's commands ran, but not as the README says (oracle, rerun)")
    return record


def update_readme(text: str, data: dict) -> str:
    """The README with each statetrack command's time (the last parenthesis of its comment), make demo's,
    and the sentence naming the machine, date and load, set from ``data`` (this script's JSON)."""
    measured = {r["command"]: r["wall_s"] for r in data["commands"]}
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("make demo ") and "make demo" in measured:
            lines[i] = re.sub(r"\(([^()]*)\)$", f"({readme_time(measured['make demo'])} once set up)", line)
    text = "\n".join(lines)
    for cmd in readme_commands(text):
        k = key(cmd)
        if not k.startswith("statetrack") or k not in measured:
            continue
        last = cmd.splitlines()[-1] if "<<" not in cmd else cmd.splitlines()[0]
        t = readme_time(measured[k])
        if stated(cmd) is not None:
            new = re.sub(r"\(([^()]*)\)(\s*)$", f"({t})\\2", last)
        else:
            new = f"{last}  # ({t})" if "  # " not in last else f"{last}  ({t})"
        text = text.replace(last, new, 1)
    return re.sub(
        r"(writes bench/readme_times\.json\) on)\s.*?(\(both are in bench/readme_times\.json\))",
        lambda m: (
            f"{m[1]} {data['machine']}, {data['date']}, {load_sentence(data)}; {ratio_sentence(data)} {m[2]}"
        ),
        text,
        count=1,
        flags=re.S,
    )


def ratio_sentence(data: dict) -> str:
    """How the wall times compare with the CPU seconds of the commands' processes (those that used at
    least a second): 'the cores were otherwise idle, so ...' or 'the machine was shared with other jobs
    throughout, so ...', with the range and median of wall / CPU."""
    r = sorted(c["wall_s"] / c["cpu_s"] for c in data["commands"] if c.get("cpu_s", 0) >= 1)
    if not r:
        return "no command used a CPU second"
    shared = statistics.median(r) > 1.5
    how = "the machine was shared with other jobs throughout" if shared else "the cores were otherwise idle"
    return (
        f"{how}, so each wall time here is {r[0]:.1f} to {r[-1]:.1f} times (median "
        f"{statistics.median(r):.1f}) the CPU seconds its processes used"
    )


def load_sentence(data: dict) -> str:
    """How loaded the machine was: '1-minute load average 2.4 before, 9.8-12.6 (median 11.2) while it ran, at
    nice 10' (the samples and the niceness where the JSON has them)."""
    s = f"1-minute load average {data['load_average_before'][0]:.1f} before"
    during = data.get("load_1min_during")
    if during:
        s += f", {during['min']:.1f}-{during['max']:.1f} (median {during['median']:.1f}) while it ran"
    if data.get("nice"):
        s += f", at nice {data['nice']}"
    return s


def machine() -> str:
    import torch

    sys.path.insert(0, str(ROOT / "src"))
    from statetrack.training.device import cpu_model

    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores ({cpu_model()}), Python "
        f"{platform.python_version()}, torch {torch.__version__}"
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=str(OUT), help="the JSON file written (default: bench/readme_times.json)")
    p.add_argument("--venv", default=str(Path(sys.prefix)), help="the virtualenv the copy links")
    p.add_argument(
        "--keep",
        default=None,
        metavar="DIR",
        help="copy the copy's runs/reports (the pages the README's commands wrote) into DIR",
    )
    p.add_argument(
        "--readme", action="store_true", help="only set the README's stated times from --out (no measuring)"
    )
    a = p.parse_args(argv)
    if a.readme:
        readme = ROOT / "README.md"
        readme.write_text(update_readme(readme.read_text(), json.loads(Path(a.out).read_text())))
        print(f"set the times of {readme} from {a.out}")
        return 0
    load_before = os.getloadavg()
    samples: list[float] = []
    stop = threading.Event()

    def sample() -> None:  # the 1-minute load average every 30 s while the README runs
        while not stop.wait(30):
            samples.append(os.getloadavg()[0])

    threading.Thread(target=sample, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="readme-times-") as tmp:
        clone = fresh_copy(ROOT, Path(tmp), Path(a.venv))
        env = {**os.environ, "PYTHONPATH": str(clone / "src"), "COLUMNS": "100"}
        env.pop("STATETRACK_PLUGINS", None)
        print(f"load average before: {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}")
        print("   wall s    CPU s  command")
        t0 = time.time()
        record = run_readme(clone, env)
        if a.keep:
            shutil.copytree(clone / "runs" / "reports", a.keep, dirs_exist_ok=True)
    stop.set()
    load_after = os.getloadavg()
    during = (
        {
            "min": round(min(samples), 2),
            "median": round(statistics.median(samples), 2),
            "max": round(max(samples), 2),
            "samples": len(samples),
        }
        if samples
        else None
    )
    result = {
        "nice": os.nice(0),
        "load_1min_during": during,
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in load_after],
        "total_wall_s": round(time.time() - t0, 1),
        "commands": record,
    }
    Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"load average after: {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}; wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
