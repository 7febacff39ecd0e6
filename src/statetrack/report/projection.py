"""How many more steps a run that did not learn its task would need, read from its learning curve.

A run that never held its ``learned_accuracy`` on the in-distribution validation within its budget is
either still learning or stuck. ``project_steps`` tells the two apart and puts a number on the first: it
fits a power law to the validation error, ``1 - accuracy = a * step^b``, by least squares on the log-log
points from a quarter of the budget on (the first steps are a plateau that says nothing of the trend), and
solves it for the error ``1 - learned_accuracy``. A fit whose exponent is above ``FLAT`` (the error falls
by less than half for ten times the steps) projects nothing: the run is stuck, and more steps of the same
recipe are not the remedy. A projection beyond ``CAP`` steps is reported as beyond it.

It is an extrapolation, not a measurement. It assumes the trend continues as it went, which a schedule
that decays the learning rate to zero in the budget makes pessimistic, and a curve with few points makes
loose; the report prints it as 'projected' beside the curve it comes from.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

FLAT = -0.3  # the exponent above which the error is not falling enough to extrapolate
CAP = 10_000_000  # projections beyond this many steps are reported as beyond it
MIN_POINTS = 3  # validations needed after the first quarter of the budget


@dataclass(frozen=True)
class Projection:
    """steps: the projected step at which the validation error reaches the target (None: no projection);
    exponent: the fitted power; best: the best validation accuracy on the curve; why: why there is no
    projection ('' when there is one); beyond: the projection passed ``CAP``."""

    steps: int | None
    exponent: float | None
    best: float | None
    why: str = ""
    beyond: bool = False

    def text(self) -> str:
        """'projected 5.4k steps', 'projected > 10M steps', or 'flat' / 'too few validations'."""
        if self.steps is None:
            return self.why
        return f"projected > {_short(CAP)} steps" if self.beyond else f"projected {_short(self.steps)} steps"


def _short(n: float) -> str:
    for div, unit in ((1e6, "M"), (1e3, "k")):
        if n >= div:
            return f"{n / div:.2g}{unit}" if n / div < 10 else f"{n / div:.0f}{unit}"
    return f"{n:.0f}"


def project_steps(curve: list[dict], target: float = 0.99, budget: int | None = None) -> Projection:
    """The projection of one run's validation curve (``[{"step": int, "val_accuracy": float}, ...]``, the
    ``curves`` rows of the store) to the validation accuracy ``target``; ``budget``: the run's steps (the
    last step of the curve when not given)."""
    pts = [
        (int(p["step"]), float(p["val_accuracy"]))
        for p in curve
        if p.get("val_accuracy") is not None and int(p.get("step") or 0) > 0
    ]
    best = max((a for _, a in pts), default=None)
    if not pts:
        return Projection(None, None, best, "no validation")
    if best is not None and best >= target:
        return Projection(None, None, best, "reached the target")
    end = budget or max(s for s, _ in pts)
    late = [(s, a) for s, a in pts if s >= end / 4]
    if len(late) < MIN_POINTS:
        return Projection(None, None, best, "too few validations")
    floor = (1 - target) / 10  # an error of 0 would have reached the target: keep the logarithm finite
    xs = np.log([s for s, _ in late])
    ys = np.log([max(1 - a, floor) for _, a in late])
    b, a = (float(v) for v in np.polyfit(xs, ys, 1))
    if b > FLAT:
        return Projection(None, b, best, "flat")
    log_steps = (math.log(1 - target) - a) / b
    if log_steps > math.log(CAP):
        return Projection(CAP, b, best, beyond=True)
    return Projection(max(int(round(math.exp(log_steps))), end), b, best)
