"""A study's report on the long-range draw and the failure horizons, beside its tables: the same cells on
the long-range draw (n/a with the reason where a task has none), the horizons per model and task, and
the per-run intervals on the long-range draw; the main table and its published numbers unchanged."""

from __future__ import annotations

import csv
import io
import json

from statetrack.cli import main
from statetrack.experiments import load_study
from statetrack.report.collect import collect

STUDY = """
name: tiny-long
title: tiny long-range study
source: test
metric: accuracy
score: {kind: longest, threshold: 0.9}
train: {batch_size: 8, eval_every: 5, val_sequences: 16, lr: 0.01}
train_lengths: [1, 8]
tables:
  - name: main
    tasks:
      - {label: aba, task: "dfa:ABA"}
      - {label: ends ab, task: "dfa:ENDS"}
      - {label: parity, task: "parity"}
      - {label: brackets, task: "modarith-brackets:5"}
    models:
      - label: RNN
        model: {layers: rnn, d_model: 4, d_state: 8}
        published: {aba: 20}
scales:
  quick: {seeds: 2, steps: 5, eval_batch: 16, test_lengths: [8, 20], test_split: test+long, horizons: true}
"""


def _dfa(tmp_path, name, states, alphabet, start, accept, rows):
    spec = {
        "states": states,
        "alphabet": alphabet,
        "start": start,
        "accept": accept,
        "transitions": {s: dict(zip(alphabet, r, strict=True)) for s, r in zip(states, rows, strict=True)},
    }
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(spec))
    return str(p)


def test_report_has_long_range_and_horizon_tables(tmp_path, db):
    aba = _dfa(
        tmp_path,
        "aba",
        ["n", "a", "ab", "aba"],
        ["a", "b"],
        "n",
        ["aba"],
        [["a", "n"], ["a", "ab"], ["aba", "n"], ["aba", "aba"]],
    )
    ends = _dfa(
        tmp_path, "ends", ["x", "a", "ab"], ["a", "b"], "x", ["ab"], [["a", "x"], ["a", "ab"], ["a", "x"]]
    )
    path = tmp_path / "s.yaml"
    path.write_text(STUDY.replace("ABA", aba).replace("ENDS", ends))
    assert main(["sweep", str(path), "--db", db, "--workers", "1"]) == 0
    out = tmp_path / "report"
    assert main(["report", str(path), "--db", db, "--out", str(out)]) == 0
    rep = collect(load_study(str(path)), db, "quick")
    names = [t.name for t in rep.tables]
    assert names == ["main", "main-learning", "main-long", "main-horizon"]
    main_t, _, long_t, hor = rep.tables
    row = long_t.rows[0]
    assert row["text"]["ends ab"] == "n/a" and row["text"]["brackets"] == "n/a"
    assert "window language" in long_t.caption and "finite automaton" in long_t.caption
    assert not any(row["differs"].values()) and "paper: aba" not in long_t.headers()
    assert "paper: aba" in main_t.headers()  # the main table keeps its published column
    assert row["text"]["aba"] == long_t.rows[0]["text"]["aba"] and "*" not in row["text"]["aba"]
    h = hor.rows[0]["text"]
    # a window language has no witness family but every string up to the exhaustive length is checked:
    # its verified horizon is a number; brackets is not regular, so it has none
    assert h["ends ab"] != "n/a" and h["ends ab"].split()[0].lstrip(">=").isdigit()
    assert h["brackets"] == "n/a"
    horizon = [r.summary["horizons"]["horizon"] for j, r in rep.results if j.column == "aba"]
    assert len(horizon) == 2 and all(x is None or 1 <= x <= 20 for x in horizon)
    assert h["aba"].split()[0] in {">=20"} | {f"{x:g}" for x in range(1, 21)} | {
        f"{x + 0.5:g}" for x in range(1, 21)
    }
    md = (out / "tiny-long.md").read_text()
    assert "on the long-range draw" in md and "failure horizons" in md
    assert "## Accuracy of every run on the long-range draw, with 95% intervals" in md
    # the CSV writes every horizon as a number, with capped flagging a lower bound ('>=N' in the table)
    rows = [
        r
        for r in csv.DictReader(io.StringIO((out / "tiny-long.csv").read_text()))
        if r["table"] == "main-horizon"
    ]
    by = {r["column"]: r for r in rows}
    for col in ("aba", "parity"):
        assert float(by[col]["selected"]) > 0 and int(by[col]["seeds"]) == 2
        assert (by[col]["capped"] == "True") == h[col].startswith(">=")
    assert main(["report", str(path), "--db", db, "--out", str(out), "--html", "--figures", ""]) == 0
    assert "on the long-range draw" in (out / "tiny-long.html").read_text()
