import numpy as np

from statetrack.tasks import get_task


def test_prefix_parity_labels():
    t = get_task("parity")
    b = t.sample_batch(np.random.default_rng(0), 16, 50)
    assert (b.targets == np.cumsum(b.inputs, 1) % 2).all()
    assert b.mask.all()
    assert t.chance_level() == 0.5


def test_final_parity_scores_last_only():
    t = get_task("parity:final")
    b = t.sample_batch(np.random.default_rng(0), 4, 9)
    assert b.mask[:, -1].all() and not b.mask[:, :-1].any()


def test_stream_carries_parity_across_chunks():
    t = get_task("parity")
    chunks = list(t.stream_batch(np.random.default_rng(3), 5, 103, 10))
    bits = np.concatenate([c.inputs for c in chunks], 1)
    labels = np.concatenate([c.targets for c in chunks], 1)
    assert bits.shape == (5, 103)
    assert (labels == np.cumsum(bits, 1) % 2).all()


def test_same_seed_same_batch():
    t = get_task("parity")
    a = t.sample_batch(np.random.default_rng(7), 3, 20)
    b = t.sample_batch(np.random.default_rng(7), 3, 20)
    assert (a.inputs == b.inputs).all()


def test_stream_equals_sample():
    t = get_task("parity")
    whole = t.sample_batch(np.random.default_rng(5), 4, 57)
    parts = list(t.stream_batch(np.random.default_rng(5), 4, 57, 10))
    assert (np.concatenate([p.inputs for p in parts], 1) == whole.inputs).all()
