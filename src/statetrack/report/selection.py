"""Scoring and selection: one run -> one number, and the runs of a table cell -> the selected number.

``run_score`` turns a run's metrics into the number it contributes (per test length, mean over a range,
or longest length above a threshold). ``select`` reduces the runs of one (model, task) over learning
rates and seeds with the study's ``select`` rule, choosing on in-distribution validation unless the
study says the paper chose on the test lengths. ``compare`` says whether our selected value differs
from the published one beyond the study's tolerance.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from statetrack.experiments import Study

MARK = "*"


def metric_by_length(res, metric: str) -> dict[int, float]:
    """The metric at every scored length (a length without a test set, or without a scaled score where
    every sequence has the same label, is left out: it is neither a pass nor a fail)."""
    return {
        m.length: getattr(m, metric) for m in (res.metrics if res else []) if getattr(m, metric) is not None
    }


def run_uncertain(study, res) -> bool:
    """``longest`` scores: whether the run's longest length could move within the 95% intervals (see
    ``evaluation.uncertain_judgement``); False for metrics without an interval."""
    from statetrack.training.evaluation import (
        uncertain_judgement,  # heavy (numpy, torch): selection stays light
    )

    sc = study.score
    return bool(
        res
        and uncertain_judgement(
            res.metrics, sc.threshold, study.metric, strict=True, every_shorter=sc.every_shorter
        )
    )


def longest_above(per_length: dict[int, float], threshold: float, every_shorter: bool = True) -> int:
    """Longest test length L with metric > threshold at L and at every shorter test length (0: none);
    ``every_shorter`` False: the longest L with metric > threshold at L, whatever the shorter ones read."""
    if not every_shorter:
        return max((n for n, v in per_length.items() if v > threshold), default=0)
    best = 0
    for n in sorted(per_length):
        if not per_length[n] > threshold:
            break
        best = n
    return best


def run_score(study, res, column_length: int | None = None) -> float | None:
    """The number a run contributes to a cell."""
    by_len = metric_by_length(res, study.metric)
    if not by_len:
        return None
    sc = study.score
    if sc.kind == "per_length":
        return None if column_length is None else by_len.get(column_length)
    if sc.kind == "mean":
        lo, hi = sc.lengths or (min(by_len), max(by_len))
        vals = [v for n, v in by_len.items() if lo <= n <= hi]
        return statistics.fmean(vals) if vals else None
    return float(longest_above(by_len, sc.threshold, sc.every_shorter))


def _reduce(vals: list[float], how: str, lengths: bool = False) -> float:
    """``vals`` reduced by ``how``; ``lengths``: the values are test lengths, whose median or mean is the
    lower middle one, a length that was tested (32 and 256 give 32, never 144)."""
    if lengths and how in ("median", "mean"):
        return statistics.median_low(vals)
    reducers: dict[str, Callable[[list[float]], float]] = {
        "median": statistics.median,
        "mean": statistics.fmean,
        "max": max,
        "min": min,
    }
    return reducers[how](vals)


@dataclass
class TableCell:
    selected: float | None = None
    values: list[float] = field(default_factory=list)  # the seeds' scores at the selected learning rate
    lr: float | None = None
    runs: int = 0
    missing: int = 0
    published: float | str | None = None
    differs: bool | None = None
    capped: bool = False  # longest: reached our longest test length
    uncertain: bool = False  # longest: a 95% interval the judgement reads contains the threshold
    not_scored: str | None = None  # per_length: why no run has a test set at this length


def select(study, entries: list[tuple[float, float | None, float | None, float | None]]) -> TableCell:
    """entries: (lr, score, val_accuracy, val_loss) for every complete run of one cell."""
    sel = study.select
    by_lr: dict[float, list] = {}
    for lr, score, va, vl in entries:
        if score is not None:
            by_lr.setdefault(lr, []).append(
                (score, va if va is not None else -1.0, vl if vl is not None else float("inf"))
            )
    if not by_lr:
        return TableCell()
    lengths = study.score.kind == "longest"
    if sel.using == "test":
        agg = {lr: _reduce([s for s, _, _ in v], sel.seeds, lengths) for lr, v in by_lr.items()}
        if sel.lrs == "max":
            lr = max(agg, key=lambda k: (agg[k], -k))
            return TableCell(agg[lr], [s for s, _, _ in by_lr[lr]], lr)
        return TableCell(
            _reduce(list(agg.values()), sel.lrs, lengths), [s for v in by_lr.values() for s, _, _ in v], None
        )
    # on validation: never look at the test scores to choose
    how = sel.seeds if sel.seeds in ("median", "mean") else "max"
    vagg = {
        lr: (_reduce([a for _, a, _ in v], how), -_reduce([l for _, _, l in v], "mean"))
        for lr, v in by_lr.items()
    }
    lr = max(vagg, key=lambda k: (vagg[k], -k))
    runs = by_lr[lr]
    scores = [s for s, _, _ in runs]
    if sel.seeds in ("max", "min"):
        order = sorted(runs, key=lambda r: (r[1], -r[2]))
        value = (order[-1] if sel.seeds == "max" else order[0])[0]
    else:
        value = _reduce(scores, sel.seeds, lengths)
    return TableCell(value, scores, lr)


def _published_number(v: float | str | None) -> float | None:
    if v is None:
        return None
    if isinstance(v, str):
        return 0.0 if v.strip().lower() in ("x", "fail", "fails") else None
    return float(v)


def compare(study: Study, cell: TableCell) -> bool | None:
    """True when our selected value and the published one differ beyond the study's tolerance."""
    pub = _published_number(cell.published)
    if pub is None or cell.selected is None:
        return None
    ours = cell.selected
    if study.score.kind != "longest":
        return abs(ours - pub) > study.tolerance
    fail = study.score.fail_below or 1
    ours_x, pub_x = ours < fail, pub < fail
    if ours_x or pub_x:
        return ours_x != pub_x
    if cell.capped:  # we cannot tell beyond our longest test length
        return pub < ours / study.length_factor
    f = study.length_factor
    return not (1 / f <= ours / pub <= f)
