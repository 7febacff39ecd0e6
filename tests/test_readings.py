"""Readings of a 'longest length with accuracy > 90%' statistic (statetrack.report.readings): each pooling,
position and span scored from stored runs, on the command line and from the committed reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from statetrack.cli import main
from statetrack.errors import UserError
from statetrack.experiments import load_study
from statetrack.report.readings import (
    ALL_READINGS,
    Pooling,
    Position,
    Reading,
    Span,
    parse_readings,
    reading_cells,
    readings_markdown,
)
from statetrack.runs.runner import RunResult
from statetrack.training.evaluation import LengthMetrics

STUDY = """
name: readings
title: readings
source: test
score: {kind: longest, threshold: 0.9, every_shorter: false, fail_below: 10}
train_lengths: [1, 4]
tables:
  - tasks: [parity]
    models:
      - {label: A, model: {layers: rnn, d_model: 2, d_state: 4}, published: {parity: 100}}
scales:
  quick: {seeds: 3, steps: 2, test_lengths: [10, 100, 1000], eval_batch: 16}
"""

# seed -> length -> (final, per-token, whole-sequence) accuracy
RUNS = {
    0: {10: (1.0, 1.0, 0.95), 100: (0.2, 0.95, 0.5), 1000: (0.95, 0.5, 0.1)},
    1: {10: (0.95, 0.99, 0.8), 100: (0.95, 0.97, 0.3), 1000: (0.5, 0.91, 0.0)},
    2: {10: (0.5, 0.8, 0.0), 100: (0.5, 0.8, 0.0), 1000: (0.5, 0.8, 0.0)},
}
# reading -> the cell's value: per seed the longest length, then the median (lower middle) or the best
EXPECTED = {
    "median/final/as-worded": 100,  # seeds: 1000, 100, 0
    "median/final/every-shorter": 10,  # seeds: 10, 100, 0
    "median/per-token/as-worded": 100,  # seeds: 100, 1000, 0
    "median/per-token/every-shorter": 100,  # seeds: 100, 1000, 0
    "median/whole-sequence/as-worded": 0,  # seeds: 10, 0, 0
    "median/whole-sequence/every-shorter": 0,
    "best-seed/final/as-worded": 1000,
    "best-seed/final/every-shorter": 100,
    "best-seed/per-token/as-worded": 1000,
    "best-seed/per-token/every-shorter": 1000,
    "best-seed/whole-sequence/as-worded": 10,
    "best-seed/whole-sequence/every-shorter": 10,
}


@pytest.fixture
def study(tmp_path):
    p = tmp_path / "readings.yaml"
    p.write_text(STUDY)
    return load_study(str(p))


def _results(study):
    out = []
    for i, j in enumerate(study.cells("quick")):
        ms = [LengthMetrics(n, *acc, None, 0.5, 4096) for n, acc in RUNS[j.seed].items()]
        out.append((j, RunResult(i, "complete", ms, {"best_val_accuracy": 1.0}, None)))
    return out


def test_every_reading_scores_the_cell_its_own_way(study):
    cells = reading_cells(study, _results(study), list(ALL_READINGS), "quick")
    got = {c.reading.name: c.value for c in cells}
    assert got == EXPECTED
    by = {c.reading.name: c for c in cells}
    # the paper's 100 within factor 2 (the default tolerance); 0 is 'x', below fail_below, a difference
    assert by["median/final/as-worded"].differs is False and by["median/final/as-worded"].text == "100"
    assert by["best-seed/final/as-worded"].differs is True and by["best-seed/final/as-worded"].capped
    assert by["best-seed/final/as-worded"].text == ">=1000"
    assert by["median/whole-sequence/as-worded"].text == "x" and by["median/whole-sequence/as-worded"].differs
    md = readings_markdown(cells)
    assert "| median/final/as-worded | 1 | 1 | 1 | - |" in md
    assert "| best-seed/whole-sequence/every-shorter | 0 | 1 | 1 | A parity |" in md


def test_the_study_reading_reproduces_the_main_table(study):
    """median/final/as-worded is the study's own rule: its cell is the report's."""
    from statetrack.report import study_tables

    res = _results(study)
    main_cell = study_tables(study, res, "quick")[0].rows[0]["cells"]["parity"]
    (mine,) = reading_cells(study, res, [Reading(Pooling.MEDIAN, Position.FINAL, Span.AS_WORDED)], "quick")
    assert (mine.value, mine.differs, mine.capped) == (
        main_cell.selected,
        main_cell.differs,
        main_cell.capped,
    )


def test_reading_names_are_typed():
    assert len(ALL_READINGS) == 12 and len({r.name for r in ALL_READINGS}) == 12
    assert parse_readings(["all"]) == list(ALL_READINGS)
    r = Reading.parse("best-seed/per-token/every-shorter")
    assert (r.pooling, r.position, r.span) == (Pooling.BEST_SEED, Position.PER_TOKEN, Span.EVERY_SHORTER)
    with pytest.raises(UserError, match="did you mean 'median/final/as-worded'"):
        Reading.parse("median/final/as-wordd")


@pytest.mark.usefixtures("study")  # writes the study file
def test_report_reading_on_the_command_line(tmp_path, capsys):
    """A sweep stored, then `report --reading`: the study's reading gives the report's own cell, every
    reading one JSON row; a bad reading is one line on stderr, exit 2."""
    yaml, db = str(tmp_path / "readings.yaml"), str(tmp_path / "r.db")
    assert main(["sweep", yaml, "--db", db, "--workers", "1"]) == 0
    assert main(["report", yaml, "--db", db, "--out", "", "--json"]) == 0
    capsys.readouterr()
    assert main(["report", yaml, "--db", db, "--reading", "all", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["reading"] for r in rows] == [r.name for r in ALL_READINGS]
    assert all(r["value"] is not None for r in rows)  # the store keeps every position's accuracy
    assert main(["report", yaml, "--db", db, "--reading", "median/final/as-worded"]) == 0
    assert "| median/final/as-worded |" in capsys.readouterr().out
    assert main(["report", yaml, "--db", db, "--reading", "best-seed/final"]) == 2
    err = capsys.readouterr().err
    assert "unknown reading 'best-seed/final'" in err and err.count("\n") == 1 and "Traceback" not in err


def test_the_committed_readings_table_is_what_the_script_computes():
    """docs/results/readings/diag-limits-2026.md holds the script's output below its statement."""
    root = Path(__file__).resolve().parent.parent
    script = root / "docs/results/readings/diag-limits-2026.py"
    out = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(root / "src")},
    ).stdout
    assert "| median/final/as-worded | 32 | 40 | 40 |" in out  # the medium report's own 32 of 40
    assert out in (root / "docs/results/readings/diag-limits-2026.md").read_text()
