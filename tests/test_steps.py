"""The training step: the device form (no host reads; what CUDA runs, with or without graphs) computes
what the eager CPU form computes; a non-finite loss is found at its step; batches and chunk sizes."""

import copy

import numpy as np
import pytest
import torch

from statetrack import EvalConfig, ModelConfig, TrainConfig, build_model, get_task
from statetrack.experiments import load_study
from statetrack.training.evaluation import chunk_size
from statetrack.training.loop import lr_lambda
from statetrack.training.steps import DeviceStep, EagerStep, batches, masked_loss

CPU = torch.device("cpu")


def _cfg(layers="negmamba(conv=0)", **kw):
    return TrainConfig(
        task="parity",
        model=ModelConfig(layers=layers, d_model=8, d_state=4),
        train_min_len=2,
        train_max_len=9,
        steps=30,
        batch_size=8,
        lr=0.01,
        **kw,
    )


@pytest.mark.parametrize("layers", ["negmamba(conv=0)", "deltanet(neg=true)", "aussm"])
def test_device_step_computes_the_eager_step(layers):
    cfg, task = _cfg(layers), get_task("parity")
    torch.manual_seed(0)
    a = build_model(cfg.model, task)
    b = copy.deepcopy(a)
    eager = EagerStep(a, cfg, lr_lambda(cfg))
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
    assert (
        max(float((p - q).detach().abs().max()) for p, q in zip(a.parameters(), b.parameters(), strict=True))
        < 1e-5
    )


@pytest.mark.parametrize("scored", ["all", "some", "last"])
def test_both_steps_take_the_same_loss_of_the_same_batch(scored):
    """One batch, one model, the two step forms: the loss each reads back is the same number, and it is
    the float64 mean cross-entropy over the scored positions."""
    cfg, task = _cfg("mamba(conv=0)"), get_task("parity")
    torch.manual_seed(0)
    a = build_model(cfg.model, task)
    b = copy.deepcopy(a)
    x, y, m = next(batches(task, np.random.default_rng(3), cfg, CPU))
    if scored == "some":
        m = m & (torch.rand(m.shape, generator=torch.Generator().manual_seed(1)) < 0.4)
    elif scored == "last":
        m = torch.zeros_like(m)
        m[:, -1] = True
    with torch.no_grad():
        logits = a(x)[0].double()
    want = float(torch.nn.functional.cross_entropy(logits[m], y[m]))
    eager, dev = EagerStep(a, cfg, lr_lambda(cfg)), DeviceStep(b, cfg, lr_lambda(cfg), CPU, graphs=False)
    eager.step(x, y, m, 1)
    dev.step(x, y, m, 1)
    ra, rb = eager.read(), dev.read()
    assert ra.loss == rb.loss and (ra.hits, ra.total) == (rb.hits, rb.total) == (ra.hits, int(m.sum()))
    assert ra.loss == pytest.approx(want, rel=1e-6)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_the_masked_loss_is_the_mean_over_scored_positions_and_reads_nothing_back():
    g = torch.Generator().manual_seed(0)
    logits, y = torch.randn(3, 5, 4, generator=g), torch.randint(0, 4, (3, 5), generator=g)
    m = torch.rand(3, 5, generator=g) < 0.5
    got = masked_loss(logits, y, m)
    assert got.dtype == torch.float32 and got.shape == ()
    assert float(got) == pytest.approx(float(torch.nn.functional.cross_entropy(logits[m], y[m])), rel=1e-6)
    assert float(masked_loss(logits, y, torch.zeros_like(m))) == 0.0  # nothing scored: no NaN
    every = torch.ones_like(m)  # every position scored: exactly the plain mean
    assert torch.equal(
        masked_loss(logits, y, every), torch.nn.functional.cross_entropy(logits[every], y[every])
    )
    # its gradient is that of the mean over the selected positions, exactly
    la, lb = logits.clone().requires_grad_(), logits.clone().requires_grad_()
    masked_loss(la, y, m).backward()
    torch.nn.functional.cross_entropy(lb[m], y[m]).backward()
    assert torch.equal(la.grad, lb.grad)


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


@pytest.mark.parametrize("layers", ["negmamba(conv=0)", "deltanet(neg=true)", "rnn"])
def test_the_eager_step_trains_the_weights_torch_optim_trains(layers):
    """EagerStep against the step as torch.optim wrote it (AdamW, LambdaLR, clip_grad_norm_): the same
    weights and learning rate after every step, to the bit (tests/test_adamw.py: the update alone)."""
    cfg, task = _cfg(layers, clip=0.5, weight_decay=0.05), get_task("parity")
    torch.manual_seed(0)
    a = build_model(cfg.model, task)
    b = copy.deepcopy(a)
    eager = EagerStep(a, cfg, lr_lambda(cfg))
    opt = torch.optim.AdamW(b.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(cfg))
    da, db = (batches(task, np.random.default_rng(0), cfg, torch.device("cpu")) for _ in range(2))
    assert eager.lr() == sched.get_last_lr()[0]
    for s in range(1, cfg.steps + 1):
        eager.step(*next(da), s)
        x, y, m = next(db)
        loss = masked_loss(b(x)[0], y, m)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(b.parameters(), cfg.clip)
        opt.step()
        sched.step()
        assert eager.lr() == sched.get_last_lr()[0]
        for p, q in zip(a.parameters(), b.parameters(), strict=True):
            assert torch.equal(p, q), s


@pytest.mark.parametrize("first,mult", [(7, 1), (5, 2), (3, 3)])
def test_warm_restarts_follow_torchs_cosine_annealing_warm_restarts(first, mult):
    """restart_steps / restart_mult / lr_min: the learning rate of every step is torch's
    CosineAnnealingWarmRestarts' (T_0, T_mult, eta_min), after the warm-up; without them, one cosine."""
    cfg = _cfg(warmup_frac=0.0, restart_steps=first, restart_mult=mult, lr_min=1e-4)
    f = lr_lambda(cfg)
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=cfg.lr)
    ref = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=first, T_mult=mult, eta_min=1e-4)
    for step in range(30):
        assert cfg.lr * f(step) == pytest.approx(opt.param_groups[0]["lr"], rel=1e-9, abs=1e-12)
        opt.step()
        ref.step()
    plain = lr_lambda(_cfg(warmup_frac=0.0))
    assert plain(0) == 1.0 and plain(15) == pytest.approx(0.5) and plain(29) < 0.01


def test_no_decay_exempts_the_named_parameters_from_weight_decay():
    """With zero gradients AdamW's only move is the decay: the named parameters keep their values, the
    others shrink, in both step forms; a name that matches nothing is one clear error."""
    from statetrack.errors import UserError
    from statetrack.training.steps import decay_groups

    cfg = _cfg("negmamba(conv=0)", weight_decay=0.5, no_decay=["A_log", ".D"])
    task = get_task("parity")
    torch.manual_seed(0)
    model = build_model(cfg.model, task)
    groups = decay_groups(model, cfg)
    exempt = {id(p) for p in groups[1]["params"]}
    names = {n for n, p in model.named_parameters() if id(p) in exempt}
    assert names and all(n.endswith(("A_log", ".D")) for n in names)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(groups, lr=0.1, weight_decay=cfg.weight_decay)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    for n, p in model.named_parameters():
        moved = not torch.equal(p, before[n])
        assert moved == (n not in names and bool(before[n].abs().sum() > 0)), n
    assert len(decay_groups(model, _cfg())) == len(list(model.parameters()))  # no groups by default
    with pytest.raises(UserError, match="names no parameter"):
        decay_groups(model, _cfg(no_decay=["nothing_here"]))
