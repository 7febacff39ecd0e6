"""AUSSM as its authors wrote it (arjunkaruvally/AUSSM, ai-modules/wavesAI/model/aussm.py, ``SSMauBlock``,
and extension-cpp/extension_cpp/ops.py, ``reference_ssm_adaptive_unitary_optimized_polar``): the layer
``aussm(theta_silu=false,theta_scale=true,const_bc=true,dt_silu=false,expand=1)`` against a float64
step-by-step reference of their equations, with their parameters mapped onto ours.

Their block, per channel i and state coordinate j, with v_t the conv's output (no silu) and u_t = silu(v_t):

    Delta_t = softplus(dt_proj(x_proj v_t) + dt_proj.bias)        (x_proj of rank d_state; the bias twice)
    theta_t[i, j] = sum_r W[i, j, r] v_t[r] / sqrt(d_model) + b[i, j],   b ~ U(-pi, pi)
    h_t[i, j] = exp(i theta_t[i, j]) h_{t-1}[i, j] + softplus(Re B_j) exp(i Im B_j) Delta_t[i] u_t[i]
    y_t[i] = (sum_j Re(softplus(Re C_j) exp(i Im C_j) h_t[i, j]) + D_i u_t[i]) silu(z_t[i])

then out_proj; in_proj d_model -> 2 d_model (expand 1), no bias; the conv depthwise, causal, with bias."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from statetrack.errors import UserError
from statetrack.layers import build_mixer
from statetrack.spec import parse_layers

SPEC = "aussm(theta_silu=false,theta_scale=true,const_bc=true,dt_silu=false,expand=1)"
D, N, K = 6, 3, 4


def authors_params(g: torch.Generator) -> dict:
    """Their block's parameters, drawn at random (float64, complex128 for B and C)."""

    def r(*shape, scale=0.5):
        return scale * torch.randn(*shape, generator=g, dtype=torch.float64)

    return {
        "in_proj": r(2 * D, D),
        "conv_w": r(D, 1, K),
        "conv_b": r(D),
        "x_proj": r(N, D),
        "dt_w": r(D, N),
        "dt_b": r(D),
        "W": r(D * N, D, scale=2.0),  # xA_proj.weight, rows ordered (n, i): row n * D + i
        "b": (torch.rand(D * N, generator=g, dtype=torch.float64) * 2 - 1) * math.pi,
        "B": torch.complex(r(N, scale=1.0), r(N, scale=1.0)),
        "C": torch.complex(r(N, scale=1.0), r(N, scale=1.0)),
        "Dp": r(D) + 1,
        "out": r(D, D),
    }


def authors_reference(x: torch.Tensor, p: dict) -> torch.Tensor:
    """Their equations, one step at a time, float64: x [B, T, D] -> [B, T, D]."""
    b, T, _ = x.shape
    xz = x @ p["in_proj"].T
    xs, z = xz[..., :D], xz[..., D:]
    pad = torch.cat([torch.zeros(b, K - 1, D, dtype=x.dtype), xs], dim=1)
    Wa = p["W"].reshape(N, D, D).permute(1, 0, 2)  # [i, j, r]
    ba = p["b"].reshape(N, D).T  # [i, j]
    Bc = torch.polar(F.softplus(p["B"].real), p["B"].imag)
    Cc = torch.polar(F.softplus(p["C"].real), p["C"].imag)
    h = torch.zeros(b, D, N, dtype=torch.complex128)
    ys = []
    for t in range(T):
        window = pad[:, t : t + K]  # [b, K, D]: the conv's inputs up to t
        v = (window * p["conv_w"][:, 0, :].T).sum(1) + p["conv_b"]
        dt = F.softplus((v @ p["x_proj"].T) @ p["dt_w"].T + p["dt_b"] + p["dt_b"])
        theta = torch.einsum("ijr,br->bij", Wa, v) / math.sqrt(D) + ba
        u = F.silu(v)
        h = torch.exp(1j * theta) * h + Bc * (dt * u)[..., None]
        y = (Cc * h).sum(-1).real + p["Dp"] * u
        ys.append((y * F.silu(z[:, t])) @ p["out"].T)
    return torch.stack(ys, dim=1)


def ours_from(p: dict):
    """Our layer holding their parameters: B's phase goes to C (y reads the product C_j B_j), dt_proj's
    bias is theirs twice, W_A's rows reordered from (n, i) to (i, n)."""
    (layer,) = parse_layers(SPEC)
    m = build_mixer(layer, D, N).to(torch.float64)
    with torch.no_grad():
        m.in_proj.weight.copy_(p["in_proj"])
        m.conv.weight.copy_(p["conv_w"])
        m.conv.bias.copy_(p["conv_b"])
        m.x_proj.weight.copy_(p["x_proj"])
        m.dt_proj.weight.copy_(p["dt_w"])
        m.dt_proj.bias.copy_(2 * p["dt_b"])
        m.theta_proj.weight.copy_(p["W"].reshape(N, D, D).transpose(0, 1).reshape(D * N, D))
        m.theta_proj.bias.copy_(p["b"].reshape(N, D).T.reshape(-1))
        m.B.copy_(p["B"].real)
        m.C.copy_(torch.stack([p["C"].real, p["C"].imag + p["B"].imag]))
        m.D.copy_(p["Dp"])
        m.out_proj.weight.copy_(p["out"])
    return m


def test_the_authors_block_matches_a_float64_reference_of_their_equations():
    g = torch.Generator().manual_seed(62)
    p = authors_params(g)
    x = torch.randn(3, 17, D, generator=g, dtype=torch.float64)
    ref = authors_reference(x, p)
    m = ours_from(p)
    y, _ = m(x)
    assert torch.allclose(y, ref, atol=1e-10, rtol=1e-10)
    # step by step, and in two chunks with the state carried
    state = m.init_state(3, dtype=torch.float64)
    steps = []
    for t in range(x.shape[1]):
        out, state = m.step(x[:, t], state)
        steps.append(out)
    assert torch.allclose(torch.stack(steps, 1), ref, atol=1e-10, rtol=1e-10)
    a, st = m(x[:, :7])
    b, _ = m(x[:, 7:], st)
    assert torch.allclose(torch.cat([a, b], 1), ref, atol=1e-10, rtol=1e-10)


def test_each_option_of_the_authors_block_is_what_moves_it():
    """Without theta_scale (two stacked maps, no 1 / sqrt(d_model)) or with dt_silu (Delta read after the
    silu) the same parameters give another function; the authors' angle is affine in the conv's output."""
    g = torch.Generator().manual_seed(7)
    p = authors_params(g)
    x = torch.randn(2, 9, D, generator=g, dtype=torch.float64)
    ref = authors_reference(x, p)
    m = ours_from(p)
    m.dt_silu = True
    assert not torch.allclose(m(x)[0], ref, atol=1e-6)
    m.dt_silu = False
    with torch.no_grad():
        m.theta_proj.weight.mul_(math.sqrt(D))  # the angle without the 1 / sqrt(d_model)
    assert not torch.allclose(m(x)[0], ref, atol=1e-6)
    x1, x2 = torch.randn(2, 2, 9, D, generator=g, dtype=torch.float64)
    ev = m.eigenvalues
    assert torch.allclose(ev(x1 + x2) * ev(torch.zeros_like(x1)), ev(x1) * ev(x2), atol=1e-9)


def test_the_angle_at_init_is_their_scale_and_bias():
    """W_A at init is nn.Linear's over E inputs, then scaled by 1 / sqrt(d_model); b_A is U(-pi, pi)."""
    torch.manual_seed(0)
    (layer,) = parse_layers(SPEC)
    m = build_mixer(layer, 64, 16)
    assert tuple(m.theta_proj.weight.shape) == (64 * 16, 64) and m.d_inner == 64
    assert m.theta_proj.weight.abs().max() <= 1 / math.sqrt(64)
    b = m.theta_proj.bias.detach()
    assert -math.pi <= float(b.min()) < -2.5 and 2.5 < float(b.max()) <= math.pi
    assert tuple(m.x_proj.weight.shape) == (16, 64)  # Delta's inputs only, rank d_state


@pytest.mark.parametrize(
    "spec,needle",
    [
        ("aussm(theta_scale=true,theta_rank=4)", "theta_scale=true is full rank"),
        ("aussm(dt_silu=false)", "dt_silu=false needs const_bc=true"),
    ],
)
def test_options_that_do_not_go_together_are_one_clear_error(spec, needle):
    (layer,) = parse_layers(spec)
    with pytest.raises(UserError, match=needle):
        build_mixer(layer, D, N)
