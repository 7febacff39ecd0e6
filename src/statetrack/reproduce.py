"""A study end to end: ``sweep`` runs its grid (complete runs reused), ``reproduce`` = sweep + report.

The report is always read back from the database (``report.collect``, as ``statetrack report`` does):
the grid is regenerated from the study file and each run is looked up by its key, so a reproduction
and a later report of the same database give the same tables. ``statetrack reproduce`` calls
``reproduce`` and ``statetrack report`` calls ``report.collect.collect`` and ``write``.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from statetrack.experiments import Study, load_study
from statetrack.progress import Progress, SweepProgress, sink
from statetrack.report import StudyTable
from statetrack.report.collect import Report, collect
from statetrack.report.folder import Extent, check_out, check_replace
from statetrack.report.lm_tables import LMTable
from statetrack.report.writer import write_report
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


@dataclass(frozen=True)
class Reproduction:
    """What ``reproduce`` gives: the study, each job's result of the sweep, the report read back from the
    database (every table, the verdicts, the curves: ``report.collect.Report``), the sweep's wall time in
    seconds and the files written (none without ``out``)."""

    study: Study
    results: list
    report: Report
    wall: float
    written: tuple[Path, ...] = ()

    @property
    def table(self) -> StudyTable | LMTable:
        """The study's first table (``report.tables`` holds every one)."""
        return self.report.tables[0]


def reproduce(
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
    progress: Progress = None,
    max_runs: int = MAX_RUNS,
    on_step=None,
    on_wait=None,
    out: str | Path | None = None,
    figures: Sequence[str] = ("png",),
    html: bool = False,
    force: bool = False,
    meta: Mapping[str, str] | None = None,
) -> Reproduction:
    """Run study ``name`` at ``scale`` (``sweep``, whose arguments these are), then read its report back
    from ``db``. With ``out`` the report's files are written there (markdown, CSV, LaTeX, the
    ``figures``' formats, with ``html`` the page too): ``out`` is checked before anything runs, and a
    report there that holds more is not replaced unless ``force`` (``report.folder.ReportExists``).
    ``meta``: header lines added to the machine, date and the sweep's wall time (e.g. the command)."""
    study = name if isinstance(name, Study) else load_study(name)
    if out is not None:  # an unwritable folder, or a fuller report there, fails now, not after the sweep
        check_out(out, study.name, Extent(scale, seeds or study.scale(scale).seeds, None), force)
    t0 = time.monotonic()
    study, results = sweep(
        study,
        scale,
        seeds,
        db,
        workers,
        fresh,
        device,
        on_done=on_done,
        executor=executor,
        address=address,
        on_step=on_step,
        progress=progress,
        max_runs=max_runs,
        on_wait=on_wait,
    )
    wall = time.monotonic() - t0
    rep = collect(study, db, scale, seeds, device, max_runs)
    if out is None:
        return Reproduction(study, results, rep, wall)
    check_replace(out, study.name, rep.extent(), force)
    rest = dict(meta or {})
    first = {"Command": rest.pop("Command")} if "Command" in rest else {}  # the header's first line
    header = first | sweep_header(results, wall, executor, workers) | rest
    return Reproduction(study, results, rep, wall, write(rep, out, header, figures, html, force))


def sweep_header(results: list, wall: float, executor: str, workers: int) -> dict[str, str]:
    """A reproduction's report header lines: the machine, the date and the sweep's wall time."""
    reused = sum(r.reused for _, r in results)
    return {
        "Machine": machine(),
        "Date": now(),
        "Wall time of the sweep": f"{wall:.0f} s ({len(results) - reused} runs trained, {reused} reused; "
        f"executor {executor}, {workers} worker(s), 1 thread per run)",
    }


def write(
    rep: Report,
    out: str | Path,
    meta: Mapping[str, str] | None = None,
    figures: Sequence[str] = ("png",),
    html: bool = False,
    force: bool = False,
) -> tuple[Path, ...]:
    """A report's files in ``out``: markdown, CSV, LaTeX and the ``figures`` (``report.writer.write_report``),
    with ``html`` the page and the folder's index (``report.html.write_html``); returns the markdown's path
    and the page's."""
    paths = [write_report(rep, out, dict(meta or {}), figures=tuple(figures), force=force)]
    if html:
        from statetrack.report.html import write_html

        paths.append(write_html(rep, out, dict(meta or {}), force=force))
    return tuple(paths)


def machine() -> str:
    """This machine in one line: system, CPU cores and model, GPU, Python and torch."""
    import torch

    from statetrack.training.device import cpu_model

    gpu = f", GPU {torch.cuda.get_device_name()}" if torch.cuda.is_available() else ""
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores ({cpu_model()}){gpu}, "
        f"Python {platform.python_version()}, torch {torch.__version__}"
    )


def now() -> str:
    """The date and minute in UTC, as report headers give it."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
