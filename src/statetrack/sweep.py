"""Run a grid of runs, in this process or in worker processes; complete runs are reused, not redone."""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing as mp
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from statetrack.config import EvalConfig, TrainConfig
from statetrack.runner import RunResult, check_run, run


@dataclass(frozen=True)
class Job:
    label: str
    seed: int
    train: TrainConfig
    eval: EvalConfig
    study: str | None = None


def _run_job(job: Job, db: str, reuse: bool) -> tuple[Job, RunResult]:
    # one thread per run: tiny models gain nothing from more, and results then do not depend on
    # how many workers share the machine
    return job, run(job.train, job.eval, db=db, study=job.study, label=job.label, reuse=reuse, threads=1)


def run_jobs(jobs: list[Job], db: str | Path, workers: int = 1, reuse: bool = True,
             on_done: Callable[[Job, RunResult], None] | None = None) -> list[tuple[Job, RunResult]]:
    """Run every job; returns (job, result) in the order of ``jobs``."""
    for job in jobs:  # every input error surfaces before the first run starts
        check_run(job.train, job.eval)
    results: dict[int, tuple[Job, RunResult]] = {}
    if workers <= 1:
        for i, job in enumerate(jobs):
            results[i] = _run_job(job, str(db), reuse)
            if on_done:
                on_done(*results[i])
    else:
        with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
            futs = {pool.submit(_run_job, job, str(db), reuse): i for i, job in enumerate(jobs)}
            for fut in cf.as_completed(futs):
                results[futs[fut]] = fut.result()
                if on_done:
                    on_done(*results[futs[fut]])
    return [results[i] for i in range(len(jobs))]
