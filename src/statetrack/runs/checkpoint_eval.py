"""A checkpoint scored again (``statetrack eval``): rebuild its model, check that the task and lengths fit,
evaluate every test length and the other draws, and say what the file's own record says of it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from statetrack.config import MAX_PARAMS, EvalConfig, Split, TrainConfig
from statetrack.progress import warn
from statetrack.runs.store import checkpoint_of_run_problem
from statetrack.tasks import get_task
from statetrack.tasks.base import Task
from statetrack.training import memory
from statetrack.training.checkpoint import check_task_fits, load_checkpoint
from statetrack.training.device import resolve_device
from statetrack.training.evaluation import check_eval_memory, evaluate_more, evaluate_run


@dataclass(frozen=True)
class CheckpointEval:
    """A checkpoint's scores: its training config, the task scored, the metrics per test length of the
    first draw (``metrics``; ``lm`` for a corpus instead), the other draws' (``more``), the failure horizons
    (with ``EvalConfig.horizons``), the file's metadata (``extra``) and what is wrong with its record of
    its run, if anything (``problem``: a warning is logged, and the file is scored as it is)."""

    config: TrainConfig
    task: Task
    metrics: list
    lm: list
    more: dict[Split, list] = field(default_factory=dict)
    horizons: dict = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None


def evaluate_checkpoint(
    path: str | Path,
    cfg: EvalConfig | None = None,
    task: str | None = None,
    max_params: int = MAX_PARAMS,
    on_length: Callable | None = None,
) -> CheckpointEval:
    """Score the checkpoint at ``path`` under ``cfg`` (EvalConfig's defaults if None), on its own task or on
    ``task`` (a task string whose vocabulary and classes the model fits). A model of more than
    ``max_params`` parameters is refused before it is built; a run that would not fit in memory before it
    starts (UserError, one line). ``on_length(i, n, length)`` after each test length."""
    cfg = cfg or EvalConfig()
    device = resolve_device(cfg.device)
    model, config, own, extra = load_checkpoint(path, device=device, max_params=max_params)
    scored = own
    if task:
        scored = get_task(task)
        check_task_fits(model, scored, str(path), config.task)
    check_eval_memory(model, cfg, memory.available() if device.type == "cpu" else None)
    problem = checkpoint_of_run_problem(str(path), extra)
    if problem:  # said before the scores, which can take a while
        warn(f"warning: {problem}; evaluating the file as it is")
    metrics, lm = evaluate_run(model, scored, cfg, on_length=on_length)  # LM tasks: on the test split
    more, horizons = evaluate_more(model, scored, cfg, metrics)
    return CheckpointEval(config, scored, metrics, lm, more, horizons, extra, problem)
