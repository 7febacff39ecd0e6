"""A grid is counted before it is expanded: above ``--max-runs`` (default ``jobs.MAX_RUNS``) it is refused in
one line before anything is built or written; below it, it is expanded one run at a time, so a sweep of a
million runs starts its first run at once, with the memory of a small one."""

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import Cli
from statetrack.experiments import load_study
from statetrack.runs.jobs import MAX_RUNS, Grid

STUDY = """
name: big
title: big
source: test
task: parity
train: {batch_size: 8, eval_every: 2, val_sequences: 8}
LRS
models:
  - {label: RNN, model: {layers: rnn, d_model: 2, d_state: 4}, train_lengths: [2, 4]}
  - {label: LSTM, model: {layers: lstm, d_model: 2, d_state: 4}, train_lengths: [2, 4]}
scales:
  quick: {seeds: SEEDS, steps: 2, eval_batch: 8, test_lengths: [8]}
"""


def _study(tmp_path, seeds=1_000_000, lrs=None):
    p = tmp_path / f"big-{seeds}-{len(lrs or [])}.yaml"
    p.write_text(STUDY.replace("SEEDS", str(seeds)).replace("LRS", f"lrs: {lrs}" if lrs else ""))
    return str(p)


def _run(*argv, timeout=60):
    """``statetrack ARGV`` in a child process; a command that does not end in ``timeout`` s fails the test."""
    p = subprocess.Popen(
        [sys.executable, "-m", "statetrack.cli", *map(str, argv)],
        env=Cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        pytest.fail(f"statetrack {' '.join(map(str, argv))} still running after {timeout} s")
    return p.returncode, out, err


@pytest.mark.parametrize("command", ["sweep", "reproduce", "report"])
def test_a_grid_of_a_million_runs_is_refused_in_one_line(tmp_path, command):
    db = tmp_path / "r.db"
    t0 = time.time()
    code, out, err = _run(
        command,
        _study(tmp_path),
        "--db",
        db,
        "--out" if command != "sweep" else "--workers",
        tmp_path / "rep" if command != "sweep" else 1,
    )
    assert time.time() - t0 < 30
    assert code == 2 and "Traceback" not in err, err
    line = err.strip().splitlines()[-1]
    assert "2,000,000 runs" in line and f"{MAX_RUNS:,}" in line and "--max-runs" in line, line
    assert not db.exists() and not (tmp_path / "rep").exists()  # nothing written


def test_a_million_seeds_or_learning_rates_on_the_command_line_or_in_the_file(tmp_path):
    code, _, err = _run("sweep", _study(tmp_path, seeds=1), "--seeds", 1_000_000, "--db", tmp_path / "r.db")
    assert code == 2 and "2,000,000 runs" in err, err
    lrs = [round(1e-3 * (1 + i / 10**5), 9) for i in range(6_000)]  # 12,000 runs
    code, _, err = _run("sweep", _study(tmp_path, seeds=1, lrs=lrs), "--db", tmp_path / "r.db")
    assert code == 2 and "12,000 runs" in err and "6,000 learning rate(s)" in err, err
    assert not (tmp_path / "r.db").exists()


def test_the_cap_is_raised_by_the_option_and_counted_without_expanding(tmp_path):
    study = load_study(_study(tmp_path, seeds=10**12))
    t0 = time.time()
    grid = study.grid("quick", max_runs=10**13)
    assert isinstance(grid, Grid) and len(grid) == 2 * 10**12 and time.time() - t0 < 1
    first = next(iter(grid))
    assert (first.label, first.seed) == ("RNN", 0) and [j.label for j in grid.heads] == ["RNN", "LSTM"]
    with pytest.raises(Exception, match="over the limit of 10,000 runs"):
        study.grid("quick")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the peak memory from /proc")
@pytest.mark.slow  # a sweep in a child process until three runs complete, then SIGKILL
def test_a_sweep_of_a_million_runs_starts_at_once_with_little_memory(tmp_path):
    """The issue this guards against: after 120 s no run had started and the process held 4.6-6.3 GB."""
    db = tmp_path / "r.db"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "statetrack.cli",
            "sweep",
            _study(tmp_path),
            "--db",
            str(db),
            "--workers",
            "1",
            "--max-runs",
            "2000000",
        ],
        env=Cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        t0 = time.time()
        done = 0
        while done < 3:
            assert p.poll() is None, p.communicate()
            assert time.time() - t0 < 90, "no three runs complete after 90 s"
            time.sleep(0.2)
            if db.exists():
                try:
                    con = sqlite3.connect(db, timeout=5)
                    done = con.execute("SELECT COUNT(*) FROM runs WHERE status='complete'").fetchone()[0]
                    con.close()
                except sqlite3.OperationalError:
                    pass
        with open(f"/proc/{p.pid}/status") as f:
            peak = next(int(x.split()[1]) for x in f if x.startswith("VmHWM:")) / 1024  # MiB
        assert peak < 1000, f"peak resident memory {peak:.0f} MiB for the first runs of a million-run grid"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
