"""``reproduce(name)``: a study's grid, run (or reused from the database), and its table."""
from __future__ import annotations

from pathlib import Path

from statetrack.experiments import Study, load_study
from statetrack.report import StudyTable, study_table
from statetrack.store import DEFAULT_DB
from statetrack.sweep import Job, run_jobs


def study_jobs(study: Study, scale: str = "quick", seeds: int | None = None, device: str = "cpu") -> list[Job]:
    return [Job(label, seed, t, e, study.name) for label, seed, t, e in study.configs(scale, seeds, device)]


def reproduce(name: str, scale: str = "quick", seeds: int | None = None, db: str | Path = DEFAULT_DB,
              workers: int = 1, fresh: bool = False, device: str = "cpu",
              on_done=None) -> tuple[Study, list, StudyTable]:
    """Run study ``name`` at ``scale``; returns (study, [(job, result)], table)."""
    study = load_study(name)
    jobs = study_jobs(study, scale, seeds, device)
    results = run_jobs(jobs, db, workers=workers, reuse=not fresh, on_done=on_done)
    return study, results, study_table(study, results)
