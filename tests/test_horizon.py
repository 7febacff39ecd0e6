"""Witness families from any DFA and the failure horizon: a model that reads a window of w symbols errs
exactly where the families say; a construction that tracks the state has no horizon; runs record the
long-range draw and the horizons beside the test draw; the commands print them."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from torch import nn

from statetrack.config import EvalConfig, ModelConfig, TrainConfig
from statetrack.horizon import failure_horizons, horizon_summary
from statetrack.runner import complete_result, run
from statetrack.store import Store
from statetrack.tasks import get_task
from statetrack.tasks.families import witness_families

ABA = (["n", "a", "ab", "aba"], ["a", "b"], "n", ["aba"], [["a", "n"], ["a", "ab"], ["aba", "n"], ["aba", "aba"]])


def _label(task, tokens) -> int:
    a = task.automaton()
    return int(a.labels[a.run(np.asarray([tokens]))[0, -1]])


@pytest.mark.parametrize("name", ["tomita:1", "tomita:2", "tomita:3", "tomita:4", "tomita:5", "tomita:6",
                                  "tomita:7", "parity", "evenpairs", "cycle:5", "group:S3", "modarith:5"])
def test_families_keep_their_labels_at_every_n(name):
    task = get_task(name)
    auto = task.automaton()
    fams = witness_families(auto)
    assert fams
    for f in fams:
        assert f.labels[0] != f.labels[1]
        for n in range(7):
            for i in (0, 1):
                word = auto.tokens[f.word(i, n)]
                if len(word):
                    assert _label(task, word) == f.labels[i], (name, f.text(auto.symbols), i, n)
            # the two strings share their last n |W| + |v| symbols
            tail = len(f.pump) * n + len(f.end)
            if tail:
                assert f.word(0, n)[-tail:] == f.word(1, n)[-tail:]


def test_known_families(dfa_task):
    p = get_task("parity").automaton()
    assert [f.text(p.symbols) for f in witness_families(p)][:2] == ["(0)^n vs 1 (0)^n", "(11)^n vs 1 (11)^n"]
    aba = get_task(dfa_task("aba", *ABA)).automaton()
    texts = [f.text(aba.symbols) for f in witness_families(aba)]
    assert "(b)^n vs aba (b)^n" in texts
    # a window language has none
    ends_ab = get_task(dfa_task("endsab", ["x", "a", "ab"], ["a", "b"], "x", ["ab"],
                                [["a", "x"], ["a", "ab"], ["a", "x"]])).automaton()
    assert witness_families(ends_ab) == []


class Window(nn.Module):
    """Answers 'accept' iff 'aba' (tokens 0 1 0) is among the last ``w`` tokens: a model with a window."""

    vocab_size = 2
    num_classes = 2

    def __init__(self, w: int):
        super().__init__()
        self.w = w
        self.dummy = nn.Parameter(torch.zeros(1))

    def init_state(self, batch):
        return torch.full((batch, self.w), -1, dtype=torch.long)

    def forward(self, tokens, state):
        logits = torch.zeros(*tokens.shape, 2)
        buf = state.clone()
        for t in range(tokens.shape[1]):
            buf = torch.cat([buf[:, 1:], tokens[:, t:t + 1]], dim=1)
            for b in range(tokens.shape[0]):
                s = "".join("x" if v < 0 else "ab"[v] for v in buf[b].tolist())
                logits[b, t, int("aba" in s)] = 1.0
        return logits, buf


def test_a_window_model_errs_where_the_window_ends(dfa_task):
    task = get_task(dfa_task("aba", *ABA))
    rows = failure_horizons(Window(10), task, max_len=40)
    by = {r["family"]: r for r in rows}
    r = by["(b)^n vs aba (b)^n"]
    # aba b^n keeps aba in the last 10 symbols while 3 + n <= 10: wrong from n = 8 (length 11) on
    assert r["horizon_n"] == 8 and r["horizon"] == 11 and r["wrong_after"] == 1.0
    assert r["tested_n"] == 37 and r["accuracy"] == pytest.approx((38 + 8) / 76)
    assert horizon_summary(rows, 40)["horizon"] == min(x["horizon"] for x in rows) <= 11


def test_a_construction_that_tracks_parity_has_no_horizon(tmp_path):
    from statetrack.checkpoint import load_checkpoint
    from statetrack.theory.constructions import save

    path = tmp_path / "parity.safetensors"
    save("parity-negmamba", str(path))
    model, _, task, _ = load_checkpoint(path)
    rows = failure_horizons(model, task, max_len=600)
    assert rows and all(r["horizon"] is None and r["accuracy"] == 1.0 for r in rows)


def test_a_run_records_the_long_draw_and_the_horizons(db, dfa_task):
    tc = TrainConfig(task=dfa_task("aba", *ABA), model=ModelConfig(layers="rnn", d_model=4, d_state=8),
                     train_min_len=1, train_max_len=8, steps=5, batch_size=8, eval_every=5, val_sequences=16,
                     device="cpu")
    ec = EvalConfig(lengths=[8, 30], batch_size=16, test_split="test+long", horizons=True, device="cpu")
    res = run(tc, ec, db=db)
    assert [m.length for m in res.more["long"]] == [8, 30] and all(m.chance == 0.5 for m in res.more["long"])
    h = res.summary["horizons"]
    assert h["horizon_max"] == 30 and len(h["families"]) >= 2
    again = complete_result(Store(db), Store(db).runs()[0]["key"])
    assert [(m.length, m.accuracy) for m in again.more["long"]] == [(m.length, m.accuracy) for m in res.more["long"]]
    assert again.summary["horizons"] == json.loads(json.dumps(h))
    # a default evaluation's key is unchanged by the new fields: old runs are reused
    assert "test_split" not in EvalConfig().key_dict() and "horizons" not in EvalConfig().key_dict()


def test_commands(cli, tmp_path, dfa_task):
    task = dfa_task("aba", *ABA)
    p = cli.start("witnesses", task, "--json")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    fams = [json.loads(x) for x in out.splitlines()]
    assert fams[0]["family"] == "(b)^n vs aba (b)^n" and fams[0]["labels"] == [0, 1]
    ck = tmp_path / "parity.safetensors"
    p = cli.start("construct", "parity-negmamba", "--out", ck)
    assert p.wait(timeout=120) == 0
    p = cli.start("horizon", ck, "--max-len", "200", "--json")
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    r = json.loads(out)
    assert r["horizon"] is None and r["horizon_max"] == 200 and r["families"]
    p = cli.start("horizon", ck, "--task", "modarith-brackets:5")
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1


def test_not_measurable_at_any_length(cli, tmp_path, dfa_task):
    """A language whose strings of one length all share a label (even length) at every test length: the
    summary says so instead of 'none'."""
    even = dfa_task("even", ["e", "o"], ["a"], "e", ["e"], [["o"], ["e"]])
    p = cli.start("train", "--task", even, "--layers", "rnn", "--d-model", "2", "--d-state", "2", "--steps", "3",
                  "--train-lengths", "1-4", "--test-lengths", "5,9,13", "--db", tmp_path / "x.db")
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    assert "not measurable at any length" in " ".join(out.split()) and "none" not in out.split("length:")[-1]


def test_balanced_dfa_training(dfa_task):
    name = dfa_task("aba", *ABA)
    task = get_task(name + "/balanced")
    assert task.balanced_training and task.name.endswith("/balanced")
    b = task.sample_batch(np.random.default_rng(0), 400, 60)
    assert abs(b.targets[:, -1].mean() - 0.5) < 0.01  # the uniform draw is almost all 'accept' at 60
    assert get_task(name).sample_batch(np.random.default_rng(0), 400, 60).targets[:, -1].mean() > 0.9
