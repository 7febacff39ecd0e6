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


def main() -> int:
    study = load_study("diag-limits-2026")
    for name, stem in REPORTS.items():
        res = results(study, SCALE[name], stem)
        done = sum(1 for _, r in res if r is not None)
        cells = reading_cells(study, [(j, r) for j, r in res if r is not None], list(ALL_READINGS), SCALE[name])
        sys.stdout.write(
            f"## Scale {name}: {done} runs read from {stem.relative_to(RESULTS.parent.parent)}.md\n\n"
            + readings_markdown(cells)
            + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
