"""The training step: the device form (no host reads; what CUDA runs, with or without graphs) computes
what the eager CPU form computes; a non-finite loss is found at its step; batches and chunk sizes."""
import copy

import numpy as np
import pytest
import torch

from statetrack import EvalConfig, ModelConfig, TrainConfig, build_model, get_task
from statetrack.evaluation import chunk_size
from statetrack.experiments import load_study
from statetrack.steps import DeviceStep, EagerStep, batches
from statetrack.training import lr_lambda, masked_loss

CPU = torch.device("cpu")


def _cfg(layers="negmamba(conv=0)", **kw):
    return TrainConfig(task="parity", model=ModelConfig(layers=layers, d_model=8, d_state=4), train_min_len=2,
                       train_max_len=9, steps=30, batch_size=8, lr=0.01, **kw)


@pytest.mark.parametrize("layers", ["negmamba(conv=0)", "deltanet(neg=true)", "aussm"])
def test_device_step_computes_the_eager_step(layers):
    cfg, task = _cfg(layers), get_task("parity")
    torch.manual_seed(0)
    a = build_model(cfg.model, task)
    b = copy.deepcopy(a)
    eager = EagerStep(a, cfg, lr_lambda(cfg), masked_loss)
    dev = DeviceStep(b, cfg, lr_lambda(cfg), CPU, graphs=False)
    da, db = (batches(task, np.random.default_rng(0), cfg, CPU) for _ in range(2))
    for s in range(1, 31):
        eager.step(*next(da), s)
        dev.step(*next(db), s)
        if s % 10 == 0:
            ra, rb = eager.read(), dev.read()
            assert (ra.hits, ra.total, rb.bad_step) == (rb.hits, rb.total, 0)
            assert rb.loss == pytest.approx(ra.loss, rel=1e-5)
            assert rb.total > 0
    assert dev.lr() == pytest.approx(eager.lr())
    assert max(float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True)) < 1e-5


def test_device_step_finds_the_first_non_finite_step():
    cfg, task = _cfg(), get_task("parity")
    model = build_model(cfg.model, task)
    dev = DeviceStep(model, cfg, lr_lambda(cfg), CPU, graphs=False)
    data = batches(task, np.random.default_rng(0), cfg, CPU)
    for s in range(1, 13):
        if s == 7:
            with torch.no_grad():
                model.head.bias.fill_(float("nan"))
        dev.step(*next(data), s)
    st = dev.read()
    assert st.bad_step == 7 and not np.isfinite(st.bad_loss)


def test_batches_draw_as_the_loop_did():
    cfg, task = _cfg(), get_task("parity")
    rng = np.random.default_rng(5)
    lo, hi = cfg.train_lengths
    want = []
    for _ in range(4):
        b = task.sample_batch(rng, cfg.batch_size, int(rng.integers(lo, hi + 1)))
        want.append(b.inputs)
    data = batches(task, np.random.default_rng(5), cfg, CPU)
    got = [next(data)[0].numpy() for _ in range(4)]
    assert all((g == w).all() for g, w in zip(got, want, strict=True))


def test_evaluation_chunks_shrink_with_the_batch():
    model = build_model(ModelConfig(layers="aussm", d_model=64, d_state=16), get_task("parity"))
    small, big = chunk_size(model, EvalConfig(batch_size=8)), chunk_size(model, EvalConfig(batch_size=4096))
    assert small == 1024 and 1 <= big < small
    per_chunk = 4096 * big * model.activation_bytes()
    assert per_chunk <= EvalConfig().memory_mb << 20


def test_auto_device_is_stored_resolved():
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert _cfg().device == want and EvalConfig().device == want
    assert _cfg(device="cpu").device == "cpu"


def test_a_declared_part_keeps_the_grids_keys():
    study = load_study("diag-limits-2026")
    whole = {j.key for j in study.cells("paper", seeds=1)}
    part = study.restrict("paper", models=["RNN", "AUSSM"], tasks=["C2", "S3"]).cells("paper", seeds=1)
    assert part and {j.key for j in part} <= whole
    assert {(j.label, j.column) for j in part} <= {(m, t) for m in ("RNN", "AUSSM") for t in ("C2", "S3")}
