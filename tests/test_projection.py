"""Projected steps of a run that did not learn its task (statetrack.report.projection), and the learning
table's text for a cell no seed learnt."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from statetrack.report.projection import CAP, project_steps
from statetrack.report.state_tables import unlearnt_text


def _curve(err, steps):
    return [{"step": 0, "val_accuracy": 0.2}] + [{"step": s, "val_accuracy": 1 - err(s)} for s in steps]


def test_a_power_law_curve_projects_the_step_where_it_reaches_the_target():
    # error 0.5 at step 100 halving for each doubling: 1 - acc = 50 / step reaches 0.01 at step 5,000
    p = project_steps(_curve(lambda s: 50 / s, range(100, 1001, 100)), target=0.99)
    assert p.steps == pytest.approx(5000, rel=1e-6) and p.exponent == pytest.approx(-1.0)
    assert p.best == pytest.approx(0.95) and p.text() == "projected 5k steps"
    # a slower power law projects further: 1 - acc = 5 / sqrt(step) reaches 0.01 at 250,000
    assert project_steps(_curve(lambda s: 5 / math.sqrt(s), range(100, 1001, 100))).steps == pytest.approx(
        250_000, rel=1e-6
    )


def test_the_fit_starts_at_a_quarter_of_the_budget():
    # a plateau at chance for the first quarter, then the power law: the plateau does not bend the fit
    curve = _curve(lambda s: 0.8 if s < 250 else 50 / s, range(50, 1001, 50))
    assert project_steps(curve, 0.99, budget=1000).steps == pytest.approx(5000, rel=1e-6)


def test_a_flat_or_noisy_curve_projects_nothing():
    flat = project_steps(_curve(lambda s: 0.6 - s * 1e-5, range(100, 4001, 250)))
    assert flat.steps is None and flat.why == "flat" and flat.text() == "flat" and flat.exponent > -0.3
    rising = project_steps(_curve(lambda s: 0.2 + s * 1e-4, range(100, 4001, 250)))
    assert rising.steps is None and rising.why == "flat"


def test_edge_cases_say_why_there_is_no_projection():
    assert project_steps([]).why == "no validation"
    assert project_steps(_curve(lambda s: 0.001, range(100, 1001, 100))).why == "reached the target"
    assert project_steps(_curve(lambda s: 50 / s, [900, 1000])).why == "too few validations"
    far = project_steps(_curve(lambda s: 0.9 * (s / 100) ** -0.31, range(100, 1001, 100)))
    assert far.beyond and far.steps == CAP and far.text() == "projected > 10M steps"


def test_a_projection_never_falls_inside_the_budget_run():
    # the fitted line crosses the target before the last step though no validation reached it
    curve = _curve(lambda s: 0.5 if s < 900 else 0.02, range(300, 1001, 100))
    p = project_steps(curve, 0.99)
    assert p.steps is not None and p.steps >= 1000


def test_the_learning_table_names_the_best_seed_and_its_projection_with_cpu_hours():
    runs = [
        SimpleNamespace(run_id=1, summary={"best_val_accuracy": 0.6, "steps_run": 1000, "train_time": 100.0}),
        SimpleNamespace(
            run_id=2, summary={"best_val_accuracy": 0.95, "steps_run": 1000, "train_time": 360.0}
        ),
    ]
    curves = {
        1: _curve(lambda s: 0.4, range(100, 1001, 100)),
        2: _curve(lambda s: 50 / s, range(100, 1001, 100)),
    }
    # seed 2 is the best: 5,000 steps at 0.36 s per step is 0.5 hours
    assert unlearnt_text(runs, curves, 0.99) == "best 95.0% · projected 5k steps (0.5 h)"
    assert unlearnt_text(runs, {}, 0.99) == "best 95.0%"  # no curve stored: no projection
    runs[1].summary["best_val_accuracy"] = 0.3
    assert unlearnt_text(runs, curves, 0.99) == "best 60.0% · flat"


def test_the_learning_table_text_of_seeds_that_learnt():
    from statetrack.report.state_tables import learning_text

    assert learning_text([3000, None, 6000]) == "2/3 · 4,500 [3,000-6,000]"
    assert learning_text([None, None]) == "0/2"
    # runs started from a construction have the task at their first validation
    assert learning_text([0, 0, 0]) == "3/3 · at the start"
