"""The recurrences of Mamba-2, Mamba-3, Gated DeltaNet, RWKV-7, GLA, mLSTM and sLSTM: every fast form
against its float64 step-by-step reference, forward and gradients; float32 over long sequences; and,
where flash-linear-attention is installed, against fla's own PyTorch references."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from statetrack.ops import dispatch
from statetrack.ops.dplr.chunk import dplr_chunked
from statetrack.ops.dplr.reference import dplr_recurrent, dplr_ref
from statetrack.ops.dplr.rwkv7 import rwkv7_rule, rwkv7_terms
from statetrack.ops.gated_delta.chunk import gated_delta_chunked
from statetrack.ops.gated_delta.reference import gated_delta_terms
from statetrack.ops.gated_delta.rule import gated_delta_rule
from statetrack.ops.gla.chunk import gla_chunked
from statetrack.ops.gla.rule import gla_rule
from statetrack.ops.kda.chunk import kda_chunked
from statetrack.ops.kda.reference import kda_terms
from statetrack.ops.mamba3.reference import mamba3_scan_ref
from statetrack.ops.mamba3.scan import mamba3_scan
from statetrack.ops.mlstm.chunk import mlstm_chunked
from statetrack.ops.mlstm.reference import mlstm_ref
from statetrack.ops.slstm.reference import slstm_recurrent, slstm_ref
from statetrack.ops.ssd.reference import ssd_scan_ref
from statetrack.ops.ssd.scan import ssd_scan

D64 = torch.float64


def rel_err(x, ref):
    return float((x.to(ref.dtype) - ref).abs().max() / ref.abs().max())


def grads(outs, weights, ins):
    loss = sum(
        (o * w).sum() if not o.is_complex() else (torch.view_as_real(o) * w).sum()
        for o, w in zip(outs, weights, strict=True)
    )
    return torch.autograd.grad(loss, [x for x in ins if x is not None and x.requires_grad])


def weights_like(outs, seed=5):
    g = torch.Generator().manual_seed(seed)
    return [
        torch.randn(torch.view_as_real(o).shape if o.is_complex() else o.shape, generator=g, dtype=D64)
        for o in outs
    ]


def dplr_inputs(B=2, T=37, H=2, dk=5, dv=3, per_channel=True, low_rank=True, dtype=D64, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    q, k, v = r(B, T, H, dk), F.normalize(r(B, T, H, dk), dim=-1), r(B, T, H, dv)
    log_w = -2 * torch.rand(B, T, H, dk if per_channel else 1, generator=g, dtype=dtype)
    a = F.normalize(r(B, T, H, dk), dim=-1) if low_rank else None
    b = -a * torch.rand(B, T, H, dk, generator=g, dtype=dtype) if low_rank else None
    return q, k, v, a, b, log_w, r(B, H, dk, dv)


# ---------------------------------------------------------------- diagonal plus low rank


@pytest.mark.parametrize("per_channel", [True, False])
@pytest.mark.parametrize("low_rank", [True, False])
@pytest.mark.parametrize("chunk,T", [(1, 9), (4, 37), (16, 37), (64, 37), (16, 48)])
def test_dplr_chunked_matches_reference(per_channel, low_rank, chunk, T):
    ins = dplr_inputs(T=T, per_channel=per_channel, low_rank=low_rank)
    o, S = dplr_chunked(*ins, chunk=chunk)
    o_ref, S_ref = dplr_ref(*ins)
    torch.testing.assert_close(o, o_ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(S, S_ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("per_channel", [True, False])
def test_dplr_chunked_gradients_match_reference(per_channel):
    ins = [None if x is None else x.requires_grad_() for x in dplr_inputs(per_channel=per_channel)]
    outs, refs = dplr_chunked(*ins, chunk=8), dplr_ref(*ins)
    w = weights_like(refs)
    for g1, g2 in zip(grads(outs, w, ins), grads(refs, w, ins), strict=True):
        torch.testing.assert_close(g1, g2, rtol=1e-9, atol=1e-9)


def test_dplr_recurrent_is_the_reference_loop_in_float32():
    ins = dplr_inputs()
    o, S = dplr_recurrent(*[None if x is None else x.float() for x in ins])
    o_ref, S_ref = dplr_ref(*ins)
    assert o.dtype == S.dtype == torch.float32
    assert rel_err(o, o_ref) < 1e-5 and rel_err(S, S_ref) < 1e-5


def test_gated_delta_rule_reflections_float32_long():
    """beta in {0, 2} with alpha = 1: products of reflections over 1,000 steps, the case that needs
    exactness (parity); the chunked float32 form against the float64 reference."""
    g = torch.Generator().manual_seed(1)
    B, T, H, dk, dv = 3, 1000, 2, 16, 16
    q = F.normalize(torch.randn(B, T, H, dk, generator=g), dim=-1)
    k = F.normalize(torch.randn(B, T, H, dk, generator=g), dim=-1)
    v = torch.randn(B, T, H, dv, generator=g)
    beta = 2.0 * (torch.rand(B, T, H, generator=g) > 0.5).float()
    gate = torch.zeros(B, T, H)
    o, S = gated_delta_rule(q, k, v, beta, gate)
    bk, a, b, lw = gated_delta_terms(k.double(), beta.double(), gate.double())
    o_ref, S_ref = dplr_ref(q.double(), bk, v.double(), a, b, lw)
    assert rel_err(o, o_ref) < 1e-5 and rel_err(S, S_ref) < 1e-5


def gated_inputs(B=2, T=37, H=2, dk=5, dv=3, dtype=D64, seed=0):
    """Gated DeltaNet's inputs: q, k (L2-normalised), v, beta in [0, 2], g = log alpha in [-2, 0], S0."""
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    q, k, v = r(B, T, H, dk), F.normalize(r(B, T, H, dk), dim=-1), r(B, T, H, dv)
    beta = 2 * torch.rand(B, T, H, generator=g, dtype=dtype)
    gate = -2 * torch.rand(B, T, H, generator=g, dtype=dtype)
    return q, k, v, beta, gate, r(B, H, dk, dv)


def gated_ref(q, k, v, beta, gate, S0=None):
    bk, a, b, lw = gated_delta_terms(k, beta, gate)
    return dplr_ref(q, bk, v, a, b, lw, S0)


@pytest.mark.parametrize("chunk,T", [(1, 9), (4, 37), (16, 37), (64, 37), (16, 48)])
def test_gated_delta_chunked_matches_reference(chunk, T):
    ins = gated_inputs(T=T)
    o, S = gated_delta_chunked(*ins, chunk=chunk)
    o_ref, S_ref = gated_ref(*ins)
    torch.testing.assert_close(o, o_ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(S, S_ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("chunk,T", [(8, 37), (16, 16), (4, 3)])
def test_gated_delta_chunked_gradients_match_reference(chunk, T):
    """The hand-written backward pass: every input's gradient (q, k, v, beta, the log-gate g, S0) against
    autograd through the float64 step-by-step loop, from a loss on both the outputs and the final state."""
    ins = [x.requires_grad_() for x in gated_inputs(T=T)]
    outs, refs = gated_delta_chunked(*ins, chunk=chunk), gated_ref(*ins)
    w = weights_like(refs)
    for g1, g2 in zip(grads(outs, w, ins), grads(refs, w, ins), strict=True):
        torch.testing.assert_close(g1, g2, rtol=1e-9, atol=1e-9)
    (o, _), (o_ref, _) = gated_delta_chunked(*ins, chunk=chunk), gated_ref(*ins)
    for g1, g2 in zip(grads([o], w[:1], ins), grads([o_ref], w[:1], ins), strict=True):  # no state gradient
        torch.testing.assert_close(g1, g2, rtol=1e-9, atol=1e-9)


def test_gated_delta_chunked_float32_with_gradients():
    """float32 over 1,000 steps, gates down to e^-2 per step next to gates of 1 and beta up to 2: outputs,
    state and every gradient within 1e-4 of the float64 reference (relative to its largest entry)."""
    ins64 = list(gated_inputs(B=2, T=1000, H=2, dk=16, dv=8, seed=3))
    ins64[4] = torch.where(torch.arange(1000).view(1, -1, 1) % 5 == 0, ins64[4], torch.zeros(()).double())
    ins32 = [x.float().requires_grad_() for x in ins64]
    ins64 = [x.requires_grad_() for x in ins64]
    outs, refs = gated_delta_chunked(*ins32), gated_ref(*ins64)
    assert all(rel_err(x.detach(), ref.detach()) < 1e-5 for x, ref in zip(outs, refs, strict=True))
    w = weights_like(refs)
    for g1, g2 in zip(grads(outs, [x.float() for x in w], ins32), grads(refs, w, ins64), strict=True):
        assert rel_err(g1, g2) < 1e-4


def gla_inputs(B=2, T=37, H=2, dk=5, dv=3, dtype=D64, seed=0):
    """GLA's inputs: q, k, v, log_w in [-2, 0] per key channel, S0."""
    q, k, v, _, _, log_w, S0 = dplr_inputs(B, T, H, dk, dv, low_rank=False, dtype=dtype, seed=seed)
    return q, k, v, log_w, S0


def gla_ref(q, k, v, log_w, S0=None):
    return dplr_ref(q, k, v, None, None, log_w, S0)


def test_rwkv7_and_gla_rules_float32_long():
    g = torch.Generator().manual_seed(2)
    B, T, H, dk, dv = 2, 1000, 2, 8, 8
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    q, k, v = r(B, T, H, dk), r(B, T, H, dk), r(B, T, H, dv)
    log_w = -0.6065 * torch.sigmoid(r(B, T, H, dk))
    kappa, a_lr = F.normalize(r(B, T, H, dk), dim=-1), torch.sigmoid(r(B, T, H, dk))
    o, _ = rwkv7_rule(q, k, v, log_w, kappa, a_lr)
    a, b = rwkv7_terms(kappa.double(), a_lr.double())
    assert rel_err(o, dplr_ref(q.double(), k.double(), v.double(), a, b, log_w.double())[0]) < 1e-5
    log_w = F.logsigmoid(r(B, T, H, dk)) / 16
    o, _ = gla_rule(q, k, v, log_w)
    assert rel_err(o, dplr_ref(q.double(), k.double(), v.double(), None, None, log_w.double())[0]) < 1e-5


def test_dplr_strong_decay_stays_finite():
    """Gates near 0 (log w = -80 per step) next to gates near 1: no overflow, no NaN, exact to rounding."""
    ins = list(dplr_inputs(T=40, dtype=torch.float32))
    ins[5] = ins[5].clone()
    ins[5][:, ::3] = -80.0
    o, S = dplr_chunked(*ins, chunk=16)
    o_ref, _ = dplr_ref(*ins)
    assert torch.isfinite(o).all() and rel_err(o, o_ref) < 1e-5


# ---------------------------------------------------------------- mLSTM, sLSTM


def mlstm_inputs(B=2, T=37, H=2, dk=5, dv=3, scale=3.0, dtype=D64, seed=3):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    state = (r(B, H, dk, dv), r(B, H, dk), r(B, H))
    return (
        r(B, T, H, dk),
        r(B, T, H, dk),
        r(B, T, H, dv),
        scale * r(B, T, H),
        F.logsigmoid(scale * r(B, T, H)),
        state,
    )


@pytest.mark.parametrize("chunk", [1, 4, 16, 64])
def test_mlstm_chunked_matches_reference(chunk):
    *ins, state = mlstm_inputs()
    h, st = mlstm_chunked(*ins, state=state, chunk=chunk)
    h_ref, st_ref = mlstm_ref(*ins, state=state)
    torch.testing.assert_close(h, h_ref, rtol=1e-10, atol=1e-10)
    for a, b in zip(st, st_ref, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_mlstm_chunked_gradients_match_reference():
    *ins, state = mlstm_inputs()
    ins = [x.requires_grad_() for x in ins]
    outs = mlstm_chunked(*ins, state=state, chunk=8)
    refs = mlstm_ref(*ins, state=state)
    outs, refs = [outs[0], outs[1][0]], [refs[0], refs[1][0]]
    w = weights_like(refs)
    for g1, g2 in zip(grads(outs, w, ins), grads(refs, w, ins), strict=True):
        torch.testing.assert_close(g1, g2, rtol=1e-8, atol=1e-8)


def test_mlstm_large_input_gates_float32():
    """Gate pre-activations up to about 300 (exp overflows float32 beyond 88): the stabilised chunked
    form stays finite and as exact as the float32 step loop (exponents of size 300 carry absolute
    rounding errors of 2e-5: measured 3.7e-5 for the chunked form, 2.3e-5 for the loop)."""
    *ins, _ = mlstm_inputs(T=300, scale=100.0)
    h, (C, n, m) = mlstm_chunked(*[x.float() for x in ins])
    h_ref, _ = mlstm_ref(*ins)
    assert torch.isfinite(h).all() and torch.isfinite(C).all()
    assert rel_err(h, h_ref) < 1e-4


def test_slstm_loop_float32_and_gradcheck():
    g = torch.Generator().manual_seed(4)
    w = torch.randn(2, 30, 4, 2, 3, generator=g, dtype=D64)
    R = 0.5 * torch.randn(4, 2, 3, 3, generator=g, dtype=D64)
    h, _ = slstm_recurrent(w.float(), R.float())
    assert rel_err(h, slstm_ref(w, R)[0]) < 1e-5
    assert torch.autograd.gradcheck(
        lambda w_, R_: slstm_recurrent(w_, R_)[0], (w[:, :6].requires_grad_(), R.requires_grad_())
    )


# ---------------------------------------------------------------- Mamba-2, Mamba-3


@pytest.mark.parametrize("neg", [False, True])
def test_ssd_scan_matches_reference_forward_and_gradients(neg):
    g = torch.Generator().manual_seed(5)
    B, T, H, P, N = 2, 29, 3, 2, 4
    dt = F.softplus(torch.randn(B, T, H, generator=g, dtype=D64)).requires_grad_()
    A = (-3 * torch.rand(H, generator=g, dtype=D64)).requires_grad_()
    x = torch.randn(B, T, H, P, generator=g, dtype=D64).requires_grad_()
    Bm, Cm = (torch.randn(B, T, N, generator=g, dtype=D64).requires_grad_() for _ in range(2))
    h0 = torch.randn(B, H, P, N, generator=g, dtype=D64).requires_grad_()
    ins = (dt, A, x, Bm, Cm, h0)
    outs, refs = ssd_scan(*ins, neg=neg), ssd_scan_ref(*ins, neg=neg)
    for a, b in zip(outs, refs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    w = weights_like(refs)
    for g1, g2 in zip(grads(outs, w, ins), grads(refs, w, ins), strict=True):
        torch.testing.assert_close(g1, g2, rtol=1e-9, atol=1e-9)


def mamba3_inputs(B=2, T=29, H=2, P=3, N2=3, dtype=D64, seed=6):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    c = lambda *s: torch.complex(r(*s), r(*s))  # noqa: E731
    ins = (
        -F.softplus(r(B, T, H)),
        r(B, T, H, N2),
        r(B, T, H, P),
        c(B, T, H, N2),
        c(B, T, H, N2),
        torch.rand(B, T, H, generator=g, dtype=dtype),
        torch.rand(B, T, H, generator=g, dtype=dtype),
    )
    return ins, (c(B, H, P, N2), c(B, H, P, N2))


def test_mamba3_scan_matches_reference_forward_and_gradients():
    ins, state = mamba3_inputs()
    ins = [x.requires_grad_() for x in ins]
    outs, refs = mamba3_scan(*ins, state=state), mamba3_scan_ref(*ins, state=state)
    torch.testing.assert_close(outs[0], refs[0], rtol=1e-10, atol=1e-10)
    for a, b in zip(outs[1], refs[1], strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    outs, refs = [outs[0], outs[1][0]], [refs[0], refs[1][0]]
    w = weights_like(refs)
    for g1, g2 in zip(grads(outs, w, ins), grads(refs, w, ins), strict=True):
        torch.testing.assert_close(g1, g2, rtol=1e-9, atol=1e-9)


def test_mamba3_pure_rotation_float32_long():
    """|a| = 1 (log decay 0), angle pi for half the steps: 10,000 steps in float32 against float64."""
    (ld, phi, x, Bc, Cc, gam, bet), _ = mamba3_inputs(B=2, T=10_000, H=1, P=2, N2=2, dtype=torch.float32)
    ld = torch.zeros_like(ld)
    phi = torch.pi * (torch.rand(phi.shape) > 0.5).float()
    ins = (ld, phi, x, Bc, Cc, gam, bet)
    y, _ = mamba3_scan(*ins)
    y_ref, _ = mamba3_scan_ref(*ins)
    assert rel_err(y, y_ref) < 1e-3


# ---------------------------------------------------------------- against flash-linear-attention's references


def _fla():
    if not dispatch.installed("fla"):
        pytest.skip("flash-linear-attention (fla-core) is not installed")


def test_gated_delta_rule_matches_fla_naive():
    _fla()
    from fla.ops.gated_delta_rule.naive import naive_recurrent_gated_delta_rule

    g = torch.Generator().manual_seed(7)
    B, T, H, dk, dv = 2, 33, 2, 8, 4
    q, v = torch.randn(B, T, H, dk, generator=g), torch.randn(B, T, H, dv, generator=g)
    k = F.normalize(torch.randn(B, T, H, dk, generator=g), dim=-1)
    beta, gate = 2 * torch.rand(B, T, H, generator=g), -torch.rand(B, T, H, generator=g)
    S0 = torch.randn(B, H, dk, dv, generator=g)
    o_fla, S_fla = naive_recurrent_gated_delta_rule(
        q, k, v, beta, gate, scale=1.0, initial_state=S0, output_final_state=True
    )
    o, S = gated_delta_rule(q, k, v, beta, gate, S0)
    assert rel_err(o, o_fla.double()) < 1e-5 and rel_err(S, S_fla.double()) < 1e-5


def test_dplr_and_gla_match_fla_naive():
    _fla()
    from fla.ops.generalized_delta_rule.dplr.naive import dplr_recurrence
    from fla.ops.gla.chunk.naive import naive_recurrent_gla

    q, k, v, a, b, log_w, S0 = (x.float() for x in dplr_inputs())
    dk = q.shape[-1]
    hf = lambda x: x.transpose(1, 2)  # noqa: E731  fla's dplr reference is head-first
    o_fla, S_fla = dplr_recurrence(hf(q), hf(k), hf(v), hf(a), hf(b), hf(log_w), initial_state=S0)
    o, S = dplr_chunked(q * dk**-0.5, k, v, a, b, log_w, S0)
    assert rel_err(o, hf(o_fla)) < 1e-5 and rel_err(S, S_fla) < 1e-5
    o_fla, S_fla = naive_recurrent_gla(q, k, v, log_w, initial_state=S0, output_final_state=True)
    o, S = gla_rule(q * dk**-0.5, k, v, log_w, S0)
    assert rel_err(o, o_fla) < 1e-5 and rel_err(S, S_fla) < 1e-5


# ---------------------------------------------------------------- PD-SSM, Gated DeltaProduct, KDA


def pd_inputs(B=2, T=37, N=5, dtype=torch.complex128, seed=0, unit=False):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randint(0, N, (B, T, N), generator=g)
    mod = (
        torch.ones(B, T, N, dtype=torch.float64)
        if unit
        else torch.rand(B, T, N, generator=g, dtype=torch.float64)
    )
    d = torch.polar(mod, 6.3 * torch.rand(B, T, N, generator=g, dtype=torch.float64)).to(dtype)
    b = torch.randn(B, T, N, generator=g, dtype=torch.float64) + 1j * torch.randn(
        B, T, N, generator=g, dtype=torch.float64
    )
    h0 = torch.randn(B, N, generator=g, dtype=torch.float64) * (1 + 0j)
    return idx, d, b.to(dtype), h0.to(dtype)


@pytest.mark.parametrize("rows", [False, True])
@pytest.mark.parametrize("chunk,T", [(0, 9), (2, 9), (3, 37), (8, 37), (32, 37), (64, 40), (4, 1)])
def test_pd_scan_matches_reference(rows, chunk, T):
    from statetrack.ops.pdssm.reference import pd_ref
    from statetrack.ops.pdssm.scan import pd_scan

    idx, d, b, h0 = pd_inputs(T=T)
    h, hT = pd_scan(idx, d, b, h0, rows, chunk)
    h_ref, hT_ref = pd_ref(idx, d, b, h0, rows)
    torch.testing.assert_close(h, h_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(hT, hT_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("rows", [False, True])
@pytest.mark.parametrize("chunk", [0, 4])
def test_pd_scan_straight_through_gradients_match_dense_reference(rows, chunk):
    """The gradients of d, b, h0 and of the soft matrix (the straight-through estimator) against autograd through
    the dense product hard + soft - soft.detach() of Terzic2025's code, in float64."""
    from statetrack.ops.pdssm.reference import pd_ref
    from statetrack.ops.pdssm.scan import pd_scan

    idx, d, b, h0 = pd_inputs(T=23)
    g = torch.Generator().manual_seed(3)
    N = idx.shape[-1]
    M = torch.randn(*idx.shape[:2], N, N, generator=g, dtype=D64)
    soft = torch.softmax(M, -1 if rows else -2).requires_grad_()
    ins = [d.requires_grad_(), b.requires_grad_(), h0.requires_grad_(), soft]
    outs = pd_scan(idx, d, b, h0, rows, chunk, soft)
    refs = pd_ref(idx, d, b, h0, rows, soft)
    w = weights_like(refs)
    for g1, g2 in zip(grads(outs, w, ins), grads(refs, w, ins), strict=True):
        torch.testing.assert_close(g1, g2, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("rows", [False, True])
def test_pd_scan_keeps_one_hot_states_exactly_float32(rows):
    """d = 1 and no input: a one-hot state moves along the maps and stays exactly one-hot over 10,000 steps of
    the float32 scan (no entry is ever rounded). Column form: any maps, the automaton q -> sigma_t(q); row form:
    permutations (a gather by a non-injective map would copy or drop the one), e_q -> e_(sigma_t^-1 q)."""
    from statetrack.ops.pdssm.scan import pd_scan

    B, T, N = 3, 10_000, 6
    g = torch.Generator().manual_seed(4)
    idx = (
        torch.rand(B, T, N, generator=g).argsort(-1) if rows else torch.randint(0, N, (B, T, N), generator=g)
    )
    d = torch.ones(idx.shape, dtype=torch.complex64)
    h0 = torch.zeros(B, N, dtype=torch.complex64)
    h0[:, 2] = 1
    h, _ = pd_scan(idx, d, torch.zeros_like(d), h0, rows)
    assert (h.abs().sum(-1) == 1).all() and ((h == 0) | (h == 1)).all()
    state = torch.full((B,), 2)
    for t in range(T):
        state = (idx[:, t] == state[:, None]).int().argmax(-1) if rows else idx[torch.arange(B), t, state]
    assert (h[:, -1].real.argmax(-1) == state).all()


def _gdp_naive(q, k, v, beta, g, S0):
    """fla's naive gated delta product: per token, the gate, then n_h delta steps; float64."""
    q, k, v, beta, g, S = (x.double() for x in (q, k, v, beta, g, S0))
    out = []
    for t in range(q.shape[1]):
        S = S * torch.exp(g[:, t])[..., None, None]
        for j in range(k.shape[2]):
            kj, vj, bj = k[:, t, j], v[:, t, j], beta[:, t, j]
            S = S + bj[..., None, None] * kj[..., None] * (
                vj - torch.einsum("bhk,bhkv->bhv", kj, S)
            ).unsqueeze(-2)
        out.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))
    return torch.stack(out, 1), S


def gdp_inputs(B=2, T=19, nh=2, H=2, dk=4, dv=3, dtype=D64, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    q, k = F.normalize(r(B, T, H, dk), dim=-1), F.normalize(r(B, T, nh, H, dk), dim=-1)
    beta = 2 * torch.rand(B, T, nh, H, generator=g, dtype=dtype)
    return q, k, r(B, T, nh, H, dv), beta, -torch.rand(B, T, H, generator=g, dtype=dtype), r(B, H, dk, dv)


@pytest.mark.parametrize("chunk", [0, 3, 16])
def test_gated_delta_product_matches_reference(chunk):
    from statetrack.ops.gated_delta.rule import gated_delta_product

    ins = [x.requires_grad_() for x in gdp_inputs()]
    outs, refs = gated_delta_product(*ins, chunk=chunk, neg=True), _gdp_naive(*ins)
    for a, b in zip(outs, refs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    w = weights_like(refs)
    for g1, g2 in zip(grads(outs, w, ins), grads(refs, w, ins), strict=True):
        torch.testing.assert_close(g1, g2, rtol=1e-9, atol=1e-9)


def _kda_naive(q, k, v, beta, log_w, S0):
    """fla's naive KDA recurrence (scale 1): S <- diag(exp(g)) S, then the delta step; float64."""
    q, k, v, beta, log_w, S = (x.double() for x in (q, k, v, beta, log_w, S0))
    out = []
    for t in range(q.shape[1]):
        S = S * torch.exp(log_w[:, t])[..., None]
        kt = k[:, t]
        S = S + torch.einsum("bhk,bhv->bhkv", beta[:, t, :, None] * kt, v[:, t] - (kt[..., None] * S).sum(-2))
        out.append(torch.einsum("bhk,bhkv->bhv", q[:, t], S))
    return torch.stack(out, 1), S


def kda_inputs(B=2, T=29, H=2, dk=5, dv=3, dtype=D64, seed=1):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.randn(*s, generator=g, dtype=dtype)  # noqa: E731
    q, k = F.normalize(r(B, T, H, dk), dim=-1), F.normalize(r(B, T, H, dk), dim=-1)
    beta, log_w = (
        2 * torch.rand(B, T, H, generator=g, dtype=dtype),
        -2 * torch.rand(B, T, H, dk, generator=g, dtype=dtype),
    )
    return q, k, r(B, T, H, dv), beta, log_w, r(B, H, dk, dv)


@pytest.mark.parametrize("chunk", [0, 4, 8])
def test_kda_rule_matches_reference(chunk):
    from statetrack.ops.kda.rule import kda_rule

    ins = [x.requires_grad_() for x in kda_inputs()]
    outs, refs = kda_rule(*ins, chunk=chunk, neg=True), _kda_naive(*ins)
    for a, b in zip(outs, refs, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    w = weights_like(refs)
    for g1, g2 in zip(grads(outs, w, ins), grads(refs, w, ins), strict=True):
        torch.testing.assert_close(g1, g2, rtol=1e-9, atol=1e-9)


def kda_ref(q, k, v, beta, log_w, S0=None):
    bk, a, b = kda_terms(k, beta, log_w)
    return dplr_ref(q, bk, v, a, b, log_w, S0)


#: the sub-chunked forms with their references and inputs
SUB_CHUNKED = {"gla": (gla_chunked, gla_ref, gla_inputs), "kda": (kda_chunked, kda_ref, kda_inputs)}


@pytest.mark.parametrize("mixer", ["gla", "kda"])
@pytest.mark.parametrize(
    "chunk,sub,T", [(1, 1, 9), (16, 8, 29), (16, 4, 48), (8, 8, 29), (64, 8, 29), (7, 8, 20)]
)
def test_gla_and_kda_chunked_match_reference(mixer, chunk, sub, T):
    form, ref, make = SUB_CHUNKED[mixer]
    ins = make(T=T)
    o, S = form(*ins, chunk=chunk, sub=sub)
    o_ref, S_ref = ref(*ins)
    torch.testing.assert_close(o, o_ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(S, S_ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("mixer", ["gla", "kda"])
@pytest.mark.parametrize("chunk,sub,T", [(16, 4, 37), (16, 16, 16), (4, 2, 3), (12, 8, 40)])
def test_gla_and_kda_chunked_gradients_match_reference(mixer, chunk, sub, T):
    """The hand-written backward passes: every input's gradient (q, k, v, KDA's beta up to 2, log_w, S0)
    against autograd through the float64 step-by-step loop, from a loss on the outputs and the final state,
    and on the outputs alone."""
    form, ref, make = SUB_CHUNKED[mixer]
    ins = [x.requires_grad_() for x in make(T=T)]
    outs, refs = form(*ins, chunk=chunk, sub=sub), ref(*ins)
    w = weights_like(refs)
    for g1, g2 in zip(grads(outs, w, ins), grads(refs, w, ins), strict=True):
        torch.testing.assert_close(g1, g2, rtol=1e-9, atol=1e-9)
    (o, _), (o_ref, _) = form(*ins, chunk=chunk, sub=sub), ref(*ins)
    for g1, g2 in zip(grads([o], w[:1], ins), grads([o_ref], w[:1], ins), strict=True):
        torch.testing.assert_close(g1, g2, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("mixer", ["gla", "kda"])
@pytest.mark.parametrize("decays", ["strong", "sparse"])
def test_gla_and_kda_chunked_float32_with_gradients(mixer, decays):
    """float32 over 1,000 steps (KDA with beta up to 2): channels that decay by e^-80 in one step beside ones
    that barely decay ("strong"), or decays down to e^-2 on every fifth step and none between ("sparse"):
    outputs and state within 1e-5, every gradient within 1e-4 of the float64 reference (relative to its
    largest entry)."""
    form, ref, make = {"gla": (gla_chunked, gla_ref, gla_inputs), "kda": (kda_chunked, kda_ref, kda_inputs)}[
        mixer
    ]
    ins64 = list(make(T=1000, dk=16, dv=8, seed=3))
    at = len(ins64) - 2  # log_w
    g = torch.Generator().manual_seed(4)
    if decays == "strong":
        hit = torch.rand(ins64[at].shape, generator=g, dtype=D64) < 0.1
        ins64[at] = torch.where(hit, torch.full((), -80.0, dtype=D64), ins64[at] / 50)
    else:
        step = torch.arange(1000).view(1, -1, 1, 1)
        ins64[at] = torch.where(step % 5 == 0, ins64[at], torch.zeros((), dtype=D64))
    ins32 = [x.float().requires_grad_() for x in ins64]
    ins64 = [x.requires_grad_() for x in ins64]
    outs, refs = form(*ins32), ref(*ins64)
    assert all(torch.isfinite(x).all() for x in outs)
    assert all(rel_err(x.detach(), r.detach()) < 1e-5 for x, r in zip(outs, refs, strict=True))
    w = weights_like(refs)
    for g1, g2 in zip(grads(outs, [x.float() for x in w], ins32), grads(refs, w, ins64), strict=True):
        assert torch.isfinite(g1).all() and rel_err(g1, g2) < 1e-4


def test_gated_delta_product_and_kda_float32_long():
    """beta in {0, 2} (reflections) with gates of exactly 1 over 2,000 steps, float32 against float64."""
    from statetrack.ops.gated_delta.rule import gated_delta_product
    from statetrack.ops.kda.rule import kda_rule

    q, k, v, beta, g, S0 = gdp_inputs(B=2, T=2000, dtype=torch.float32, seed=5)
    beta = 2.0 * (beta > 1).float()
    o, S = gated_delta_product(q, k, v, beta, torch.zeros_like(g), S0, neg=True)
    o_ref, S_ref = _gdp_naive(q, k, v, beta, torch.zeros_like(g), S0)
    assert rel_err(o, o_ref) < 1e-4 and rel_err(S, S_ref) < 1e-4
    q, k, v, beta, log_w, S0 = kda_inputs(T=2000, dtype=torch.float32, seed=6)
    beta = 2.0 * (beta > 1).float()
    o, S = kda_rule(q, k, v, beta, torch.zeros_like(log_w), S0, neg=True)
    o_ref, S_ref = _kda_naive(q, k, v, beta, torch.zeros_like(log_w), S0)
    assert rel_err(o, o_ref) < 1e-4 and rel_err(S, S_ref) < 1e-4


def test_gated_delta_product_and_kda_match_fla_naive():
    _fla()
    from fla.ops.gated_delta_product.naive import naive_recurrent_gated_delta_product
    from fla.ops.kda.chunk.naive import naive_recurrent_kda

    from statetrack.ops.gated_delta.rule import gated_delta_product
    from statetrack.ops.kda.rule import kda_rule

    q, k, v, beta, g, S0 = (x.float() for x in gdp_inputs())
    B, T, nh, H, dk = k.shape
    flat = lambda x: x.reshape(B, T * nh, *x.shape[3:])  # noqa: E731
    o_fla, S_fla = naive_recurrent_gated_delta_product(
        q,
        flat(k),
        flat(v),
        g,
        flat(beta),
        1.0,
        None,
        initial_state=S0,
        output_final_state=True,
        num_householder=nh,
    )
    o, S = gated_delta_product(q, k, v, beta, g, S0, neg=True)
    assert rel_err(o, o_fla.double()) < 1e-5 and rel_err(S, S_fla.double()) < 1e-5
    q, k, v, beta, log_w, S0 = (x.float() for x in kda_inputs())
    o_fla, S_fla = naive_recurrent_kda(
        q, k, v, log_w, beta, scale=1.0, initial_state=S0, output_final_state=True
    )
    o, S = kda_rule(q, k, v, beta, log_w, S0, neg=True)
    assert rel_err(o, o_fla.double()) < 1e-5 and rel_err(S, S_fla.double()) < 1e-5


def _fake_fla(monkeypatch, calls):
    """Stand-ins for the fla kernels the new ops call, with fla's signatures: each records (name, dtype of q,
    grad enabled) and computes fla's recurrence in float64 (what the real kernel computes). With
    ``dispatch.use_fla`` forced on, the CUDA dispatch runs on the CPU."""
    import sys
    import types

    def kernel(name, fn):
        def wrapped(*args, **kw):
            calls.append((name, args[0].dtype, torch.is_grad_enabled()))
            return fn(*args, **kw)

        return wrapped

    def gdr(q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel):
        assert scale == 1.0 and output_final_state and not use_qk_l2norm_in_kernel
        o, S = _gdp_naive(q, k.unsqueeze(2), v.unsqueeze(2), beta.unsqueeze(2), g, initial_state)
        return o.float(), S.float()

    def gdr_recurrent(q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel):
        return gdr(q, k, v, g, beta, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel)

    def gdp(
        q, k, v, g, beta, num_householder, scale, initial_state, output_final_state, use_qk_l2norm_in_kernel
    ):
        assert scale == 1.0 and output_final_state and not use_qk_l2norm_in_kernel
        B, TN, H, _ = k.shape
        n = num_householder
        o, S = _gdp_naive(
            q,
            k.reshape(B, TN // n, n, H, -1),
            v.reshape(B, TN // n, n, H, -1),
            beta.reshape(B, TN // n, n, H),
            g,
            initial_state,
        )
        return o.float(), S.float()

    def kda(q, k, v, g, beta, scale, initial_state, output_final_state):
        assert scale == 1.0 and output_final_state
        o, S = _kda_naive(q, k, v, beta, g, initial_state)
        return o.float(), S.float()

    mods = {
        "fla": {},
        "fla.ops": {},
        "fla.ops.gated_delta_rule": {
            "chunk_gated_delta_rule": kernel("chunk_gated_delta_rule", gdr),
            "fused_recurrent_gated_delta_rule": kernel("fused_recurrent_gated_delta_rule", gdr_recurrent),
        },
        "fla.ops.gated_delta_product": {
            "chunk_gated_delta_product": kernel("chunk_gated_delta_product", gdp)
        },
        "fla.ops.kda.chunk": {
            "chunk_kda": kernel("chunk_kda", kda),
            "fused_recurrent_kda": kernel("fused_recurrent_kda", kda),
        },
    }
    for name, fns in mods.items():
        m = types.ModuleType(name)
        m.__dict__.update(fns)
        monkeypatch.setitem(sys.modules, name, m)
    monkeypatch.setattr(dispatch, "use_fla", lambda _x: True)


@pytest.mark.parametrize("neg", [False, True])
@pytest.mark.parametrize("grad", [False, True])
def test_fla_dispatch_of_gated_delta_product_and_kda(monkeypatch, neg, grad):
    """The CUDA dispatch, run on the CPU with stand-in kernels: beta in [0, 1] takes fla's chunk kernels with
    bfloat16 q, k, v; neg=true takes the float32 recurrent kernels when no gradient is needed (evaluation) and the
    PyTorch chunked form when one is (fla's recurrent kernels have no backward pass). Every path gives the
    reference's numbers (to bfloat16 precision on the chunk kernels)."""
    from statetrack.ops.gated_delta.rule import gated_delta_product
    from statetrack.ops.kda.rule import kda_rule

    calls: list = []
    _fake_fla(monkeypatch, calls)
    scale = 1.0 if neg else 0.5
    for op, inputs, naive, beta_at in (
        (gated_delta_product, gdp_inputs, _gdp_naive, 3),
        (kda_rule, kda_inputs, _kda_naive, 3),
    ):
        ins = [x.float() for x in inputs()]
        ins[beta_at] = ins[beta_at] * scale  # beta in [0, 1] unless neg
        if grad:
            ins = [x.requires_grad_() for x in ins]
        calls.clear()
        with torch.set_grad_enabled(grad):
            o, S = op(*ins, neg=neg)
        ref = naive(*[x.detach() for x in ins])
        assert o.dtype == torch.float32
        if neg and grad:
            assert calls == [], "training with neg=true must run the PyTorch form"
            tol = 1e-5
        elif neg:
            assert [c[0] for c in calls] == [
                {gated_delta_product: "fused_recurrent_gated_delta_rule", kda_rule: "fused_recurrent_kda"}[op]
            ]
            assert calls[0][1] == torch.float32
            tol = 1e-5
        else:
            assert [c[0] for c in calls] == [
                {gated_delta_product: "chunk_gated_delta_product", kda_rule: "chunk_kda"}[op]
            ]
            assert calls[0][1] == torch.bfloat16
            tol = 3e-2
        assert rel_err(o.detach(), ref[0]) < tol and rel_err(S.detach(), ref[1]) < tol, (
            op.__name__,
            neg,
            grad,
        )


@pytest.mark.parametrize("dk, dv", [(8, 16), (16, 8), (16, 16)])
def test_fla_dispatch_of_rwkv7_only_for_heads_it_compiles(monkeypatch, dk, dv):
    """fla's chunk RWKV-7 kernel does not compile below 16 key or value channels per head: narrower heads
    run the PyTorch chunked form on CUDA too, with the reference's numbers."""
    import sys
    import types

    from statetrack.ops.dplr.rwkv7 import RWKV7_FLA_MIN_DK

    calls: list = []
    m = types.ModuleType("fla.ops.rwkv7")
    m.chunk_rwkv7 = lambda *a, **kw: calls.append(a) or (a[0].float(), torch.zeros(1))  # type: ignore[attr-defined]
    for name, mod in (
        ("fla", types.ModuleType("fla")),
        ("fla.ops", types.ModuleType("fla.ops")),
        (m.__name__, m),
    ):
        monkeypatch.setitem(sys.modules, name, mod)
    monkeypatch.setattr(dispatch, "use_fla", lambda _x: True)
    g = torch.Generator().manual_seed(4)
    q, k, kappa = (torch.randn(2, 9, 2, dk, generator=g) for _ in range(3))
    v = torch.randn(2, 9, 2, dv, generator=g)
    log_w, a_lr = -torch.rand(2, 9, 2, dk, generator=g), torch.rand(2, 9, 2, dk, generator=g)
    o, _ = rwkv7_rule(q, k, v, log_w, F.normalize(kappa, dim=-1), a_lr)
    assert len(calls) == (min(dk, dv) >= RWKV7_FLA_MIN_DK)
    if not calls:
        a, b = rwkv7_terms(F.normalize(kappa, dim=-1).double(), a_lr.double())
        assert rel_err(o, dplr_ref(q.double(), k.double(), v.double(), a, b, log_w.double())[0]) < 1e-5


def test_fla_gated_chunk_backward_refused_runs_the_pytorch_form(monkeypatch):
    """Where fla refuses its gated chunk backward pass (Hopper with Triton 3.4-3.7.0), training Gated
    DeltaProduct with beta in [0, 1] runs the PyTorch chunked form, and evaluation still the chunk kernel."""
    from statetrack.ops import fla as fla_gated
    from statetrack.ops.gated_delta.rule import gated_delta_product

    calls: list = []
    _fake_fla(monkeypatch, calls)
    monkeypatch.setattr(fla_gated, "gated_chunk_backward", lambda: False)
    ins = [x.float() for x in gdp_inputs()]
    ins[3] = ins[3] * 0.5
    ref = _gdp_naive(*ins)
    o, S = gated_delta_product(*[x.requires_grad_() for x in ins])
    assert calls == [] and rel_err(o.detach(), ref[0]) < 1e-5
    o.sum().backward()
    with torch.no_grad():
        o, S = gated_delta_product(*ins)
    assert [c[0] for c in calls] == ["chunk_gated_delta_product"] and rel_err(o, ref[0]) < 3e-2


def test_fla_recurrent_delta_rule_gets_an_initial_state_it_can_differentiate(monkeypatch):
    """fla 0.6.0's recurrent delta-rule backward pass needs a gradient buffer for any initial state it was
    given, and allocates one only for a state that requires a gradient: the wrapper hands it such a state
    while autograd records, and the caller's state keeps requires_grad False."""
    import sys
    import types

    from statetrack.ops.deltanet.fla import delta_rule_fla

    seen: list = []

    def fused_recurrent_delta_rule(*args, initial_state, **_kw):
        seen.append(initial_state.requires_grad)
        return torch.zeros_like(args[2]), initial_state.detach().clone()

    m = types.ModuleType("fla.ops.delta_rule")
    m.__dict__.update(fused_recurrent_delta_rule=fused_recurrent_delta_rule, chunk_delta_rule=None)
    for name in ("fla", "fla.ops"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "fla.ops.delta_rule", m)
    q = torch.randn(1, 3, 1, 4, requires_grad=True)
    S0 = torch.zeros(1, 1, 4, 4)
    delta_rule_fla(q, q, q, torch.ones(1, 3, 1), S0, kernel="recurrent")
    with torch.no_grad():
        delta_rule_fla(q, q, q, torch.ones(1, 3, 1), S0, kernel="recurrent")
    assert seen == [True, False] and not S0.requires_grad
