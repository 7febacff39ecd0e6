"""Verified horizons: the exhaustive walk equals an independent enumeration, the searches find what the
families miss, and the claim says what it rests on.

tests/data/twoloops-rnn.safetensors is an RNN (d_model 8) trained on tests/data/twoloops.json by
``statetrack train --task dfa:twoloops.json --layers rnn --d-model 8 --lr 0.01 --steps 4000 --seed 0
--train-lengths 1-40 --test-split test+long --horizons``: every test draw and every witness family to
10,000 is right, yet it is wrong from length 18 (``babaaaa b^10 a``), where state D is reached by
another word than its shortest access word ``ab``.

tests/data/negmamba-parity.safetensors is run 48 of the grazzi2024 quick rerun (Mamba [-1,1], parity,
seed 2): right on every string to 20 and on every test draw to 256, but a witness family breaks at 160.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from statetrack.config import ModelConfig
from statetrack.model import build_model
from statetrack.tasks import get_task
from statetrack.training.checkpoint import load_checkpoint
from statetrack.training.horizon import measure_horizons
from statetrack.training.verify import (
    Source,
    draw_failures,
    exhaustive_check,
    exhaustive_length,
    horizons_record,
    live_states,
    prefix_counts,
    task_automaton,
    verify,
)

DATA = Path(__file__).parent / "data"
#: prefix-tree nodes for every binary string up to 18 symbols
B18 = (1 << 19) - 2


@pytest.fixture
def twoloops(monkeypatch):
    monkeypatch.chdir(DATA)  # the checkpoint names its task as dfa:twoloops.json
    model, _cfg, task, _ = load_checkpoint("twoloops-rnn.safetensors")
    return model, task


def brute_errors(model, task, max_len: int) -> tuple[list[int], list[int]]:
    """Per length, (scored, wrong) by running every string whole, independently of the walk."""
    auto = task_automaton(model, task)
    live = live_states(auto)
    scored, wrong = [], []
    for n in range(1, max_len + 1):
        words = np.array(list(itertools.product(range(auto.n_symbols), repeat=n)), dtype=np.int64)
        q = np.full(len(words), auto.start)
        ok = np.ones(len(words), dtype=bool)
        for t in range(n):
            q = auto.delta[q, words[:, t]]
            ok &= live[q]
        words, q = words[ok], q[ok]
        with torch.no_grad():
            logits, _ = model(torch.as_tensor(auto.tokens[words]))
        answer = logits[:, -1].argmax(-1).numpy()
        lab = auto.labels[q]
        s = lab >= 0
        scored.append(int(s.sum()))
        wrong.append(int((s & (answer != lab)).sum()))
    return scored, wrong


def test_twoloops_rnn_is_wrong_from_18_where_families_and_draws_see_nothing(twoloops):
    model, task = twoloops
    fam = measure_horizons(model, task, 400)
    assert fam["horizon"] is None  # the families with one access word per state see no failure
    v = verify(model, task, 400, budget=B18, plain_families=fam["horizon"], draws=(None, [16, 64, 400]))
    assert v.exhaustive.max_len == 18
    assert v.horizon is not None and v.horizon <= 18
    first = v.wrong[0]
    assert first.text == "babaaaabbbbbbbbbba" and first.source is Source.EXHAUSTIVE
    assert (first.label, first.answer, first.state) == ("accepted", "rejected", "E")
    assert v.exhaustive.errors[:17] == [0] * 17 and v.exhaustive.errors[17] == 1
    # the families with other access words fail too, and name the prefixes that fail
    fs = next(s for s in v.searches if s.source is Source.FAMILIES)
    assert fs.shortest is not None and fs.access
    auto = task_automaton(model, task)
    shortest_access = {auto.access_words()[q] for q in range(auto.n_states)}
    names = dict(zip(["A", "B", "C", "D", "E"], range(5), strict=True))
    for state, prefix, _family in fs.access:
        word = tuple(auto.symbols.index(c) for c in prefix)
        assert auto.apply(word, [auto.start])[0] == names[state]
        assert word not in shortest_access  # a shortest access word's family is right at every n
    assert v.holds_to == v.horizon - 1
    text = v.rests_on()
    assert "exhaustive: first wrong at 18" in text and "test draws: none wrong to 400" in text


def test_walk_equals_an_independent_enumeration_of_every_string(twoloops):
    model, task = twoloops
    ex, _, _ = exhaustive_check(model, task, max_len=12)
    scored, wrong = brute_errors(model, task, 12)
    assert ex.scored == scored and ex.errors == wrong


@pytest.mark.parametrize(
    "layers", ["rnn", "mamba(conv=0)", "deltanet(conv=0,neg=true)", "lstm", "transformer"]
)
def test_walk_equals_enumeration_on_untrained_models_and_a_task_with_dead_ends(layers, tmp_path):
    # a DFA with a dead state (never labelled again): strings through it are not walked
    spec = {
        "states": ["s", "t", "u", "dead"],
        "alphabet": ["a", "b", "c"],
        "start": "s",
        "accept": ["t"],
        "transitions": {
            "s": {"a": "t", "b": "u", "c": "s"},
            "t": {"a": "s", "b": "t", "c": "u"},
            "u": {"a": "u", "b": "s", "c": "t"},
            "dead": {"a": "dead", "b": "dead", "c": "dead"},
        },
    }
    path = tmp_path / "d.json"
    path.write_text(json.dumps(spec))
    task = get_task(f"dfa:{path}")
    torch.manual_seed(0)
    model = build_model(ModelConfig(layers=layers, d_model=8, d_state=4), task).eval()
    ex, _, _ = exhaustive_check(model, task, max_len=7)
    scored, wrong = brute_errors(model, task, 7)
    assert ex.scored == scored and ex.errors == wrong
    assert sum(wrong) > 0  # an untrained model errs: the comparison is not vacuous
    assert ex.shortest == 1 + next(i for i, w in enumerate(wrong) if w)


def test_the_budget_sets_the_exhaustive_length():
    parity = task_automaton(build_model(ModelConfig(layers="rnn"), get_task("parity")), get_task("parity"))
    assert exhaustive_length(parity) == 20  # 2 + 4 + ... + 2^20 = 2^21 - 2 nodes <= 2,400,000
    assert exhaustive_length(parity, budget=B18) == 18
    assert prefix_counts(parity, 3) == [2, 4, 8]


def test_draw_failures_reads_final_and_earlier_positions():
    rows = [
        {"length": 16, "accuracy": 1.0, "sequence_accuracy": 1.0},
        {"length": 64, "accuracy": 1.0, "sequence_accuracy": 0.99},
        {"length": 400, "accuracy": 0.98, "sequence_accuracy": 0.9},
    ]
    assert draw_failures(rows) == (64, [16, 64, 400])
    assert draw_failures(rows[:1]) == (None, [16])


def test_searches_find_what_lies_beyond_the_exhaustive_length(twoloops):
    model, task = twoloops
    v = verify(model, task, 60, budget=(1 << 15) - 2)  # exhaustive to 14 only
    assert v.exhaustive.shortest is None
    # the drift along the loop (bb)^n shows only at its end: the families with other access words see it
    assert v.horizon is not None and v.horizon <= 25
    assert "no error up to 14 in all 32,766 strings" in v.rests_on()
    search = next(s for s in v.searches if s.source is Source.SEARCH)
    assert search.max_len == 60 or search.shortest is not None


def test_a_horizon_found_by_the_plain_families_names_its_string():
    # the families alone break this run (at 160); the record names that string, and it is wrong when the
    # model reads it whole
    model, _cfg, task, _ = load_checkpoint(DATA / "negmamba-parity.safetensors")
    r = horizons_record(model, task, 170)
    assert r["family_horizon"] == r["horizon"] == 160
    w = r["shortest_wrong"]
    assert w is not None and w["length"] == 160 and w["source"] == Source.FAMILIES.value
    auto = task_automaton(model, task)
    q = auto.apply(w["word"], [auto.start])[0]
    with torch.no_grad():
        logits, _ = model(torch.as_tensor(auto.tokens[np.asarray(w["word"])])[None])
    assert int(logits[0, -1].argmax()) != int(auto.labels[q])


def test_margin_search_follows_the_lowest_margins_to_a_failure():
    # an untrained RNN on parity is right on some strings by chance; from the walk's worst prefixes the
    # search reaches a wrong string at the first length it extends to
    task = get_task("parity")
    torch.manual_seed(1)
    model = build_model(ModelConfig(layers="rnn", d_model=8), task).eval()
    v = verify(model, task, 40, budget=(1 << 6) - 2)
    assert v.exhaustive.max_len == 5
    if v.exhaustive.shortest is None:
        search = next(s for s in v.searches if s.source is Source.SEARCH)
        assert search.shortest == 6
    else:
        assert v.horizon == v.exhaustive.shortest <= 5


def test_horizon_command_names_the_claim_and_the_failing_prefixes(monkeypatch, capsys):
    from statetrack.cli import main

    monkeypatch.chdir(DATA)
    rc = main(["horizon", "twoloops-rnn.safetensors", "--max-len", "100", "--budget", str(B18)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "verified horizon 18" in out
    assert "no error up to" not in out and "exhaustive: first wrong at 18" in out
    assert "prefixes that fail" in out and "D: " in out
