"""Negative Mamba constructions: parity with one layer, C2 x C4 with two (sign-flip layers).

A flip channel has A_bar = 2 exp(-Delta a) - 1 with Delta a = 120 when its input feature is on (exp
underflows: A_bar = -1 exactly) and Delta = softplus(-30) = 9.4e-14 when off (exp rounds to 1 in
float32: A_bar = 1 exactly), so the state moves on the affine orbit h -> -h + beta / h -> h.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from statetrack.algebra import get_group
from statetrack.constructions.base import Construction, blank_model, layer_input, register, silu
from statetrack.layers.mamba import Mamba


@register(
    "parity-negmamba",
    "T5",
    "parity with ONE Negative Mamba layer and a one-dimensional state: "
    "A(1) = -1, A(0) = 1 (to float32), h in {0, beta}",
    mixers=("negmamba",),
)
def parity_negmamba() -> Construction:
    model, cfg = blank_model("parity", layers="negmamba(conv=0)", d_model=2, d_state=1)
    mx = model.mixer(0, Mamba)
    E = mx.d_inner
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
        xin = layer_input(model, 0, model.embed.weight)  # (2, d): the layer input per token
        W = mx.in_proj.weight
        W.zero_()
        W[0] = torch.tensor([1.0, 1.0])  # u0 = silu(sqrt2) for both tokens
        W[1] = torch.tensor([0.0, 1.0])  # u1 = silu(sqrt2) for bit 1, silu(0) = 0 for bit 0
        W[E] = torch.tensor([4.0, 4.0])  # z0: gate open
        u = F.silu(xin @ W[:E].T)  # (2, E)
        U, V = float(u[0, 0]), float(u[1, 1])
        xp = mx.x_proj.weight
        xp.zero_()
        R = mx.R
        xp[0, 1] = 1.0  # dt_raw = u1
        xp[R, 1] = 1.0  # B = u1: zero for bit 0
        xp[R + 1, 0] = 1.0  # C = u0
        mx.dt_proj.weight.zero_()
        mx.dt_proj.weight[0, 0] = (
            150.0 / V
        )  # dt(1) = softplus(150 - 30) = 120: exp(-120) underflows -> A = -1
        mx.dt_proj.bias.fill_(-30.0)  # dt(0) = softplus(-30) = 9.4e-14: exp(-dt) rounds to 1 -> A = 1
        mx.A_log.zero_()
        # beta = dt(1) * u0 * B(1) = 120 U V * kappa: scale B so that beta = 1
        xp[R, 1] = 1.0 / (120.0 * U * V)
        beta = float(F.softplus(torch.tensor(150.0 - 30.0)) * U * V * xp[R, 1])
        mx.D.zero_()
        mx.D[0] = -beta / 2  # y0 = U Z (h - beta/2) = +-U Z beta/2
        Z = float(F.silu(xin[0] @ W[E]))
        mx.out_proj.weight.zero_()
        mx.out_proj.weight[0, 0] = 2.0 / (U * Z * beta / 2)  # residual gets +-2 on coordinate 0
        model.head.weight.copy_(torch.tensor([[-0.5, 0.0], [0.5, 0.0]]))
        model.head.bias.zero_()
    return Construction(
        "parity-negmamba",
        model,
        cfg,
        "",
        "",
        {"beta": beta, "A(0)": "1 (float32)", "A(1)": "-1", "dt(0)": 9.357e-14},
    )


def _negmamba_flip(
    mx: Mamba,
    units: list[torch.Tensor],
    channel: int,
    rank: int,
    const: int,
    L: float = 30.0,
    first_unit_channel: int = 0,
) -> float:
    """State ``channel`` of a Negative Mamba layer (conv=0, d_state=1) flips, h -> -h + beta, on the inputs
    where one of ``units`` is on (w . x = 1; off: w . x <= -1) and keeps h otherwise (A = 1 to float32).
    The unit features sit in channels first_unit_channel.. and drive the low-rank row ``rank`` of Delta.
    Returns beta."""
    E = mx.d_inner
    sL = silu(L)
    with torch.no_grad():
        W = mx.in_proj.weight
        W[channel].zero_()
        W[channel, const] = 1.0  # u[channel] = silu(1): the injection scale
        W[E + channel].zero_()
        W[E + channel, const] = 4.0  # gate
        xp = mx.x_proj.weight  # [dt_raw (R) | B | C]
        for i, w in enumerate(units):
            W[first_unit_channel + i] = L * w
            xp[rank, first_unit_channel + i] = 1.0
        uc = silu(1.0)
        # B and C constant (from the injection channel of the first state channel); set by the caller once
        mx.dt_proj.weight[channel].zero_()
        mx.dt_proj.weight[channel, rank] = 150.0 / sL  # on: Delta = softplus(120) = 120 -> A = -1
        mx.dt_proj.bias[channel] = -30.0  # off: Delta = 9.4e-14 -> A = 1 in float32
        mx.A_log[channel].zero_()
    return uc


def _negmamba_common(mx: Mamba, states: list[int], out_coords: list[int]) -> float:
    """B and C constant (kappa so that beta = 1), D centring, gates and output: residual +-1 per state."""
    R = mx.R
    uc = silu(1.0)
    with torch.no_grad():
        xp = mx.x_proj.weight
        ch0 = states[0]
        kappa = 1.0 / (120.0 * uc * uc)
        xp[R, ch0] = kappa  # B = kappa u_const
        xp[R + 1, ch0] = 1.0  # C = u_const
        beta = float(F.softplus(torch.tensor(120.0))) * uc * kappa * uc
        Z = silu(4.0)
        mx.D.zero_()
        for ch, oc in zip(states, out_coords, strict=True):
            mx.D[ch] = -beta / 2  # y = uc (h - beta/2) Z
            mx.out_proj.weight[oc, ch] = 2.0 / (beta * uc * Z)
    return beta


@register(
    "c2xc4-negmamba",
    "T5",
    "C2 x C4 with TWO Negative Mamba layers (DiagLimits2026): layer 1 tracks "
    "(a, b mod 2) by sign flips, layer 2 flips the high bit of b when b1 XOR (b0 AND NOT (b mod 2)) (the carry)",
    mixers=("negmamba",),
)
def c2xc4_negmamba() -> Construction:
    g = get_group("C2xC4")
    task = "group:C2xC4"
    d = 32  # R = ceil(32/16) = 2 low-rank rows for Delta: two independent flip channels in layer 1
    model, cfg = blank_model(task, layers="negmamba(conv=0)*2", d_model=d, d_state=1, norm="none")
    CONST, P, Q, S = 8, 9, 10, 11
    comps = [(i // 4, i % 4) for i in range(8)]  # id = 4 a + b
    for x in range(8):  # check the encoding against the table
        for y in range(8):
            (a, b), (a2, b2) = comps[x], comps[y]
            assert comps[int(g.mul(x, y))] == ((a + a2) % 2, (b + b2) % 4)
    e = torch.zeros(8, d)
    for i in range(8):
        e[i, i] = 1.0
        e[i, CONST] = 1.0

    def unit(tokens, extra=None, bias=-1.0):
        w = torch.zeros(d)
        for t in tokens:
            w[t] = 2.0
        w[CONST] = bias
        if extra:
            for c, v in extra.items():
                w[c] = v
        return w

    with torch.no_grad():
        model.embed.weight.copy_(e)
        m1, m2 = model.mixer(0, Mamba), model.mixer(1, Mamba)
        # layer 1: channel 0 flips on a = 1, channel 1 on b odd
        _negmamba_flip(
            m1, [unit([t for t in range(8) if comps[t][0] == 1])], 0, 0, CONST, first_unit_channel=2
        )
        _negmamba_flip(
            m1, [unit([t for t in range(8) if comps[t][1] % 2 == 1])], 1, 1, CONST, first_unit_channel=3
        )
        _negmamba_common(m1, [0, 1], [P, Q])
        # layer 2: flip = b1 XOR (b0 AND NOT q), q = parity of b after this input (residual Q = +1 iff odd)
        TA = [t for t in range(8) if comps[t][1] == 2]  # b0 = 0, b1 = 1: always
        TB = [t for t in range(8) if comps[t][1] == 3]  # b0 = 1, b1 = 1: iff q = 1
        TC = [t for t in range(8) if comps[t][1] == 1]  # b0 = 1, b1 = 0: iff q = 0
        units = [unit(TA), unit(TB, {Q: 1.0}, -2.0), unit(TC, {Q: -1.0}, -2.0)]
        _negmamba_flip(m2, units, 0, 0, CONST, first_unit_channel=2)
        _negmamba_common(m2, [0], [S])
        for y in range(8):
            a, b = comps[y]
            for ch, bit in ((P, a), (Q, b % 2), (S, b // 2)):  # +1 for a bit set, -1 for a bit clear
                model.head.weight[y, ch] = 1.0 if bit else -1.0
        model.head.bias.zero_()
    return Construction(
        "c2xc4-negmamba", model, cfg, "", "", {"layer 1": "a, b mod 2", "layer 2": "carry bit"}
    )
