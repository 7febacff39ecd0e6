"""bench/study_cost.py: what a study's grid costs to train, per cell, from a timed step of each shape."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from study_cost import study_cost  # noqa: E402  (a bench script, imported as the test of its function)

STUDY = """
name: tiny-cost
title: tiny
source: test
metric: accuracy
score: {kind: longest, threshold: 0.9}
train: {batch_size: 8, eval_every: 5, val_sequences: 16}
train_lengths: [1, 8]
lrs: [0.01, 0.03]
tables:
  - name: main
    tasks:
      - {label: parity, task: parity}
      - {label: C3, task: "group:C3"}
    models:
      - {label: RNN, model: {layers: rnn, d_model: 4, d_state: 8}}
      - {label: Mamba, model: {layers: mamba, d_model: 4, d_state: 4}, tasks: [parity]}
scales:
  quick: {seeds: 2, steps: 50, eval_batch: 16, test_lengths: [8]}
"""


def test_every_cell_is_costed_from_its_runs_and_steps(tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(STUDY)
    rows = study_cost(str(path), "quick", steps=2)
    assert [(r["model"], r["task"]) for r in rows] == [("RNN", "parity"), ("RNN", "C3"), ("Mamba", "parity")]
    for r in rows:
        assert r["runs"] == 4 and r["steps"] == 50  # 2 learning rates x 2 seeds
        assert r["cpu_ms_per_step"] > 0
        assert r["cpu_s"] == pytest.approx(r["cpu_ms_per_step"] / 1e3 * 50 * 4)
    assert "Mamba" in capsys.readouterr().err
    only = study_cost(str(path), "quick", steps=2, models=["Mamba"])
    assert [(r["model"], r["task"]) for r in only] == [("Mamba", "parity")]
