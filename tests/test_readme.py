"""The README runs as written: on a fresh copy of the checkout, ``make demo``'s command, then every ``bash``
block of the README from top to bottom in one shell (the ``make`` block aside), then its ``python`` block
(slow: several minutes on 2 cores). Each command's wall time is written to STATETRACK_README_TIMES when set;
the times the README states are those of bench/readme_times.py, which runs the same way (a fast test checks
that each stated time is its measurement)."""

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
from readme_times import (  # noqa: E402  (the bench script holds the README's parsing, shared)
    IGNORE,
    blocks,
    commands,
    demo_command,
    instrumented,
    key,
    load_sentence,
    ratio_sentence,
    readme_commands,
    readme_time,
    stated,
    timings,
)


def _smallest_real_parts(out: str) -> list[float]:
    return [float(x) for x in re.findall(r"layer \d+ \([^)]*\): smallest real part ([-+\d.e]+),", out)]


#: what the comments of the README's commands claim, each with the check its commands' output must pass
#: (the output of every bash block, its whitespace joined): a claim that is not printed fails the README's run
CLAIMS = {
    "# impossible (T4)": lambda out: "impossible (T4)" in out,
    "identical metrics": lambda out: "identical metrics" in out,
    "# no config key differs, no length beyond the intervals": lambda out: (
        re.search(r"config: 0 of \d+ keys differ", out) is not None
        and "beyond the intervals: at none of the 2 lengths scored" in out
    ),
    "# its eigenvalues: none below 0": lambda out: (
        bool(_smallest_real_parts(out)) and min(_smallest_real_parts(out)) >= 0
    ),
    "# the test draw: half accepted, half rejected": lambda out: (
        re.search(
            r"sequences of length 500 \(.*?\): (accepted|rejected) 50\.0%, (accepted|rejected) 50\.0%", out
        )
        is not None
    ),
}
#: the S3 run's claim, read from the README: 'above N% at 16 and 64' (runs show s3 --json checks it)
S3_CLAIM = re.compile(r"--label s3  # above (\d+)% at 16 and 64  \(")


def test_claims_are_the_ones_checked():
    """Each claim the README's run checks is in the README as written, and the S3 run's claim is one it
    can check (it said '100% at 16 and 64' where the run prints 98.4% and 96.9%)."""
    readme = (ROOT / "README.md").read_text()
    for claim in CLAIMS:
        assert claim in readme, claim
    assert S3_CLAIM.search(readme), "the S3 run's comment must read 'above N% at 16 and 64'"
    assert not re.search(r"--label s3 .*# 100%", readme)


def test_stated_times_are_measured():
    """Every statetrack command of the README states its wall time, and that time is the one
    bench/readme_times.py measured for it (bench/readme_times.json), on the machine the README names."""
    data = json.loads((ROOT / "bench" / "readme_times.json").read_text())
    measured = {r["command"]: r["wall_s"] for r in data["commands"]}
    readme = (ROOT / "README.md").read_text()
    checked = 0
    for cmd in readme_commands(readme):
        if not key(cmd).startswith("statetrack"):
            continue
        assert key(cmd) in measured, f"no measurement of {key(cmd)!r}: run python bench/readme_times.py"
        assert stated(cmd) == readme_time(measured[key(cmd)]), (key(cmd), stated(cmd), measured[key(cmd)])
        checked += 1
    assert checked >= 20
    demo = re.search(r"^make demo .*\(([^()]*)\)$", readme, re.M)
    assert demo and demo[1].startswith(readme_time(measured["make demo"])), demo
    # the machine, the date and the load it was measured under, as the script writes them; no placeholder
    said = " ".join(readme.split())
    assert f"{data['machine']}, {data['date']}, {load_sentence(data)}; {ratio_sentence(data)} (both" in said
    assert not re.search(r"\b(MACHINE|DATE|LOAD)\b", readme)


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
        assert p.returncode == 0, (
            f"{what} failed (exit {p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
        )
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
    said = " ".join(out.split())
    for claim, check in CLAIMS.items():  # what the comments say is what the commands printed
        assert check(said), (claim, said[-3000:])
    # the config example learns what the README says: S3 tracked at 16 and 64 (chance 16.7%)
    p = subprocess.run(
        [str(clone / ".venv/bin/statetrack"), "runs", "show", "s3", "--json"],
        cwd=clone,
        env=env,
        capture_output=True,
        text=True,
    )
    s3 = {m["length"]: m["accuracy"] for m in json.loads(p.stdout)["metrics"]}
    above = int(S3_CLAIM.search(readme)[1]) / 100
    assert s3[16] >= above and s3[64] >= above, s3
    assert (clone / "spectrum.png").is_file() and (clone / "runs/reports/index.html").is_file()
    # make demo again, after the README's sweep and report at 2 seeds: it reuses them and says so (exit 0)
    again = run(demo_command(), "make demo again")
    assert "reproducing it at 2 seeds per cell, reusing the runs" in " ".join(again.split())
    python = [b for lang, b in blocks(readme) if lang == "python"]
    assert len(python) == 1
    (clone / "readme_api.py").write_text(python[0])
    t0 = time.time()
    p = subprocess.run(
        [str(clone / ".venv/bin/python"), "readme_api.py"], cwd=clone, env=env, capture_output=True, text=True
    )
    assert p.returncode == 0, p.stderr[-3000:]
    record.append(("python block", 0, time.time() - t0, float("nan")))
    assert "possible P3 S3 has derived length 2" in p.stdout
    assert "[] ['no', 'no']" in p.stdout  # the rerun's comparison, as the block's comment says
    keep = os.environ.get("STATETRACK_README_TIMES")
    if keep:
        with open(keep, "w") as f:
            f.write("   wall s    CPU s  command\n")
            for what, k, secs, cpu in record:
                cmd = cmds[k].splitlines()[0] if what == "bash" else what
                f.write(f"{secs:8.1f} {cpu:8.1f}  {cmd}\n")


def test_first_screen_has_the_commands_and_the_findings():
    """A newcomer's first screen of the README (its first 40 lines, about 450 words): make demo and make
    test in the first 10 lines, then what the toolkit found, then the first statetrack commands to type."""
    lines = (ROOT / "README.md").read_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("make demo"))
    assert first < 10 and lines[first + 1].startswith("make test"), lines[:12]
    found = lines.index("## What it found")
    command = next(i for i, line in enumerate(lines) if "`statetrack " in line)
    assert found < 15 and found < command < 40, (found, command)
    assert len(" ".join(lines[:40]).split()) < 600


def test_the_demo_environment_holds_only_what_the_demo_imports():
    """make demo installs statetrack without extras (torch, numpy, matplotlib, ...: 1.1 GB, as the README
    says), make test and make lint add the test extra (triton, ray, ...); the base dependencies hold
    neither triton nor ray."""
    import tomllib

    make = (ROOT / "Makefile").read_text()
    recipes = dict(re.findall(r"^(\S+):[^\n]*\n((?:\t.*\n)+)", make, re.M))
    base = recipes["$(VENV)/.installed"]
    assert "install --progress-bar on -e .\n" in base and "[test]" not in base
    assert "-e '.[test]'" in recipes["$(VENV)/.installed-test"]
    assert re.search(r"^demo: install$", make, re.M) and re.search(r"^test: install-test$", make, re.M)
    assert re.search(r"^lint: install-test$", make, re.M)
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not any(re.match(r"(triton|ray|fla|tensorboard|pytest)\b", d) for d in deps), deps
    assert "a virtualenv of 1.1 GB (`du -sh .venv`" in " ".join((ROOT / "README.md").read_text().split())
