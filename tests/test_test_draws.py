"""Test draws: what ``evaluate`` scores. Regular languages get half accepted and half rejected strings,
each uniform among the strings of its length and label (exact, by counting); parity, even pairs and
whole-group word problems get balanced final labels; every other task is scored on its training draw."""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter

import numpy as np
import pytest

from statetrack.errors import UserError
from statetrack.tasks import get_task, label_shares, sample_json
from statetrack.tasks.dfa import DFATask, tomita_dfa
from test_tasks_suite import PARITY_DFA, TOMITA


def words(alphabet, n):
    return ["".join(w) for w in itertools.product(alphabet, repeat=n)]


@pytest.mark.parametrize("k", range(1, 8))
def test_log_counts_are_exact(k):
    dfa = tomita_dfa(k)
    table = dfa.log_counts(12)
    for r in range(13):
        for q in range(len(dfa.states)):
            # brute force: run every word of r symbols from q
            acc = 0
            for w in itertools.product(range(2), repeat=r):
                s = q
                for a in w:
                    s = dfa.delta[s, a]
                acc += bool(dfa.accepting[s])
            for label, n in ((1, acc), (0, 2**r - acc)):
                got = table[r, label, q]
                assert (n == 0 and got == -np.inf) or np.exp(got) == pytest.approx(n, rel=1e-12)


@pytest.mark.parametrize("k,length", [(3, 6), (4, 7), (6, 6), (7, 5)])
def test_test_draw_is_uniform_within_each_label(k, length):
    """Each string of a label appears about equally often (exact sampler: every count within 5 sd)."""
    t = get_task(f"tomita:{k}")
    n = 40_000
    b = t.test_batch(np.random.default_rng(1), n, length)
    drawn = Counter("".join(map(str, row)) for row in b.inputs)
    labels = b.targets[:, -1]
    assert abs(labels.sum() - n / 2) <= 1
    for label in (0, 1):
        pool = [w for w in words("01", length) if TOMITA[k](w) == bool(label)]
        expected = (labels == label).sum() / len(pool)
        sd = np.sqrt(expected)
        for w in pool:
            assert abs(drawn.get(w, 0) - expected) < 5 * sd + 1, (w, drawn.get(w, 0), expected)
        assert sum(drawn[w] for w in pool) == (labels == label).sum()  # no string with the wrong label


@pytest.mark.parametrize("k", range(1, 8))
@pytest.mark.parametrize("length", [100, 500])
def test_tomita_test_sets_are_balanced_and_match_the_grammar(k, length):
    t = get_task(f"tomita:{k}")
    b = t.test_batch(np.random.default_rng(0), 400, length)
    share = b.targets[:, -1].mean()
    assert 0.35 <= share <= 0.65
    for x, y in zip(b.inputs[:60], b.targets[:60], strict=True):
        s = "".join(map(str, x))
        assert y[-1] == TOMITA[k](s)
        every = max(1, length // 7)
        assert y[::every].tolist() == [int(TOMITA[k](s[: i + 1])) for i in range(0, length, every)]
    # the training draw is what the test draw replaces: nearly all "reject" at these lengths
    if k in (1, 2, 3, 7):
        train = t.sample_batch(np.random.default_rng(0), 2000, length)
        assert train.targets[:, -1].mean() < 0.01


def test_lengths_without_a_label_are_named():
    assert get_task("tomita:2").test_unavailable(7) == "no accepted string of length 7"
    assert get_task("tomita:5").test_unavailable(101) == "no accepted string of length 101"
    assert get_task("tomita:3").test_unavailable(1) == "no rejected string of length 1"
    assert get_task("tomita:2").test_unavailable(8) is None
    assert get_task("evenpairs").test_unavailable(1)
    with pytest.raises(UserError, match="no accepted string of length 7"):
        get_task("tomita:2").test_batch(np.random.default_rng(0), 4, 7)


def test_dfa_file_test_draw(tmp_path):
    p = tmp_path / "parity.json"
    p.write_text(json.dumps(PARITY_DFA))
    t = get_task(f"dfa:{p}")
    b = t.test_batch(np.random.default_rng(0), 64, 301)
    assert (b.targets == np.cumsum(b.inputs, 1) % 2).all()
    assert b.targets[:, -1].sum() == 32


def test_long_test_draw_is_fast_and_small():
    t = get_task("tomita:3")
    t0 = time.perf_counter()
    parts = list(t.stream_test_batch(np.random.default_rng(0), 64, 10_000, 1024))
    assert time.perf_counter() - t0 < 10  # about 0.3 s on one core
    assert sum(p.inputs.shape[1] for p in parts) == 10_000
    assert t.dfa.log_counts(100_000).nbytes == 100_001 * 2 * 5 * 8  # 8 MB at length 100,000
    last = parts[-1].targets[:, -1]
    assert last.sum() == 32


@pytest.mark.parametrize(
    "name,k",
    [
        ("parity", 2),
        ("parity:final", 2),
        ("evenpairs", 2),
        ("evenpairs:every", 2),
        ("group:S3", 6),
        ("group:C2xC4", 8),
        ("group:A4", 12),
    ],
)
@pytest.mark.parametrize("length", [2, 5, 40])
def test_balanced_final_labels(name, k, length):
    t = get_task(name)
    b = t.test_batch(np.random.default_rng(3), 120, length)
    counts = np.bincount(b.targets[:, -1], minlength=k)
    assert (counts == 120 // k).all()
    # the labels are the task's own: the same inputs through the training labeller agree
    again = t.sample_batch(np.random.default_rng(0), 1, length)  # shapes only
    assert again.targets.shape[1] == length
    if name.startswith("group"):
        g = t.group
        for x, y in zip(b.inputs, b.targets, strict=True):
            acc = 0
            for a, want in zip(x, y, strict=True):
                acc = g.mul(acc, int(a))
                assert acc == want
    elif name.startswith("parity"):
        assert (b.targets[:, -1] == b.inputs.sum(1) % 2).all()
    else:
        assert (b.targets[:, -1] == (b.inputs[:, 0] != b.inputs[:, -1])).all()


def test_other_tasks_test_on_the_training_draw():
    for name in ("cycle:5", "modarith:5", "offset", "group:S5/transpositions", "modcount:3", "witness:alt"):
        t = get_task(name)
        a = t.test_batch(np.random.default_rng(2), 16, 30)
        b = t.sample_batch(np.random.default_rng(2), 16, 30)
        assert (a.inputs == b.inputs).all() and (a.targets == b.targets).all(), name
        assert t.test_draw.startswith("the training draw")


def test_label_shares_and_sample_split():
    s = label_shares("tomita:4", 100, "test", n=2000)
    assert s["shares"] == {"rejected": 0.5, "accepted": 0.5} and s["n"] == 2000 and s["majority"] == 0.5
    tr = label_shares("tomita:4", 100, "train", n=2000)
    assert tr["shares"]["rejected"] > 0.99
    ex = sample_json("tomita:4", 30, 4, 0, split="test")
    assert sorted(e["targets"][-1] for e in ex) == [0, 0, 1, 1]
    with pytest.raises(UserError, match="no accepted string of length 9"):
        label_shares("tomita:2", 9, "test")
    with pytest.raises(UserError, match="unknown split"):
        sample_json("parity", 5, 1, 0, split="valid")


def test_sample_cli_prints_shares(capsys):
    from statetrack.cli import main

    assert main(["sample", "tomita:3", "--split", "test", "--length", "100", "--n", "1"]) == 0
    out = capsys.readouterr().out
    assert "final label over 10,000 test sequences of length 100" in out and "accepted 50.0%" in out
    assert main(["sample", "tomita:2", "--split", "test", "--length", "7"]) == 2
    assert "no accepted string of length 7" in capsys.readouterr().err
    assert main(["sample", "parity", "--split", "test", "--length", "5", "--n", "2", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[-1]["label_shares"]["shares"] == {"even": 0.5, "odd": 0.5} and rows[0]["split"] == "test"


def test_dfa_task_declares_its_draw():
    t = get_task("tomita:1")
    assert isinstance(t, DFATask) and "half accepted" in t.test_draw


def test_balanced_training_variant():
    t = get_task("tomita:2/balanced")
    assert t.name == "tomita:2/balanced" and t.params()["balanced_training"]
    b = t.sample_batch(np.random.default_rng(0), 40, 50)
    assert b.targets[:, -1].sum() == 20 and all(
        TOMITA[2]("".join(map(str, x))) == bool(y) for x, y in zip(b.inputs, b.targets[:, -1], strict=True)
    )
    odd = t.sample_batch(np.random.default_rng(0), 40, 51)  # no accepted string: the uniform draw
    assert odd.targets[:, -1].sum() == 0
    assert get_task("tomita:2").sample_batch(np.random.default_rng(0), 40, 50).targets[:, -1].sum() == 0
    with pytest.raises(UserError, match="unknown option 'even' for task family 'tomita'"):
        get_task("tomita:2/even")


def test_split_is_an_enum_whose_text_round_trips(tmp_path):
    """A split's text (config, study YAML, command line) becomes a ``Split``, and what is stored or printed
    is the same text again; the order of the splits is part of every draw's seed."""
    from statetrack.config import EvalConfig, Split, TrainConfig, load_run_config, parse_override, run_configs
    from statetrack.tasks.draws import SPLITS, check_split, test_rng

    assert [s.value for s in SPLITS] == ["train", "test", "long"]
    assert check_split("long") is Split.LONG and check_split(Split.TEST) is Split.TEST
    with pytest.raises(
        UserError, match=r"unknown split 'lnog'; allowed: train, test, long \(did you mean 'long'"
    ):
        check_split("lnog")
    # the draw's seed is (seed, position of the split, length), as when the splits were strings
    for i, s in enumerate(SPLITS):
        assert test_rng(7, s, 30).integers(1 << 30) == np.random.default_rng([7, i, 30]).integers(1 << 30)
        assert test_rng(7, s.value, 30).integers(1 << 30) == test_rng(7, s, 30).integers(1 << 30)

    cfg = TrainConfig(model={"layers": "rnn"}, task="tomita:1", train_split="long")
    assert cfg.train_split is Split.LONG
    stored = json.loads(json.dumps(cfg.key_dict()))
    assert stored["train_split"] == "long" and TrainConfig(**stored).train_split is Split.LONG
    assert EvalConfig(test_split="test+long").splits == [Split.TEST, Split.LONG]
    assert all(type(s) is Split for s in EvalConfig(test_split="long").splits)
    # a config file's text -> the enum -> the same text in the stored config
    (tmp_path / "c.yaml").write_text("model: {layers: rnn}\ntask: tomita:1\ntrain_split: long\n")
    train, _ = run_configs(load_run_config(tmp_path / "c.yaml"))
    assert (
        train.train_split is Split.LONG
        and json.loads(json.dumps(train.model_dump()))["train_split"] == "long"
    )
    assert parse_override("train_split=test") == ("train_split", Split.TEST)
    (tmp_path / "bad.yaml").write_text("model: {layers: rnn}\ntask: parity\ntrain_split: lnog\n")
    with pytest.raises(
        UserError, match=r"key 'train_split' expects one of 'train', 'test', 'long'.*did you mean 'long'"
    ):
        load_run_config(tmp_path / "bad.yaml")


def test_split_from_a_study_file_and_the_command_line(capsys):
    from statetrack.cli import main
    from statetrack.config import Split
    from statetrack.experiments import load_study

    zoo = load_study("frontier-zoo")
    cells = [c for c in zoo.grid_cells("long-draw", device="cpu") if c.column == "Tomita 1"]
    assert cells and all(c.job(c.lrs[0], 0).train.train_split is Split.LONG for c in cells)
    assert main(["sample", "tomita:1", "--split", "long", "--length", "6", "--n", "1", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["split"] == "long" and rows[-1]["label_shares"]["split"] == "long"
    assert main(["sample", "parity", "--split", "lnog"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "invalid choice: 'lnog' (did you mean 'long'?)" in err
    assert "(choose from train, test, long)" in err
