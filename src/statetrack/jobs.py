"""A run of a grid: :class:`Job`, what ``Study.cells()`` returns and a sweep runs."""
from __future__ import annotations

from dataclasses import dataclass, field

from statetrack.config import EvalConfig, TrainConfig
from statetrack.runner import run_key


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
