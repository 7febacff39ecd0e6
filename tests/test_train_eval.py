import math

import numpy as np
import pytest
import torch

from statetrack import EvalConfig, ModelConfig, TrainConfig, evaluate, get_task, train
from statetrack.training.evaluation import LengthMetrics, longest_generalized, scaled


def _cfg(**kw):
    base = {
        "model": ModelConfig(layers="rnn", d_model=2, d_state=8),
        "train_min_len": 8,
        "train_max_len": 8,
        "steps": 120,
        "eval_every": 40,
        "lr": 0.01,
        "weight_decay": 0.0,
        "seed": 3,
        "val_sequences": 64,
    }
    base.update(kw)
    return TrainConfig(**base)


def test_same_seed_same_numbers():
    r1 = train(_cfg())
    r2 = train(_cfg())
    assert r1.curve == r2.curve
    e = EvalConfig(lengths=[8, 50], batch_size=32)
    m1 = evaluate(r1.model, get_task("parity"), e)
    m2 = evaluate(r2.model, get_task("parity"), e)
    assert [m.as_dict() for m in m1] == [m.as_dict() for m in m2]


def test_training_learns_parity_in_distribution():
    r = train(_cfg(steps=1500, eval_every=100, patience=100))
    assert r.best_val_accuracy > 0.95
    m = evaluate(r.model, get_task("parity"), EvalConfig(lengths=[8], batch_size=256))
    assert m[0].accuracy > 0.9


def test_validation_set_is_the_training_distribution_and_labelled_by_the_task():
    from statetrack.training.loop import validation_set

    cfg = _cfg(train_min_len=3, train_max_len=40)
    val = validation_set(get_task("parity"), cfg, "cpu")
    lengths = [x.shape[1] for x, _, _ in val]
    # the range's two ends and points between them, each length once
    assert lengths[0] == 3 and lengths[-1] == 40 and len(set(lengths)) == len(lengths) == 8
    assert sum(x.shape[0] for x, _, _ in val) == 8 * (cfg.val_sequences // 8)
    for x, y, m in val:
        # parity's label is the parity of the bits so far, scored at the last position; the draw is fair
        assert torch.equal(y[:, -1], x.cumsum(1)[:, -1] % 2) and m[:, -1].all()
        assert 0.2 < x.float().mean() < 0.8
    # a second call gives the same batches (fixed, seeded): validation is comparable across steps
    again = validation_set(get_task("parity"), cfg, "cpu")
    assert all(torch.equal(a[0], b[0]) for a, b in zip(val, again, strict=True))


def test_early_stop_and_best_checkpoint():
    r = train(_cfg(steps=2000, eval_every=10, patience=2))
    assert r.stopped_early and r.steps_run < 2000
    assert r.best_step <= r.steps_run


def test_metrics_definitions():
    m = [
        LengthMetrics(16, 1.0, 1, 1, 1, 0.5, 10),
        LengthMetrics(100, 0.95, 1, 1, 0.9, 0.5, 10),
        LengthMetrics(1000, 0.5, 1, 1, 0, 0.5, 10),
        LengthMetrics(10000, 0.99, 1, 1, 0.98, 0.5, 10),
    ]
    assert longest_generalized(m) == 100
    assert scaled(0.75, 0.5) == pytest.approx(0.5)


def test_eval_memory_path_is_chunked():
    r = train(_cfg(steps=50))
    chunked = evaluate(r.model, get_task("parity"), EvalConfig(lengths=[300], batch_size=16, chunk=7))
    whole = evaluate(r.model, get_task("parity"), EvalConfig(lengths=[300], batch_size=16, chunk=300))
    # the same sequences, run in chunks of 7 steps or all at once, give the same metrics
    assert chunked[0].as_dict() == whole[0].as_dict()


def test_accuracy_uses_the_last_scored_position():
    import torch

    from statetrack.tasks.base import Batch, Task
    from statetrack.training.evaluation import evaluate_length

    class LastUnscored(Task):  # label = input; the final position is never scored
        name, vocab_size, num_classes = "t", 2, 2

        def sample_batch(self, rng, batch_size, length):
            x = rng.integers(0, 2, (batch_size, length))
            mask = np.ones_like(x, dtype=bool)
            mask[:, -1] = False
            return Batch(x, x.copy(), mask)

    class Echo(torch.nn.Module):  # right everywhere except at the final position
        def init_state(self, _b):
            return None

        def forward(self, x, state):
            logits = torch.nn.functional.one_hot(x, 2).float()
            logits[:, -1] = logits[:, -1].flip(-1)
            return logits, state

        def parameters(self):
            return iter([torch.zeros(1)])

    m = evaluate_length(Echo(), LastUnscored(), 10, 8, 10, np.random.default_rng(0))
    assert m.accuracy == 1.0 and m.token_accuracy == 1.0


def test_validation_loss_does_not_round_to_zero():
    """Selection and early stopping compare validation losses; a confident model must still show how
    confident it is (float32 cross-entropy is exactly 0 beyond margins of about 17)."""
    import torch
    import torch.nn.functional as F

    from statetrack.training.loop import validation_loss

    g = torch.Generator().manual_seed(0)
    logits, y = torch.randn(64, 5, generator=g) * 4, torch.randint(0, 5, (64,), generator=g)
    mask = torch.ones(64, dtype=torch.bool)
    assert validation_loss(logits, y, mask) == pytest.approx(
        float(F.cross_entropy(logits.double(), y)), rel=1e-12
    )
    sure = torch.tensor([[30.0, 0.0, -5.0], [0.0, 50.0, 1.0]])
    target = torch.tensor([0, 1])
    assert float(F.cross_entropy(sure, target)) == 0.0
    loss = validation_loss(sure, target, torch.ones(2, dtype=torch.bool))
    assert loss == pytest.approx(
        (math.exp(-30) + math.exp(-35) + math.exp(-50) + math.exp(-49)) / 2, rel=1e-12
    )
    sharper = validation_loss(sure * 2, target, torch.ones(2, dtype=torch.bool))
    assert 0 < sharper < loss
