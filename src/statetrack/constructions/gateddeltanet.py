"""Gated DeltaNet construction: parity with ONE Gated DeltaNet [-1,1] layer (T6), the gate held at 1.

The layer has d_k = d_state = 1, so the key, L2-normalised, is 1 and the factor I - beta k k^T is the
number 1 - beta: beta = 2 sigmoid(30) = 2 exactly in float32 on bit 1 (a reflection, -1), and
2 sigmoid(-30) = 1.9e-13 on bit 0, where 1 - beta rounds to 1. The gate alpha = exp(-exp(A_log)
softplus(.)) is 1 exactly: A_log = -200 makes exp(A_log) underflow to 0. So the state moves on the orbit
S -> -S + 2 v (bit 1), S -> S (bit 0) from S_0 = 0: {0, 2 v}, to a write of 1.9e-13 v per bit-0 step
(2e-9 after 10,000 steps). The per-head RMSNorm maps 2 v to a fixed vector and 0 to 0; the head
compares the output coordinate with the two points.
"""

from __future__ import annotations

import torch

from statetrack.constructions.base import (
    Construction,
    blank_model,
    layer_input,
    nearest_point_head,
    register,
    silu,
    token_embedding,
)
from statetrack.layers.gateddeltanet import GatedDeltaNet

SAT = 30.0


@register(
    "parity-gateddeltanet",
    "T6",
    "parity with ONE Gated DeltaNet [-1,1] layer: beta = 2 (a reflection, -1) on "
    "bit 1 and ~0 on bit 0, the gate exactly 1 in float32; the state on {0, 2 v}",
    mixers=("gateddeltanet",),
)
def parity_gateddeltanet() -> Construction:
    CONST, OUT = 2, 3
    model, cfg = blank_model("parity", layers="gateddeltanet(conv=0,neg=true)", d_model=4, d_state=1)
    token_embedding(model, 2, CONST)
    mx = model.mixer(0, GatedDeltaNet)
    xin = layer_input(model, 0, model.embed.weight)
    c = float(xin[0, CONST])
    H, dk, dv = mx.H, mx.dk, mx.dv
    with torch.no_grad():
        W = mx.qkv.weight  # rows: q (dk) | k (dk) | v (dv); each goes through silu
        W.zero_()
        W[0, CONST] = 1.0 / c  # q = silu(1) > 0: normalised to 1
        W[dk, CONST] = 1.0 / c  # k = 1 after the normalisation
        W[2 * dk, CONST] = 1.0 / c  # v = (silu(1), 0, ...)
        ab = mx.ab_proj.weight  # rows: beta logit (H) | the gate's Delta (H)
        ab.zero_()
        ab[0, 1] = SAT / float(xin[1, 1])  # bit 1: beta = 2 sigmoid(30) = 2
        ab[0, 0] = -SAT / float(xin[0, 0])  # bit 0: beta = 2 sigmoid(-30) = 1.9e-13
        mx.A_log.fill_(-200.0)  # exp(-200) = 0 in float32: alpha = exp(-0 * softplus(.)) = 1
        mx.g_proj.weight.zero_()
        mx.g_proj.weight[:, CONST] = 4.0 / c  # output gate silu(4)
        # o is 0 or 2 v; the per-head RMSNorm maps 2 v to (sqrt(dv), 0, ...): write coordinate 0 to OUT
        mx.o_proj.weight.zero_()
        mx.o_proj.weight[OUT, 0] = 1.0 / (dv**0.5 * silu(4.0))
    nearest_point_head(model, [[0.0], [1.0]], [OUT], CONST)
    return Construction(
        "parity-gateddeltanet",
        model,
        cfg,
        "",
        "",
        {"beta(1)": 2.0, "beta(0)": 1.9e-13, "alpha": "1 (float32)", "heads": H},
    )
