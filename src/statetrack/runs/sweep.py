"""Run a grid of runs, in this process, in local worker processes, or on Ray.

Resuming: every run has a key (``runner.run_key``: its full train + eval config, study and label);
a run whose key is already ``complete`` in the database is reused, never redone. So a sweep stopped by
Ctrl-C, a crash or SIGKILL is resumed by running it again: finished runs are kept, the rest run.

Several sweeps at once: before it starts a run, a sweep claims its key (``statetrack.runs.claims``: one
SQLite transaction, an owner and a heartbeat), so any number of sweeps of one study on one database
(two terminals, two machines on a shared file, local or Ray) complete every run exactly once and split
the work. A key claimed by another live sweep is left to it; once a sweep has nothing left to claim it
polls those keys (every ``POLL`` seconds) until they are complete, so its results and its report see
every run of the grid (a run the other sweep completed counts as reused, one it failed as failed). A
claim whose owner died (kill -9, a lost machine) is taken over after the claim timeout (at once on the
same machine), and the dead owner's ``running`` row is marked ``interrupted``. Reports only ever read
``complete`` rows, one per key, so an unfinished record is never counted.

Ctrl-C, SIGTERM and SIGHUP (``statetrack.runs.signals``) stop the whole sweep: no run starts after the
signal, the running ones are marked ``interrupted`` (worker processes are told and get ``executors.GRACE``
seconds to record it, then are killed; Ray tasks are cancelled), the claims are released, and the interrupt
is passed on (the command exits 130, 143 or 129).

The executors (``local``: worker processes on this machine; ``ray``: tasks on a Ray instance or
cluster) live in ``statetrack.runs.executors``. Each run seeds itself from its config and uses one thread,
so the numbers do not depend on the executor or the number of workers.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from statetrack.errors import UserError
from statetrack.progress import describe_waits, warn
from statetrack.runs import signals
from statetrack.runs.claims import Claims, ClaimState, Heartbeat
from statetrack.runs.executors import (
    Executor,
    InProcess,
    OnStep,
    Pool,
    RayExecutor,
    check_ray_address,
    ensure_traces,
    import_ray,
    result_of,
    start_ray,
    worker_limit,
)
from statetrack.runs.jobs import Grid, Job
from statetrack.runs.runner import RunResult, check_run, complete_result
from statetrack.runs.store import Damaged, Store, warn_damaged
from statetrack.tasks import get_task

__all__ = ["Job", "POLL", "run_jobs"]

#: seconds between looks at runs that other sweeps have claimed
POLL = 1.0
#: seconds between two lines saying which runs a sweep with nothing of its own to run waits for
WAIT_EVERY = 5.0


# -- the schedule: claim, run, wait for the others ---------------------------------------------------
class _Schedule:
    """The state of one sweep's schedule, which :meth:`run` goes through: the grid not yet reached, the runs
    another live sweep holds (looked at again each round), the runs started here, and the damaged rows."""

    def __init__(
        self,
        jobs: Iterable[Job],
        store: Store,
        executor: Executor,
        reuse: bool,
        on_done: Callable[[Job, RunResult], None] | None,
        results: dict[int, tuple[Job, RunResult]],
        claims: Claims,
    ) -> None:
        self.store, self.executor, self.reuse, self.on_done = store, executor, reuse, on_done
        self.results, self.claims = results, claims
        self.t0 = time.time()
        self.pending = enumerate(jobs)
        self.more = True
        self.waiting: dict[int, Job] = {}  # claimed by another live sweep: looked at again each round
        self.running: dict[Any, tuple[int, Job]] = {}  # handle -> (index, job)
        self.damaged: set[int] = set()  # runs whose rows cannot be read: as if they were not there

    def done(self, i: int, job: Job, res: RunResult) -> None:
        self.results[i] = (job, res)
        if self.on_done:
            self.on_done(job, res)

    def start(self, i: int, job: Job) -> None:
        """Claim the run and start it; or wait, where another sweep holds it; or take its result, where
        another sweep completed or failed it meanwhile."""
        while True:
            got = self.claims.claim(
                job.key,
                complete_since=0.0 if self.reuse else self.t0,
                failed_since=self.t0,
                ignore=tuple(sorted(self.damaged)),
            )
            if got.state == ClaimState.TAKEN:
                self.waiting[i] = job
            elif got.state == ClaimState.CLAIMED:
                self.running[self.executor.submit(job, i)] = (i, job)
            else:  # complete or failed by another sweep meanwhile
                assert got.run_id is not None  # a complete or failed claim names its run
                try:
                    res = result_of(self.store, got.run_id)
                except Damaged as e:
                    warn_damaged(self.store.path, e)
                    self.damaged.add(got.run_id)
                    continue
                ensure_traces(str(self.store.path), job, res)
                self.done(i, job, res)
            return

    def retry_waiting(self, busy: set[str]) -> None:
        """Start the waiting runs that no other sweep holds any more, while a slot is free."""
        for i, job in list(self.waiting.items()):
            if len(self.running) >= self.executor.slots:
                break
            if job.key not in busy:
                del self.waiting[i]
                self.start(i, job)

    def advance(self, busy: set[str]) -> None:
        """Expand the grid while a slot is free: reuse a complete run, wait for one another sweep holds,
        start the others."""
        while self.more and len(self.running) < self.executor.slots:
            nxt = next(self.pending, None)
            if nxt is None:
                self.more = False
                break
            i, job = nxt
            prev = complete_result(self.store, job.key) if self.reuse else None
            if prev is not None:  # complete runs without taking the write lock for each
                ensure_traces(str(self.store.path), job, prev)
                self.done(i, job, prev)
            elif job.key in busy:
                self.waiting[i] = job
            else:
                self.start(i, job)

    def collect(self) -> None:
        """The runs that ended within ``POLL`` seconds: their claims released, their results kept."""
        for handle, res in self.executor.wait(self.running, POLL):
            i, job = self.running.pop(handle)
            self.claims.release(job.key)
            self.done(i, job, res)

    def run(self, on_wait: Callable[[list[dict[str, Any]]], None]) -> None:
        """Go through the grid in order, expanding it as the sweep reaches it (a run is built when a slot is
        free for it, so memory does not grow with the grid): a complete run is reused, a run another live
        sweep has claimed waits, the others are claimed and started. While it only waits, ``on_wait`` is
        told what for every ``WAIT_EVERY`` seconds."""
        claims = self.claims
        said = time.monotonic()
        while self.more or self.waiting or self.running:
            busy = claims.held_by_others()  # read first: no write lock for a key another sweep is running
            self.retry_waiting(busy)
            self.advance(busy)
            if self.waiting and not self.running and time.monotonic() - said >= WAIT_EVERY:
                said = time.monotonic()
                waits = claims.waits({job.key for job in self.waiting.values()})
                if waits:
                    on_wait(waits)
            self.collect()


# -- entry point -------------------------------------------------------------------------------------
def _start_local_ray(executor: str, address: str | None, db: str | Path, workers: int) -> None:
    """For a new database, the local Ray instance first, so that one that cannot start leaves no file (on
    an existing database it starts at the first run to run: all complete, none is started)."""
    if executor == "ray" and address is None and not Path(db).exists():
        start_ray(None, workers)


def _check_inputs(jobs: Grid | list[Job], workers: int, executor: str, address: str | None) -> None:
    """Every input error of a sweep, in one line, before the first run (and before the database is
    created: an unreachable Ray cluster, or a local Ray that cannot start, leaves nothing)."""
    if executor not in ("local", "ray"):
        raise UserError(f"unknown executor {executor!r}; allowed: local, ray")
    if address is not None and executor != "ray":
        raise UserError("--address is for --executor ray")
    if workers < 1:
        raise UserError(f"--workers must be at least 1, got {workers}")
    for job in jobs.heads if isinstance(jobs, Grid) else jobs:  # every input error before the first run
        check_run(job.train, job.eval)
        for p in job.probes:
            get_task(p)
    if executor == "ray":
        import_ray()
        check_ray_address(address)  # before the database is created: an unreachable cluster leaves nothing
        if address:  # and connected to: no database is created for a cluster that Ray cannot join
            start_ray(address, workers)


def _executor(
    executor: str,
    db: str,
    claims: Claims,
    workers: int,
    address: str | None,
    jobs: Grid | list[Job],
    on_step: OnStep | None,
) -> Executor:
    """Where the runs run: Ray tasks, this process (one worker), or local worker processes."""
    if executor == "ray":
        return RayExecutor(db, claims.me, workers, address, jobs.heads if isinstance(jobs, Grid) else jobs)
    if workers <= 1:
        return InProcess(db, claims.me, on_step)
    return Pool(db, claims.me, workers, on_step)


def run_jobs(
    jobs: Grid | list[Job],
    db: str | Path,
    workers: int = 1,
    reuse: bool = True,
    on_done: Callable[[Job, RunResult], None] | None = None,
    executor: str = "local",
    address: str | None = None,
    on_step: Callable[[Job, int, dict[str, Any]], None] | None = None,
    on_wait: Callable[[list[dict[str, Any]]], None] | None = None,
) -> list[tuple[Job, RunResult]]:
    """Run every job of ``jobs`` (a :class:`Grid`, expanded as the sweep goes, or a list); returns (job,
    result) in their order. Runs that another sweep left behind (its process ended, or its heartbeat
    stopped for longer than the claim timeout) lose their claims and are marked interrupted first.

    ``on_done(job, result)`` after each run; ``on_step(job, step, info)`` after each validation of a
    running run (local executor; from worker processes through a queue). Worker processes import the
    plugin modules this process has loaded (statetrack.plugins). ``on_wait(waits)`` every ``WAIT_EVERY``
    seconds while the sweep only waits for runs that other sweeps hold (``Claims.waits``; by default a
    warning line, ``progress.describe_waits``).

    ``workers`` above this machine's CPU cores, or above what its memory holds (each run's estimate,
    ``runner.memory_needed``), is capped with a warning line (``executors.worker_limit``); a Ray cluster
    given by ``address`` is asked first and must answer within ``executors.RAY_CONNECT_TIMEOUT`` seconds."""
    _check_inputs(jobs, workers, executor, address)
    workers, why = worker_limit(workers, jobs.heads if isinstance(jobs, Grid) else jobs, executor, address)
    if why:
        warn(why)
    _start_local_ray(executor, address, db, workers)
    db = str(db)
    # create (or check) the database here, once: workers that open a new file at the same moment would
    # otherwise race on its creation
    store = Store(db)
    claims = Claims(store)
    claims.clear_dead()
    results: dict[int, tuple[Job, RunResult]] = {}
    ex = _executor(executor, db, claims, workers, address, jobs, on_step)
    try:
        with Heartbeat(claims):
            _Schedule(jobs, store, ex, reuse, on_done, results, claims).run(
                on_wait or (lambda waits: warn(describe_waits(waits)))
            )
    except BaseException as e:
        ex.stop()
        why = signals.describe(e) if isinstance(e, KeyboardInterrupt) else f"the sweep stopped: {e}"
        with contextlib.suppress(UserError):  # the database takes no write (a full disk): the claims expire
            claims.release_all(interrupted=why)
        raise
    finally:
        ex.close()
    return [results[i] for i in range(len(results))]
