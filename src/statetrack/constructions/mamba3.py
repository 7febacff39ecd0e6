"""Mamba-3 constructions: parity and counting modulo m with ONE layer, each a rotation (T5, P1).

Mamba-3's transition is a_t = exp(Delta_t A_t) exp(i Delta_t theta_t) per state pair, with the angle
theta = pi tanh(.) in (-pi, pi). The constructions hold the decay at 1 and put the state in one rotation:

* A = -softplus(-120) = 0 in float32 (the layer's default a_floor is 0), so exp(Delta A) = 1 exactly;
* theta = pi tanh(20) = pi exactly on the tokens that turn (tanh rounds to 1), 0 on the others;
* the step Delta = softplus(dt_bias) is the angle's fraction of pi: 1 for parity (a rotation by pi on
  bit 1, none on bit 0), 2/m for counting (2 pi/m on every token); the float32 product Delta pi is the
  intended angle to a rounding (1e-7 rad per step: 1e-3 rad after 10,000 steps, far inside the margins
  pi/2 and pi/m);
* lambda = sigmoid(30) = 1 in float32 (the trapezoid reduces to Mamba-2's rule, beta = 0), B = C = 1
  (their normalised rows are zero, the biases (1, 0)), x = 1/Delta on the counted tokens, so the input
  term is 1: parity moves on {0, 1} (h -> -h + 1 on bit 1, h -> h on bit 0), counting on the circle
  h_t = (1 - a^t)/(1 - a) through 0;
* the read-out Re(conj(C) h) (and, in a second head with C = i, Im h) goes to residual coordinates that
  the head compares with the orbit's points (nearest point).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from statetrack.constructions.base import (
    Construction,
    blank_model,
    layer_input,
    nearest_point_head,
    register,
    silu,
    token_embedding,
)
from statetrack.errors import UserError
from statetrack.layers.mamba3 import Mamba3
from statetrack.model import Model

SAT = 30.0  # sigmoid(30) = 1 in float32
TANH_SAT = 20.0  # tanh(20) = 1 in float32
NO_DECAY = -120.0  # softplus(-120) = 0 in float32


def _mamba3_rotation_layer(
    model: Model,
    const: int,
    delta: float,
    turn_tokens: list[int],
    count_tokens: list[int],
    out_coords: list[int],
) -> float:
    """Set the (only) Mamba-3 layer of ``model`` (d_state 2: one complex slot; the first head reads Re h,
    a second Im h). The tokens in turn_tokens rotate the state by Delta pi, the others not at all; the
    tokens in count_tokens add 1 to the state. Returns Delta as the layer computes it in float32."""
    mx = model.mixer(0, Mamba3)
    xin = layer_input(model, 0, model.embed.weight)  # (tokens, d): what the layer sees per token
    E, H, P = mx.d_inner, mx.H, mx.P
    z0, x0, b0, c0, dt0, a0, l0, th0 = (sum(mx.sizes[:i]) for i in range(len(mx.sizes)))
    cval = float(xin[0, const])
    with torch.no_grad():
        W = mx.in_proj.weight
        W.zero_()
        mx.dt_bias.fill_(math.log(math.expm1(delta)))  # softplus^-1(delta)
        d32 = float(F.softplus(mx.dt_bias[:1].float()))
        for h in range(H):
            W[a0 + h, const] = NO_DECAY / cval  # A = -softplus(-120) = 0: no decay
            W[l0 + h, const] = SAT / cval  # lambda = sigmoid(30) = 1
        for tok in turn_tokens:  # theta = pi tanh(20) = pi on these tokens, 0 elsewhere
            W[th0, tok] = TANH_SAT / float(xin[tok, tok])
        for h in range(H):  # x = 1/Delta on the counted tokens, in the first channel of each head
            for tok in count_tokens:
                W[x0 + h * P, tok] = 1.0 / (d32 * float(xin[tok, tok]))
        mx.B_bias.zero_()
        mx.C_bias.zero_()
        mx.B_bias[:, 0] = 1.0  # B = 1 + 0i
        mx.C_bias[0, 0] = 1.0  # head 0 reads Re h
        if H > 1:
            mx.C_bias[1, 1] = 1.0  # head 1: C = i, Re(conj(i) h) = Im h
        mx.D.zero_()
        W[z0 : z0 + E, const] = 4.0 / cval  # gates open: silu(4)
        gate = silu(4.0)
        mx.out_proj.weight.zero_()
        for h, oc in enumerate(out_coords):
            mx.out_proj.weight[oc, h * P] = 1.0 / gate
    return d32


@register(
    "parity-mamba3",
    "T5",
    "parity with ONE Mamba-3 layer: the state pair rotates by pi on bit 1 and stays "
    "on bit 0 (no decay: exp(0) = 1), the state on {0, 1}",
    mixers=("mamba3",),
)
def parity_mamba3() -> Construction:
    CONST, OUT = 2, 3
    model, cfg = blank_model("parity", layers="mamba3(headdim=8)", d_model=4, d_state=2)
    token_embedding(model, 2, CONST)
    delta = _mamba3_rotation_layer(model, CONST, 1.0, [1], [1], [OUT])
    nearest_point_head(model, [[0.0], [1.0]], [OUT], CONST)
    return Construction(
        "parity-mamba3",
        model,
        cfg,
        "",
        "",
        {"delta": delta, "angle(1)": "pi", "angle(0)": 0.0, "decay": "exp(0) = 1 (float32)"},
    )


@register(
    "modcount-mamba3",
    "P1",
    "counting mod m with ONE Mamba-3 layer: a rotation by 2 pi/m per token (no "
    "decay); two of its heads read the real and imaginary parts of the orbit",
    default_arg="3",
    mixers=("mamba3",),
)
def modcount_mamba3(arg: str) -> Construction:
    m = int(arg)
    if m < 2:
        raise UserError(f"modcount-mamba3 needs m >= 2, got {m}")
    CONST, OUT = 2, [3, 4]
    model, cfg = blank_model(f"modcount:{m}", layers="mamba3(headdim=4)", d_model=6, d_state=2)
    token_embedding(model, 2, CONST)
    delta = _mamba3_rotation_layer(model, CONST, 2.0 / m, [1], [1], OUT)
    a = complex(math.cos(2 * math.pi / m), math.sin(2 * math.pi / m))
    # h_t = (1 - a^t) / (1 - a): class k = t mod m sits at (1 - a^k) / (1 - a)
    pts = [(1 - a**k) / (1 - a) for k in range(m)]
    nearest_point_head(model, [[p.real, p.imag] for p in pts], OUT, CONST)
    return Construction("modcount-mamba3", model, cfg, "", "", {"m": m, "delta": delta, "angle": f"2 pi/{m}"})
