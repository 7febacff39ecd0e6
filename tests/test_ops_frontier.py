"""The recurrences of Mamba-2, Mamba-3, Gated DeltaNet, RWKV-7, GLA, mLSTM and sLSTM: every fast form
against its float64 step-by-step reference, forward and gradients; float32 over long sequences; and,
where flash-linear-attention is installed, against fla's own PyTorch references."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from statetrack.ops import dispatch
from statetrack.ops.dplr import (
    dplr_chunked,
    dplr_recurrent,
    dplr_ref,
    gated_delta_rule,
    gated_delta_terms,
    gla_rule,
    rwkv7_rule,
    rwkv7_terms,
)
from statetrack.ops.mamba3 import mamba3_scan, mamba3_scan_ref
from statetrack.ops.mlstm import mlstm_chunked, mlstm_ref
from statetrack.ops.slstm import slstm_recurrent, slstm_ref
from statetrack.ops.ssd import ssd_scan, ssd_scan_ref

D64 = torch.float64


def rel_err(x, ref):
    return float((x.to(ref.dtype) - ref).abs().max() / ref.abs().max())


def grads(outs, weights, ins):
    loss = sum((o * w).sum() if not o.is_complex() else (torch.view_as_real(o) * w).sum()
               for o, w in zip(outs, weights, strict=True))
    return torch.autograd.grad(loss, [x for x in ins if x is not None and x.requires_grad])


def weights_like(outs, seed=5):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(torch.view_as_real(o).shape if o.is_complex() else o.shape, generator=g, dtype=D64)
            for o in outs]


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
    assert rel_err(o, dplr_ref(*ins)[0]) < 1e-5


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
    return r(B, T, H, dk), r(B, T, H, dk), r(B, T, H, dv), scale * r(B, T, H), F.logsigmoid(scale * r(B, T, H)), state


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
    assert torch.autograd.gradcheck(lambda w_, R_: slstm_recurrent(w_, R_)[0],
                                    (w[:, :6].requires_grad_(), R.requires_grad_()))


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
    ins = (-F.softplus(r(B, T, H)), r(B, T, H, N2), r(B, T, H, P), c(B, T, H, N2), c(B, T, H, N2),
           torch.rand(B, T, H, generator=g, dtype=dtype), torch.rand(B, T, H, generator=g, dtype=dtype))
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
    o_fla, S_fla = naive_recurrent_gated_delta_rule(q, k, v, beta, gate, scale=1.0, initial_state=S0,
                                                    output_final_state=True)
    o, S = gated_delta_rule(q, k, v, beta, gate, S0)
    assert rel_err(o, o_fla.double()) < 1e-5 and rel_err(S, S_fla.double()) < 1e-5


def test_dplr_and_gla_match_fla_naive():
    _fla()
    from fla.ops.generalized_delta_rule.dplr.naive import dplr_recurrence
    from fla.ops.gla.naive import naive_recurrent_gla

    q, k, v, a, b, log_w, S0 = (x.float() for x in dplr_inputs())
    dk = q.shape[-1]
    hf = lambda x: x.transpose(1, 2)  # noqa: E731  fla's dplr reference is head-first
    o_fla, S_fla = dplr_recurrence(hf(q), hf(k), hf(v), hf(a), hf(b), hf(log_w), initial_state=S0)
    o, S = dplr_chunked(q * dk ** -0.5, k, v, a, b, log_w, S0)
    assert rel_err(o, hf(o_fla)) < 1e-5 and rel_err(S, S_fla) < 1e-5
    o_fla, S_fla = naive_recurrent_gla(q, k, v, log_w, initial_state=S0, output_final_state=True)
    o, S = gla_rule(q * dk ** -0.5, k, v, log_w, S0)
    assert rel_err(o, o_fla) < 1e-5 and rel_err(S, S_fla) < 1e-5
