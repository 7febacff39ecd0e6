"""A study end to end: ``sweep`` runs its grid (complete runs reused), ``reproduce`` = sweep + tables.

The tables can also be rebuilt from the database alone (``report.collect`` / ``statetrack report``):
the grid is regenerated from the study file and each run is looked up by its key.
"""

from __future__ import annotations

from pathlib import Path

from statetrack.experiments import Study, StudyKind, load_study
from statetrack.progress import Progress, SweepProgress, sink
from statetrack.report import StudyTable, study_table
from statetrack.report.lm import LMTable, lm_tables
from statetrack.runs.jobs import MAX_RUNS
from statetrack.runs.store import DEFAULT_DB
from statetrack.runs.sweep import run_jobs


def sweep(
    name: str | Study,
    scale: str = "quick",
    seeds: int | None = None,
    db: str | Path = DEFAULT_DB,
    workers: int = 1,
    fresh: bool = False,
    device: str = "auto",
    on_done=None,
    executor: str = "local",
    address: str | None = None,
    on_step=None,
    progress: Progress = None,
    max_runs: int = MAX_RUNS,
    on_wait=None,
) -> tuple[Study, list]:
    """Run study ``name``'s grid at ``scale``; returns (study, [(job, result)]). ``on_done(job, result)``
    after each run, ``on_step(job, step, info)`` after each validation, ``on_wait(waits)`` while it waits
    for runs other sweeps hold (sweep.run_jobs). ``progress``: a
    log line per validation and per finished run by default, unless ``on_done`` or ``on_step`` is given
    (:mod:`statetrack.progress`). A grid of more than ``max_runs`` runs is refused before anything runs
    (``jobs.MAX_RUNS`` by default)."""
    study = name if isinstance(name, Study) else load_study(name)
    jobs = study.grid(scale, seeds, device, max_runs)
    out = sink(progress, callbacks=bool(on_done or on_step))
    if out is not None:
        log = SweepProgress(out, f"{study.name} ({scale})", len(jobs))
        on_step = _both(on_step, log.on_step)
        on_done = _both(on_done, log.on_done)
        on_wait = _both(on_wait, log.on_wait)
    results = run_jobs(
        jobs,
        db,
        workers=workers,
        reuse=not fresh,
        on_done=on_done,
        executor=executor,
        address=address,
        on_step=on_step,
        on_wait=on_wait,
    )
    return study, results


def _both(first, second):
    """A callback calling ``first`` (if any), then ``second``."""
    if first is None:
        return second
    return lambda *a: (first(*a), second(*a))


def reproduce(
    name: str,
    scale: str = "quick",
    seeds: int | None = None,
    db: str | Path = DEFAULT_DB,
    workers: int = 1,
    fresh: bool = False,
    device: str = "auto",
    on_done=None,
    executor: str = "local",
    address: str | None = None,
    progress: Progress = None,
) -> tuple[Study, list, StudyTable | LMTable]:
    """Run study ``name`` at ``scale``; returns (study, [(job, result)], its first table). ``progress``: as
    ``sweep``'s.

    ``report.study_tables(study, results, scale)`` gives every table of a study with several."""
    study, results = sweep(
        name, scale, seeds, db, workers, fresh, device, on_done, executor, address, progress=progress
    )
    if study.kind is StudyKind.LM:
        return study, results, lm_tables(study, results, scale, db=db)[0]
    return study, results, study_table(study, results)
