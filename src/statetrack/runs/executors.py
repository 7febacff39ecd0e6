# long: the three executors of a sweep (in process, a local pool, Ray) behind one protocol, with what they share
"""Where a claimed run of a sweep runs (``statetrack.runs.sweep`` claims, schedules and stops them).

Executors:

- ``local`` (default): ``workers`` processes (spawned) on this machine; each run writes its own rows,
  under the claim of the sweep's process.
- ``ray``: one Ray task per run (``num_cpus=1``) on a local Ray instance, or on the cluster at
  ``address`` (``ray.init(address=...)``), at most ``workers`` at a time. The driver claims each run
  and records it ``running``; the task trains into a private temporary database and returns the rows
  (config, metrics, curve, summary, checkpoint bytes, traces); the driver writes them to the one
  database. Workers therefore need no shared filesystem.

Every executor has ``slots`` (runs at once), ``submit(job, index)`` -> a handle, ``wait(running, timeout)``
-> (handle, result) pairs of finished runs, ``stop(exception)`` (a signal: the running runs are recorded
interrupted) and ``close()``.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing as mp
import os
import queue
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from multiprocessing import resource_tracker
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias

from statetrack import plugins
from statetrack.errors import UserError
from statetrack.files import inside, reason, sha256_bytes, write_file
from statetrack.runs import signals
from statetrack.runs.jobs import Job
from statetrack.runs.probes import read_traces, traces_from_checkpoint, write_traces
from statetrack.runs.runner import RunResult, run, stored_config
from statetrack.runs.store import RunStatus, Store
from statetrack.training import memory
from statetrack.training.checkpoint import rewrite_extra
from statetrack.training.evaluation import LengthMetrics

if TYPE_CHECKING:
    from multiprocessing.queues import Queue

#: a run's validations as a sweep hears them: (job, step, info)
OnStep = Callable[[Job, int, dict[str, Any]], None]
#: one run's validations: (step, info) (``runner.run``'s ``on_step``)
OnRunStep = Callable[[int, dict[str, Any]], None]
#: what worker processes put a validation on: (index of the job, step, info)
ProgressQueue: TypeAlias = "Queue[tuple[int | None, int, dict[str, Any]]]"


class Executor(Protocol):
    """Where a sweep's claimed runs run: ``submit`` starts one and returns its handle, ``wait`` returns
    (handle, result) of those done within ``timeout`` seconds, ``stop`` ends those still running (their
    runs recorded interrupted), ``close`` frees the executor. ``slots``: runs at once."""

    slots: int

    def submit(self, job: Job, index: int) -> Any: ...
    def wait(self, handles: Collection[Any], timeout: float) -> Sequence[tuple[Any, RunResult]]: ...
    def stop(self) -> None: ...
    def close(self) -> None: ...


#: seconds worker processes get, after a signal, to record their runs interrupted before they are killed
GRACE = 5.0
#: seconds a Ray cluster named by ``--address`` has to accept a connection before the sweep gives up
RAY_CONNECT_TIMEOUT = 10.0


def worker_limit(
    workers: int, jobs: Iterable[Job], executor: str = "local", address: str | None = None
) -> tuple[int, str | None]:
    """(workers to use, the line that says why fewer than asked, or None). On this machine (the local
    executor, or a local Ray instance) at most one run per CPU core (each run uses one thread), and no
    more than its available memory holds: each worker's process (``memory.WORKER_BYTES``) and the largest
    run of ``jobs`` (``runner.memory_needed``). A Ray cluster's own resources decide there."""
    from statetrack.runs.runner import memory_needed
    from statetrack.tasks import get_task

    if executor == "ray" and address is not None:
        return workers, None
    n_cores = memory.cores()
    need = memory.WORKER_BYTES + max(
        (memory_needed(j.train, get_task(j.train.task))[0] for j in jobs), default=0
    )
    free, where = memory.available()
    by_memory = max(1, free // need)
    n = min(workers, n_cores, by_memory)
    if n >= workers:
        return workers, None
    why = (
        f"this machine has {n_cores} CPU core{'s' if n_cores > 1 else ''} (each run uses one)"
        if n == n_cores
        else f"each worker needs about {memory.gib(need)} (its process and its largest run) and {memory.gib(free)} is "
        f"{where}"
    )
    return n, f"--workers {workers} capped at {n}: {why}"


#: what an HTTP/2 client says first (RFC 9113 section 3.4), then an empty SETTINGS frame
_HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])


def check_ray_address(address: str | None, timeout: float | None = None) -> None:
    """A UserError when no Ray cluster answers at ``address`` (``host:port`` or ``ray://host:port``)
    within ``timeout`` seconds (:data:`RAY_CONNECT_TIMEOUT`): a handshake, not only a connection. Ray's
    GCS and its client server speak gRPC, so the check opens a connection, sends HTTP/2's client preface and
    waits for the server's SETTINGS frame; a listener that accepts and never answers (``ray.init`` would
    wait on it for good), or answers in another protocol, is refused in one line, within the deadline.
    Other forms (``auto``, none: a local instance) are left to Ray."""
    if not address:
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    timeout = RAY_CONNECT_TIMEOUT if timeout is None else timeout
    deadline, connected = time.monotonic() + timeout, False
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout) as conn:
            connected = True
            conn.sendall(_HTTP2_PREFACE)
            head = b""
            while len(head) < 9:
                conn.settimeout(max(0.01, deadline - time.monotonic()))
                got = conn.recv(9 - len(head))
                if not got:
                    break
                head += got
    except OSError as e:
        why = "timed out" if isinstance(e, TimeoutError) else reason(e)
        if isinstance(e, TimeoutError) and connected:
            why = "it accepts connections but does not answer: not a Ray cluster"
        raise UserError(
            f"no Ray cluster answers at --address {address} ({why}, within {timeout:g} s); "
            "start one there (ray start --head) or give its address"
        ) from None
    if len(head) < 9 or head[3] != 4 or head[5:9] != bytes(4):  # a SETTINGS frame on stream 0
        raise UserError(
            f"no Ray cluster answers at --address {address} (it answers, but not in gRPC's HTTP/2: "
            f"{'it closed the connection' if len(head) < 9 else repr(head[:9])}); give the address of a "
            "Ray cluster (ray start --head prints it)"
        )


# -- helpers shared by the executors ----------------------------------------------------------------
def ensure_traces(db: str, job: Job, res: RunResult) -> None:
    if not job.probes or res.status != RunStatus.COMPLETE or not res.checkpoint:
        return

    have = read_traces(db, res.run_id)
    missing = [p for p in job.probes if p not in have]
    if missing:
        write_traces(db, res.run_id, traces_from_checkpoint(res.checkpoint, missing))


#: in a worker process: the queue its runs report validations to (index of the job, step, info)
_progress_queue: ProgressQueue | None = None


def _init_worker(
    plugin_names: list[str],
    progress_queue: ProgressQueue | None = None,
    ignore: tuple[int, ...] = (),
    parent: int | None = None,
) -> None:
    """A worker process is an entry point of its own: allocator settings, the parent's plugins, signals
    that interrupt the run in progress (those the parent ignores stay ignored), and, with ``parent`` (the
    sweep's pid), an end of its own when that process ends, even by SIGKILL (``signals.die_with_parent``)."""
    global _progress_queue
    memory.configure()
    plugins.load_plugins(plugin_names, "loaded by the sweep's parent process")
    _progress_queue = progress_queue
    signals.install_in_worker(ignore)
    if parent is not None:
        signals.die_with_parent(parent)


def _run_job(
    job: Job, db: str, owner: str, index: int | None = None, on_step: OnRunStep | None = None
) -> RunResult:
    if on_step is None and (q := _progress_queue) is not None:

        def on_step(step: int, info: dict[str, Any]) -> None:
            q.put((index, step, info))

    # one thread per run: tiny models gain nothing from more, and results then do not depend on
    # how many workers share the machine
    with signals.job():
        res = run(
            job.train,
            job.eval,
            db=db,
            study=job.study,
            label=job.label,
            reuse=False,
            threads=1,
            owner=owner,
            on_step=on_step,
        )
        ensure_traces(db, job, res)
        if res.status == RunStatus.COMPLETE:
            Store(db).mark_interrupted(job.key, res.run_id)
    return res


def result_of(store: Store, run_id: int) -> RunResult:
    """A run another sweep (or an earlier one) finished, as a reused RunResult."""
    r = store.run(run_id)
    ms = [LengthMetrics.from_row(m) for m in store.metrics(run_id)] if r.status == RunStatus.COMPLETE else []
    return RunResult(run_id, r.status, ms, r.summary or {}, r.checkpoint, reused=True)


# -- executors: where a claimed run runs ------------------------------------------------------------
class InProcess:
    """Runs each job in this process when it is waited for."""

    slots = 1

    def __init__(self, db: str, owner: str, on_step: OnStep | None = None) -> None:
        self.db, self.owner, self.on_step = db, owner, on_step
        self.jobs: dict[object, Job] = {}

    def submit(self, job: Job, _index: int) -> object:
        handle = object()
        self.jobs[handle] = job
        return handle

    def wait(self, handles: Collection[object], timeout: float) -> list[tuple[object, RunResult]]:
        if not handles:
            time.sleep(timeout)
            return []
        h = next(iter(handles))
        job = self.jobs.pop(h)
        on_step = self.on_step
        step = (lambda s, info: on_step(job, s, info)) if on_step else None
        return [(h, _run_job(job, self.db, self.owner, on_step=step))]

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


DIED = (
    "a worker process of the sweep died (killed, or out of memory); its runs are marked interrupted; "
    "run the sweep again to resume"
)


class Pool:
    """Local worker processes (spawned); one job per free worker, never a queue of jobs. Validations come
    back through a queue while the runs go on (``on_step``)."""

    def __init__(self, db: str, owner: str, workers: int, on_step: OnStep | None = None) -> None:
        self.db, self.owner, self.slots, self.on_step = db, owner, workers, on_step
        ctx = mp.get_context("spawn")
        # multiprocessing's resource tracker (started by the first queue) ignores SIGINT and SIGTERM but
        # not SIGHUP: started inside spawning() it ignores that too, so closing the terminal cannot end
        # it before the sweep has released its queues (a tracker started again prints tracebacks)
        with signals.spawning():
            resource_tracker.ensure_running()
        self.queue: ProgressQueue | None = ctx.Queue() if on_step else None
        self.pool = cf.ProcessPoolExecutor(
            workers,
            mp_context=ctx,
            initializer=_init_worker,
            initargs=(plugins.loaded(), self.queue, signals.ignored(), os.getpid()),
        )
        self.futures: dict[cf.Future[RunResult], tuple[int, Job]] = {}  # future -> (job index, job)

    def submit(self, job: Job, index: int) -> cf.Future[RunResult]:
        with signals.spawning():  # workers start with the signals ignored, not with a traceback
            try:
                fut = self.pool.submit(_run_job, job, self.db, self.owner, index)
            except cf.process.BrokenProcessPool:
                raise UserError(DIED) from None
        self.futures[fut] = (index, job)
        return fut

    def _drain(self) -> None:
        while self.queue is not None:
            try:
                i, s, info = self.queue.get_nowait()
            except queue.Empty:
                return
            job = next((j for k, j in self.futures.values() if k == i), None)
            # a late message of a run already reported done is dropped (a queue is made only with on_step)
            if job is not None and self.on_step is not None:
                self.on_step(job, s, info)

    def wait(
        self, handles: Collection[cf.Future[RunResult]], timeout: float
    ) -> list[tuple[cf.Future[RunResult], RunResult]]:
        if not handles:
            time.sleep(timeout)
            return []
        done, _ = cf.wait(
            list(handles),
            timeout=min(timeout, 0.5) if self.queue else timeout,
            return_when=cf.FIRST_COMPLETED,
        )
        self._drain()
        out = []
        for f in done:
            self.futures.pop(f, None)
            try:
                out.append((f, f.result()))
            except cf.process.BrokenProcessPool:
                raise UserError(DIED) from None
        return out

    def stop(self) -> None:
        """Tell the workers (SIGTERM: a worker in a run records it interrupted), wait GRACE seconds,
        then kill those still running."""
        procs = list((self.pool._processes or {}).values())  # noqa: SLF001 - the pool names no other way
        for p in procs:
            with contextlib.suppress(OSError):
                if p.pid is not None:
                    os.kill(p.pid, signal.SIGTERM)
        cf.wait(self.futures, timeout=GRACE)
        for p in procs:  # their runs are recorded (or, past the grace, recorded by the parent): no slow exit
            if p.is_alive():
                p.kill()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _ray_payload(job: Job, plugin_names: Sequence[str] = ()) -> dict[str, Any]:
    """Runs on a Ray worker: train into a private database, return everything the driver stores."""
    _init_worker(list(plugin_names))  # a Ray worker is an entry point of its own
    with tempfile.TemporaryDirectory(prefix="statetrack-ray-") as d:
        wdb = str(Path(d) / "worker.db")
        res = run(
            job.train,
            job.eval,
            db=wdb,
            study=job.study,
            label=job.label,
            reuse=False,
            checkpoint_dir=Path(d) / "ck",
            threads=1,
        )
        store = Store(wdb)
        row = store.run(res.run_id)
        out: dict[str, Any] = {
            "status": res.status,
            "config": row.config,
            "versions": row.versions,
            "error": row.error,
            "wall_time": row.wall_time,
            "summary": row.summary,
            "metrics": res.metrics,
            "lm": res.lm,
            "more": res.more,
            "curve": store.curve(res.run_id),
            "checkpoint": None,
            "traces": {},
        }
        if res.status == RunStatus.COMPLETE and res.checkpoint is not None:
            out["checkpoint"] = Path(res.checkpoint).read_bytes()
            if job.probes:
                out["traces"] = traces_from_checkpoint(res.checkpoint, job.probes)
        return out


def _store_payload(store: Store, run_id: int, p: dict[str, Any]) -> RunResult:
    """On the driver: write one Ray worker's run into its row, as ``runner.run`` would have."""
    store.set_versions(run_id, p["versions"])  # the worker's (its thread count), not the driver's
    if p["status"] != RunStatus.COMPLETE:
        store.fail_run(run_id, p["error"] or "the run failed", p["wall_time"], p["summary"])
        return RunResult(run_id, RunStatus.FAILED, [], p["summary"] or {}, None)
    run_uuid = store.run(run_id).uuid
    assert run_uuid is not None  # start_run gave the row its uuid
    data = rewrite_extra(
        p["checkpoint"],
        {
            "run_id": run_id,
            "run_uuid": run_uuid,
            "db": str(store.path.absolute()),
            "db_name": store.path.name,
        },
    )
    with inside(store.path.parent):  # a checkpoint folder that is a link elsewhere is refused, not followed
        ck = write_file(store.checkpoint_name(run_id, run_uuid), data, exclusive=True, what="checkpoint")
    if not store.finish_run(
        run_id,
        p["metrics"],
        str(ck),
        p["wall_time"],
        p["summary"],
        p["curve"],
        sha256_bytes(data),
        p["lm"],
        p.get("more"),
    ):
        ck.unlink(missing_ok=True)
        return RunResult(
            run_id, RunStatus.INTERRUPTED, [], {"reason": "the run was taken over by another sweep"}, None
        )
    if p["traces"]:
        write_traces(store.path, run_id, p["traces"])
    return RunResult(
        run_id, RunStatus.COMPLETE, p["metrics"], p["summary"], str(ck), lm=p["lm"], more=p.get("more") or {}
    )


def _plugin_roots() -> list[str]:
    """The folders the loaded plugin modules were imported from (for the Ray workers' PYTHONPATH)."""
    roots = []
    for name in plugins.loaded():
        f = getattr(sys.modules.get(name.partition(".")[0]), "__file__", None)
        if f:
            p = Path(f).resolve()
            roots.append(str(p.parents[1] if p.name == "__init__.py" else p.parent))
    return list(dict.fromkeys(roots))


def import_ray() -> Any:  # the module: Ray is untyped here (ignore_missing_imports)
    try:
        import ray  # optional (the ray extra)
    except ImportError:
        raise UserError(
            "--executor ray needs Ray: pip install 'statetrack[ray]' (or pip install ray)"
        ) from None
    return ray


#: whether this process started Ray (:func:`start_ray`), so that the sweep's end shuts it down (a Ray the
#: program started itself, in a notebook, is left running)
_started = False


def start_ray(address: str | None, slots: int) -> bool:
    """``ray.init`` unless Ray is running in this process already: the cluster at ``address``, or a local
    instance of ``slots`` CPUs; the workers import this very package (and the plugins). Returns whether
    this call started it. Ray's own error is one line."""
    global _started
    ray = import_ray()
    if ray.is_initialized():
        return False
    src = str(Path(__file__).resolve().parents[2])  # so workers import this very package
    path = [src, *_plugin_roots()] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    env = {"PYTHONPATH": os.pathsep.join(path), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    kw: dict[str, Any] = {"address": address, "runtime_env": {"env_vars": env}, "log_to_driver": False}
    if address is None:
        kw.update(num_cpus=max(1, slots), include_dashboard=False)
    try:
        ray.init(**kw)
    except (ConnectionError, TimeoutError, RuntimeError, ValueError) as e:  # Ray's words, in one line
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        where = f"at --address {address}" if address else f"here (a local instance of {max(1, slots)} CPUs)"
        raise UserError(f"Ray could not start {where}: {first}") from None
    _started = True
    return True


def cancel_errors(ray: Any) -> tuple[type[Exception], ...]:
    """What ``ray.cancel`` raises for a task it cannot cancel: Ray's own errors (``RaySystemError`` once
    this process is no longer connected to Ray), ``TypeError`` (the core worker refused, or not an object
    ref) and ``ValueError`` (an argument the core worker calls invalid)."""
    return (ray.exceptions.RayError, TypeError, ValueError)


class RayExecutor:
    """One Ray task per claimed run; the driver writes the database."""

    def __init__(self, db: str, owner: str, workers: int, address: str | None, jobs: list[Job]):
        self.ray = import_ray()
        self.store, self.owner, self.slots, self.address = Store(db), owner, workers, address
        self.rows: dict[Any, tuple[Job, int]] = {}  # ref -> (job, run_id)
        self.remote: Any = None  # ray.remote(_ray_payload), once Ray is started
        # runs on a GPU share it: each asks for 1/workers of one, so that `workers` of them run at once
        self.gpus = 1.0 / max(1, workers) if any(j.train.device == "cuda" for j in jobs) else 0

    def _start(self) -> None:
        """Ray itself, at the first run to start (a sweep whose runs are all complete never starts a local
        instance; a cluster's ``address`` was connected to before the database was opened)."""
        start_ray(self.address, self.slots)
        self.remote = self.ray.remote(num_cpus=1, num_gpus=self.gpus, max_retries=0)(_ray_payload)

    def submit(self, job: Job, _index: int) -> Any:  # a Ray object ref
        if self.remote is None:
            self._start()
        run_id = self.store.start_run(
            stored_config(job.train, job.eval),
            study=job.study,
            label=job.label,
            key=job.key,
            owner=self.owner,
        )
        ref = self.remote.remote(job, plugins.loaded())
        self.rows[ref] = (job, run_id)
        return ref

    def wait(self, handles: Collection[Any], timeout: float) -> list[tuple[Any, RunResult]]:
        if not handles:
            time.sleep(timeout)
            return []
        ready, _ = self.ray.wait(list(handles), num_returns=1, timeout=timeout)
        out = []
        for ref in ready:
            job, run_id = self.rows.pop(ref)
            try:
                payload = self.ray.get(ref)
            except self.ray.exceptions.RayError as e:  # the task raised or its worker died
                self.store.fail_run(run_id, f"Ray task failed: {str(e).strip().splitlines()[-1]}")
                out.append((ref, RunResult(run_id, RunStatus.FAILED, [], {"reason": str(e)[:500]}, None)))
                continue
            out.append((ref, _store_payload(self.store, run_id, payload)))
        return out

    def stop(self) -> None:
        """Cancel every run still on Ray; a run Ray cannot cancel (finished, or Ray gone) is passed over so
        that the others are still cancelled, and any other error is raised."""
        for ref in list(self.rows):
            with contextlib.suppress(*cancel_errors(self.ray)):
                self.ray.cancel(ref, force=True)

    def close(self) -> None:
        global _started
        if _started:
            self.ray.shutdown()
            _started = False
