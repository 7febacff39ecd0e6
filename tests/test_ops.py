"""Scan engine: every fast form against its float64 step-by-step reference."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import statetrack.ops.diag.scan as ds_mod
from statetrack.ops import (
    causal_conv,
    delta_rule_chunked,
    delta_rule_recurrent,
    delta_rule_ref,
    diag_scan,
    diag_scan_ref,
    householder_product,
    interleave,
    mamba_scan,
    mamba_scan_ref,
    selective_scan,
    selective_scan_ref,
    unit_scan,
    unit_scan_ref,
)
from statetrack.ops.conv import causal_conv_ref
from statetrack.ops.diag.scan import scan_chunked, scan_loop


def rel_err(x, ref):
    """Max error over the max of the reference (per whole tensor)."""
    return float((x.to(ref.dtype) - ref).abs().max() / ref.abs().max())


# ---------------------------------------------------------------- diagonal scan


@pytest.mark.parametrize("form", [scan_loop, scan_chunked, diag_scan])
@pytest.mark.parametrize("kind", ["real", "circle"])
def test_diag_scan_float32_long(form, kind):
    torch.manual_seed(0)
    B, T, S = 2, 10_000, 3
    if kind == "real":
        a = torch.rand(B, T, S) * 2 - 1
        b = torch.randn(B, T, S)
    else:
        a = torch.polar(torch.ones(B, T, S), (torch.rand(B, T, S) * 2 - 1) * math.pi)
        b = torch.randn(B, T, S, dtype=torch.complex64)
    h0 = torch.randn(B, S, dtype=b.dtype)
    ref = diag_scan_ref(a, b, h0)
    assert rel_err(form(a, b, h0), ref) <= 1e-4


def test_unit_scan_long():
    torch.manual_seed(1)
    th = (torch.rand(2, 10_000, 3) * 2 - 1) * math.pi
    b = torch.randn(2, 10_000, 3, dtype=torch.complex64)
    assert rel_err(unit_scan(th, b), unit_scan_ref(th, b)) <= 1e-4


def test_polar_gradcheck():
    from statetrack.ops import polar

    torch.manual_seed(9)
    r = torch.rand(3, 4, dtype=torch.float64, requires_grad=True)
    th = (10 * torch.randn(3, 4, dtype=torch.float64)).requires_grad_()
    torch.testing.assert_close(polar(r, th), torch.polar(r, th))
    torch.testing.assert_close(polar(None, th), torch.polar(torch.ones_like(th), th))
    assert torch.autograd.gradcheck(polar, (r, th))
    assert torch.autograd.gradcheck(lambda t: polar(None, t), (th,))


def test_diag_scan_exact_for_zero_and_negative():
    a = torch.tensor([[0.0, -1.0, -1.0, 0.0, -0.5]]).unsqueeze(-1)
    b = torch.tensor([[1.0, 2.0, 3.0, 4.0, 5.0]]).unsqueeze(-1)
    h = diag_scan(a, b, torch.tensor([[7.0]]))
    assert h.squeeze().tolist() == [1.0, 1.0, 2.0, 4.0, 3.0]
    # chunked form too (zeros in the cumulative product)
    a = torch.zeros(1, 400, 1)
    a[:, ::3] = -1
    b = torch.ones(1, 400, 1)
    torch.testing.assert_close(scan_chunked(a, b, torch.zeros(1, 1)), diag_scan_ref(a, b).float())


def test_diag_scan_finite_100k():
    torch.manual_seed(2)
    T = 100_000
    a = torch.rand(1, T, 4) * 2 - 1
    a[..., 0] = 1.0  # the worst case: pure accumulation
    a[..., 1] = -1.0
    b = torch.randn(1, T, 4)
    h = diag_scan(a, b)
    assert torch.isfinite(h).all()
    th = torch.rand(1, T, 4) * 100
    hc = unit_scan(th, torch.zeros(1, T, 4, dtype=torch.complex64), torch.ones(1, 4, dtype=torch.complex64))
    assert torch.isfinite(hc).all() and ((hc.abs() - 1).abs() < 1e-3).all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("T,chunked", [(1, False), (4, False), (19, True)])
def test_diag_scan_gradcheck(dtype, T, chunked, monkeypatch):
    if chunked:  # route through the chunked forward (and backward) at a small length
        monkeypatch.setattr(ds_mod, "CHUNKED_MIN_T", 8)
    torch.manual_seed(3)
    S = (2, 3)
    a = (0.9 * torch.randn((2, T) + S, dtype=dtype)).requires_grad_()
    b = torch.randn((2, T) + S, dtype=dtype, requires_grad=True)
    h0 = torch.randn((2,) + S, dtype=dtype, requires_grad=True)
    assert torch.autograd.gradcheck(diag_scan, (a, b, h0))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_diag_scan_gradgradcheck(dtype):
    torch.manual_seed(3)
    ins = [
        (0.9 * torch.randn(2, 5, 3, dtype=dtype)).requires_grad_(),
        torch.randn(2, 5, 3, dtype=dtype, requires_grad=True),
        torch.randn(2, 3, dtype=dtype, requires_grad=True),
    ]
    assert torch.autograd.gradgradcheck(diag_scan, ins)


def test_diag_scan_grad_matches_reference_and_broadcast():
    torch.manual_seed(4)
    a = torch.rand(3, 1, 5, dtype=torch.float64, requires_grad=True)  # time-invariant, broadcast over T
    b = torch.randn(3, 50, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 50, 5, dtype=torch.float64)
    g1 = torch.autograd.grad((diag_scan(a, b) * w).sum(), (a, b))
    g2 = torch.autograd.grad((diag_scan_ref(a.expand(3, 50, 5), b) * w).sum(), (a, b))
    for x, y in zip(g1, g2, strict=True):
        torch.testing.assert_close(x, y)


@pytest.mark.parametrize("S", [(3,), (64, 16)])
def test_diag_scan_streamed_in_chunks_into_one_buffer(S):
    """The streaming form: chunks with the state carried, written into one reused buffer."""
    torch.manual_seed(3)
    B, T, C = 2, 1_000, 128
    a, b = torch.rand((B, T) + S) * 2 - 1, torch.randn((B, T) + S)
    ref = diag_scan_ref(a, b)
    buf, h, got = None, None, []
    for i in range(0, T, C):
        ac, bc = a[:, i : i + C], b[:, i : i + C]
        if buf is None or buf.shape != ac.shape:
            buf = torch.empty_like(ac)
        diag_scan(ac, bc, h, out=buf)
        got.append(buf.clone())
        h = buf[:, -1].clone()
    assert rel_err(torch.cat(got, 1), ref) <= 1e-5
    with pytest.raises(ValueError, match="expected"):
        diag_scan(a[:, :5], b[:, :5], out=torch.empty(B, 4, *S))


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
def test_selective_scan_matches_and_gradcheck(dtype):
    torch.manual_seed(7)
    a = (0.9 * torch.randn(2, 6, 3, 4, dtype=dtype)).requires_grad_()
    x = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)
    Bm = torch.randn(2, 6, 4, dtype=torch.float64, requires_grad=True)
    h0 = torch.randn(2, 3, 4, dtype=dtype, requires_grad=True)
    torch.testing.assert_close(selective_scan(a, x, Bm, h0), selective_scan_ref(a, x, Bm, h0))
    assert torch.autograd.gradcheck(selective_scan, (a, x, Bm, h0))


def test_selective_scan_float32_long():
    torch.manual_seed(8)
    th = (torch.rand(2, 3000, 8, 4) * 2 - 1) * math.pi
    a = torch.polar(torch.ones_like(th), th)
    x, Bm = torch.randn(2, 3000, 8), torch.randn(2, 3000, 4)
    assert rel_err(selective_scan(a, x, Bm), selective_scan_ref(a, x, Bm)) <= 1e-4


def _mamba_inputs(B, T, E, N, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    dt = torch.rand(B, T, E, generator=g, dtype=dtype) * 0.5
    A = -torch.rand(E, N, generator=g, dtype=dtype) * 3 - 0.1
    u, Bm, Cm = (torch.randn(*s, generator=g, dtype=dtype) for s in ((B, T, E), (B, T, N), (B, T, N)))
    h0 = torch.randn(B, E, N, generator=g, dtype=dtype)
    return dt, A, u, Bm, Cm, h0


@pytest.mark.parametrize("neg", [False, True])
def test_mamba_scan_matches_and_gradcheck(neg):
    ins = [t.requires_grad_() for t in _mamba_inputs(2, 7, 3, 4, torch.float64, 11)]
    y, h = mamba_scan(*ins, neg=neg)
    yr, hr = mamba_scan_ref(*ins, neg=neg)
    torch.testing.assert_close(y, yr)
    torch.testing.assert_close(h, hr)
    # gradients of y and of the last state (carried between chunks) against autograd through the reference
    assert torch.autograd.gradcheck(lambda *z: mamba_scan(*z, neg=neg), ins)
    with torch.no_grad():  # the evaluation path stores no states
        y2, h2 = mamba_scan(*ins, neg=neg)
    torch.testing.assert_close(y2, yr)
    torch.testing.assert_close(h2, hr)


@pytest.mark.parametrize("T", [1, 8, 13, 17])
def test_mamba_scan_evaluation_loop_any_length(T):
    """The no-gradient loop reads out a ring of states at a time: lengths below, at and past the ring."""
    ins = _mamba_inputs(2, T, 3, 4, torch.float64, 14)
    for neg in (False, True):
        with torch.no_grad():
            y, h = mamba_scan(*ins, neg=neg)
        yr, hr = mamba_scan_ref(*ins, neg=neg)
        torch.testing.assert_close(y, yr)
        torch.testing.assert_close(h, hr)


@pytest.fixture(params=["c", "pytorch"])
def cpu_form(request, monkeypatch):
    """float32 on the CPU runs the C kernel (ops/mamba/mamba_scan.c) where a compiler is found; STATETRACK_KERNELS=0
    keeps the PyTorch loops: both are tested."""
    if request.param == "pytorch":
        monkeypatch.setenv("STATETRACK_KERNELS", "0")
    return request.param


@pytest.mark.parametrize("neg", [False, True])
@pytest.mark.usefixtures("cpu_form")
def test_mamba_scan_float32_long(neg):
    ins = _mamba_inputs(2, 10_000, 4, 3, torch.float32, 12)
    y, h = mamba_scan(*ins, neg=neg)
    yr, hr = mamba_scan_ref(*ins, neg=neg)
    assert rel_err(y, yr) <= 1e-4 and rel_err(h, hr) <= 1e-4


@pytest.mark.usefixtures("cpu_form")
def test_mamba_scan_gradients_float32_agree_with_reference():
    ins = [t.requires_grad_() for t in _mamba_inputs(3, 300, 5, 4, torch.float32, 13)]
    w = torch.randn(3, 300, 5)
    g1 = torch.autograd.grad((mamba_scan(*ins, neg=True)[0] * w).sum(), ins)
    g2 = torch.autograd.grad((mamba_scan_ref(*ins, neg=True)[0] * w.double()).sum(), ins)
    for x, ref in zip(g1, g2, strict=True):
        assert rel_err(x, ref) <= 1e-4


# ---------------------------------------------------------------- delta rule


def _delta_inputs(B, T, H, dk, dv, kind, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(B, T, H, dk, generator=g), dim=-1)
    k = F.normalize(torch.randn(B, T, H, dk, generator=g), dim=-1)
    beta = torch.rand(B, T, H, generator=g)
    if kind in ("repeated", "repeated_near2"):
        k = F.normalize(torch.randn(B, 1, H, dk, generator=g), dim=-1).expand(B, T, H, dk).clone()
        k[:, ::5] = F.normalize(torch.randn(B, k[:, ::5].shape[1], H, dk, generator=g), dim=-1)
    if kind in ("near2", "repeated_near2"):
        beta = 2 - 1e-3 * torch.rand(B, T, H, generator=g)
    if kind == "neg":
        beta = 2 * beta
    v = torch.randn(B, T, H, dv, generator=g)
    S0 = torch.randn(B, H, dk, dv, generator=g)
    return [x.to(dtype) for x in (q, k, v, beta, S0)]


@pytest.mark.parametrize("kind", ["plain", "neg", "repeated", "near2", "repeated_near2"])
def test_delta_chunked_float32(kind):
    q, k, v, beta, S0 = _delta_inputs(2, 300, 2, 16, 8, kind)
    ro, rS = delta_rule_ref(q, k, v, beta, S0)
    for chunk in (16, 64, 128):
        o, S = delta_rule_chunked(q, k, v, beta, S0, chunk=chunk)
        assert rel_err(o, ro) <= 1e-3 and rel_err(S, rS) <= 1e-3, chunk
    o, S = delta_rule_recurrent(q, k, v, beta, S0)
    assert rel_err(o, ro) <= 1e-3 and rel_err(S, rS) <= 1e-3


@pytest.mark.parametrize("T,chunk", [(1, 4), (7, 4), (8, 4), (13, 64)])
def test_delta_chunked_exact_float64_and_padding(T, chunk):
    q, k, v, beta, S0 = _delta_inputs(2, T, 3, 4, 5, "neg", torch.float64)
    ro, rS = delta_rule_ref(q, k, v, beta, S0)
    o, S = delta_rule_chunked(q, k, v, beta, S0, chunk=chunk)
    torch.testing.assert_close(o, ro)
    torch.testing.assert_close(S, rS)


@pytest.mark.parametrize("T,chunk", [(11, 4), (8, 8), (3, 16)])
def test_delta_chunked_gradcheck(T, chunk):
    """The chunked form's hand-written backward, including the gradient of the final state."""
    ins = [x.clone().requires_grad_() for x in _delta_inputs(2, T, 2, 4, 3, "neg", torch.float64, seed=T)]
    assert torch.autograd.gradcheck(lambda *z: delta_rule_chunked(*z, chunk=chunk), ins)


@pytest.mark.parametrize("kind", ["neg", "repeated_near2"])
def test_delta_chunked_gradients_float32_agree_with_reference(kind):
    ins = [x.clone().requires_grad_() for x in _delta_inputs(2, 300, 2, 16, 8, kind)]
    w = torch.randn(2, 300, 2, 8)
    g1 = torch.autograd.grad((delta_rule_chunked(*ins, chunk=32)[0] * w).sum(), ins)
    g2 = torch.autograd.grad((delta_rule_ref(*ins)[0] * w.double()).sum(), ins)
    for x, ref in zip(g1, g2, strict=True):
        assert rel_err(x, ref) <= 1e-3


def test_delta_chunked_gradients_match_recurrent():
    q, k, v, beta, S0 = _delta_inputs(2, 11, 2, 4, 3, "neg", torch.float64)
    ins = [x.clone().requires_grad_() for x in (q, k, v, beta, S0)]
    w = torch.randn(2, 11, 2, 3, dtype=torch.float64)
    g1 = torch.autograd.grad((delta_rule_chunked(*ins, chunk=4)[0] * w).sum(), ins)
    g2 = torch.autograd.grad((delta_rule_recurrent(*ins)[0] * w).sum(), ins)
    for x, y in zip(g1, g2, strict=True):
        torch.testing.assert_close(x, y)


def test_deltaproduct_interleave_is_product_of_householders():
    """One token of n_h sub-steps applies prod_j (I - beta_j k_j k_j^T) to the state."""
    torch.manual_seed(5)
    B, T, nh, H, dk, dv = 2, 3, 3, 2, 4, 5
    q = F.normalize(torch.randn(B, T, H, dk, dtype=torch.float64), dim=-1)
    k = F.normalize(torch.randn(B, T, nh, H, dk, dtype=torch.float64), dim=-1)
    v = torch.zeros(B, T, nh, H, dv, dtype=torch.float64)
    beta = 2 * torch.rand(B, T, nh, H, dtype=torch.float64)
    S0 = torch.randn(B, H, dk, dv, dtype=torch.float64)
    o, S = delta_rule_chunked(*interleave(q, k, v, beta), S0, chunk=4)
    A = householder_product(k.transpose(2, 3), beta.transpose(2, 3))  # (B, T, H, dk, dk)
    Sr = S0
    for t in range(T):
        Sr = A[:, t] @ Sr
        torch.testing.assert_close(o[:, nh * t + nh - 1], torch.einsum("bhk,bhkv->bhv", q[:, t], Sr))
    torch.testing.assert_close(S, Sr)


# ---------------------------------------------------------------- causal conv


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_causal_conv_matches_conv1d(dtype):
    torch.manual_seed(6)
    conv = torch.nn.Conv1d(6, 6, 4, groups=6).to(dtype)
    x, buf = torch.randn(2, 9, 6, dtype=dtype), torch.randn(2, 6, 3, dtype=dtype)
    y1, b1 = causal_conv(conv, x, buf)
    y2, b2 = causal_conv_ref(conv, x, buf)
    torch.testing.assert_close(y1, y2)
    torch.testing.assert_close(b1, b2)


def test_causal_conv_gradients_match_conv1d():
    """The hand-written backward: gradients of the input, the carried buffer, the weights and the bias."""
    torch.manual_seed(7)
    conv = torch.nn.Conv1d(6, 6, 4, groups=6).double()
    x = torch.randn(2, 9, 6, dtype=torch.float64, requires_grad=True)
    buf = torch.randn(2, 6, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(2, 9, 6, dtype=torch.float64)
    params = [x, buf, conv.weight, conv.bias]
    g1 = torch.autograd.grad((causal_conv(conv, x, buf)[0] * w).sum(), params)
    g2 = torch.autograd.grad((causal_conv_ref(conv, x, buf)[0] * w).sum(), params)
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b)
    assert torch.autograd.gradcheck(lambda x, buf: causal_conv(conv, x, buf)[0], (x, buf))
