"""Hand-set weights from the proofs: ordinary statetrack Models that solve a task at every length.

``build(name) -> Construction`` returns the model (a plain :class:`statetrack.model.Model`), the
TrainConfig that describes it (task + ModelConfig) and notes; ``save(name, path)`` writes the ordinary
checkpoint, which ``statetrack eval`` loads like any trained one. ``NAMES`` lists them all; a name may
take an argument after a colon (``modcount-s4d:5``, ``abelian-aussm:C2xC4``, ``sn-deltaproduct:4``).

Every construction reads the model the way the proofs do: a layer's state moves on a finite orbit,
and the head (no bias) is a linear score of the residual stream. The final RMSNorm only rescales the
residual vector by a positive number, so it never changes the argmax of a bias-free head; pre-norms
see the embeddings (constant per token) or residual vectors built to have the same norm in every state.

Precision notes (float32), measured by the tests at length 10,000:

* Negative Mamba, parity: A_bar = 2 exp(-Delta a) - 1. For bit 1, Delta a = 120: exp underflows to 0
  and A_bar = -1 exactly. For bit 0, Delta = softplus(-30) = 9.4e-14 > 0, so mathematically A_bar < 1,
  but exp(-9.4e-14) rounds to 1.0 in float32 (any Delta a < 2^-25 does), so A_bar = 1 exactly. The
  state is the affine orbit h -> -h + beta (bit 1) / h -> h (bit 0) from h = 0: exactly {0, beta}
  forever. In float64 A_bar(0) = 1 - 1.9e-13 and the orbit would decay by 1e-9 over 10^4 steps.
* S4D (P1, P2): |A_bar| = exp(-exp(-60)) = 1 in float32; the angle 2 pi/m is rounded once and its
  error accumulates linearly (about 1e-7 rad per step), far inside the margin pi/m at 10^4 steps.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

from statetrack.config import ModelConfig, TrainConfig
from statetrack.errors import UserError
from statetrack.model import Model, build_model
from statetrack.tasks import get_task


@dataclass
class Construction:
    name: str
    model: Model
    config: TrainConfig
    description: str
    basis: str
    notes: dict = field(default_factory=dict)


REGISTRY: dict[str, tuple[Callable, str, str, str | None]] = {}


def register(name: str, basis: str, description: str, default_arg: str | None = None,
             mixers: tuple[str, ...] = ()):
    def deco(fn):
        REGISTRY[name] = (fn, basis, description, default_arg, mixers)
        return fn
    return deco


def available() -> list[dict]:
    """One row per construction: name, basis, description, available (its mixers are registered)."""
    from statetrack.layers import MIXERS

    rows = []
    for name, (_, basis, desc, arg, mixers) in REGISTRY.items():
        rows.append({"name": name + (f":{arg}" if arg else ""), "basis": basis, "description": desc,
                     "available": all(m in MIXERS for m in mixers),
                     "needs": ", ".join(m for m in mixers if m not in MIXERS)})
    return rows





def build(name: str) -> Construction:
    """Build a construction by name (``NAME`` or ``NAME:ARG``)."""
    from statetrack.layers import MIXERS

    base, _, arg = name.partition(":")
    if base not in REGISTRY:
        raise UserError(f"unknown construction {name!r}; allowed: {', '.join(sorted(REGISTRY))}")
    fn, basis, desc, default_arg, mixers = REGISTRY[base]
    missing = [m for m in mixers if m not in MIXERS]
    if missing:
        raise UserError(f"construction {base!r} needs mixer(s) {', '.join(missing)}, not in this build; "
                        f"allowed: {', '.join(r['name'] for r in available() if r['available'])}")
    c = fn(arg or default_arg) if default_arg is not None else fn()
    c.name = base + (f":{arg or default_arg}" if default_arg is not None else "")
    c.basis = basis
    c.model.eval()
    return c


def save(name: str, path) -> Construction:
    from statetrack.checkpoint import save_checkpoint

    c = build(name)
    save_checkpoint(c.model, c.config.model_dump(), path,
                    extra={"construction": c.name, "basis": c.basis, "label": f"construction:{c.name}",
                           "notes": c.notes})
    return c


# -- helpers -------------------------------------------------------------------------------------------
def _model(task: str, **mcfg) -> tuple[Model, TrainConfig]:
    cfg = TrainConfig(task=task, model=ModelConfig(**mcfg), init=None)
    torch.manual_seed(0)
    model = build_model(cfg.model, get_task(task))
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        for name, mod in model.named_modules():
            if isinstance(mod, torch.nn.RMSNorm | torch.nn.LayerNorm) and mod.weight is not None:
                mod.weight.fill_(1.0)
    return model, cfg


def _normed(model: Model, block: int, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.blocks[block].norm(x)


def _isp(y: float) -> float:
    """Inverse softplus."""
    return y + math.log(-math.expm1(-y))


# -- Negative Mamba ------------------------------------------------------------------------------------
def _negmamba_flip_layer(mixer, in_const: torch.Tensor, in_bits: list[torch.Tensor], channel: int = 0,
                         big: float = 150.0, small: float = -30.0) -> dict:
    """Configure a Negative Mamba layer (conv=0, d_state=1) so that channel ``channel`` flips its state
    h -> -h + beta when feature k of ``in_bits`` is on, and keeps it (h -> h) otherwise.

    ``in_const`` (d_model,) is a direction on which every layer input has the same positive value;
    ``in_bits`` are directions whose value is 1 on the flipping inputs and 0 elsewhere (after silu).
    Returns the measured constants (beta, U = u of the state channel)."""
    E, N, R = mixer.d_inner, mixer.d_state, mixer.R
    assert N == 1 and mixer.conv is None
    with torch.no_grad():
        W = mixer.in_proj.weight  # (2E, d)
        W[channel] = in_const  # u[channel]: a positive constant for every input
        for j, d in enumerate(in_bits):
            W[E - 1 - j] = d  # u[E-1-j]: the flip feature (0 when off)
        W[E + channel] = in_const * 4.0  # z[channel]: gate open for every input
        xp = mixer.x_proj.weight  # (R + 2N, E): [dt_raw | B | C]
        xp.zero_()
        for j in range(len(in_bits)):
            xp[0, E - 1 - j] = 1.0
            xp[R, E - 1 - j] = 1.0
        xp[R + 1, channel] = 1.0  # C = u[channel]
        mixer.dt_proj.weight.zero_()
        mixer.dt_proj.bias.fill_(small)
        mixer.A_log.zero_()  # a = 1
        mixer.D.zero_()
        mixer.out_proj.weight.zero_()
    return {}


def _sil(v: float) -> float:
    return v / (1 + math.exp(-v))


@register("parity-negmamba", "T5", "parity with ONE Negative Mamba layer and a one-dimensional state: "
          "A(1) = -1, A(0) = 1 (to float32), h in {0, beta}", mixers=("negmamba",))
def parity_negmamba() -> Construction:
    model, cfg = _model("parity", layers="negmamba(conv=0)", d_model=2, d_state=1)
    mx = model.blocks[0].mixer
    E = mx.d_inner
    with torch.no_grad():
        model.embed.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
        xin = _normed(model, 0, model.embed.weight)  # (2, d): the layer input per token
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
        mx.dt_proj.weight[0, 0] = 150.0 / V  # dt(1) = softplus(150 - 30) = 120: exp(-120) underflows -> A = -1
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
    return Construction("parity-negmamba", model, cfg, "", "", {"beta": beta, "A(0)": "1 (float32)",
                                                                 "A(1)": "-1", "dt(0)": 9.357e-14})


# -- S4D ------------------------------------------------------------------------------------------------
def _s4d_rotation(mixer, channel: int, angle: float):
    with torch.no_grad():
        mixer.log_A_real[channel].fill_(-60.0)  # Re A = -exp(-60): |A_bar| = 1 in float32
        mixer.A_imag[channel].fill_(angle)
        mixer.log_dt[channel] = 0.0  # Delta = 1


@register("modcount-s4d", "P1", "counting mod m with ONE S4D layer (002 Prop. 4.2): A = exp(2 pi i/m); the state "
          "starts at 0, so the input term B x puts the orbit on the circle through 0 centred at B x/(1 - A)",
          default_arg="3", mixers=("s4d",))
def modcount_s4d(arg: str) -> Construction:
    m = int(arg)
    if m < 2:
        raise UserError(f"modcount-s4d needs m >= 2, got {m}")
    task = f"modcount:{m}"
    model, cfg = _model(task, layers="s4d", d_model=3, d_state=2)
    mx = model.blocks[0].mixer
    with torch.no_grad():
        # token 1 (the only one that occurs) -> (1, 1, 1); channels 0 and 1 rotate, channel 2 is a constant
        model.embed.weight.copy_(torch.tensor([[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]]))
        for c in range(2):
            _s4d_rotation(mx, c, 2 * math.pi / m)
        mx.log_A_real[2].fill_(5.0)  # channel 2 decays at once: A_bar = exp(-e^5) = 0, h = B x
        x = _normed(model, 0, model.embed.weight[1])
        dA, dB = mx.discrete()
        hstar = (dB[0, 0] * x[0] / (1 - dA[0, 0])).to(torch.complex128)  # fixed point of channel 0 (= channel 1)
        scale = 1.0 / (2 * abs(hstar))  # readouts of size <= 1
        # y_c = 2 Re(C h) + D x: channel 0 -> Re(h) * 2 scale... offset 10 keeps GELU linear
        mx.C_re.zero_(); mx.C_im.zero_()
        mx.C_re[0, 0] = scale
        mx.C_im[1, 0] = -scale  # 2 Re(-i s h) = 2 s Im h
        mx.D.zero_()
        mx.D[0] = 10.0 / float(x[0]); mx.D[1] = 10.0 / float(x[1])
        out = mx.out  # Linear(H, 2H) -> GLU(a, b) = a * sigmoid(b)
        out.weight.zero_(); out.bias.zero_()
        H = mx.d_model
        out.weight[0, 0] = 1.0; out.weight[1, 1] = 1.0
        # a_c = gelu(y_c) - 10 - 2 scale * (Re, Im) hstar - embedding: the residual is 2 scale (h - h*)
        e = model.embed.weight[1]
        out.bias[0] = -10.0 - 2 * scale * float(hstar.real) - float(e[0])
        out.bias[1] = -10.0 - 2 * scale * float(hstar.imag) - float(e[1])
        out.bias[H:2 * H] = 30.0  # gates open
        # residual r = (2 s Re(h - h*), 2 s Im(h - h*), 1); h_t - h* = -h* A^t, label t mod m
        om = complex(math.cos(2 * math.pi / m), math.sin(2 * math.pi / m))
        for k in range(m):
            v = -complex(hstar) * om ** k
            v /= abs(v)
            model.head.weight[k] = torch.tensor([v.real, v.imag, 0.0])
        model.head.bias.zero_()
    return Construction("modcount-s4d", model, cfg, "", "", {"m": m, "h_star": [hstar.real.item(), hstar.imag.item()]})


@register("offset-s4d", "P2", "offset prediction with ONE S4D layer (002 App. C): the counting channel "
          "rotates by 2 pi/10 on each 1 around its fixed point and rests at 0 on 0s",
          mixers=("s4d",))
def offset_s4d() -> Construction:
    n = 10
    model, cfg = _model("offset", layers="s4d", d_model=3, d_state=2)
    mx = model.blocks[0].mixer
    with torch.no_grad():
        # token 0 -> (1, 0, 0); token 1 -> (0, 1, 1); channel 2 counts (input 0 on token 0: h stays 0)
        model.embed.weight.copy_(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]))
        _s4d_rotation(mx, 2, 2 * math.pi / n)
        for c in range(2):
            mx.log_A_real[c].fill_(5.0)
        x1 = _normed(model, 0, model.embed.weight[1])
        dA, dB = mx.discrete()
        hstar = complex((dB[2, 0] * x1[2] / (1 - dA[2, 0])).to(torch.complex128))  # orbit h_k = h*(1 - A^k)
        nvec = hstar / abs(hstar)  # inward normal at 0
        kappa = 2.0 / abs(hstar)
        # 2 Re(C h) = kappa <n, h> = kappa |h*| (1 - cos(2 pi k/n)) in [0, 4]
        mx.C_re.zero_(); mx.C_im.zero_()
        mx.C_re[2, 0] = kappa * nvec.real / 2
        mx.C_im[2, 0] = kappa * nvec.imag / 2  # Re((a+ib)(x+iy)) = ax - by: use conj(n)
        mx.C_im[2, 0] *= -1
        mx.D.zero_()
        mx.D[2] = 10.0 / float(x1[2])  # token 1: y = 10 + g (linear GELU); token 0: y = 0, gelu(0) = 0
        out = mx.out
        out.weight.zero_(); out.bias.zero_()
        H = mx.d_model
        out.weight[2, 2] = 1.0
        out.bias[H:2 * H] = 30.0
        # residual: token 0 -> (1, 0, 0); token 1 -> (0, 1, 1 + 10 + g). score = g - tau on token 1, < 0 on token 0
        tau = 2.0 * (1 - math.cos(2 * math.pi / n)) / 2  # half the smallest non-zero g
        model.head.weight.zero_()
        model.head.weight[1] = torch.tensor([-1.0, -(11.0 + tau), 1.0]) / 2
        model.head.weight[0] = -model.head.weight[1]
        model.head.bias.zero_()
    return Construction("offset-s4d", model, cfg, "", "", {"n": n, "tau": tau})


# -- Negative Mamba, two layers: C2 x C4 ------------------------------------------------------------------
def _negmamba_flip(mx, units: list[torch.Tensor], channel: int, rank: int, const: int, L: float = 30.0,
                   first_unit_channel: int = 0) -> float:
    """State ``channel`` of a Negative Mamba layer (conv=0, d_state=1) flips, h -> -h + beta, on the inputs
    where one of ``units`` is on (w . x = 1; off: w . x <= -1) and keeps h otherwise (A = 1 to float32).
    The unit features sit in channels first_unit_channel.. and drive the low-rank row ``rank`` of Delta.
    Returns beta."""
    E = mx.d_inner
    sL = _sil(L)
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
        uc = _sil(1.0)
        # B and C constant (from the injection channel of the first state channel); set by the caller once
        mx.dt_proj.weight[channel].zero_()
        mx.dt_proj.weight[channel, rank] = 150.0 / sL  # on: Delta = softplus(120) = 120 -> A = -1
        mx.dt_proj.bias[channel] = -30.0  # off: Delta = 9.4e-14 -> A = 1 in float32
        mx.A_log[channel].zero_()
    return uc


def _negmamba_common(mx, const: int, states: list[int], out_coords: list[int]):
    """B and C constant (kappa so that beta = 1), D centring, gates and output: residual +-1 per state."""
    R = mx.R
    uc = _sil(1.0)
    with torch.no_grad():
        xp = mx.x_proj.weight
        ch0 = states[0]
        kappa = 1.0 / (120.0 * uc * uc)
        xp[R, ch0] = kappa  # B = kappa u_const
        xp[R + 1, ch0] = 1.0  # C = u_const
        beta = float(F.softplus(torch.tensor(120.0))) * uc * kappa * uc
        Z = _sil(4.0)
        mx.D.zero_()
        for ch, oc in zip(states, out_coords):
            mx.D[ch] = -beta / 2  # y = uc (h - beta/2) Z
            mx.out_proj.weight[oc, ch] = 2.0 / (beta * uc * Z)
    return beta


@register("c2xc4-negmamba", "T5", "C2 x C4 with TWO Negative Mamba layers (003): layer 1 tracks (a, b mod 2) by "
          "sign flips, layer 2 flips the high bit of b when b1 XOR (b0 AND NOT (b mod 2)) (the carry)",
          mixers=("negmamba",))
def c2xc4_negmamba() -> Construction:
    from statetrack.algebra import get_group

    g = get_group("C2xC4")
    task = "group:C2xC4"
    d = 32  # R = ceil(32/16) = 2 low-rank rows for Delta: two independent flip channels in layer 1
    model, cfg = _model(task, layers="negmamba(conv=0)*2", d_model=d, d_state=1, norm="none")
    CONST, P, Q, S = 8, 9, 10, 11
    comps = [(i // 4, i % 4) for i in range(8)]  # id = 4 a + b
    for x in range(8):  # check the encoding against the table
        for y in range(8):
            a, b = comps[x]; a2, b2 = comps[y]
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
        m1, m2 = model.blocks[0].mixer, model.blocks[1].mixer
        # layer 1: channel 0 flips on a = 1, channel 1 on b odd
        _negmamba_flip(m1, [unit([t for t in range(8) if comps[t][0] == 1])], 0, 0, CONST, first_unit_channel=2)
        _negmamba_flip(m1, [unit([t for t in range(8) if comps[t][1] % 2 == 1])], 1, 1, CONST, first_unit_channel=3)
        _negmamba_common(m1, CONST, [0, 1], [P, Q])
        # layer 2: flip = b1 XOR (b0 AND NOT q), q = parity of b after this input (residual Q = +1 iff odd)
        TA = [t for t in range(8) if comps[t][1] == 2]  # b0 = 0, b1 = 1: always
        TB = [t for t in range(8) if comps[t][1] == 3]  # b0 = 1, b1 = 1: iff q = 1
        TC = [t for t in range(8) if comps[t][1] == 1]  # b0 = 1, b1 = 0: iff q = 0
        units = [unit(TA), unit(TB, {Q: 1.0}, -2.0), unit(TC, {Q: -1.0}, -2.0)]
        _negmamba_flip(m2, units, 0, 0, CONST, first_unit_channel=2)
        _negmamba_common(m2, CONST, [0], [S])
        for y in range(8):
            a, b = comps[y]
            sig = lambda bit: 1.0 if bit else -1.0
            model.head.weight[y, P] = sig(a)
            model.head.weight[y, Q] = sig(b % 2)
            model.head.weight[y, S] = sig(b // 2)
        model.head.bias.zero_()
    return Construction("c2xc4-negmamba", model, cfg, "", "", {"layer 1": "a, b mod 2", "layer 2": "carry bit"})


# -- AUSSM: the lagged-angle layer -------------------------------------------------------------------------
def _aussm_lag_layer(mx, units: list[torch.Tensor], angles: list[list[float]], c: list[complex], const: int,
                     out_coord: int, L: float = 30.0, situations: list[torch.Tensor] | None = None):
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
    E, N, R, K = mx.d_inner, mx.d_state, mx.R, mx.k
    nU = len(units)
    I = 2 * nU
    assert I + 1 <= E and N <= R and K >= 2, (E, nU, N, R, K)
    sL = _sil(L)
    with torch.no_grad():
        W = mx.in_proj.weight
        W.zero_()
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
        xp = mx.x_proj.weight  # [low (R) | B (N) | C_re (N) | C_im (N)]
        xp.zero_()
        if situations is not None:
            U = torch.stack([F.silu(L * torch.stack([w @ x for w in units])) for x in situations]).double()
            Uinv = torch.linalg.inv(U)
        for n in range(N):
            ang = torch.tensor([angles[i][n] for i in range(nU)], dtype=torch.float64)
            z = torch.tensor([c[n] * complex(math.cos(a), math.sin(a)) for a in ang.tolist()], dtype=torch.complex128)
            if situations is not None:
                xp[n, :nU] = (Uinv @ ang).float()
                xp[R + N + n, nU:2 * nU] = (Uinv @ z.real).float()
                xp[R + 2 * N + n, nU:2 * nU] = (Uinv @ z.imag).float()
            else:
                xp[n, :nU] = (ang / sL).float()
                xp[R + N + n, nU:2 * nU] = (z.real / sL).float()
                xp[R + 2 * N + n, nU:2 * nU] = (z.imag / sL).float()
            xp[R + n, I] = 1.0 / (sL * sL)  # B: u_I B = 1 at t = 1, exactly 0 after
        tp = mx.theta_proj
        tp.weight.zero_()
        tp.bias.zero_()
        for n in range(N):
            tp.weight[I * N + n, n] = 1.0
        mx.D.zero_()
        mx.out_proj.weight.zero_()
        mx.out_proj.weight[out_coord, I] = 1.0 / _sil(4.0)


def _spread(points_fn, tries: int = 200, seed: int = 0):
    """Pick readout coefficients that maximise the smallest gap between the classes' readout values."""
    g = torch.Generator().manual_seed(seed)
    best, best_gap = None, -1.0
    for _ in range(tries):
        cand = torch.rand(8, generator=g).tolist()
        vals = sorted(points_fn(cand))
        gap = min(b - a for a, b in zip(vals, vals[1:])) / (vals[-1] - vals[0])
        if gap > best_gap:
            best, best_gap = cand, gap
    return best, best_gap


def _nearest_head(model, values: list[float], out_coord: int, const: int):
    """Head scores 2 phi_g s - phi_g^2 (nearest value), s the residual coordinate holding phi(prefix)."""
    with torch.no_grad():
        model.head.weight.zero_()
        model.head.bias.zero_()
        for y, v in enumerate(values):
            model.head.weight[y, out_coord] = 2 * v
            model.head.weight[y, const] = -v * v


def _abelian_components(name: str):
    """Token id -> exponent vector over the cyclic factors (Cn, V4 = C2 x C2) of a named abelian group."""
    from statetrack.algebra import get_group, parse_group_name

    canonical, factors = parse_group_name(name)
    g = get_group(canonical)
    if not g.is_abelian:
        raise UserError(f"abelian-aussm needs an abelian group, got {canonical} (not abelian)")
    radix, cyc = [], []
    for kind, n in factors:
        if kind == "C":
            radix.append(n); cyc.append([n])
        elif kind == "V":
            radix.append(4); cyc.append([2, 2])
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
        for p, cs in zip(parts, cyc):
            vec += [p] if len(cs) == 1 else [p // 2, p % 2]
        comps.append(vec)
    orders = [n for cs in cyc for n in cs]
    for x in range(g.order):  # check: the map is a homomorphism
        for y in range(g.order):
            z = int(g.mul(x, y))
            assert all((comps[x][k] + comps[y][k]) % orders[k] == comps[z][k] for k in range(len(orders)))
    return g, comps, orders


@register("abelian-aussm", "T5", "any abelian group (products of Cn and V4) with ONE AUSSM layer: one state slot "
          "per cyclic factor holds its character; lagged angles and an input-dependent readout C_t",
          default_arg="C2xC4", mixers=("aussm",))
def abelian_aussm(arg: str) -> Construction:
    g, comps, orders = _abelian_components(arg)
    K, G = len(orders), g.order
    d = max(16 * (K - 1) + 1, G + 2)
    task = f"group:{g.name}"
    model, cfg = _model(task, layers="aussm", d_model=d, d_state=K, norm="none")
    CONST, OUT = G, G + 1
    e = torch.zeros(G, d)
    for i in range(G):
        e[i, i] = 1.0
        e[i, CONST] = 1.0
    units = []
    for t in range(G):
        w = torch.zeros(d)
        w[t] = 2.0
        w[CONST] = -1.0
        units.append(w)
    angles = [[2 * math.pi * comps[t][k] / orders[k] for k in range(K)] for t in range(G)]

    def phis(cand):
        c = [complex(cand[2 * k] * 0.7 ** k, cand[2 * k + 1]) for k in range(K)]
        return [sum((c[k] * complex(math.cos(a), math.sin(a))).real for k, a in enumerate(angles[t])) for t in range(G)]

    cand, gap = _spread(phis)
    c = [complex(cand[2 * k] * 0.7 ** k, cand[2 * k + 1]) for k in range(K)]
    vals = phis(cand)
    with torch.no_grad():
        model.embed.weight.copy_(e)
        _aussm_lag_layer(model.blocks[0].mixer, units, angles, c, CONST, OUT)
        _nearest_head(model, vals, OUT, CONST)
    return Construction("abelian-aussm", model, cfg, "", "", {"characters": orders, "relative_gap": gap})


L_S3 = 3.0


@register("s3-aussm", "P3", "S3 = C3 x| C2 with TWO AUSSM layers (003, P3): layer 1 tracks the sign (angle 0 or pi), "
          "layer 2 rotates by +-2 pi/3 as layer 1's state says", mixers=("aussm",))
def s3_aussm() -> Construction:
    from statetrack.algebra import get_group

    g = get_group("S3")
    G = 6
    d = 16
    model, cfg = _model("group:S3", layers="aussm*2", d_model=d, d_state=1, norm="none")
    CONST, JC, KC = 6, 7, 8
    r = int(g.ids_of([[1, 2, 0]])[0])
    s = int(g.ids_of([[1, 0, 2]])[0])
    pw = lambda x, k: 0 if k == 0 else int(g.mul(pw(x, k - 1), x))
    KJ = {}
    for k in range(3):
        for j in range(2):
            KJ[int(g.mul(pw(r, k), pw(s, j)))] = (k, j)
    assert len(KJ) == 6
    # the increment of K when y = r^K s^J is multiplied by x on the right, as a function of (J after, x)
    inc = {}
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
    units2, ang2, sit2 = [], [], []
    for t in range(G):
        for J, sign in ((0, 1.0), (1, -1.0)):
            units2.append(unit(t, sign))
            ang2.append([2 * math.pi * inc[(J, t)] / 3])
            x = e[t].clone()
            x[JC] = sign
            sit2.append(x)
    c2 = complex(math.cos(0.4), math.sin(0.4))
    phi = [(c2 * complex(math.cos(2 * math.pi * k / 3), math.sin(2 * math.pi * k / 3))).real for k in range(3)]
    with torch.no_grad():
        model.embed.weight.copy_(e)
        # L = 3: weights of order 1 (the read-out rows solve for the leak of the off units exactly)
        _aussm_lag_layer(model.blocks[0].mixer, units1, ang1, [1.0 + 0j], CONST, JC, L=L_S3, situations=sit1)
        _aussm_lag_layer(model.blocks[1].mixer, units2, ang2, [c2], CONST, KC, L=L_S3, situations=sit2)
        model.head.weight.zero_()
        model.head.bias.zero_()
        for y in range(G):
            K0, J0 = KJ[y]
            model.head.weight[y, JC] = 10.0 * (1.0 if J0 == 0 else -1.0)
            model.head.weight[y, KC] = 2 * phi[K0]
            model.head.weight[y, CONST] = -phi[K0] ** 2
    return Construction("s3-aussm", model, cfg, "", "", {"r": r, "s": s, "phi": phi})


# -- DeltaProduct [-1, 1]: S_n with n_h = n - 1 ------------------------------------------------------------
def _silu_inv(y: float) -> float:
    """The preimage of y under silu on the branch x >= -1.2785 (y >= -0.27846)."""
    lo, hi = -1.2784645, max(1.0, y + 2.0)
    for _ in range(200):
        mid = (lo + hi) / 2
        if _sil(mid) < y:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def _transpositions(perm: list[int]) -> list[tuple[int, int]]:
    """Transpositions t_1, t_2, ... (apply t_1 first) whose composition is ``perm`` (array form)."""
    n = len(perm)
    out = []
    cur = list(range(n))  # cur = composition so far, as an array form
    target = list(perm)
    # build left to right: after applying t_1..t_k, point i sits at cur[i]; fix points one by one
    for i in range(n):
        if cur[i] != target[i]:
            j = cur.index(target[i])  # the point currently mapped to target[i]
            a, b = cur[i], cur[j]
            out.append((a, b))
            cur = [b if v == a else a if v == b else v for v in cur]
    assert cur == target, (perm, out)
    return out


@register("sn-deltaproduct", "T6", "S_n with ONE DeltaProduct layer, eigenvalues in [-1,1] and n_h = n - 1: each "
          "input is a product of <= n - 1 transpositions, each the Householder reflection I - 2 k k^T, "
          "k = (e_a - e_b)/sqrt 2, about the centre -w0 v^T", default_arg="3", mixers=("deltaproduct",))
def sn_deltaproduct(arg: str) -> Construction:
    from statetrack.algebra import get_group

    n = int(arg)
    if not 3 <= n <= 5:
        raise UserError(f"sn-deltaproduct takes n in 3..5, got {n}")
    g = get_group(f"S{n}")
    G, nh = g.order, n - 1
    d = G + 2
    CONST, OUT = G, G + 1
    model, cfg = _model(f"group:S{n}", layers=f"deltaproduct(nh={nh},neg=true,conv=0)", d_model=d, d_state=n,
                        norm="none")
    mx = model.blocks[0].mixer
    dk, dv = mx.dk, mx.dv
    sizes = mx.sizes  # [dk, nh dk, nh dv]
    # q-hat (positive) and w0 (zero sum): spread the readout q . P_y w0 over the n! classes
    perms = [g.perm(y) for y in range(G)]

    def vals_of(cand):
        q = [0.2 + c for c in cand[:n]]
        w = [c - sum(cand[n:2 * n]) / n for c in cand[n:2 * n]]
        # (P_y w0)_{y(i)} = w0_i
        return [sum(q[p[i]] * w[i] for i in range(n)) for p in perms]

    g_ = torch.Generator().manual_seed(1)
    best, gap = None, -1.0
    for _ in range(400):
        cand = torch.rand(2 * n, generator=g_).tolist()
        v = sorted(vals_of(cand))
        gg = min(b - a for a, b in zip(v, v[1:])) / (v[-1] - v[0])
        if gg > gap:
            best, gap = cand, gg
    qhat = [0.2 + c for c in best[:n]]
    qn = math.sqrt(sum(x * x for x in qhat))
    qhat = [x / qn for x in qhat]
    w0 = [c - sum(best[n:2 * n]) / n for c in best[n:2 * n]]
    v1s = 1e-5 / max(abs(x) for x in w0)  # o stays far below sqrt(eps): the output RMSNorm is linear there
    mneg = _sil(-1.2784645)
    ppos = _silu_inv(-mneg)
    with torch.no_grad():
        e = torch.zeros(G, d)
        for i in range(G):
            e[i, i] = 1.0
            e[i, CONST] = 1.0
        model.embed.weight.copy_(e)
        Wq = mx.qkv.weight  # rows: q (dk) | k (nh dk) | v (nh dv)
        Wq.zero_()
        for i in range(dk):
            Wq[i, CONST] = _silu_inv(qhat[i] * 0.25)
        mx.b_proj.weight.zero_()
        for y in range(G):
            ts = _transpositions(perms[y])
            assert len(ts) <= nh
            for j, (a, b) in enumerate(ts):
                # k = (e_a - e_b)/sqrt2 up to sign; pick the sign with k . w0 <= 0
                if w0[a] - w0[b] > 0:
                    a, b = b, a
                Wq[sizes[0] + j * dk + a, y] = ppos
                Wq[sizes[0] + j * dk + b, y] = -1.2784645
                kw = (w0[a] - w0[b]) / math.sqrt(2)
                Wq[sizes[0] + sizes[1] + j * dv + 0, y] = _silu_inv(-kw * v1s)  # v_j = -(k . w0) v1
                mx.b_proj.weight[j, y] = 30.0  # beta = 2 sigmoid(30) = 2 in float32
            for j in range(len(ts), nh):
                mx.b_proj.weight[j, y] = -30.0  # beta ~ 2e-13 and k = 0: identity
        mx.o_norm.weight.fill_(1.0)
        eps = mx.o_norm.eps or torch.finfo(torch.float32).eps  # the norm is o / sqrt(eps) in its linear regime
        mx.o_proj.weight.zero_()
        mx.o_proj.weight[OUT, 0] = math.sqrt(eps) / v1s  # residual OUT = q . (P_y w0 - w0)
        qdotw = sum(q * w for q, w in zip(qhat, w0))
        vals = [sum(qhat[p[i]] * w0[i] for i in range(n)) - qdotw for p in perms]
        _nearest_head(model, vals, OUT, CONST)
    return Construction("sn-deltaproduct", model, cfg, "", "", {"n": n, "n_h": nh, "relative_gap": gap})


# -- starting training from a construction -------------------------------------------------------------------
def _init_name(init: str) -> str:
    kind, _, name = (init or "").partition(":")
    if kind != "construction" or not name:
        raise UserError(f"bad --init {init!r}; allowed: construction:NAME with NAME from 'statetrack construct --list'")
    return name


def init_config(init: str, task: str | None = None) -> ModelConfig:
    """The ModelConfig of the construction named by ``init`` ('construction:NAME'), checking the task."""
    c = build(_init_name(init))
    if task is not None and get_task(task).name != get_task(c.config.task).name:
        raise UserError(f"construction {c.name!r} solves {c.config.task!r}, not {task!r}; allowed: --task {c.config.task}")
    return c.config.model


def init_model(cfg: TrainConfig, task=None) -> Model:
    """The construction's model with N(0, init_noise^2) added to every parameter (seeded by cfg.seed)."""
    c = build(_init_name(cfg.init))
    if cfg.model != c.config.model:
        raise UserError(f"--init {cfg.init}: the model config must be the construction's "
                        f"({c.config.model.model_dump()}), got {cfg.model.model_dump()}")
    if get_task(cfg.task).name != get_task(c.config.task).name:
        raise UserError(f"construction {c.name!r} solves {c.config.task!r}, not {cfg.task!r}")
    model = c.model
    if cfg.init_noise > 0:
        gen = torch.Generator().manual_seed(int(cfg.seed))
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * cfg.init_noise)
    model.train()
    return model
