"""The GPU kernels against their float64 step-by-step references, forward and gradients.

    TRITON_INTERPRET=1 python -m pytest -q -m kernels

On CPU the Triton kernels run under Triton's interpreter (``TRITON_INTERPRET=1``, set here before
triton is imported unless the environment sets it), at tiny shapes. With ``TRITON_INTERPRET=0`` on a
machine with CUDA the same tests run compiled on the GPU, at the kernels' default tile sizes too, and
the CUDA-only tests run as well: each mixer on CUDA with the kernels against the PyTorch forms, and
flash-linear-attention's delta rule (where ``fla`` is installed) against the reference. The default
``pytest`` run leaves these out (``-m 'not slow and not kernels'`` in pyproject.toml); CI runs them as
a separate step (.ci/run).
"""

from __future__ import annotations

import math
import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before triton is imported

import pytest

pytest.importorskip("triton", reason="the kernel tests need triton (in the test extra: pip install triton)")

import torch
import torch.nn.functional as F

from statetrack.errors import UserError
from statetrack.ops import (
    delta_rule,
    delta_rule_ref,
    dispatch,
    mamba_scan,
    mamba_scan_ref,
    selective_scan,
    selective_scan_ref,
)
from statetrack.ops.dplr.reference import dplr_ref
from statetrack.ops.triton_scans import mamba_scan_triton, selective_scan_triton

pytestmark = pytest.mark.kernels

INTERPRET = os.environ["TRITON_INTERPRET"] == "1"
DEV = "cpu" if INTERPRET else "cuda"
if not INTERPRET and not torch.cuda.is_available():
    pytest.skip("TRITON_INTERPRET=0 needs a CUDA device", allow_module_level=True)
cuda_only = pytest.mark.skipif(
    DEV != "cuda", reason="needs CUDA (run with TRITON_INTERPRET=0 on a GPU machine)"
)
#: (chunk, block_e): tiny tiles everywhere (several tiles and channel blocks, ragged ends); the
#: kernels' defaults where compiled
CONFIGS = [(4, 4)] if INTERPRET else [(4, 4), (None, None)]
#: relative error allowed where fla's chunk kernel rounds q, k, v to bfloat16 (8 significant bits)
BF16_TOL = 5e-2


def rel_err(x, ref):
    """Max error over the max of the reference (per whole tensor)."""
    return float(
        (x.detach().to(ref.dtype) - ref.detach()).abs().max() / ref.detach().abs().max().clamp_min(1e-30)
    )


def grads(out, ws, ins):
    """Gradients of sum_i <out_i, w_i> (real part for complex outputs) with respect to ins."""
    loss = sum(
        (o * w.to(o.dtype).conj()).real.sum() if o.is_complex() else (o * w.to(o.dtype)).sum()
        for o, w in zip(out, ws, strict=True)
    )
    return torch.autograd.grad(loss, [x for x in ins if x is not None])


def present(names, ins):
    """The names of the inputs that are given (``grads`` differentiates those only)."""
    return [n for n, x in zip(names, ins, strict=True) if x is not None]


def leaf(x):
    return x.to(DEV).requires_grad_()


# ---------------------------------------------------------------- Mamba / Negative Mamba


def mamba_inputs(B, T, E, N, h0: bool, seed=0, dt_scale=0.5):
    g = torch.Generator().manual_seed(seed)
    dt = torch.rand(B, T, E, generator=g) * dt_scale + 0.01
    A = -(torch.rand(E, N, generator=g) * 3 + 0.1)
    u, Bm, Cm = (torch.randn(*s, generator=g) for s in ((B, T, E), (B, T, N), (B, T, N)))
    hz = torch.randn(B, E, N, generator=g) if h0 else None
    return [None if x is None else leaf(x) for x in (dt, A, u, Bm, Cm, hz)]


def check_mamba(ins, neg, cfg, tol=2e-5):
    chunk, block_e = cfg
    y, hT = mamba_scan_triton(*ins, neg=neg, chunk=chunk, block_e=block_e)
    yr, hr = mamba_scan_ref(*ins, neg=neg)
    assert y.dtype == hT.dtype == torch.float32 and y.shape == yr.shape and hT.shape == hr.shape
    assert rel_err(y, yr) < tol and rel_err(hT, hr) < tol
    ws = [torch.randn(y.shape, device=DEV), torch.randn(hT.shape, device=DEV)]
    names = present(("dt", "A", "u", "B", "C", "h0"), ins)
    for name, gk, gr in zip(names, grads((y, hT), ws, ins), grads((yr, hr), ws, ins), strict=True):
        assert gk.shape == gr.shape and rel_err(gk, gr) < tol, name


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("h0", [False, True])
@pytest.mark.parametrize("T", [1, 4, 7])
@pytest.mark.parametrize("neg", [False, True])
def test_mamba_kernel(neg, T, h0, cfg):
    # E = 5 channels in blocks of 4 (a ragged block), N = 3 states padded to 4, T = 7 ragged against chunk 4
    check_mamba(mamba_inputs(2, T, 5, 3, h0, seed=T), neg, cfg)


@pytest.mark.parametrize("neg", [False, True])
def test_mamba_kernel_saturated_transitions(neg):
    """Large Delta: exp(Delta A) underflows to 0, so a_t = 0 (Mamba) or exactly -1 (Negative Mamba),
    mixed with a_t near 1; the scan only multiplies and adds, so it stays exact there too."""
    ins = mamba_inputs(1, 13, 4, 2, True, seed=3, dt_scale=1.0)
    with torch.no_grad():
        ins[0][:, ::3] = 80.0
    check_mamba(ins, neg, (4, 4))
    if neg:
        a = 2 * torch.exp(ins[0][0, 0, :, None] * ins[1]) - 1
        assert (a == -1).all()


def test_mamba_kernel_without_grad_and_in_the_op():
    ins = mamba_inputs(2, 6, 3, 2, True, seed=5)
    with torch.no_grad():
        y, hT = mamba_scan_triton(*ins, neg=True, chunk=4, block_e=4)
        yr, hr = mamba_scan_ref(*ins, neg=True)
        yp, hp = mamba_scan(*ins, neg=True)  # the op: kernels on CUDA, the C kernel or PyTorch loop on CPU
    assert not y.requires_grad and rel_err(y, yr) < 2e-5 and rel_err(hT, hr) < 2e-5
    assert rel_err(yp, yr) < 2e-5 and rel_err(hp, hr) < 2e-5


@cuda_only
@pytest.mark.parametrize("neg", [False, True])
def test_mamba_kernel_long(neg):
    check_mamba(mamba_inputs(2, 3000, 40, 16, True, seed=11, dt_scale=0.1), neg, (None, None), tol=1e-4)


# ---------------------------------------------------------------- complex selective scan


def complex_inputs(B, T, E, N, kind, h0: bool, seed=0):
    g = torch.Generator().manual_seed(seed)
    if kind == "circle":  # angles at and near +-pi, where a float32 angle is least exact
        theta = math.pi - torch.rand(B, T, E, N, generator=g, dtype=torch.float64) * 1e-3
        theta = theta * torch.where(torch.rand(B, T, E, N, generator=g) < 0.5, -1.0, 1.0)
        theta[..., 0] = math.pi
        a = torch.polar(torch.ones_like(theta), theta).to(torch.complex64)
    else:  # DCD: r exp(i theta), r in (0, 1], any angle
        r = torch.rand(B, T, E, N, generator=g) * 0.7 + 0.3
        a = torch.polar(r, (torch.rand(B, T, E, N, generator=g) * 2 - 1) * math.pi)
    x, Bm = torch.randn(B, T, E, generator=g), torch.randn(B, T, N, generator=g)
    hz = torch.randn(B, E, N, generator=g, dtype=torch.complex64) if h0 else None
    return [None if z is None else leaf(z) for z in (a, x, Bm, hz)]


def check_selective(ins, cfg, tol=2e-5):
    chunk, block_e = cfg
    h = selective_scan_triton(*ins, chunk=chunk, block_e=block_e)
    hr = selective_scan_ref(*ins)
    assert h.dtype == torch.complex64 and h.shape == hr.shape
    assert rel_err(h, hr) < tol
    w = [torch.randn(h.shape, dtype=torch.complex64, device=DEV)]
    names = present(("a", "x", "B", "h0"), ins)
    for name, gk, gr in zip(names, grads((h,), w, ins), grads((hr,), w, ins), strict=True):
        assert gk.shape == gr.shape and gk.is_complex() == gr.is_complex(), name
        assert rel_err(gk, gr) < tol, name


@pytest.mark.parametrize("cfg", CONFIGS)
@pytest.mark.parametrize("h0", [False, True])
@pytest.mark.parametrize("T", [1, 7])
@pytest.mark.parametrize("kind", ["circle", "disc"])
def test_selective_kernel(kind, T, h0, cfg):
    check_selective(complex_inputs(2, T, 5, 3, kind, h0, seed=T), cfg)


def test_selective_kernel_in_the_op():
    ins = complex_inputs(1, 6, 3, 2, "disc", True, seed=4)
    hr = selective_scan_ref(*ins)
    assert rel_err(selective_scan(*ins), hr) < 2e-5  # the op: kernels on CUDA, the PyTorch loop on CPU
    with pytest.raises(ValueError, match="complex"):
        selective_scan_triton(ins[0].real, *ins[1:])


@cuda_only
def test_selective_kernel_long():
    check_selective(complex_inputs(2, 3000, 40, 16, "circle", True, seed=12), (None, None), tol=1e-4)


# ---------------------------------------------------------------- dispatch


def test_kernels_env(monkeypatch):
    x = torch.zeros(2, device=DEV)
    monkeypatch.setenv(dispatch.ENV, "0")
    assert not dispatch.kernels_enabled() and not dispatch.use_triton(x) and not dispatch.use_fla(x)
    monkeypatch.setenv(dispatch.ENV, "yes")
    with pytest.raises(UserError, match="STATETRACK_KERNELS"):
        dispatch.kernels_enabled()
    monkeypatch.setenv(dispatch.ENV, "1")
    assert dispatch.kernels_enabled()
    assert not dispatch.use_triton(torch.zeros(2)) and not dispatch.use_fla(
        torch.zeros(2)
    )  # CPU: PyTorch forms
    # float64: the references' precision
    assert not dispatch.use_triton(torch.zeros(2, dtype=torch.float64, device=DEV))
    assert dispatch.use_triton(x) == (DEV == "cuda")


@cuda_only
@pytest.mark.parametrize(
    "name",
    [
        "mamba",
        "negmamba",
        "aussm",
        "saussm",
        "dcd",
        "deltanet(heads=4)",
        "deltaproduct(heads=4)",
        "deltanet(heads=4,neg=true)",
        "deltaproduct(heads=4,neg=true)",
    ],
)
def test_mixer_cuda_kernels_match_pytorch_forms(name, monkeypatch):
    """Each mixer on CUDA: output and every parameter gradient with the kernels against STATETRACK_KERNELS=0."""
    from statetrack.layers import build_mixer
    from statetrack.spec import parse_layers

    (layer,) = parse_layers(name)
    delta = layer.name.startswith("delta")
    if delta and not dispatch.installed("fla"):
        pytest.skip("flash-linear-attention (fla-core) is not installed")
    torch.manual_seed(0)
    d_model, d_state = (256, 64) if delta else (32, 16)  # the delta rule at head dims 64 x 64, as in bench/
    m = build_mixer(layer, d_model, d_state).to(DEV)
    x = torch.randn(3, 100, d_model, device=DEV)

    def run():
        m.zero_grad()
        y, (h, _) = m(x)
        (y.square().mean() + h.abs().square().mean()).backward()
        return [y, h] + [p.grad.clone() for p in m.parameters()]

    fast = run()
    monkeypatch.setenv(dispatch.ENV, "0")
    ref = run()
    # fla's chunk kernel (DeltaNet / DeltaProduct with beta in [0, 1]) takes q, k, v in bfloat16
    tol = BF16_TOL if delta and not layer.options.get("neg") else 1e-4
    for i, (a, b) in enumerate(zip(fast, ref, strict=True)):
        assert rel_err(a, b) < tol, (name, i)


@cuda_only
@pytest.mark.parametrize("kernel", ["chunk", "recurrent"])
def test_fla_delta_rule_matches_reference(kernel):
    if not dispatch.installed("fla"):
        pytest.skip("flash-linear-attention (fla-core) is not installed")
    from statetrack.ops.deltanet.fla import delta_rule_fla

    torch.manual_seed(1)
    B, T, H, dk, dv = 2, 200, 4, 64, 64
    q = F.normalize(torch.randn(B, T, H, dk, device=DEV), dim=-1)
    k = F.normalize(torch.randn(B, T, H, dk, device=DEV), dim=-1)
    # the chunk kernel serves beta in [0, 1], the recurrent one beta in [0, 2], exact reflections included
    top = 1.0 if kernel == "chunk" else 2.0
    v, beta = torch.randn(B, T, H, dv, device=DEV), top * torch.rand(B, T, H, device=DEV)
    beta[:, ::7] = top
    beta[:, 3::7] = 0.0
    ins = [t.requires_grad_() for t in (q, k, v, beta, torch.randn(B, H, dk, dv, device=DEV))]
    o, S = delta_rule_fla(*ins, kernel=kernel)
    orf, Sr = delta_rule_ref(*ins)
    tol = BF16_TOL if kernel == "chunk" else 1e-4
    assert rel_err(o, orf) < tol and rel_err(S, Sr) < tol
    ws = [torch.randn_like(o), torch.randn_like(S)]
    for name, gk, gr in zip("qkvbS", grads((o, S), ws, ins), grads((orf, Sr), ws, ins), strict=True):
        assert rel_err(gk, gr) < tol, name
    # the op dispatches here on CUDA: neg=True -> the float32 recurrent kernel
    o2, _ = delta_rule(*[t.detach() for t in ins], neg=True)
    assert rel_err(o2, orf) < 1e-4


# ---------------------------------------------------------------- fla: gated delta rule, RWKV-7, GLA


def _fla_inputs(B=2, T=24, H=2, dk=16, dv=16, seed=11):
    g = torch.Generator().manual_seed(seed)
    q = F.normalize(torch.randn(B, T, H, dk, generator=g), dim=-1)
    k = F.normalize(torch.randn(B, T, H, dk, generator=g), dim=-1)
    v = torch.randn(B, T, H, dv, generator=g)
    return g, q, k, v, torch.randn(B, H, dk, dv, generator=g)


def _need_fla():
    if not dispatch.installed("fla"):
        pytest.skip("flash-linear-attention (fla-core) is not installed")


def test_fla_gated_delta_rule_recurrent_matches_reference():
    """The float32 recurrent kernel (what neg=true evaluates with): exact, pure reflections included.
    Forward only: fla implements no backward pass for it. Runs under the interpreter on CPU too."""
    _need_fla()
    from statetrack.ops.gated_delta.fla import gated_delta_rule_fla
    from statetrack.ops.gated_delta.reference import gated_delta_terms

    g, q, k, v, S0 = _fla_inputs()
    beta = 2.0 * torch.rand(q.shape[:3], generator=g)
    beta[:, ::5] = 2.0
    gate = -torch.rand(q.shape[:3], generator=g)
    gate[:, ::3] = 0.0  # alpha = 1: pure reflections
    q, k, v, beta, gate, S0 = (x.to(DEV) for x in (q, k, v, beta, gate, S0))
    o, S = gated_delta_rule_fla(q, k, v, beta, gate, S0, kernel="recurrent")
    bk, a, b, lw = gated_delta_terms(k.double(), beta.double(), gate.double())
    orf, Sr = dplr_ref(q.double(), bk, v.double(), a, b, lw, S0.double())
    assert rel_err(o, orf) < 1e-5 and rel_err(S, Sr) < 1e-5


@cuda_only
def test_fla_gated_delta_rule_chunk_matches_reference():
    _need_fla()
    from statetrack.ops.gated_delta.fla import gated_delta_rule_fla
    from statetrack.ops.gated_delta.reference import gated_delta_terms

    g, q, k, v, S0 = _fla_inputs()
    beta, gate = torch.rand(q.shape[:3], generator=g), -torch.rand(q.shape[:3], generator=g)
    ins = [leaf(x) for x in (q, k, v, beta, gate, S0)]
    o, S = gated_delta_rule_fla(*ins, kernel="chunk")
    bk, a, b, lw = gated_delta_terms(ins[1].double(), ins[3].double(), ins[4].double())
    orf, Sr = dplr_ref(ins[0].double(), bk, ins[2].double(), a, b, lw, ins[5].double())
    assert rel_err(o, orf) < BF16_TOL and rel_err(S, Sr) < BF16_TOL
    ws = [torch.randn_like(o), torch.randn_like(S)]
    pairs = zip(grads((o, S), ws, ins), grads((orf, Sr), ws, ins), strict=True)
    for name, (gk, gr) in zip(("q", "k", "v", "beta", "g", "S0"), pairs, strict=True):
        assert rel_err(gk, gr) < BF16_TOL, name


@cuda_only
@pytest.mark.parametrize("kernel", ["recurrent", "chunk"])
def test_fla_gla_matches_reference(kernel):
    _need_fla()
    from statetrack.ops.gla.fla import gla_fla

    g, q, k, v, S0 = _fla_inputs()
    log_w = F.logsigmoid(torch.randn(q.shape, generator=g)) / 16
    ins = [leaf(x) for x in (q, k, v, log_w, S0)]
    o, S = gla_fla(*ins, kernel=kernel)
    orf, Sr = dplr_ref(
        ins[0].double(), ins[1].double(), ins[2].double(), None, None, ins[3].double(), ins[4].double()
    )
    tol = 1e-4 if kernel == "recurrent" else BF16_TOL
    assert rel_err(o, orf) < tol and rel_err(S, Sr) < tol
    ws = [torch.randn_like(o), torch.randn_like(S)]
    pairs = zip(grads((o, S), ws, ins), grads((orf, Sr), ws, ins), strict=True)
    for name, (gk, gr) in zip(("q", "k", "v", "log_w", "S0"), pairs, strict=True):
        assert rel_err(gk, gr) < tol, name


@cuda_only
def test_fla_rwkv7_matches_reference():
    _need_fla()
    from statetrack.ops.dplr.fla import rwkv7_fla
    from statetrack.ops.dplr.rwkv7 import rwkv7_terms

    g, q, k, v, S0 = _fla_inputs()
    log_w = -0.6065 * torch.sigmoid(torch.randn(q.shape, generator=g))
    kappa = F.normalize(torch.randn(q.shape, generator=g), dim=-1)
    a_lr = torch.sigmoid(torch.randn(q.shape, generator=g))
    ins = [leaf(x) for x in (q, k, v, log_w, kappa, a_lr, S0)]
    o, S = rwkv7_fla(*ins)
    a, b = rwkv7_terms(ins[4].double(), ins[5].double())
    orf, Sr = dplr_ref(
        ins[0].double(), ins[1].double(), ins[2].double(), a, b, ins[3].double(), ins[6].double()
    )
    assert rel_err(o, orf) < BF16_TOL and rel_err(S, Sr) < BF16_TOL
    ws = [torch.randn_like(o), torch.randn_like(S)]
    for name, gk, gr in zip("qkvwKaS", grads((o, S), ws, ins), grads((orf, Sr), ws, ins), strict=True):
        assert rel_err(gk, gr) < BF16_TOL, name


@cuda_only
@pytest.mark.parametrize(
    "name",
    [
        "mamba2",
        "mamba2(neg=true)",
        "gateddeltanet(heads=4)",
        "gateddeltanet(heads=4,neg=true)",
        "rwkv7(heads=4)",
        "gla(heads=4)",
        "gateddeltaproduct(heads=4)",
        "gateddeltaproduct(heads=4,neg=true)",
        "kda(heads=4)",
        "kda(heads=4,neg=true)",
    ],
)
def test_frontier_mixers_cuda_kernels_match_pytorch_forms(name, monkeypatch):
    """Each frontier mixer on CUDA: output and every parameter gradient with the kernels (Triton for
    Mamba-2, fla for the others) against STATETRACK_KERNELS=0."""
    from statetrack.layers import build_mixer
    from statetrack.spec import parse_layers

    (layer,) = parse_layers(name)
    fla = layer.name != "mamba2"
    if fla:
        _need_fla()
    torch.manual_seed(0)
    d_model, d_state = (256, 64) if fla else (32, 16)
    m = build_mixer(layer, d_model, d_state).to(DEV)
    x = torch.randn(3, 100, d_model, device=DEV)

    def run():
        m.zero_grad()
        y, state = m(x)
        h = state[0] if isinstance(state, tuple) else state
        (y.square().mean() + h.abs().square().mean()).backward()
        return [y, h] + [p.grad.clone() for p in m.parameters() if p.grad is not None]

    fast = run()
    monkeypatch.setenv(dispatch.ENV, "0")
    ref = run()
    tol = 1e-4 if (not fla or layer.options.get("neg")) else BF16_TOL
    for i, (a, b) in enumerate(zip(fast, ref, strict=True)):
        assert rel_err(a, b) < tol, (name, i)


@cuda_only
def test_fla_gated_delta_product_chunk_matches_reference():
    """fla's chunk_gated_delta_product (beta in [0, 1]: bfloat16 q, k, v) against the float64 gated delta rule
    over the interleaved sub-steps, forward and gradients."""
    _need_fla()
    from statetrack.ops.gated_delta.fla import gated_delta_product_fla
    from statetrack.ops.gated_delta.rule import gated_delta_product

    g, q, k, v, S0 = _fla_inputs()
    B, T, H, dk = k.shape
    nh = 2
    k2 = F.normalize(torch.randn(B, T, nh, H, dk, generator=g), dim=-1)
    v2 = torch.randn(B, T, nh, H, v.shape[-1], generator=g)
    beta, gate = torch.rand(B, T, nh, H, generator=g), -torch.rand(B, T, H, generator=g)
    ins = [leaf(x) for x in (q, k2, v2, beta, gate, S0)]
    o, S = gated_delta_product_fla(*ins)
    orf, Sr = gated_delta_product(*[x.detach().double() for x in ins])  # float64: the PyTorch form
    assert rel_err(o, orf) < BF16_TOL and rel_err(S, Sr) < BF16_TOL


@cuda_only
@pytest.mark.parametrize("kernel", ["chunk", "recurrent"])
def test_fla_kda_matches_reference(kernel):
    """fla's KDA kernels against the float64 DPLR reference: the chunk kernel (bfloat16 q, k, v) forward and
    gradients; the float32 recurrent kernel (what neg=true evaluates with) forward, reflections included."""
    _need_fla()
    from statetrack.ops.kda.fla import kda_fla
    from statetrack.ops.kda.reference import kda_terms

    g, q, k, v, S0 = _fla_inputs()
    beta = (2.0 if kernel == "recurrent" else 1.0) * torch.rand(q.shape[:3], generator=g)
    log_w = -torch.rand(q.shape, generator=g)
    log_w[:, ::3] = 0.0  # alpha = 1
    ins = [leaf(x) for x in (q, k, v, beta, log_w, S0)]
    with torch.set_grad_enabled(kernel == "chunk"):
        o, S = kda_fla(*ins, kernel=kernel)
    bk, a, b = kda_terms(ins[1].double(), ins[3].double(), ins[4].double())
    orf, Sr = dplr_ref(ins[0].double(), bk, ins[2].double(), a, b, ins[4].double(), ins[5].double())
    tol = 1e-5 if kernel == "recurrent" else BF16_TOL
    assert rel_err(o, orf) < tol and rel_err(S, Sr) < tol
    if kernel == "chunk":
        ws = [torch.randn_like(o), torch.randn_like(S)]
        pairs = zip(grads((o, S), ws, ins), grads((orf, Sr), ws, ins), strict=True)
        for name, (gk, gr) in zip(("q", "k", "v", "beta", "log_w", "S0"), pairs, strict=True):
            assert rel_err(gk, gr) < BF16_TOL, name
