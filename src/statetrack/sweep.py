"""Run a grid of runs, in this process, in local worker processes, or on Ray.

Resuming: every run has a key (``runner.run_key``: its full train + eval config, study and label);
a run whose key is already ``complete`` in the database is reused, never redone. So a sweep stopped by
Ctrl-C, a crash or SIGKILL is resumed by running it again: finished runs are kept, the rest run.

A run killed mid-way leaves its row with status ``running`` (a killed process cannot write anything).
When the same key later completes, the sweep marks those older ``running`` rows ``interrupted``. Reports
only ever read ``complete`` rows, one per key, so an unfinished record is never counted.

Executors:

- ``local`` (default): ``workers`` processes (spawned) on this machine; each run writes its own rows.
- ``ray``: one Ray task per run (``num_cpus=1``) on a local Ray instance, or on the cluster at
  ``address`` (``ray.init(address=...)``). A task trains into a private temporary database and returns
  the rows (config, metrics, curve, summary, checkpoint bytes, traces); the driver writes them to the
  one database. Workers therefore need no shared filesystem.

Each run seeds itself from its config and uses one thread, so the numbers do not depend on the
executor or the number of workers.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
import queue
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from statetrack import memory, plugins
from statetrack.config import EvalConfig, TrainConfig
from statetrack.errors import UserError
from statetrack.runner import RunResult, check_run, complete_result, run, run_key
from statetrack.store import Store


@dataclass(frozen=True)
class Job:
    """One run of a grid: the model row ``label`` of ``table`` on the task ``column`` of a study, at one
    learning rate and seed, with its full train and eval configs and the probes to trace after it."""

    label: str
    seed: int
    train: TrainConfig
    eval: EvalConfig
    study: str | None = None
    table: str = "main"
    column: str | None = None
    lr: float | None = None
    probes: tuple[str, ...] = field(default=())

    @property
    def key(self) -> str:
        return run_key(self.train, self.eval, self.study, self.label)


# -- helpers shared by the executors ----------------------------------------------------------------
def _ensure_traces(db, job: Job, res: RunResult) -> None:
    if not job.probes or res.status != "complete" or not res.checkpoint:
        return
    from statetrack.probes import read_traces, traces_from_checkpoint, write_traces

    have = read_traces(db, res.run_id)
    missing = [p for p in job.probes if p not in have]
    if missing:
        write_traces(db, res.run_id, traces_from_checkpoint(res.checkpoint, missing))


#: in a worker process: the queue its runs report validations to (index of the job, step, info)
_progress_queue = None


def _init_worker(plugin_names: list[str], progress_queue=None) -> None:
    """A worker process is an entry point of its own: allocator settings, the parent's plugins."""
    global _progress_queue
    memory.configure()
    plugins.load_plugins(plugin_names, "loaded by the sweep's parent process")
    _progress_queue = progress_queue


def _run_job(job: Job, db: str, reuse: bool, index: int | None = None, on_step=None) -> tuple[Job, RunResult]:
    if on_step is None and _progress_queue is not None:
        def on_step(step, info):
            _progress_queue.put((index, step, info))
    # one thread per run: tiny models gain nothing from more, and results then do not depend on
    # how many workers share the machine
    res = run(job.train, job.eval, db=db, study=job.study, label=job.label, reuse=reuse, threads=1,
              on_step=on_step)
    _ensure_traces(db, job, res)
    if res.status == "complete" and not res.reused:
        Store(db).mark_interrupted(job.key, res.run_id)
    return job, res


# -- Ray ---------------------------------------------------------------------------------------------
def _ray_payload(job: Job, plugin_names: list[str] = ()) -> dict:
    """Runs on a Ray worker: train into a private database, return everything the driver stores."""
    from statetrack.probes import traces_from_checkpoint

    _init_worker(list(plugin_names))  # a Ray worker is an entry point of its own
    with tempfile.TemporaryDirectory(prefix="statetrack-ray-") as d:
        wdb = str(Path(d) / "worker.db")
        res = run(job.train, job.eval, db=wdb, study=job.study, label=job.label, reuse=False,
                  checkpoint_dir=Path(d) / "ck", threads=1)
        store = Store(wdb)
        row = store.run(res.run_id)
        out = {"status": res.status, "config": row["config"], "versions": row["versions"], "error": row["error"],
               "wall_time": row["wall_time"], "summary": row["summary"], "metrics": res.metrics, "lm": res.lm,
               "curve": store.curve(res.run_id), "checkpoint": None, "traces": {}}
        if res.status == "complete":
            out["checkpoint"] = Path(res.checkpoint).read_bytes()
            if job.probes:
                out["traces"] = traces_from_checkpoint(res.checkpoint, job.probes)
        return out


def _store_payload(db: str, job: Job, p: dict) -> RunResult:
    """On the driver: write one Ray worker's run into the database, as ``runner.run`` would have."""
    from statetrack.probes import write_traces

    store = Store(db)
    run_id = store.start_run(p["config"], study=job.study, label=job.label, key=job.key)
    store.set_versions(run_id, p["versions"])  # the worker's (its thread count), not the driver's
    if p["status"] != "complete":
        store.fail_run(run_id, p["error"] or "failed", p["wall_time"], p["summary"])
        return RunResult(run_id, "failed", [], p["summary"] or {}, None)
    ck = Path(db).parent / "checkpoints" / f"run{run_id}.safetensors"
    ck.parent.mkdir(parents=True, exist_ok=True)
    tmp = ck.with_suffix(".tmp")
    tmp.write_bytes(p["checkpoint"])
    tmp.replace(ck)
    store.finish_run(run_id, p["metrics"], str(ck), p["wall_time"], p["summary"], p["curve"], p["lm"])
    if p["traces"]:
        write_traces(db, run_id, p["traces"])
    store.mark_interrupted(job.key, run_id)
    return RunResult(run_id, "complete", p["metrics"], p["summary"], str(ck), lm=p["lm"])


def _plugin_roots() -> list[str]:
    """The folders the loaded plugin modules were imported from (for the Ray workers' PYTHONPATH)."""
    import sys

    roots = []
    for name in plugins.loaded():
        f = getattr(sys.modules.get(name.partition(".")[0]), "__file__", None)
        if f:
            p = Path(f).resolve()
            roots.append(str(p.parents[1] if p.name == "__init__.py" else p.parent))
    return list(dict.fromkeys(roots))


def _import_ray():
    try:
        import ray
    except ImportError:
        raise UserError("--executor ray needs Ray: pip install 'statetrack[ray]' (or pip install ray)") from None
    return ray


def _run_ray(jobs: list[Job], db: str, workers: int, reuse: bool, address: str | None, on_done,
             results: dict) -> None:
    ray = _import_ray()
    store = Store(db)
    todo = []
    for i, job in enumerate(jobs):
        done = complete_result(store, job.key) if reuse else None
        if done is not None:
            if job.probes:
                _ensure_traces(db, job, done)
            results[i] = (job, done)
            if on_done:
                on_done(job, done)
        else:
            todo.append(i)
    if not todo:
        return
    started = not ray.is_initialized()
    if started:
        import os

        src = str(Path(__file__).resolve().parents[1])  # so workers import this very package
        path = [src, *_plugin_roots()] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
        env = {"PYTHONPATH": os.pathsep.join(path), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        kw = dict(address=address, runtime_env={"env_vars": env}, log_to_driver=False)
        if address is None:
            kw.update(num_cpus=max(1, workers), include_dashboard=False)
        ray.init(**kw)
    try:
        # runs on a GPU share it: each asks for 1/workers of one, so that `workers` of them run at once
        gpus = 1.0 / max(1, workers) if any(jobs[i].train.device == "cuda" for i in todo) else 0
        remote = ray.remote(num_cpus=1, num_gpus=gpus, max_retries=0)(_ray_payload)
        pending = {remote.remote(jobs[i], plugins.loaded()): i for i in todo}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                i = pending.pop(ref)
                res = _store_payload(db, jobs[i], ray.get(ref))
                results[i] = (jobs[i], res)
                if on_done:
                    on_done(jobs[i], res)
    finally:
        if started:
            ray.shutdown()


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
    db = str(db)
    # create (or check) the database here, once: workers that open a new file at the same moment would
    # otherwise race on its creation
    Store(db)
    results: dict[int, tuple[Job, RunResult]] = {}
    if executor == "ray":
        _run_ray(jobs, db, workers, reuse, address, on_done, results)
    elif workers <= 1:
        for i, job in enumerate(jobs):
            step = (lambda s, info, job=job: on_step(job, s, info)) if on_step else None
            results[i] = _run_job(job, db, reuse, on_step=step)
            if on_done:
                on_done(*results[i])
    else:
        _run_pool(jobs, db, workers, reuse, on_done, on_step, results)
    return [results[i] for i in range(len(jobs))]


def _run_pool(jobs, db, workers, reuse, on_done, on_step, results) -> None:
    """``workers`` spawned processes; validations come back through a queue while the runs go on."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue() if on_step else None

    def drain():
        while q is not None:
            try:
                i, s, info = q.get_nowait()
            except queue.Empty:
                return
            if i not in results:  # a late message of a run already reported done is dropped
                on_step(jobs[i], s, info)

    with cf.ProcessPoolExecutor(workers, mp_context=ctx, initializer=_init_worker,
                                initargs=(plugins.loaded(), q)) as pool:
        pending = {pool.submit(_run_job, job, db, reuse, i): i for i, job in enumerate(jobs)}
        while pending:
            done, _ = cf.wait(pending, timeout=0.5, return_when=cf.FIRST_COMPLETED)
            drain()
            for fut in done:
                i = pending.pop(fut)
                results[i] = fut.result()
                if on_done:
                    on_done(*results[i])
    drain()
