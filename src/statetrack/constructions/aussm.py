"""AUSSM constructions: any abelian group with one layer (T5), S3 with two (P3), both from the
lagged-angle layer; and a cyclic group with one Simple AUSSM layer (T5), from the same layer with the
angle carried by Delta.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from statetrack.algebra import get_group, parse_group_name
from statetrack.constructions.base import (
    Construction,
    blank_model,
    nearest_head,
    register,
    silu,
    spread_readout,
    token_embedding,
)
from statetrack.errors import UserError
from statetrack.layers.aussm import AUSSM, SimpleAUSSM


def _lag_inputs(mx: AUSSM | SimpleAUSSM, units: list[torch.Tensor], const: int, L: float) -> None:
    """The inputs of the lagged-angle layer: channels 0..nU-1 the unit features one step late (lag-1 conv
    copies), nU..2nU-1 the same features now (lag 0), channel I = 2 nU the indicator of t = 1 (const * (w_0 -
    w_1) through the conv), its gate z_I = 4 const; in_proj and the conv otherwise zero."""
    E, K, nU = mx.d_inner, mx.k, len(units)
    I = 2 * nU
    W = mx.in_proj.weight
    W.zero_()
    assert mx.conv is not None and mx.conv.bias is not None, "the construction needs the layer's convolution"
    cw = mx.conv.weight  # (E, 1, K)
    cw.zero_()
    mx.conv.bias.zero_()
    for i, w in enumerate(units):
        W[i] = L * w
        W[nU + i] = L * w
        cw[i, 0, K - 2] = 1.0  # lag 1
        cw[nU + i, 0, K - 1] = 1.0  # lag 0
    W[I, const] = L
    cw[I, 0, K - 1] = 1.0
    cw[I, 0, K - 2] = -1.0  # the indicator of t = 1
    W[E + I, const] = 4.0  # gate


def _aussm_lag_layer(
    mx: AUSSM,
    units: list[torch.Tensor],
    angles: list[list[float]],
    c: list[complex],
    const: int,
    out_coord: int,
    L: float = 30.0,
    situations: list[torch.Tensor] | None = None,
):
    """One AUSSM layer (d_state = N slots) whose state channel holds prod chi_n of the inputs so far.

    AUSSM's input term b = u B is real and its state starts at 0, so the rotation cannot be about a
    common non-zero centre. Instead: a causal-conv indicator of t = 1 (const * (w_0 - w_1) = 0 exactly
    from t = 2 on) writes h = 1 once; from then on the angle applied at step t is that of step t - 1
    (lag-1 copies of the unit features through the conv), and the input-dependent C_t = c_n exp(i angle_t)
    applies the current step's angle in the readout. So Re(sum_n C_t h_t) = Re(sum_n c_n chi_n(prefix_t)).
    ``units``: weight vectors over the layer input with w . x = 1 when on and <= -1 when off (one per
    situation); ``angles[i][n]``: the angle of situation i in slot n. With ``situations`` (the layer input
    of each situation) the read-out rows solve U c = target exactly for the unit activations U[s, i] =
    silu(L w_i . x_s), so a small L (weights of order 1, less sensitive to noise) leaks nothing."""
    E, N, R, K = mx.d_inner, mx.d_state, mx.R_theta, mx.k  # AUSSM has no Delta: the low part is theta's
    nU = len(units)
    I = 2 * nU
    assert I + 1 <= E and N <= R and K >= 2, (E, nU, N, R, K)
    sL = silu(L)
    with torch.no_grad():
        _lag_inputs(mx, units, const, L)
        xp = mx.x_proj.weight  # [low (R) | B (N) | C_re (N) | C_im (N)]
        xp.zero_()
        if situations is not None:
            U = torch.stack([F.silu(L * torch.stack([w @ x for w in units])) for x in situations]).double()
            Uinv = torch.linalg.inv(U)
        for n in range(N):
            ang = torch.tensor([angles[i][n] for i in range(nU)], dtype=torch.float64)
            z = torch.tensor(
                [c[n] * complex(math.cos(a), math.sin(a)) for a in ang.tolist()], dtype=torch.complex128
            )
            if situations is not None:
                xp[n, :nU] = (Uinv @ ang).float()
                xp[R + N + n, nU : 2 * nU] = (Uinv @ z.real).float()
                xp[R + 2 * N + n, nU : 2 * nU] = (Uinv @ z.imag).float()
            else:
                xp[n, :nU] = (ang / sL).float()
                xp[R + N + n, nU : 2 * nU] = (z.real / sL).float()
                xp[R + 2 * N + n, nU : 2 * nU] = (z.imag / sL).float()
            xp[R + n, I] = 1.0 / (sL * sL)  # B: u_I B = 1 at t = 1, exactly 0 after
        tp = mx.theta_proj
        tp.weight.zero_()
        tp.bias.zero_()
        for n in range(N):
            tp.weight[I * N + n, n] = 1.0
        mx.D.zero_()
        mx.out_proj.weight.zero_()
        mx.out_proj.weight[out_coord, I] = 1.0 / silu(4.0)


def _abelian_components(name: str):
    """Token id -> exponent vector over the cyclic factors (Cn, V4 = C2 x C2) of a named abelian group."""
    canonical, factors = parse_group_name(name)
    g = get_group(canonical)
    if not g.is_abelian:
        raise UserError(f"abelian-aussm needs an abelian group, got {canonical} (not abelian)")
    radix, cyc = [], []
    for kind, n in factors:
        if kind == "C":
            radix.append(n)
            cyc.append([n])
        elif kind == "V":
            radix.append(4)
            cyc.append([2, 2])
        else:
            raise UserError(f"abelian-aussm takes products of Cn and V4, got factor {kind}{n}")
    comps = []
    for i in range(g.order):
        rest, parts = i, []
        for r in reversed(radix):
            parts.append(rest % r)
            rest //= r
        parts.reverse()
        vec = []
        for p, cs in zip(parts, cyc, strict=True):
            vec += [p] if len(cs) == 1 else [p // 2, p % 2]
        comps.append(vec)
    orders = [n for cs in cyc for n in cs]
    for x in range(g.order):  # check: the map is a homomorphism
        for y in range(g.order):
            z = int(g.mul(x, y))
            assert all((comps[x][k] + comps[y][k]) % orders[k] == comps[z][k] for k in range(len(orders)))
    return g, comps, orders


def _token_units(G: int, d: int, const: int) -> list[torch.Tensor]:
    """One unit per token of ``token_embedding``'s code (e_t + e_const): w_t = 2 e_t - e_const, so w_t . x is
    1 on token t and -1 on every other."""
    units = []
    for t in range(G):
        w = torch.zeros(d)
        w[t] = 2.0
        w[const] = -1.0
        units.append(w)
    return units


@register(
    "abelian-aussm",
    "T5",
    "any abelian group (products of Cn and V4) with ONE AUSSM layer: one state slot "
    "per cyclic factor holds its character; lagged angles and an input-dependent readout C_t",
    default_arg="C2xC4",
    mixers=("aussm",),
)
def abelian_aussm(arg: str) -> Construction:
    g, comps, orders = _abelian_components(arg)
    K, G = len(orders), g.order
    d = max(16 * (K - 1) + 1, G + 2)
    task = f"group:{g.name}"
    model, cfg = blank_model(task, layers="aussm", d_model=d, d_state=K, norm="none")
    CONST, OUT = G, G + 1
    units = _token_units(G, d, CONST)
    angles = [[2 * math.pi * comps[t][k] / orders[k] for k in range(K)] for t in range(G)]

    def phis(cand):
        c = [complex(cand[2 * k] * 0.7**k, cand[2 * k + 1]) for k in range(K)]
        return [
            sum((c[k] * complex(math.cos(a), math.sin(a))).real for k, a in enumerate(angles[t]))
            for t in range(G)
        ]

    cand, gap = spread_readout(phis)
    c = [complex(cand[2 * k] * 0.7**k, cand[2 * k + 1]) for k in range(K)]
    vals = phis(cand)
    token_embedding(model, G, CONST)
    with torch.no_grad():
        _aussm_lag_layer(model.mixer(0, AUSSM), units, angles, c, CONST, OUT)
        nearest_head(model, vals, OUT, CONST)
    return Construction("abelian-aussm", model, cfg, "", "", {"characters": orders, "relative_gap": gap})


#: softplus(-30) = 9.4e-14: the Delta, hence the angle, of a token that must not turn the state
_DT_OFF = -30.0


def _saussm_lag_layer(
    mx: SimpleAUSSM,
    units: list[torch.Tensor],
    angles: list[float],
    c: complex,
    const: int,
    out_coord: int,
    L: float = 30.0,
):
    """One Simple AUSSM layer (d_state 1) whose channel I = 2 len(units) holds chi(the inputs so far).

    The lagged-angle layer of ``_aussm_lag_layer`` with the angle carried by Delta: theta = Delta Lambda,
    Lambda = 1 on channel I and 0 elsewhere, and Delta_I(t) = softplus(p(x_{t-1})) read through the lag-1
    copies of the unit features, with p = log(expm1(angle)) (Delta = the angle, in (0, 2 pi)), or
    softplus(-30) = 9.4e-14 for a zero angle. The input term b = Delta B u is written once, at t = 1, where
    the lag-1 features read the conv's zero history (Delta_I = softplus(0) = log 2): b = 1."""
    E, R, K = mx.d_inner, mx.R, mx.k
    nU = len(units)
    I = 2 * nU
    assert I + 1 <= E and mx.d_state == 1 and K >= 2, (E, nU, mx.d_state, K)
    sL = silu(L)
    with torch.no_grad():
        _lag_inputs(mx, units, const, L)
        xp = mx.x_proj.weight  # [low (R) | B (1) | C_re (1) | C_im (1)]
        xp.zero_()
        for i, a in enumerate(angles):
            p = math.log(math.expm1(a)) if a > 0 else _DT_OFF
            xp[0, i] = p / sL
            z = c * complex(math.cos(a), math.sin(a))
            xp[R + 1, nU + i] = z.real / sL
            xp[R + 2, nU + i] = z.imag / sL
        xp[R, I] = 1.0 / (math.log(2.0) * sL * sL)  # B: Delta_I B u_I = 1 at t = 1, exactly 0 after
        mx.dt_proj.weight.zero_()
        mx.dt_proj.bias.zero_()
        mx.dt_proj.weight[I, 0] = 1.0
        mx.Lambda.zero_()
        mx.Lambda[I, 0] = 1.0
        mx.D.zero_()
        mx.out_proj.weight.zero_()
        mx.out_proj.weight[out_coord, I] = 1.0 / silu(4.0)


@register(
    "cyclic-saussm",
    "T5",
    "a cyclic group Cm with ONE Simple AUSSM layer (theta = Delta Lambda): Delta carries each token's "
    "angle 2 pi k/m one step late, and an input-dependent readout C_t applies the current one",
    default_arg="C6",
    mixers=("saussm",),
)
def cyclic_saussm(arg: str) -> Construction:
    g, comps, orders = _abelian_components(arg)
    if len(orders) != 1:
        raise UserError(f"cyclic-saussm needs a cyclic group Cm, got {g.name} (a product of {len(orders)})")
    G, m = g.order, orders[0]
    d = G + 2
    model, cfg = blank_model(f"group:{g.name}", layers="saussm", d_model=d, d_state=1, norm="none")
    CONST, OUT = G, G + 1
    units = _token_units(G, d, CONST)
    angles = [2 * math.pi * comps[t][0] / m for t in range(G)]

    def phis(cand):
        c = complex(cand[0], cand[1])
        return [(c * complex(math.cos(a), math.sin(a))).real for a in angles]

    cand, gap = spread_readout(phis)
    c = complex(cand[0], cand[1])
    token_embedding(model, G, CONST)
    with torch.no_grad():
        _saussm_lag_layer(model.mixer(0, SimpleAUSSM), units, angles, c, CONST, OUT)
        nearest_head(model, phis(cand), OUT, CONST)
    return Construction("cyclic-saussm", model, cfg, "", "", {"order": m, "relative_gap": gap})


L_S3 = 3.0


# long: a construction's weights written out entry by entry, in the order of the proof
@register(
    "s3-aussm",
    "P3",
    "S3 = C3 x| C2 with TWO AUSSM layers (P3, DiagLimits2026): layer 1 tracks the sign "
    "(angle 0 or pi), layer 2 rotates by +-2 pi/3 as layer 1's state says",
    mixers=("aussm",),
)
def s3_aussm() -> Construction:
    g = get_group("S3")
    G = 6
    d = 16
    model, cfg = blank_model("group:S3", layers="aussm*2", d_model=d, d_state=1, norm="none")
    CONST, JC, KC = 6, 7, 8
    r = int(g.ids_of([[1, 2, 0]])[0])
    s = int(g.ids_of([[1, 0, 2]])[0])

    def pw(x, k):
        return 0 if k == 0 else int(g.mul(pw(x, k - 1), x))

    KJ = {}
    for k in range(3):
        for j in range(2):
            KJ[int(g.mul(pw(r, k), pw(s, j)))] = (k, j)
    assert len(KJ) == 6
    # the increment of K when y = r^K s^J is multiplied by x on the right, as a function of (J after, x)
    inc: dict[tuple[int, int], int] = {}
    for y in range(G):
        for x in range(G):
            K0, J0 = KJ[y]
            K1, J1 = KJ[int(g.mul(y, x))]
            key = (J1, x)
            val = (K1 - K0) % 3
            assert inc.setdefault(key, val) == val
    e = torch.zeros(G, d)
    for i in range(G):
        e[i, i] = 1.0
        e[i, CONST] = 1.0

    def unit(t, sign=None):
        w = torch.zeros(d)
        w[t] = 2.0
        w[CONST] = -1.0
        if sign is not None:
            w[JC] = sign
            w[CONST] = -2.0
        return w

    # layer 1: the sign character, angle pi j; readout Re(exp(i pi J)) = +1 (even) / -1 (odd) on JC
    units1 = [unit(t) for t in range(G)]
    sit1 = [e[t] for t in range(G)]
    ang1 = [[math.pi * KJ[t][1]] for t in range(G)]
    # layer 2: situations (x, J after x) with J read from JC (+1 even, -1 odd)
    units2: list[torch.Tensor] = []
    ang2: list[list[float]] = []
    sit2: list[torch.Tensor] = []
    for t in range(G):
        for J, sign in ((0, 1.0), (1, -1.0)):
            units2.append(unit(t, sign))
            ang2.append([2 * math.pi * inc[(J, t)] / 3])
            situation = e[t].clone()
            situation[JC] = sign
            sit2.append(situation)
    c2 = complex(math.cos(0.4), math.sin(0.4))
    phi = [
        (c2 * complex(math.cos(2 * math.pi * k / 3), math.sin(2 * math.pi * k / 3))).real for k in range(3)
    ]
    with torch.no_grad():
        model.embed.weight.copy_(e)
        # L = 3: weights of order 1 (the read-out rows solve for the leak of the off units exactly)
        _aussm_lag_layer(model.mixer(0, AUSSM), units1, ang1, [1.0 + 0j], CONST, JC, L=L_S3, situations=sit1)
        _aussm_lag_layer(model.mixer(1, AUSSM), units2, ang2, [c2], CONST, KC, L=L_S3, situations=sit2)
        model.head.weight.zero_()
        model.head.bias.zero_()
        for y in range(G):
            K0, J0 = KJ[y]
            model.head.weight[y, JC] = 10.0 * (1.0 if J0 == 0 else -1.0)
            model.head.weight[y, KC] = 2 * phi[K0]
            model.head.weight[y, CONST] = -(phi[K0] ** 2)
    return Construction("s3-aussm", model, cfg, "", "", {"r": r, "s": s, "phi": phi})
