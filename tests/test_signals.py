"""Ctrl-C and SIGTERM stop the whole job: the runs they stop are recorded ``interrupted``, no run starts
after them, and the command exits 130 (SIGINT) or 143 (SIGTERM) within seconds, without a traceback."""

import os
import signal
import sqlite3
import time

import pytest

from conftest import live_processes
from statetrack.reproduce import sweep
from statetrack.runs.store import Store

# never stops early (patience): a run that ended before the signal arrived would exit 0
LONG = [
    "--layers",
    "rnn",
    "--d-model",
    "2",
    "--d-state",
    "4",
    "--steps",
    "100000",
    "--eval-every",
    "20",
    "--patience",
    "100000",
    "--test-lengths",
    "8",
    "--eval-batch",
    "8",
]


def _rows(db):
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT id, status, error, created FROM runs ORDER BY id").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_signal_during_train_records_the_run_interrupted(tmp_path, cli, sig, code):
    """SIGHUP (the terminal closed) used to end train with 129 and leave its run `running` for good."""
    db = str(tmp_path / "r.db")
    p = cli.start("train", *LONG, "--db", db)
    cli.wait_until(db, "status='running'", 1, [p])
    time.sleep(0.5)  # inside the training loop
    t = time.time()
    p.send_signal(sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == code and time.time() - t < 10
    assert err.splitlines()[-1] == f"interrupted by {signal.Signals(sig).name}" and "Traceback" not in err, (
        err
    )
    [(_, status, error, _)] = _rows(db)
    assert (status, error) == ("interrupted", f"interrupted by {signal.Signals(sig).name}")


@pytest.mark.slow
@pytest.mark.parametrize(
    "sig, to_group, workers",
    [
        (signal.SIGINT, True, 2),  # Ctrl-C in a terminal: the whole process group, workers included
        (signal.SIGTERM, False, 2),  # kill PID: the parent only, which tells its workers
        (signal.SIGTERM, False, 1),  # runs in the sweep's own process
        (signal.SIGHUP, True, 2),  # the terminal closed: it used to leave the sweep's claims behind
    ],
)
def test_a_signal_stops_the_whole_sweep(tmp_path, cli, grid8, sig, to_group, workers):
    db = str(tmp_path / "r.db")
    p = cli.start("sweep", grid8(100000), "--db", db, "--workers", workers, start_new_session=True)
    cli.wait_until(db, "status='running'", workers, [p])
    time.sleep(0.5)
    t = time.time()
    (os.killpg if to_group else os.kill)(p.pid, sig)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig and time.time() - t < 10, err
    assert "Traceback" not in err and err.endswith(f"interrupted by {signal.Signals(sig).name}\n"), err
    rows = _rows(db)
    assert not [r for r in rows if r[3] > t], "a run started after the signal"
    assert [r[1] for r in rows] == ["interrupted"] * workers
    assert all(r[2] == f"interrupted by {signal.Signals(sig).name}" for r in rows)
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0  # released for the next sweep


@pytest.mark.slow
def test_sigterm_stops_reproduce_before_its_report(tmp_path, cli, grid8):
    db, out_dir = str(tmp_path / "r.db"), tmp_path / "reports"
    p = cli.start("reproduce", grid8(100000), "--db", db, "--workers", 2, "--out", out_dir)
    cli.wait_until(db, "status='running'", 2, [p])
    t = time.time()
    p.send_signal(signal.SIGTERM)
    p.communicate(timeout=60)
    assert p.returncode == 143 and time.time() - t < 10
    assert [r[1] for r in _rows(db)] == ["interrupted", "interrupted"] and not out_dir.exists()


def test_an_interrupt_in_the_api_starts_no_further_run(db, grid8):
    seen = []

    def on_done(_job, res):
        seen.append(res.run_id)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(grid8(5), db=db, workers=1, on_done=on_done)
    store = Store(db)
    assert [r.status for r in store.runs()] == ["complete"] and seen == [1]
    with store.transaction() as c:
        assert c.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
    _, results = sweep(grid8(5), db=db, workers=1)  # the next sweep does the rest
    assert sum(r.reused for _, r in results) == 1 and len(store.runs(status="complete")) == 8


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc to find the workers")
def test_workers_die_with_a_sweep_killed_with_sigkill(tmp_path, cli, grid8):
    """kill -9 of the sweep's process alone: its worker processes (and the resource tracker) end within
    seconds, each recording its run interrupted; the next sweep clears the dead sweep's claims and
    completes every run exactly once."""
    db, grid = str(tmp_path / "r.db"), grid8(600)
    p = cli.start("sweep", grid, "--db", db, "--workers", 2, start_new_session=True)
    cli.wait_until(db, "status='running'", 2, [p])
    assert len(live_processes(pgid=p.pid)) >= 3  # the sweep, two workers (and the resource tracker)
    os.kill(p.pid, signal.SIGKILL)  # the parent only: nobody tells the workers
    p.wait()
    t0 = time.time()
    while live_processes(pgid=p.pid) and time.time() - t0 < 20:
        time.sleep(0.2)
    assert live_processes(pgid=p.pid) == [], "processes of the killed sweep still alive after 20 s"
    rows = _rows(db)
    assert [r[1] for r in rows].count("running") == 0, rows  # the workers recorded their runs
    killed = [r for r in rows if r[1] == "interrupted"]
    assert killed and all(r[2].startswith("interrupted: the sweep's process ended") for r in killed), rows

    again = cli.start("sweep", grid, "--db", db, "--workers", 2)
    out, err = again.communicate(timeout=600)
    assert again.returncode == 0, err
    con = sqlite3.connect(db)
    try:
        assert (
            con.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
        )  # no claim of the dead sweep left
        per_key = con.execute(
            "SELECT key, COUNT(*) FROM runs WHERE status='complete' GROUP BY key"
        ).fetchall()
        assert len(per_key) == 8 and all(n == 1 for _, n in per_key)
        assert con.execute("SELECT COUNT(*) FROM runs WHERE status='running'").fetchone()[0] == 0
    finally:
        con.close()


def test_a_signal_inside_deferred_arrives_when_the_block_ends():
    """signals.deferred() holds a signal back (the runner imports torch's lazy modules inside it: a
    KeyboardInterrupt raised in an import that C++ code runs would abort the process)."""
    from statetrack.runs import signals

    done = []
    with signals.handled(), pytest.raises(KeyboardInterrupt) as caught, signals.deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        done.append("the block ran to its end")
    assert done == ["the block ran to its end"] and caught.value.signum == signal.SIGTERM
