"""Run a grid of runs, in this process, in local worker processes, or on Ray.

Resuming: every run has a key (``runner.run_key``: its full train + eval config, study and label);
a run whose key is already ``complete`` in the database is reused, never redone. So a sweep stopped by
Ctrl-C, a crash or SIGKILL is resumed by running it again: finished runs are kept, the rest run.

Several sweeps at once: before it starts a run, a sweep claims its key (``statetrack.claims``: one
SQLite transaction, an owner and a heartbeat), so any number of sweeps of one study on one database
(two terminals, two machines on a shared file, local or Ray) complete every run exactly once and split
the work. A key claimed by another live sweep is left to it; once a sweep has nothing left to claim it
polls those keys (every ``POLL`` seconds) until they are complete, so its results and its report see
every run of the grid (a run the other sweep completed counts as reused, one it failed as failed). A
claim whose owner died (kill -9, a lost machine) is taken over after the claim timeout (at once on the
same machine), and the dead owner's ``running`` row is marked ``interrupted``. Reports only ever read
``complete`` rows, one per key, so an unfinished record is never counted.

Ctrl-C and SIGTERM (``statetrack.signals``) stop the whole sweep: no run starts after the signal, the
running ones are marked ``interrupted`` (worker processes are told and get ``executors.GRACE`` seconds to record
it, then are killed; Ray tasks are cancelled), the claims are released, and the interrupt is passed on
(the command exits 130 or 143).

The executors (``local``: worker processes on this machine; ``ray``: tasks on a Ray instance or
cluster) live in ``statetrack.executors``. Each run seeds itself from its config and uses one thread,
so the numbers do not depend on the executor or the number of workers.
"""
from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from statetrack import signals
from statetrack.claims import Claims, Heartbeat
from statetrack.errors import UserError
from statetrack.executors import InProcess, Pool, RayExecutor, ensure_traces, import_ray, result_of
from statetrack.jobs import Job
from statetrack.runner import RunResult, check_run, complete_result
from statetrack.store import Store

__all__ = ["Job", "POLL", "run_jobs"]

#: seconds between looks at runs that other sweeps have claimed
POLL = 1.0


# -- the schedule: claim, run, wait for the others ---------------------------------------------------
def _schedule(jobs: list[Job], store: Store, executor, reuse: bool, on_done, results: dict,
              claims: Claims) -> None:
    t0 = time.time()
    todo = list(range(len(jobs)))
    running: dict = {}  # handle -> job index

    def done(i: int, res: RunResult) -> None:
        results[i] = (jobs[i], res)
        if on_done:
            on_done(jobs[i], res)

    if reuse:  # complete runs first, without taking the write lock for each
        for i in list(todo):
            prev = complete_result(store, jobs[i].key)
            if prev is not None:
                ensure_traces(str(store.path), jobs[i], prev)
                todo.remove(i)
                done(i, prev)
    while todo or running:
        busy = claims.held_by_others()  # read first: no write lock for a key another sweep is running
        for i in list(todo):
            if len(running) >= executor.slots:
                break
            if jobs[i].key in busy:
                continue
            got = claims.claim(jobs[i].key, complete_since=0.0 if reuse else t0, failed_since=t0)
            if got.state == "taken":
                continue
            todo.remove(i)
            if got.state == "claimed":
                running[executor.submit(jobs[i], i)] = i
            else:  # complete or failed by another sweep meanwhile
                res = result_of(store, got.run_id)
                ensure_traces(str(store.path), jobs[i], res)
                done(i, res)
        for handle, res in executor.wait(running, POLL):
            i = running.pop(handle)
            claims.release(jobs[i].key)
            done(i, res)


# -- entry point -------------------------------------------------------------------------------------
def run_jobs(jobs: list[Job], db: str | Path, workers: int = 1, reuse: bool = True,
             on_done: Callable[[Job, RunResult], None] | None = None, executor: str = "local",
             address: str | None = None,
             on_step: Callable[[Job, int, dict], None] | None = None) -> list[tuple[Job, RunResult]]:
    """Run every job; returns (job, result) in the order of ``jobs``.

    ``on_done(job, result)`` after each run; ``on_step(job, step, info)`` after each validation of a
    running run (local executor; from worker processes through a queue). Worker processes import the
    plugin modules this process has loaded (statetrack.plugins)."""
    if executor not in ("local", "ray"):
        raise UserError(f"unknown executor {executor!r}; allowed: local, ray")
    if address is not None and executor != "ray":
        raise UserError("--address is for --executor ray")
    if workers < 1:
        raise UserError(f"--workers must be at least 1, got {workers}")
    for job in jobs:  # every input error surfaces before the first run starts
        check_run(job.train, job.eval)
        for p in job.probes:
            from statetrack.tasks import get_task
            get_task(p)
    if executor == "ray":
        import_ray()
    db = str(db)
    # create (or check) the database here, once: workers that open a new file at the same moment would
    # otherwise race on its creation
    store = Store(db)
    claims = Claims(store)
    results: dict[int, tuple[Job, RunResult]] = {}
    if executor == "ray":
        ex = RayExecutor(db, claims.me, workers, address, jobs)
    elif workers <= 1:
        ex = InProcess(db, claims.me, on_step)
    else:
        ex = Pool(db, claims.me, workers, jobs, on_step)
    try:
        with Heartbeat(claims):
            _schedule(jobs, store, ex, reuse, on_done, results, claims)
    except BaseException as e:
        ex.stop(e)
        why = signals.describe(e) if isinstance(e, KeyboardInterrupt) else f"the sweep stopped: {e}"
        with contextlib.suppress(UserError):  # the database takes no write (a full disk): the claims expire
            claims.release_all(interrupted=why)
        raise
    finally:
        ex.close()
    return [results[i] for i in range(len(jobs))]
