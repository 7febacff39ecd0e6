"""Mamba-3 constructions: parity and counting modulo m with ONE layer, each a rotation (T5, P1).

Mamba-3's transition is a_t = exp(Delta_t A_t) exp(i Delta_t theta_t) per state pair. The
construction holds the decay at 1 and puts the whole state in one rotation:

* Delta = softplus(dt_bias) = 1e-5 for every token (the dt rows of in_proj are zero) and A = -a_floor
  = -1e-4 (its row drives -softplus(.) to -9e-14, which the floor clamps): Delta A = -1e-9, and
  exp(-1e-9) rounds to 1 in float32, so |a_t| = 1 exactly;
* the angle Delta_t theta_t is set by the theta row: pi on bit 1 and 0 on bit 0 (parity), 2 pi / m on
  every token (counting); the row's weight is fixed from the float32 Delta the layer computes, so the
  float32 product is the intended angle to a rounding (1e-7 rad per step: 1e-3 rad after 10,000 steps,
  far inside the margins pi/2 and pi/m);
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

from statetrack.errors import UserError
from statetrack.theory.constructions.base import (
    Construction,
    blank_model,
    layer_input,
    nearest_point_head,
    register,
    silu,
    token_embedding,
)

DELTA = 1e-5
SAT = 30.0  # sigmoid(30) = 1 and softplus(-30) = 9e-14 in float32


def _mamba3_rotation_layer(model, const: int, angle_of_token: dict[int, float], count_tokens: list[int],
                           out_coords: list[int]) -> tuple[float, float]:
    """Set the (only) Mamba-3 layer of ``model`` (d_state 2: one complex slot; one or two heads, the
    second reading Im h). Token i rotates by angle_of_token[i]; tokens in count_tokens add 1 to the
    state. Returns (Delta as computed in float32, the gate's value)."""
    mx = model.blocks[0].mixer
    xin = layer_input(model, 0, model.embed.weight)  # (tokens, d): what the layer sees per token
    E, H, P = mx.d_inner, mx.H, mx.P
    z0, x0, b0, c0, dt0, a0, l0, th0 = (sum(mx.sizes[:i]) for i in range(len(mx.sizes)))
    cval = float(xin[0, const])
    with torch.no_grad():
        W = mx.in_proj.weight
        W.zero_()
        mx.dt_bias.fill_(math.log(math.expm1(DELTA)))  # softplus^-1(1e-5)
        delta = float(F.softplus(mx.dt_bias[:1].float()))
        for h in range(H):
            W[a0 + h, const] = -SAT / cval  # A = clamp(-softplus(-30), max=-a_floor) = -a_floor
            W[l0 + h, const] = SAT / cval  # lambda = sigmoid(30) = 1
        # the angle: theta = sum_i w_i x_i over the token coordinates, Delta theta = the token's angle
        for tok, ang in angle_of_token.items():
            W[th0, tok] = ang / (delta * float(xin[tok, tok]))
        for h in range(H):  # x = 1/Delta on the counted tokens, in the first channel of each head
            for tok in count_tokens:
                W[x0 + h * P, tok] = 1.0 / (delta * float(xin[tok, tok]))
        mx.B_bias.zero_()
        mx.C_bias.zero_()
        mx.B_bias[:, 0] = 1.0  # B = 1 + 0i
        mx.C_bias[0, 0] = 1.0  # head 0 reads Re h
        if H > 1:
            mx.C_bias[1, 1] = 1.0  # head 1: C = i, Re(conj(i) h) = Im h
        mx.D.zero_()
        W[z0:z0 + E, const] = 4.0 / cval  # gates open: silu(4)
        gate = silu(4.0)
        mx.out_proj.weight.zero_()
        for h, oc in enumerate(out_coords):
            mx.out_proj.weight[oc, h * P] = 1.0 / gate
    return delta, gate


@register("parity-mamba3", "T5", "parity with ONE Mamba-3 layer: the state pair rotates by pi on bit 1 and stays "
          "on bit 0 (decay exactly 1 in float32), the state on {0, 1}", mixers=("mamba3",))
def parity_mamba3() -> Construction:
    CONST, OUT = 2, 3
    model, cfg = blank_model("parity", layers="mamba3(headdim=8)", d_model=4, d_state=2)
    token_embedding(model, 2, CONST)
    delta, _ = _mamba3_rotation_layer(model, CONST, {1: math.pi}, [1], [OUT])
    nearest_point_head(model, [[0.0], [1.0]], [OUT], CONST)
    return Construction("parity-mamba3", model, cfg, "", "", {"delta": delta, "angle(1)": "pi", "angle(0)": 0.0,
                                                               "decay": "exp(-1e-9) = 1 (float32)"})


@register("modcount-mamba3", "P1", "counting mod m with ONE Mamba-3 layer: a rotation by 2 pi/m per token (decay "
          "exactly 1 in float32); two of its heads read the real and imaginary parts of the orbit", default_arg="3",
          mixers=("mamba3",))
def modcount_mamba3(arg: str) -> Construction:
    m = int(arg)
    if m < 2:
        raise UserError(f"modcount-mamba3 needs m >= 2, got {m}")
    CONST, OUT = 2, [3, 4]
    model, cfg = blank_model(f"modcount:{m}", layers="mamba3(headdim=4)", d_model=6, d_state=2)
    token_embedding(model, 2, CONST)
    delta, _ = _mamba3_rotation_layer(model, CONST, {1: 2 * math.pi / m}, [1], OUT)
    a = complex(math.cos(2 * math.pi / m), math.sin(2 * math.pi / m))
    # h_t = (1 - a^t) / (1 - a): class k = t mod m sits at (1 - a^k) / (1 - a)
    pts = [(1 - a ** k) / (1 - a) for k in range(m)]
    nearest_point_head(model, [[p.real, p.imag] for p in pts], OUT, CONST)
    return Construction("modcount-mamba3", model, cfg, "", "", {"m": m, "delta": delta, "angle": f"2 pi/{m}"})
