"""diag-limits-2026: how many published cells each reading of "longest length with accuracy > 90%" matches,
scored from the committed reports (the databases behind them are not in the repository).

    PYTHONPATH=src python docs/results/readings/diag-limits-2026.py > /tmp/readings.md

Each committed report lists, in "Accuracy of every run", the final label's accuracy of every run (model,
task, learning rate, seed) at every test length, and its CSV names the learning rate each cell selected
on the in-distribution validation. This script reads both back into the runs of the study's grid at that
scale (a run at the selected rate gets validation 1, the others 0, so the table's own rule selects the same
rate) and scores them with ``statetrack.report.readings``, the code behind ``statetrack report NAME
--reading``. Per-token and whole-sequence accuracy are stored in the databases only, not in the reports:
those readings show 'not stored' here and are scored by ``statetrack report diag-limits-2026 --reading
all --db DB`` where a database is at hand.
"""

from __future__ import annotations

import csv
import re
import sys
from pathlib import Path

from statetrack.experiments import load_study
from statetrack.report.readings import ALL_READINGS, reading_cells, readings_markdown
from statetrack.runs.runner import RunResult
from statetrack.runs.store import RunStatus
from statetrack.training.evaluation import LengthMetrics

RESULTS = Path(__file__).resolve().parent.parent
#: scale -> the committed report of that scale (markdown, CSV)
REPORTS = {
    "quick": RESULTS / "diag-limits-2026",
    "medium": RESULTS / "medium" / "diag-limits-2026",
    "paper (H100/H200, part of the grid)": RESULTS / "paper-gpu" / "diag-limits-2026",
}
SCALE = {"quick": "quick", "medium": "medium", "paper (H100/H200, part of the grid)": "paper"}
_ACC = re.compile(r"^(\d+(?:\.\d+)?) \(")


def per_run(md: str) -> dict[tuple, dict[int, float]]:
    """(table, model, task, lr, seed) -> {length: final-label accuracy} from 'Accuracy of every run'."""
    body = md.split("## Accuracy of every run, with 95% intervals", 1)[1].split("\n## ", 1)[0]
    out: dict[tuple, dict[int, float]] = {}
    table, lengths = "main", []
    for line in body.splitlines():
        if m := re.match(r"^Table `([\w-]+)`:", line):
            table = m[1]
        elif line.startswith("| model | task | lr | seed |"):
            lengths = [int(x) for x in line.strip("| \n").split(" | ")[4:]]
        elif line.startswith("| ") and not line.startswith(("| chance", "|---")):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            model, task, lr, seed, values = cells[0], cells[1], float(cells[2]), int(cells[3]), cells[4:]
            out[(table, model, task, lr, seed)] = {
                n: float(m[1]) / 100 for n, v in zip(lengths, values, strict=True) if (m := _ACC.match(v))
            }
    return out


def selected_lrs(path: Path) -> dict[tuple, float]:
    """(table, model, task) -> the learning rate the cell selected (the report's CSV)."""
    with path.open(newline="") as f:
        return {(r["table"], r["model"], r["column"]): float(r["lr"]) for r in csv.DictReader(f) if r["lr"]}


def results(study, scale: str, stem: Path) -> list:
    """The (Job, RunResult or None) pairs of the grid at ``scale`` from the committed report ``stem``."""
    accs = per_run(stem.with_suffix(".md").read_text())
    lrs = selected_lrs(stem.with_suffix(".csv"))
    out = []
    for j in study.grid(scale):
        acc = accs.get((j.table, j.label, j.column, j.train.lr, j.seed))
        if acc is None:
            out.append((j, None))
            continue
        metrics = [LengthMetrics(n, a, None, None, None, None, 128) for n, a in sorted(acc.items())]
        chosen = lrs.get((j.table, j.label, j.column)) == j.train.lr
        summary = {"best_val_accuracy": 1.0 if chosen else 0.0, "best_val_loss": 0.0 if chosen else 1.0}
        out.append((j, RunResult(0, RunStatus.COMPLETE, metrics, summary, None)))
    return out


def per_token_estimate(acc: dict[int, float], train_max: int = 60, threshold: float = 0.9) -> int:
    """The longest test length L (of 60, 80, ..., 1000) at which the per-token accuracy, estimated from the
    final-label accuracies, is > ``threshold``. For a causal model on a group's uniform i.i.d. inputs the
    first t inputs of a test sequence are a test sequence of length t, so the per-token accuracy at L is the
    mean over t <= L of the final-label accuracy at t; it is taken as 1 below the training range's top (an
    upper bound) and interpolated linearly between the tested lengths."""
    import numpy as np

    xs = np.array(sorted(acc))
    ys = np.array([acc[n] for n in xs])
    best = 0
    for length in range(60, 1001, 20):
        t = np.arange(1, length + 1)
        if np.where(t < train_max, 1.0, np.interp(t, xs, ys)).mean() > threshold:
            best = length
    return best


def estimated_table(study, res: list) -> str:
    """Per-token holds estimated from the final-label accuracies, median over seeds at the selected rate,
    for the published cells that are not 'x' on both sides."""
    import statistics

    from statetrack.report.render import fmt_value

    rows = [
        "| table | model | column | paper | per-token (estimated), median [seeds] |",
        "|---|---|---|---|---|",
    ]
    cells = reading_cells(study, res, [ALL_READINGS[0]])
    fail = study.score.fail_below or 1
    for c in (c for c in cells if c.published != "x" or (c.value or 0) >= fail):  # not 'x' on both sides
        holds = [
            per_token_estimate({m.length: m.accuracy for m in r.metrics})
            for j, r in res
            if j.table == c.table
            and j.label == c.model
            and j.column == c.column
            and r.summary["best_val_accuracy"]
        ]
        med = statistics.median_low(holds)
        rows.append(
            f"| {c.table} | {c.model} | {c.column} | {c.published} | {fmt_value(med, study)} "
            f"[{', '.join(fmt_value(h, study) for h in holds)}] |"
        )
    return "\n".join(rows) + "\n"


def main() -> int:
    study = load_study("diag-limits-2026")
    for name, stem in REPORTS.items():
        res = results(study, SCALE[name], stem)
        done = sum(1 for _, r in res if r is not None)
        cells = reading_cells(
            study, [(j, r) for j, r in res if r is not None], list(ALL_READINGS), SCALE[name]
        )
        sys.stdout.write(
            f"## Scale {name}: {done} runs read from {stem.relative_to(RESULTS.parent.parent)}.md\n\n"
            + readings_markdown(cells)
            + "\n"
        )
        if name == "medium":
            sys.stdout.write(
                "Per-token holds estimated from the final-label accuracies (`per_token_estimate`: the mean of "
                "the final-label accuracy over the lengths up to L, taken as 1 below 60; an estimate, not the "
                "stored per-token accuracy), for the medium cells that are not 'x' on both sides:\n\n"
                + estimated_table(study, [(j, r) for j, r in res if r is not None])
                + "\n"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
