"""One JSON schema for a run, shared by every command's ``--json`` (field by field in docs/json.md).

- a **run** (``statetrack runs --json``, one per line): ``RUN_KEYS``;
- a **length row** (``train``, ``eval``, ``rerun``, ``sweep``, ``reproduce``: one per run, draw and test
  length): the run's keys, ``length``, ``split`` (the draw: ``test`` or ``long``) and the metrics at that
  length (``LENGTH_KEYS``); ``sweep`` and ``reproduce`` add the run's place in the study's grid
  (``GRID_KEYS``);
- a **run in detail** (``statetrack runs show ID --json``, one object): ``DETAIL_KEYS``: the run's keys,
  its full config, versions, training summary, learning curve and per-length metrics.

``eval`` reads a checkpoint, not the database: its rows carry the run id, study and label recorded in
the checkpoint (null for a construction's) and null status, wall time and longest length.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import Any

from statetrack.runs.store import MetricRow, RunRecord
from statetrack.training.evaluation import LengthMetrics

RUN_KEYS = (
    "run_id",
    "study",
    "label",
    "model",
    "task",
    "seed",
    "status",
    "train_min_len",
    "train_max_len",
    "checkpoint",
    "wall_time",
    "longest_90",
)
METRIC_KEYS = tuple(f.name for f in fields(LengthMetrics) if f.name != "length")
LENGTH_KEYS = RUN_KEYS + ("length", "split") + METRIC_KEYS
GRID_KEYS = ("table", "column", "lr")
DETAIL_KEYS = RUN_KEYS + (
    "error",
    "created",
    "finished",
    "config",
    "versions",
    "summary",
    "curve",
    "metrics",
    "split_metrics",
)


def run_object(row: RunRecord) -> dict[str, Any]:
    """A run of the results database (``Store.run`` / ``Store.runs``) in the shared schema."""
    return {
        "run_id": row.id,
        "study": row.study,
        "label": row.label,
        "model": row.model,
        "task": row.task,
        "seed": row.seed,
        "status": str(row.status),
        "train_min_len": row.train_min_len,
        "train_max_len": row.train_max_len,
        "checkpoint": row.checkpoint,
        "wall_time": row.wall_time,
        "longest_90": (row.summary or {}).get("longest_90"),
    }


def checkpoint_run(config: dict[str, Any], extra: dict[str, Any], task: str, path: str) -> dict[str, Any]:
    """The run a checkpoint records (``statetrack eval``): ``config`` a TrainConfig dict, ``extra`` its
    metadata; ``task`` the task evaluated on."""
    return {
        "run_id": extra.get("run_id"),
        "study": extra.get("study"),
        "label": extra.get("label"),
        "model": config["model"]["layers"],
        "task": task,
        "seed": config["seed"],
        "status": None,
        "train_min_len": config["train_min_len"],
        "train_max_len": config["train_max_len"],
        "checkpoint": str(path),
        "wall_time": None,
        "longest_90": None,
    }


def metric_dict(m: LengthMetrics | MetricRow | dict[str, Any]) -> dict[str, Any]:
    """A LengthMetrics (or a database metrics row) as ``length`` + ``METRIC_KEYS`` (a row stored before
    the interval was recorded gets it computed)."""
    d = (m if isinstance(m, LengthMetrics) else LengthMetrics.from_row(m)).as_dict()
    return {k: d[k] for k in ("length",) + METRIC_KEYS}


def length_rows(
    run: dict[str, Any],
    metrics: Iterable[LengthMetrics | MetricRow | dict[str, Any]],
    split: str = "test",
    **grid: object,
) -> list[dict[str, Any]]:
    """One row per test length: the run object, ``length``, ``split`` and the metrics (and ``grid`` keys if
    given)."""
    out = []
    for m in metrics:
        d = metric_dict(m)
        out.append({**run, "length": d.pop("length"), "split": split, **d, **grid})
    return out


def split_rows(
    run: dict[str, Any],
    metrics: Iterable[LengthMetrics | MetricRow | dict[str, Any]],
    more: Mapping[str, Iterable[LengthMetrics | MetricRow | dict[str, Any]]] | None,
    headline: str = "test",
    **grid: object,
) -> list[dict[str, Any]]:
    """The length rows of a run's headline draw, then those of its other draws (``more``: split -> metrics)."""
    rows = length_rows(run, metrics, headline, **grid)
    for split, ms in (more or {}).items():
        rows += length_rows(run, ms, split, **grid)
    return rows


def run_detail(
    row: RunRecord,
    metrics: list[Any],
    curve: list[dict[str, Any]],
    split_metrics: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``statetrack runs show --json``: the run, its config, versions, summary, curve and metrics (those of
    the headline draw; ``split_metrics``: split -> those of its other draws)."""
    return {
        **run_object(row),
        "error": row.error,
        "created": row.created,
        "finished": row.finished,
        "config": row.config,
        "versions": row.versions,
        "summary": row.summary or {},
        "curve": curve,
        "metrics": [metric_dict(m) for m in metrics],
        "split_metrics": {s: [metric_dict(m) for m in ms] for s, ms in (split_metrics or {}).items()},
    }
