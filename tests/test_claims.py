"""Runs claimed exactly once: any number of sweeps of one study on one database complete every run once
and split the work; a claim whose owner died is taken over and its running row marked interrupted."""

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from statetrack.errors import UserError
from statetrack.runs import claims as claims_mod
from statetrack.runs.claims import Claims, process_gone, process_id
from statetrack.runs.store import Store

CFG = {"model": {"layers": "rnn"}, "task": "parity", "seed": 0}


def test_a_key_is_claimed_by_exactly_one_of_many_racing_owners(db):
    store = Store(db)
    outcomes, barrier = [], threading.Barrier(8)

    def race(i):
        c = Claims(Store(db), me=f"owner-{i}")
        barrier.wait()
        outcomes.append((i, c.claim("k").state))

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(s for _, s in outcomes) == ["claimed"] + ["taken"] * 7
    with store.transaction() as c:
        assert c.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 1


def test_a_live_claim_is_left_alone_a_stale_one_is_taken_over(db):
    store = Store(db)
    a, b = Claims(store, me="host-a:1:aaaa", timeout=30), Claims(store, me="host-b:2:bbbb", timeout=30)
    assert a.claim("k").state == "claimed"
    rid = store.start_run(CFG, key="k", owner=a.me)
    got = b.claim("k")
    assert (got.state, got.by) == ("taken", a.me)
    with store.transaction() as c:  # a's machine went silent 31 s ago (no heartbeat, not a process of ours)
        c.execute("UPDATE claims SET heartbeat=heartbeat-31, process=NULL WHERE owner=?", (a.me,))
    assert b.claim("k").state == "claimed"
    row = store.run(rid)
    assert row.status == "interrupted" and f"its sweep {a.me} stopped" in row.error
    # a comes back (a suspended laptop): its run is not completed a second time
    assert store.finish_run(rid, [], None, 1.0, {}) is False and store.run(rid).status == "interrupted"


def test_a_claim_of_a_process_that_ended_is_taken_over_at_once(db):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        proc = process_id(child.pid)
    finally:
        child.kill()
        child.wait()
    assert proc is not None and process_gone(proc) and not process_gone(process_id())
    assert not process_gone("another-boot/pid:[1]/123/456")  # another machine: only its heartbeat tells
    store = Store(db)
    with store.transaction() as c:
        c.execute("INSERT INTO claims VALUES ('k', 'gone:1:x', ?, ?, ?)", (proc, time.time(), time.time()))
    assert Claims(store, timeout=3600).claim("k").state == "claimed"


def test_the_outcome_of_a_run_another_sweep_finished(db):
    store = Store(db)
    t0 = time.time()
    a, b = Claims(store, me="a"), Claims(store, me="b")
    a.claim("failing")
    rid = store.start_run(CFG, key="failing", owner="a")
    store.fail_run(rid, "diverged")
    a.release("failing")
    assert (b.claim("failing", failed_since=t0).state, b.claim("x", failed_since=t0).state) == (
        "failed",
        "claimed",
    )
    assert b.claim("failing").state == "claimed"  # a failure before this sweep started is redone
    done = store.start_run(CFG, key="done", owner="a")
    store.finish_run(done, [], None, 1.0, {})
    assert b.claim("done").state == "complete"
    assert b.claim("done", complete_since=time.time() + 1).state == "claimed"  # --fresh


def test_heartbeat_keeps_claims_live(db):
    store = Store(db)
    a = Claims(store, me="a", timeout=0.6)
    a.claim("k")
    with claims_mod.Heartbeat(a):
        time.sleep(1.0)
        assert Claims(store, me="b", timeout=0.6).claim("k").state == "taken"
    time.sleep(0.7)
    assert Claims(store, me="b", timeout=0.6).claim("k").state == "claimed"


# -- several sweeps at once -----------------------------------------------------------------------
def _once_each(db):
    """Every key of the grid complete exactly once, and which owners ran them."""
    rows = Store(db).runs(status="complete")
    keys = [r.key for r in rows]
    assert len(keys) == 8 and len(set(keys)) == 8, keys
    assert not Store(db).runs(status="running")
    return {r.owner for r in rows}


@pytest.mark.slow
@pytest.mark.parametrize("n, workers", [(2, 2), (3, 1)])
def test_sweeps_started_together_split_the_work(tmp_path, cli, grid8, n, workers):
    db, path = str(tmp_path / "r.db"), grid8(300)
    procs = [cli.start("sweep", path, "--db", db, "--workers", workers) for _ in range(n)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0] * n, [e for _, e in outs]
    owners = _once_each(db)
    assert len(owners) == n  # each sweep ran some of the runs
    ran = [int(re.search(r"(\d+) run now", o).group(1)) for o, _ in outs]
    assert sum(ran) == 8 and all(ran), ran  # and each reports the others' runs as reused
    assert all("8 runs" in o for o, _ in outs)


@pytest.mark.slow
def test_the_others_finish_the_runs_of_a_sweep_killed_with_sigkill(tmp_path, cli, grid8):
    db, path = str(tmp_path / "r.db"), grid8(600)
    procs = [cli.start("sweep", path, "--db", db, "--workers", 1, start_new_session=True) for _ in range(3)]
    cli.wait_until(db, "status='running'", 3, procs)
    victim = procs[0]
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait()
    outs = [p.communicate(timeout=600) for p in procs[1:]]
    assert [p.returncode for p in procs[1:]] == [0, 0], [e for _, e in outs]
    _once_each(db)
    dead = [r for r in Store(db).runs() if r.status == "interrupted"]
    assert len(dead) == 1 and "claim taken over" in dead[0].error


@pytest.mark.slow
def test_a_ray_sweep_and_a_local_sweep_share_the_work(tmp_path, cli, grid8):
    pytest.importorskip("ray")
    from statetrack.reproduce import sweep
    from statetrack.runs.executors import start_ray

    db, path = str(tmp_path / "r.db"), grid8(300)
    start_ray(None, 2)  # up before the local sweep starts: Ray's seconds of start-up are not a head start
    local = cli.start("sweep", path, "--db", db, "--workers", 1)
    _, results = sweep(path, db=db, workers=2, executor="ray")
    out, err = local.communicate(timeout=600)
    assert local.returncode == 0, err
    assert len(_once_each(db)) == 2
    assert all(r.status == "complete" for _, r in results)


def test_heartbeat_failures_are_logged_and_counted(db, caplog):
    """A locked or full database is a warning and the beats go on; a bug in beat() is logged with its
    traceback, counted, and raised when the block ends: a heartbeat never stops unseen."""
    store = Store(db)
    a = Claims(store, me="a", timeout=0.6)
    errors = [UserError("results database 'x': database is locked"), ZeroDivisionError("a bug")]

    def beat():
        if errors:
            raise errors.pop(0)

    a.beat = beat
    hb = claims_mod.Heartbeat(a)
    with caplog.at_level("WARNING", logger="statetrack.runs.claims"):
        hb.beat()
        assert hb.failures == 1 and hb.error is None
        hb.beat()
        hb.beat()  # a good beat again
    assert hb.failures == 2 and isinstance(hb.error, ZeroDivisionError)
    assert "database is locked" in caplog.records[0].getMessage() and caplog.records[0].levelname == "WARNING"
    assert caplog.records[1].levelname == "ERROR" and caplog.records[1].exc_info[0] is ZeroDivisionError
    with pytest.raises(RuntimeError, match="heartbeat failed 2 times.*a bug"), hb:
        pass


def test_a_heartbeat_in_the_future_is_taken_over_after_the_timeout(db):
    """A crashed machine whose clock ran an hour ahead left a claim whose heartbeat lies in the future: it
    used to look live forever and block every sweep. A heartbeat that does not move for the timeout, as
    this process sees it, is dead whatever its time stamp says."""
    store = Store(db)
    rid = store.start_run(CFG, key="k", owner="fast:1:clock")
    with store.transaction() as c:
        c.execute(
            "INSERT INTO claims VALUES ('k', 'fast:1:clock', NULL, ?, ?)", (time.time(), time.time() + 3600)
        )
    b = Claims(store, me="b", timeout=0.5)
    assert b.claim("k").state == "taken" and b.held_by_others() == {"k"}
    [w] = b.waits(["k"])
    assert w["run_id"] == rid and w["age"] < -3500 and w["owner"] == "fast:1:clock"
    time.sleep(0.7)
    assert b.held_by_others() == set()
    assert b.claim("k").state == "claimed" and store.run(rid).status == "interrupted"


def test_a_sweep_says_what_it_waits_for_and_ends(tmp_path, rnn_study, monkeypatch):
    """The sweep that waits on a claim with a future heartbeat names the run it waits for (its id, its
    sweep, how far in the future) every few seconds, then takes the claim over and finishes."""
    from statetrack.experiments import load_study
    from statetrack.reproduce import sweep
    from statetrack.runs import sweep as sweep_mod

    monkeypatch.setenv("STATETRACK_CLAIM_TIMEOUT", "2")
    monkeypatch.setattr(sweep_mod, "WAIT_EVERY", 0.5)
    db, path = str(tmp_path / "r.db"), rnn_study()
    [job] = list(load_study(path).grid("quick"))
    store = Store(db)
    rid = store.start_run(CFG, key=job.key, owner="fast:1:clock")
    with store.transaction() as c:
        c.execute(
            "INSERT INTO claims VALUES (?, 'fast:1:clock', NULL, ?, ?)",
            (job.key, time.time(), time.time() + 3600),
        )
    said, t = [], time.time()
    _, results = sweep(path, db=db, workers=1, on_wait=said.append, progress=False)
    assert time.time() - t < 60 and [r.status for _, r in results] == ["complete"]
    assert said and all(w["run_id"] == rid for waits in said for w in waits)
    text = sweep_mod.describe_waits(said[0])
    assert text.startswith(
        f"waiting for 1 run(s) that other sweeps hold: run {rid} (sweep fast:1:clock, heartbeat "
    )
    assert "s in the future (its clock is ahead); taken over if it stays unchanged for 2 s" in text
    assert store.run(rid).status == "interrupted"
    with store.transaction() as c:
        assert c.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
