"""Learnability as a measurement: the stop criterion, learned_at_step, per-position supervision and the
length curriculum (statetrack.training.loop, statetrack.training.steps.batches)."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
import torch

from statetrack.config import EvalConfig, ModelConfig, Supervision, TrainConfig
from statetrack.errors import UserError
from statetrack.runs.runner import check_run, run, run_key
from statetrack.tasks import get_task
from statetrack.training.loop import Learning, StopReason, train
from statetrack.training.steps import batches


def _cfg(**kw) -> TrainConfig:
    base = {
        "task": "parity",
        "model": ModelConfig(layers="rnn", d_model=8, d_state=8),
        "steps": 200,
        "batch_size": 16,
        "lr": 0.03,
        "eval_every": 10,
        "val_sequences": 64,
        "device": "cpu",
    }
    return TrainConfig(**{**base, **kw})


def _first_batch(cfg: TrainConfig):
    """The first training batch (x, y, mask) of ``cfg`` from seed 0, on the CPU."""
    return next(batches(get_task(cfg.task), np.random.default_rng(0), cfg, torch.device("cpu")))


def test_learning_needs_the_streak_and_records_its_first_step():
    learning = Learning(_cfg(learned_accuracy=0.99, learned_validations=3))
    seen = [
        learning.see(s, a)
        for s, a in [
            (0, 0.5),
            (10, 0.995),
            (20, 1.0),
            (30, 0.9),
            (40, 0.99),
            (50, 1.0),
            (60, 0.999),
            (70, 0.5),
        ]
    ]
    assert seen == [False, False, False, False, False, False, True, True]  # learnt stays learnt
    assert learning.learned_at == 40  # the streak's first validation, not the one that completed it


def test_a_run_that_learns_stops_there_and_records_the_step(tmp_path):
    cfg = _cfg(steps=2000, stop_when_learned=True)
    res = train(cfg, progress=False)
    assert res.stop_reason == StopReason.LEARNED
    assert res.learned_at_step is not None
    # stopped at the validation that completed the streak: learned_validations - 1 validations later
    assert res.steps_run == res.learned_at_step + (cfg.learned_validations - 1) * cfg.eval_every
    accs = {p.step: p.val_accuracy for p in res.curve}
    assert all(accs[s] >= 0.99 for s in range(res.learned_at_step, res.steps_run + 1, cfg.eval_every))
    # the run is still scored at its test lengths, and the summary carries the same fields
    r = run(cfg, EvalConfig(lengths=[16], batch_size=32, device="cpu"), db=tmp_path / "t.db")
    assert r.summary["learned_at_step"] == res.learned_at_step
    assert r.summary["stop_reason"] == "learned"
    # the same seed trains the same model: the run's numbers at 16 are those of the model trained above
    from statetrack.training.evaluation import evaluate

    (m,) = evaluate(res.model, get_task("parity"), EvalConfig(lengths=[16], batch_size=32, device="cpu"))
    assert (r.metrics[0].length, r.metrics[0].n_sequences) == (16, m.n_sequences)
    assert (r.metrics[0].accuracy, r.metrics[0].token_accuracy) == (m.accuracy, m.token_accuracy)
    # what the run cost: its CPU time (no more than its wall time times the cores) and the load it ran under
    assert 0 < r.summary["cpu_time"] <= r.summary["train_time"] * (os.cpu_count() or 1) + 5
    assert r.summary["load_average"] is None or r.summary["load_average"] >= 0


def test_a_run_that_does_not_learn_records_none():
    # a time-invariant stack cannot track parity: its in-distribution accuracy stays below 99%
    res = train(
        _cfg(
            model=ModelConfig(layers="s4d", d_model=8, d_state=8),
            task="parity:final",
            train_min_len=20,
            train_max_len=40,
            steps=60,
            stop_when_learned=True,
        ),
        progress=False,
    )
    assert res.learned_at_step is None
    assert res.stop_reason == StopReason.BUDGET and res.steps_run == 60


def test_curriculum_raises_the_longest_length_by_stages():
    cfg = _cfg(train_min_len=3, train_max_len=40, steps=100, curriculum_start=10, curriculum_stages=4)
    tops = [cfg.max_length_at(s) for s in range(1, 101)]
    assert tops[:25] == [10] * 25 and tops[-25:] == [40] * 25
    assert sorted(set(tops)) == [10, 20, 30, 40]
    assert _cfg(train_min_len=3, train_max_len=40).max_length_at(1) == 40
    drawn = [
        x.shape[1]
        for x, _, _ in (
            next(it)
            for it in [batches(get_task("parity"), np.random.default_rng(0), cfg, torch.device("cpu"))] * 100
        )
    ]
    assert all(3 <= n <= cfg.max_length_at(i + 1) for i, n in enumerate(drawn))
    assert max(drawn[:25]) <= 10 and max(drawn[75:]) > 30
    with pytest.raises(ValueError, match="curriculum_start 50 is outside"):
        _cfg(train_min_len=3, train_max_len=40, curriculum_start=50)


def _value(tokens: list[str]) -> int:
    """d op d op ... d with * before + and -, left to right: a sum of products."""
    terms, sign, prod = [], 1, int(tokens[0])
    for op, d in zip(tokens[1::2], tokens[2::2], strict=True):
        if op == "*":
            prod *= int(d)
        else:
            terms.append(sign * prod)
            sign, prod = (1 if op == "+" else -1), int(d)
    return sum(terms) + sign * prod


def test_every_position_supervision_reads_every_prefix_label():
    task = get_task("modarith:5")
    cfg = _cfg(task="modarith:5", supervision="every", train_min_len=9, train_max_len=9)
    x, y, m = next(batches(task, np.random.default_rng(0), cfg, torch.device("cpu")))
    assert bool(m.all())
    # the targets are the values of the prefixes: check them against an independent evaluation
    for row_x, row_y in zip(x.tolist(), y.tolist(), strict=True):
        for t in range(0, 9, 2):  # after each digit
            assert _value([task.symbols[i] for i in row_x[: t + 1]]) % 5 == row_y[t]
    x2, y2, m2 = _first_batch(_cfg(task="modarith:5", train_min_len=9, train_max_len=9))
    assert torch.equal(x, x2) and torch.equal(y, y2) and int(m2.sum()) == m2.shape[0]  # the same data


def test_every_position_supervision_is_refused_where_prefixes_have_no_label():
    cfg = _cfg(task="modarith-brackets:5", supervision="every")
    with pytest.raises(UserError, match="modarith-brackets:5 labels only its final position"):
        check_run(cfg, EvalConfig(lengths=[16], device="cpu"))


def _last_zero_from_end(x: torch.Tensor) -> list[int]:
    """For each string of Tomita 1 (1*): how many inputs after its last 0 (the length where it has none)."""
    n = x.shape[1]
    return [n - 1 - max((t for t, v in enumerate(row) if v == 0), default=-1) for row in x.tolist()]


def test_the_long_range_training_draw_puts_the_deciding_input_in_the_first_half():
    cfg = _cfg(task="tomita:1", train_split="long", train_min_len=40, train_max_len=40)
    x, y, m = _first_batch(cfg)
    gaps = _last_zero_from_end(x)
    # half accepted (all 1s), half rejected with every 0 in the first 20 inputs
    assert sorted(set(y[:, -1].tolist())) == [0, 1] and abs(int(y[:, -1].sum()) - 8) <= 1
    assert all(g >= 20 for g in gaps)
    assert all((g == 40) == bool(lab) for g, lab in zip(gaps, y[:, -1].tolist(), strict=True))
    # the task's own targets (every prefix's answer) and mask, as the training draw has them
    assert bool(m.all()) and torch.equal(y[:, 0], (x[:, 0] == 1).long())
    # the training draw: a rejected string's last 0 is nearly always among its last inputs
    x2, _, _ = _first_batch(_cfg(task="tomita:1", train_min_len=40, train_max_len=40))
    assert np.median(_last_zero_from_end(x2)) < 3


def test_the_long_range_training_draw_falls_back_where_it_has_no_strings():
    cfg = _cfg(task="tomita:1", train_split="long", train_min_len=1, train_max_len=1)
    x, y, _ = _first_batch(cfg)
    plain = cfg.model_copy(update={"train_split": "train"})
    x2, y2, _ = _first_batch(plain)
    assert torch.equal(x, x2) and torch.equal(y, y2) and torch.equal(y, (x == 1).long())
    with pytest.raises(UserError, match="train_split 'test' is for generated tasks; lm:synthetic"):
        check_run(_cfg(task="lm:synthetic", train_split="test"), EvalConfig(lengths=[16], device="cpu"))
    with pytest.raises(UserError, match="train_split 'long' needs a regular task"):
        check_run(
            _cfg(task="modarith-brackets:5", train_split="long"), EvalConfig(lengths=[16], device="cpu")
        )


def test_the_validation_strings_come_from_the_training_draw():
    from statetrack.training.loop import validation_set

    cfg = _cfg(task="tomita:1", train_split="long", train_min_len=33, train_max_len=40, val_sequences=64)
    for x, y, _ in validation_set(get_task("tomita:1"), cfg, torch.device("cpu")):
        gaps = _last_zero_from_end(x)
        assert all(g >= (x.shape[1] + 1) // 2 for g in gaps)
        assert 0 < int(y[:, -1].sum()) < x.shape[0]


def test_new_training_fields_keep_older_run_keys():
    cfg = _cfg()
    key = cfg.key_dict()
    assert not set(TrainConfig.LATE_FIELDS) & set(key)
    changed = _cfg(supervision=Supervision.EVERY)
    assert changed.key_dict()["supervision"] == "every"
    assert _cfg(train_split="long").key_dict()["train_split"] == "long"
    ev = EvalConfig(lengths=[16], device="cpu")
    assert run_key(cfg, ev, None, None) != run_key(changed, ev, None, None)


EVIDENCE_STUDY = """
name: ev
title: evidence test
source: test
metric: accuracy
oracle: true
score: {kind: mean}
train: {batch_size: 16, eval_every: 10, val_sequences: 32, lr: 0.01}
train_lengths: [1, 20]
tables:
  - name: main
    tasks: [parity]
    models:
      - {label: Mamba-3, model: {layers: mamba3, d_model: 8, d_state: 4}}
      - {label: Mamba-3 (construction), model: {layers: "mamba3(headdim=8)", d_model: 4, d_state: 2},
         control_of: Mamba-3, train: {init: "construction:parity-mamba3"}}
      - {label: "Mamba [0,1]", model: {layers: "mamba(conv=0)", d_model: 8, d_state: 4}}
scales:
  quick: {seeds: 2, steps: 30, eval_batch: 16, test_lengths: [100, 101], test_split: long}
"""


def _swept(tmp_path, text: str):
    """The quick scale of the study ``text``, run into a fresh database and collected for its report."""
    from statetrack.report.collect import collect
    from statetrack.reproduce import reproduce

    path = tmp_path / "study.yaml"
    path.write_text(text)
    db = tmp_path / "t.db"
    study = reproduce(str(path), db=str(db), workers=1).study
    return collect(study, str(db), "quick")


def test_a_learnability_cell_carries_its_evidence(tmp_path):
    from statetrack.report.html import write_html
    from statetrack.report.writer import write_report

    rep = _swept(tmp_path, EVIDENCE_STUDY)
    # the control row is evidence, not a cell of the agreement count
    assert [label for label, _ in rep.verdicts.rows] == ["Mamba-3", "Mamba [0,1]"]
    (cell,) = rep.verdicts.learnability_cells()
    assert cell.model == "Mamba-3" and cell.learnt_in_distribution()[1] == 2
    ctrl = rep.verdicts.controls[("Mamba-3", "parity")]
    assert ctrl.tracked == 2  # the construction holds at length 100 after training
    md = write_report(rep, tmp_path / "out").read_text()
    section = md[md.index("## Learnability cells: the evidence") :]
    assert "### Mamba-3 on parity (yes T5" in section
    assert "learnt in distribution by 0/2 seeds" in section
    # not learnt in distribution: the best seed's curve, extrapolated or called flat
    assert re.search(
        r"- Projection \(the best seed's validation curve.*\): best \d+\.\d% · (flat|projected )", section
    )
    assert "Spectrum of the best seed" in section and "per input symbol, min Re 0:" in section
    assert "control 'Mamba-3 (construction)' (from the construction): tracked by 2/2 seeds" in section
    assert (tmp_path / "out" / "ev" / "spectrum-mamba-3-parity.png").is_file()
    # the HTML page carries the same evidence, its spectrum inline
    page = write_html(rep, tmp_path / "html").read_text()
    section = page[page.index("<h2>Learnability cells: the evidence</h2>") :]
    assert "<h3>Mamba-3 on parity (yes T5" in section and "learnt in distribution by 0/2 seeds" in section
    assert '<figure id="spectrum-mamba-3-parity"><svg' in section
    assert "control &#x27;Mamba-3 (construction)&#x27; (from the construction): tracked by 2/2" in section
    with pytest.raises(UserError, match="control_of names 'Nope'"):
        from statetrack.experiments import load_study

        bad = tmp_path / "bad.yaml"
        bad.write_text(EVIDENCE_STUDY.replace("control_of: Mamba-3", "control_of: Nope"))
        load_study(str(bad))


BELOW_STUDY = """
name: below
title: a study whose model falls short of its paper
source: test
metric: accuracy
score: {kind: mean}
tolerance: 0.1
train: {batch_size: 8, eval_every: 5, val_sequences: 16, lr: 0.01}
train_lengths: [1, 8]
tables:
  - name: main
    tasks:
      - {label: parity, task: parity}
      - {label: C2, task: "group:C2"}
    models:
      - label: Neg. Mamba
        model: {layers: "negmamba(conv=0)", d_model: 4, d_state: 4}
        published: {parity: 1.0, C2: 0.0}
      - {label: Neg. Mamba from parity-negmamba, model: {layers: "negmamba(conv=0)", d_model: 2, d_state: 1},
         tasks: [parity], control_of: Neg. Mamba, train: {lr: 0.001, init: "construction:parity-negmamba"}}
scales:
  quick: {seeds: 2, steps: 10, eval_batch: 16, test_lengths: [20]}
"""


def test_a_cell_below_the_paper_carries_its_evidence(tmp_path):
    from statetrack.report.html import write_html
    from statetrack.report.writer import write_report

    rep = _swept(tmp_path, BELOW_STUDY)
    md = write_report(rep, tmp_path / "out").read_text()
    section = md[md.index("## Cells below the paper's: the evidence") :]
    # 10 steps do not learn parity: below the paper's 1.0; C2 is above its paper's 0.0, which is no failure
    assert "### Neg. Mamba on parity" in section and "### Neg. Mamba on C2" not in section
    assert "learnt in distribution by 0/2 seeds: best " in section
    assert "Spectrum of the best seed (seed " in section and "layer 1 (negmamba): min Re" in section
    assert (tmp_path / "out" / "below" / "spectrum-neg-mamba-parity.png").is_file()
    # the construction control of that row and column, read by the table's statistic (the mean here)
    assert re.search(
        r"- Construction: control 'Neg. Mamba from parity-negmamba' \(the same layers from the construction, "
        r"trained alike at lr 0.001\): 100\.0 over 2 seeds, learnt in distribution 2/2",
        section,
    ), section
    page = write_html(rep, tmp_path / "html").read_text()
    section = page[page.index("<h2>Cells below the paper&#x27;s: the evidence</h2>") :]
    assert "<h3>Neg. Mamba on parity</h3>" in section and "<h3>Neg. Mamba on C2</h3>" not in section
    assert "<li>Training: learnt in distribution by 0/2 seeds: best " in section
    assert '<figure id="spectrum-neg-mamba-parity"><svg' in section


def test_a_spectrum_line_of_a_large_alphabet_gives_the_range_over_its_symbols():
    from statetrack.report.evidence import spectrum_summary

    layer = {
        "layer": 1,
        "mixer": "m",
        "samples": [],
        "min_real": -1.0,
        "min_modulus": 0.5,
        "max_modulus": 1.0,
    }
    many = {**layer, "per_token_min_real": {str(i): -i / 59 for i in range(60)}}  # a group of order 60
    assert "per input symbol, min Re from -1.000 to +0.000 over 60 symbols" in spectrum_summary(
        {"layers": [many]}
    )
    few = {**layer, "per_token_min_real": {"0": 1.0, "1": -1.0}}
    assert "per input symbol, min Re 0: +1.000, 1: -1.000" in spectrum_summary({"layers": [few]})
