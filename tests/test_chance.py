"""Chance comes from the label distribution, never from the few sequences scored: the chance stored for a
length is the majority share of the final label's distribution in that length's draw (exact where the task
computes it, else over 10,000 draws of the same draw), while the accuracy's interval stays on the sequences
scored."""

from __future__ import annotations

import numpy as np
import pytest

from statetrack.config import EvalConfig, ModelConfig, TrainConfig
from statetrack.model import build_model
from statetrack.runs.runner import complete_result, run
from statetrack.runs.store import Store
from statetrack.tasks import FAMILIES, draws, get_task
from statetrack.training.evaluation import evaluate, wilson

#: one task string per family whose tasks have more than two classes (language modelling aside: its chance is
#: the most frequent next token among the tokens scored, docs/lm.md)
MULTICLASS = {
    "group": ["group:S3", "group:S5/transpositions", "group:C6/generators+identity"],
    "modarith": ["modarith:5"],
    "modarith-brackets": ["modarith-brackets:5"],
    "cycle": ["cycle:5"],
    "modcount": ["modcount:3"],
}
BINARY_EXAMPLES = {
    "parity": "parity",
    "evenpairs": "evenpairs",
    "tomita": "tomita:3",
    "offset": "offset",
    "witness": "witness:ones",
    "dfa": None,
}


def independent_majority(task, length, n=20_000, seed=777):
    counts = draws.final_label_counts(task, "test", length, n, np.random.default_rng(seed))
    return counts.max() / counts.sum()


def test_every_multiclass_family_is_covered():
    for family in FAMILIES:
        if family in MULTICLASS or family == "lm":
            continue
        example = BINARY_EXAMPLES.get(family, "unlisted")
        assert example != "unlisted", f"family {family!r}: add it to MULTICLASS or BINARY_EXAMPLES"
        if example:
            assert get_task(example).num_classes == 2


@pytest.mark.parametrize("name", [t for ts in MULTICLASS.values() for t in ts])
def test_stored_chance_is_the_label_distributions_majority(name):
    """At 64 sequences per length, the chance is within 0.01 of the majority share over 20,000 independent
    draws of the same draw (the majority of 64 sequences is typically 0.05-0.15 above it)."""
    task = get_task(name)
    model = build_model(ModelConfig(layers="rnn", d_model=4, d_state=4), task)
    ms = evaluate(model, task, EvalConfig(lengths=[16, 40], batch_size=64, device="cpu"))
    for m in ms:
        ref = independent_majority(task, m.length)
        assert abs(m.chance - ref) < 0.01, (name, m.length, m.chance, ref)
        # the interval stays on the 64 sequences scored
        assert (m.accuracy_low, m.accuracy_high) == wilson(round(m.accuracy * 64), 64)
    exact = draws.exact_label_distribution(task, "test", 40)
    if exact is not None:
        assert ms[-1].chance == pytest.approx(exact.max(), abs=1e-12)


def test_modarith5_trained_at_64_sequences_stores_the_distribution(db):
    """modarith:5 trained and evaluated at 64 sequences: the stored chance is the distribution's majority."""
    tc = TrainConfig(
        task="modarith:5",
        model=ModelConfig(layers="rnn", d_model=4, d_state=4),
        train_min_len=3,
        train_max_len=9,
        steps=5,
        batch_size=8,
        eval_every=5,
        val_sequences=16,
        seed=0,
        device="cpu",
    )
    ec = EvalConfig(lengths=[40, 64, 128, 256], batch_size=64, device="cpu")
    res = run(tc, ec, db=db)
    stored = complete_result(Store(db), Store(db).runs()[0].key).metrics
    auto = get_task("modarith:5").automaton()
    for m in stored:
        assert m.chance == pytest.approx(auto.label_distribution(m.length).max(), abs=1e-12)
        assert abs(m.chance - independent_majority(get_task("modarith:5"), m.length)) < 0.01
    assert res.metrics[0].chance < 0.23  # the majority of 64 draws, which chance used to be, is 0.27-0.36


def test_estimated_chance_uses_ten_thousand_draws_of_the_same_draw():
    task = get_task("modarith-brackets:5")
    assert draws.exact_label_distribution(task, "test", 30) is None
    dist, exact = draws.label_distribution(task, "test", 30)
    assert not exact and abs(dist.sum() - 1) < 1e-12
    counts = draws.final_label_counts(
        task, "test", 30, draws.CHANCE_DRAWS, np.random.default_rng(draws.CHANCE_SEED)
    )
    assert np.allclose(dist, counts / counts.sum())


def test_exact_distributions():
    assert draws.exact_label_distribution(get_task("tomita:3"), "test", 50).tolist() == [0.5, 0.5]
    assert draws.exact_label_distribution(get_task("group:S3"), "test", 50) == pytest.approx(
        np.full(6, 1 / 6)
    )
    assert draws.exact_label_distribution(get_task("modcount:3"), "test", 10).tolist() == [0, 1, 0]
    # the training draw of Tomita 1 at length 20: one accepted string among 2^20
    d = draws.exact_label_distribution(get_task("tomita:1"), "train", 20)
    assert d[1] == pytest.approx(2.0**-20)
