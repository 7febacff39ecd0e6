"""The CPU's C kernels (ops/<recurrence>/*.c, built by ops.cpu_kernels) against their float64 references."""

from __future__ import annotations

import os
import tempfile

import pytest
import torch

from statetrack.ops import conv as conv_ops
from statetrack.ops import cpu_kernels, dispatch, mamba_scan, mamba_scan_ref
from statetrack.ops.mamba import scan as mamba_ops
from statetrack.ops.mamba.scan import MAMBA_NMAX

pytestmark = pytest.mark.skipif(cpu_kernels.compiler() is None, reason="no C compiler on PATH")


def _inputs(B, T, E, N, seed, h0=True):
    g = torch.Generator().manual_seed(seed)
    dt = torch.rand(B, T, E, generator=g) * 0.5
    A = -torch.rand(E, N, generator=g) * 3 - 0.1
    u, Bm, Cm = (torch.randn(*s, generator=g) for s in ((B, T, E), (B, T, N), (B, T, N)))
    return [dt, A, u, Bm, Cm, torch.randn(B, E, N, generator=g) if h0 else None]


def rel_err(x, ref):
    return float((x.detach().double() - ref.detach()).abs().max() / ref.detach().abs().max())


@pytest.mark.parametrize("neg", [False, True])
@pytest.mark.parametrize("shape", [(2, 37, 5, 16), (1, 1, 3, 1), (3, 64, 7, 64), (2, 20, 4, 5)])
def test_mamba_kernel_matches_reference_with_gradients(neg, shape):
    """y, h_T and the gradients of all six inputs (through y and h_T) against autograd through the
    float64 reference; the no-gradient path gives the same y and h_T as the training path."""
    ins = [t.requires_grad_() for t in _inputs(*shape, seed=sum(shape))]
    assert dispatch.use_cpu_kernels(ins[2])
    y, h = mamba_scan(*ins, neg=neg)
    assert y.grad_fn is not None and "MambaScanC" in type(y.grad_fn).__name__  # the kernel ran
    yr, hr = mamba_scan_ref(*ins, neg=neg)
    assert rel_err(y, yr) <= 1e-5 and rel_err(h, hr) <= 1e-5
    g = torch.Generator().manual_seed(1)
    wy, wh = torch.randn(y.shape, generator=g), torch.randn(h.shape, generator=g)
    g1 = torch.autograd.grad((y * wy).sum() + (h * wh).sum(), ins)
    g2 = torch.autograd.grad((yr * wy.double()).sum() + (hr * wh.double()).sum(), ins)
    for x, ref in zip(g1, g2, strict=True):
        assert rel_err(x, ref) <= 1e-5
    with torch.no_grad():
        y2, h2 = mamba_scan(*ins, neg=neg)
    assert torch.equal(y2, y) and torch.equal(h2, h)


@pytest.mark.slow  # 26 s on 2 cores
def test_mamba_kernel_long_sequence_and_zero_state():
    """10,000 steps from h0 = None, gradient of y only (h_T unused)."""
    ins = _inputs(2, 10_000, 3, 16, seed=5, h0=False)
    for t in ins[:5]:
        t.requires_grad_()
    for neg in (False, True):
        y, h = mamba_scan(*ins, neg=neg)
        yr, hr = mamba_scan_ref(*ins, neg=neg)
        assert rel_err(y, yr) <= 1e-4 and rel_err(h, hr) <= 1e-4
        w = torch.randn(y.shape)
        g1 = torch.autograd.grad((y * w).sum(), ins[:5])
        g2 = torch.autograd.grad((yr * w.double()).sum(), ins[:5])
        for x, ref in zip(g1, g2, strict=True):
            assert rel_err(x, ref) <= 1e-4


def test_non_contiguous_inputs():
    dt, A, u, Bm, Cm, h0 = _inputs(2, 9, 4, 8, seed=3)
    u_t = u.transpose(0, 1).contiguous().transpose(0, 1)  # same values, other strides
    y, h = mamba_scan(dt, A.t().contiguous().t(), u_t, Bm, Cm, h0, neg=True)
    yr, hr = mamba_scan_ref(dt, A, u, Bm, Cm, h0, neg=True)
    assert rel_err(y, yr) <= 1e-5 and rel_err(h, hr) <= 1e-5


def test_what_stays_on_the_pytorch_forms(monkeypatch):
    x = torch.zeros(1)
    assert dispatch.use_cpu_kernels(x)
    assert not dispatch.use_cpu_kernels(x.double())
    # a state larger than the kernel's arrays: the PyTorch loop, same answer
    ins = _inputs(1, 5, 2, MAMBA_NMAX + 1, seed=2)
    y, _ = mamba_scan(*[t.requires_grad_() for t in ins])
    assert "MambaScanC" not in type(y.grad_fn).__name__
    assert rel_err(y, mamba_scan_ref(*ins)[0]) <= 1e-5
    monkeypatch.setenv("STATETRACK_KERNELS", "0")
    assert not dispatch.use_cpu_kernels(x)
    y, _ = mamba_scan(*[t.requires_grad_() for t in _inputs(1, 5, 2, 4, seed=2)])
    assert "MambaScanC" not in type(y.grad_fn).__name__


@pytest.mark.parametrize("shape", [(2, 37, 19, 4), (3, 50, 64, 4), (2, 2, 5, 4), (1, 6, 8, 1)])
def test_conv_kernel_streams_as_the_reference_and_the_pytorch_form(shape, monkeypatch):
    """The C conv over a stream of chunks (the buffer carried, chunks shorter than the kernel included, the
    input a strided slice):
    within float32 rounding of the float64 conv1d reference, equal to the PyTorch form to the bit."""
    B, T, C, K = shape
    g = torch.Generator().manual_seed(sum(shape))
    conv = torch.nn.Conv1d(C, C, K, groups=C)
    x = torch.randn(B, T, 2 * C, generator=g)[..., C:]  # a slice of a projection, read in place
    buf0 = torch.randn(B, C, K - 1, generator=g)
    assert conv_ops.c_rounds_alike()  # this machine: PyTorch's addcmul_ fuses its multiply-add

    def stream(cut):
        ys, buf = [], buf0
        with torch.no_grad():
            for s in range(0, T, cut):
                y, buf = conv_ops.causal_conv(conv, x[:, s : s + cut], buf)
                ys.append(y)
        return torch.cat(ys, 1), buf

    with torch.no_grad():
        ref, ref_buf = conv_ops.causal_conv_ref(conv.double(), x.double(), buf0.double())
        conv.float()
    for cut in (T, 3, 1):
        y, buf = stream(cut)
        assert rel_err(y, ref) <= 1e-6 and torch.equal(buf.double(), ref_buf)
        monkeypatch.setenv("STATETRACK_KERNELS", "0")
        y0, buf0_torch = stream(cut)
        monkeypatch.delenv("STATETRACK_KERNELS")
        assert torch.equal(y, y0) and torch.equal(buf, buf0_torch)


def test_conv_keeps_the_pytorch_form_with_gradients_or_another_dtype(monkeypatch):
    calls = []
    monkeypatch.setattr(conv_ops, "_c_form", lambda *a: calls.append(a) or conv_ops._torch_form(*a)[0])
    conv = torch.nn.Conv1d(4, 4, 4, groups=4)
    x, buf = torch.randn(1, 5, 4), torch.zeros(1, 4, 3)
    y, _ = conv_ops.causal_conv(conv, x, buf)  # the weights need gradients
    assert y.requires_grad and not calls
    with torch.no_grad():
        conv_ops.causal_conv(conv.double(), x.double(), buf.double())
        assert not calls
        conv_ops.causal_conv(conv.float(), x, buf)
    assert len(calls) == 1


@pytest.mark.parametrize("neg", [False, True])
@pytest.mark.parametrize("shape", [(2, 37, 5, 16), (3, 64, 7, 64), (1, 1, 3, 1)])
def test_gated_kernel_matches_reference_and_the_composed_ops(neg, shape):
    """Evaluation's pass, (y + D u) * g with B_t and C_t read in place from one projection: within float32
    rounding of the float64 reference, equal to mamba_scan followed by the PyTorch ops to the bit."""
    B, T, E, N = shape
    dt, A, u, _, _, h0 = _inputs(*shape, seed=sum(shape))
    g = torch.Generator().manual_seed(7)
    proj = torch.randn(B, T, 3 + 2 * N, generator=g)
    Bm, Cm = proj[..., 3 : 3 + N], proj[..., 3 + N :]
    D, gate = torch.randn(E, generator=g), torch.randn(B, T, E, generator=g)
    assert mamba_ops.gated_rounds_alike()
    with torch.no_grad():
        out, h = mamba_ops.mamba_scan_gated(dt, A, u, Bm, Cm, h0, neg, D, gate)
        yr, hr = mamba_scan_ref(dt, A, u, Bm, Cm, h0, neg=neg)
        ref = (yr + D.double() * u.double()) * gate.double()
        assert rel_err(out, ref) <= 1e-5 and rel_err(h, hr) <= 1e-5
        y0, h0_ = mamba_scan(dt, A, u, Bm, Cm, h0, neg=neg)
        assert torch.equal(out, (y0 + D * u) * gate) and torch.equal(h, h0_)


@pytest.mark.parametrize("name", ["mamba", "negmamba", "mamba(conv=0)"])
def test_mamba_layer_evaluates_as_it_trains_to_the_bit(name):
    """The layer without gradients (the C conv, the gated pass) streams chunk by chunk to the numbers of
    its training forward over the whole sequence."""
    from statetrack.layers import build_mixer
    from statetrack.spec import parse_layers

    (spec,) = parse_layers(name)
    torch.manual_seed(0)
    mixer = build_mixer(spec, 16, 8)
    x = torch.randn(3, 50, 16)
    y, (h, buf) = mixer(x)
    assert y.requires_grad
    with torch.no_grad():
        state, ys = None, []
        for s in range(0, 50, 16):
            yc, state = mixer(x[:, s : s + 16], state)
            ys.append(yc)
    assert torch.equal(torch.cat(ys, 1), y) and torch.equal(state[0], h) and torch.equal(state[1], buf)


def test_no_compiler_and_a_failing_compiler(monkeypatch):
    monkeypatch.setenv("CC", "no-such-compiler-here")
    cpu_kernels.compiler.cache_clear()
    try:
        assert cpu_kernels.compiler() is None
        assert not dispatch.use_cpu_kernels(torch.zeros(1))  # the PyTorch forms, no error
    finally:
        cpu_kernels.compiler.cache_clear()
    monkeypatch.setenv("CC", "false")  # found, but fails: an error naming the file and the compiler
    cpu_kernels.compiler.cache_clear()
    cpu_kernels.library.cache_clear()
    try:
        with pytest.raises(RuntimeError, match=r"building .*mamba_scan\.c with .*false failed"):
            cpu_kernels.library("mamba/mamba_scan")
    finally:
        cpu_kernels.compiler.cache_clear()
        cpu_kernels.library.cache_clear()


def test_build_leaves_nothing_on_disk():
    before = {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("statetrack-kernels-")}
    cpu_kernels.library.cache_clear()
    try:
        cpu_kernels.library("mamba/mamba_scan")
    finally:
        after = {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("statetrack-kernels-")}
    assert after == before


# -- Mamba-3's complex scan (ops/mamba3/mamba3_scan.c) --------------------------------------------------------
def _mamba3_inputs(B, T, H, P, N2, seed, decay=0.3):
    from statetrack.ops.mamba3.reference import mamba3_zero_state

    g = torch.Generator().manual_seed(seed)
    f64 = {"dtype": torch.float64, "generator": g}
    c = {"dtype": torch.complex128, "generator": g}
    ins = [
        -torch.rand(B, T, H, **f64) * decay,
        torch.randn(B, T, H, N2, **f64) * 2,
        torch.randn(B, T, H, P, **f64),
        torch.randn(B, T, H, N2, **c),
        torch.randn(B, T, H, N2, **c),
        torch.rand(B, T, H, **f64),
        torch.rand(B, T, H, **f64),
    ]
    state = (torch.randn(B, H, P, N2, **c), torch.randn(B, H, P, N2, **c))
    return ins, state, mamba3_zero_state


def crel(x, ref):
    """rel_err for real or complex tensors (the complex ones compared whole, not by their real parts)."""
    return float((x.detach().to(ref.dtype) - ref.detach()).abs().max() / ref.detach().abs().max())


def _lowered(ts):
    return [t.detach().to(torch.complex64 if t.is_complex() else torch.float32).requires_grad_() for t in ts]


def _mamba3_loss(y, state, w):
    wy, wh, wu = w
    return (y * wy.to(y.dtype)).sum() + sum(
        (s.conj() * ww.to(s.dtype)).real.sum() for s, ww in zip(state, (wh, wu), strict=True)
    )


@pytest.mark.parametrize("shape", [(2, 37, 3, 4, 5), (1, 1, 1, 1, 1), (3, 50, 2, 8, 32), (2, 16, 4, 16, 8)])
def test_mamba3_kernel_matches_reference_with_gradients(shape):
    from statetrack.ops.mamba3.reference import mamba3_scan_ref
    from statetrack.ops.mamba3.scan import mamba3_scan

    ins, state, _ = _mamba3_inputs(*shape, seed=sum(shape))
    ref_in = [t.clone().requires_grad_() for t in (*ins, *state)]
    y, st = mamba3_scan_ref(*ref_in[:7], tuple(ref_in[7:]))
    g = torch.Generator().manual_seed(1)
    w = (
        torch.randn(y.shape, dtype=torch.float64, generator=g),
        *(torch.randn(s.shape, dtype=torch.complex128, generator=g) for s in st),
    )
    ref_grads = torch.autograd.grad(_mamba3_loss(y, st, w), ref_in)
    low = _lowered((*ins, *state))
    y32, st32 = mamba3_scan(*low[:7], tuple(low[7:]))
    assert "Mamba3ScanC" in type(y32.grad_fn).__name__
    assert crel(y32, y) <= 1e-5 and all(crel(a, b) <= 1e-5 for a, b in zip(st32, st, strict=True))
    grads = torch.autograd.grad(_mamba3_loss(y32, st32, w), low)
    for name, a, b in zip(
        ["log_decay", "phi", "x", "B", "C", "gamma", "beta", "h0", "u0"], grads, ref_grads, strict=True
    ):
        assert crel(a, b) <= 1e-5, name


def test_mamba3_kernel_long_rotation_and_zero_state():
    # 10,000 steps of pure rotation (no decay): the kernel keeps the reference within 1e-4
    from statetrack.ops.mamba3.reference import mamba3_scan_ref
    from statetrack.ops.mamba3.scan import mamba3_scan

    ins, _, zero = _mamba3_inputs(1, 10_000, 2, 2, 3, seed=5, decay=0.0)
    y_ref, _ = mamba3_scan_ref(*ins)
    with torch.no_grad():
        y, (hT, uT) = mamba3_scan(*_lowered(ins))
    assert crel(y, y_ref) <= 1e-4
    assert hT.shape == zero(1, 2, 2, 3)[0].shape and uT.dtype == torch.complex64


def test_mamba3_non_contiguous_inputs_and_opt_out(monkeypatch):
    from statetrack.ops.mamba3.reference import mamba3_scan_ref
    from statetrack.ops.mamba3.scan import mamba3_scan

    ins, state, _ = _mamba3_inputs(2, 9, 4, 3, 2, seed=7)
    low = [t.transpose(0, 1).contiguous().transpose(0, 1) for t in _lowered(ins)]  # strided views
    assert not low[2].is_contiguous()
    y, _ = mamba3_scan(*low)
    assert crel(y, mamba3_scan_ref(*ins)[0]) <= 1e-5
    monkeypatch.setenv("STATETRACK_KERNELS", "0")
    y, _ = mamba3_scan(*_lowered(ins))
    assert "Mamba3ScanC" not in type(y.grad_fn).__name__


def _readout_inputs(B, T, E, N, seed, unit=False):
    """The modulus (None: 1) and angle of the transitions r e^(i theta), real x and B, complex C and h0
    (float64)."""
    import math

    g = torch.Generator().manual_seed(seed)
    r = None if unit else torch.rand(B, T, E, N, generator=g, dtype=torch.float64) * 0.5 + 0.5
    theta = (torch.rand(B, T, E, N, generator=g, dtype=torch.float64) * 2 - 1) * math.pi
    x, Bm = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((B, T, E), (B, T, N)))
    C, h0 = (torch.randn(*s, generator=g, dtype=torch.complex128) for s in ((B, T, N), (B, E, N)))
    return [r, theta, x, Bm, C, h0]


def _lowered_some(ts):
    """``_lowered`` of the tensors given, None kept."""
    return [None if t is None else _lowered([t])[0] for t in ts]


@pytest.mark.parametrize("shape", [(2, 37, 5, 16), (1, 1, 3, 1), (3, 50, 8, 4), (2, 16, 4, 32)])
@pytest.mark.parametrize("unit", [True, False])
@pytest.mark.parametrize("final_grad", [True, False])
def test_complex_readout_kernel_matches_reference_with_gradients(shape, unit, final_grad):
    from statetrack.ops import polar_readout, polar_readout_ref

    ins = _readout_inputs(*shape, seed=sum(shape), unit=unit)
    ref_in = [None if t is None else t.clone().requires_grad_() for t in ins]
    y, hT = polar_readout_ref(*ref_in)
    g = torch.Generator().manual_seed(1)
    wy = torch.randn(y.shape, dtype=torch.float64, generator=g)
    wh = torch.randn(hT.shape, dtype=torch.complex128, generator=g)

    def loss(y, hT):
        out = (y * wy.to(y.dtype)).sum()
        return out + (hT.conj() * wh.to(hT.dtype)).real.sum() if final_grad else out

    given = [t for t in ref_in if t is not None]
    ref_grads = torch.autograd.grad(loss(y, hT), given)
    low = _lowered_some(ins)
    y32, hT32 = polar_readout(*low)
    assert "PolarReadoutC" in type(y32.grad_fn).__name__
    assert y32.dtype == torch.float32 and hT32.dtype == torch.complex64
    assert crel(y32, y) <= 1e-5 and crel(hT32, hT) <= 1e-5
    grads = torch.autograd.grad(loss(y32, hT32), [t for t in low if t is not None])
    names = [n for n, t in zip(["r", "theta", "x", "B", "C", "h0"], ins, strict=True) if t is not None]
    for name, a, b in zip(names, grads, ref_grads, strict=True):
        assert crel(a, b) <= 1e-5, name


def test_complex_readout_kernel_long_rotation_evaluation_and_opt_out(monkeypatch):
    from statetrack.ops import polar_readout, polar_readout_ref

    # 10,000 steps on the unit circle (AUSSM's transitions) from a zero state: within 1e-4 of the float64
    # reference, without autograd (no states kept)
    ins = _readout_inputs(1, 10_000, 3, 4, seed=5, unit=True)
    ins[5] = None
    y_ref, hT_ref = polar_readout_ref(*ins)
    low = [None if t is None else t.to(torch.complex64 if t.is_complex() else torch.float32) for t in ins]
    with torch.no_grad():
        y, hT = polar_readout(*low)
    assert crel(y, y_ref) <= 1e-4 and crel(hT, hT_ref) <= 1e-4
    # strided inputs are made dense first
    ins = _readout_inputs(2, 9, 4, 3, seed=7)
    low = _lowered(ins)
    strided = [t.transpose(0, 1).contiguous().transpose(0, 1) for t in low[:5]] + low[5:]
    assert not strided[2].is_contiguous()
    y, _ = polar_readout(*strided)
    assert "PolarReadoutC" in type(y.grad_fn).__name__
    assert crel(y, polar_readout_ref(*ins)[0]) <= 1e-5
    monkeypatch.setenv("STATETRACK_KERNELS", "0")
    y, _ = polar_readout(*_lowered(ins))
    assert "PolarReadoutC" not in type(y.grad_fn).__name__
    assert crel(y, polar_readout_ref(*ins)[0]) <= 1e-5
