"""The runs of a grid: :class:`Job` (one run), :class:`Grid` (all of them, expanded lazily: what
``Study.grid()`` returns and a sweep runs) and the cap on their number, :data:`MAX_RUNS`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from statetrack.config import EvalConfig, TrainConfig


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
        # lazy: runner imports torch, and this module is on the CLI's start-up path (--max-runs's default)
        from statetrack.runs.runner import run_key

        return run_key(self.train, self.eval, self.study, self.label)


#: the most runs a grid may have unless the caller raises the limit (``--max-runs N``, ``max_runs=``):
#: 25 times the largest built-in grid (diag-limits-2026 at paper scale, 387 runs), and a week of one core
#: at the quick scale's minute per run. A grid above it is far likelier a slip (``seeds: 1000000``) than a
#: plan, and is refused before any run's config is built.
MAX_RUNS = 10_000


class Grid:
    """The runs of a grid, counted before any is built and expanded lazily: iterating builds one
    :class:`Job` at a time, so memory does not grow with the grid. ``heads`` holds the first run of every
    cell (a cell's runs differ only in learning rate and seed): all that checking the input needs."""

    def __init__(self, size: int, make: Callable[[], Iterator[Job]], heads: list[Job]):
        self.size, self._make, self.heads = size, make, heads

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[Job]:
        return self._make()
