"""Expanding a study into the runs a sweep runs.

A study at a scale is a list of *cells*, one per (table, model, task) it trains (``Study.grid`` in
:mod:`statetrack.experiments.study_schema` walks the study file's tables, models and tasks and resolves each
setting from the most specific layer that gives it). A :class:`Cell` holds everything its runs share: the
training fields, the evaluation config, the learning rates and the probes. :func:`expand` turns the cells
into a :class:`~statetrack.runs.jobs.Grid`, one job per cell, learning rate and seed: counted and refused
in one line above ``max_runs`` before any run's config is built, then built one run at a time as the grid
is iterated.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from statetrack.config import EvalConfig, ModelConfig, TrainConfig, validated
from statetrack.errors import UserError
from statetrack.runs.jobs import MAX_RUNS, Grid, Job


@dataclass(frozen=True)
class Cell:
    """A (table, model, task) cell of a grid: everything its runs share but the learning rate and seed."""

    study: str
    table: str
    label: str
    column: str
    fields: dict
    eval: EvalConfig
    lrs: tuple[float, ...]
    probes: tuple[str, ...]

    def job(self, lr: float, seed: int) -> Job:
        train = validated(TrainConfig, **{**self.fields, "lr": lr, "seed": seed})
        return Job(
            self.label,
            seed,
            train,
            self.eval,
            self.study,
            table=self.table,
            column=self.column,
            lr=float(lr),
            probes=self.probes,
        )


def model_config(fields: dict, depth: int | None) -> ModelConfig:
    """A cell's model config: its layer spec repeated ``depth`` times where the task asks for depth."""
    layers = fields.get("layers", "")
    config: ModelConfig = validated(
        ModelConfig, **{**fields, "layers": ",".join([layers] * depth)} if depth else fields
    )
    return config


def learning_rates(
    task_train: dict,
    model_train: dict,
    scale_lrs: list[float] | None,
    study_lrs: list[float] | None,
    base: dict,
) -> list[float]:
    """A cell's learning rates, from the first layer that gives them: the task's one rate at this scale
    (``task_train``'s lr) or its own grid there (lrs); a model that sets its own lr (e.g. fine-tuning from a
    construction) trains at that one rate; else the scale's grid, the study's, or the training config's
    rate."""
    if "lr" in task_train:
        return [task_train["lr"]]
    if task_train.get("lrs"):
        own: list[float] = task_train["lrs"]
        return own
    if "lr" in model_train:
        return [model_train["lr"]]
    return scale_lrs or study_lrs or [base.get("lr", TrainConfig.model_fields["lr"].default)]


def expand(cells: list[Cell], study: str, scale: str, seeds: int, max_runs: int = MAX_RUNS) -> Grid:
    """Every run of these cells (learning rates x seeds), as the jobs a sweep runs: counted, and refused
    in one line above ``max_runs``, before any run's config is built; then built one run at a time as the
    grid is iterated."""
    lrs = max((len(c.lrs) for c in cells), default=0)
    size = sum(len(c.lrs) for c in cells) * seeds
    if size > max_runs:
        raise UserError(
            f"study {study!r} at scale {scale!r} has {size:,} runs ({len(cells)} cell(s) x "
            f"{lrs:,} learning rate(s) x {seeds:,} seed(s)), over the limit of {max_runs:,} runs per "
            f"grid (default {MAX_RUNS:,}; raise it with --max-runs N, or max_runs= in Python)"
        )
    for lr in sorted({lr for c in cells for lr in c.lrs}):  # each rate once, not once per run
        cells[0].job(lr, 0)

    def make() -> Iterator[Job]:
        for c in cells:
            for lr in c.lrs:
                for seed in range(seeds):
                    yield c.job(lr, seed)

    return Grid(size, make, [c.job(c.lrs[0], 0) for c in cells])
