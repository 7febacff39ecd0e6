"""S4D constructions: counting mod m (P1) and offset prediction (P2) with one time-invariant layer."""

from __future__ import annotations

import math

import torch

from statetrack.constructions.base import Construction, blank_model, layer_input, register
from statetrack.errors import UserError
from statetrack.layers.s4d import S4D


def _s4d_rotation(mixer: S4D, channel: int, angle: float) -> None:
    with torch.no_grad():
        mixer.log_A_real[channel].fill_(-60.0)  # Re A = -exp(-60): |A_bar| = 1 in float32
        mixer.A_imag[channel].fill_(angle)
        mixer.log_dt[channel] = 0.0  # Delta = 1


@register(
    "modcount-s4d",
    "P1",
    "counting mod m with ONE S4D layer (Khavari2025 Prop. 4.2): A = exp(2 pi i/m); "
    "the state starts at 0, so the input term B x puts the orbit on the circle through 0 centred at B x/(1 - A)",
    default_arg="3",
    mixers=("s4d",),
)
def modcount_s4d(arg: str) -> Construction:
    m = int(arg)
    if m < 2:
        raise UserError(f"modcount-s4d needs m >= 2, got {m}")
    task = f"modcount:{m}"
    model, cfg = blank_model(task, layers="s4d", d_model=3, d_state=2)
    mx = model.mixer(0, S4D)
    with torch.no_grad():
        # token 1 (the only one that occurs) -> (1, 1, 1); channels 0 and 1 rotate, channel 2 is a constant
        model.embed.weight.copy_(torch.tensor([[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]]))
        for c in range(2):
            _s4d_rotation(mx, c, 2 * math.pi / m)
        mx.log_A_real[2].fill_(5.0)  # channel 2 decays at once: A_bar = exp(-e^5) = 0, h = B x
        x = layer_input(model, 0, model.embed.weight[1])
        dA, dB = mx.discrete()
        hstar = (dB[0, 0] * x[0] / (1 - dA[0, 0])).to(
            torch.complex128
        )  # fixed point of channel 0 (= channel 1)
        scale = 1.0 / (2 * abs(hstar))  # readouts of size <= 1
        # y_c = 2 Re(C h) + D x: channel 0 -> Re(h) * 2 scale... offset 10 keeps GELU linear
        mx.C_re.zero_()
        mx.C_im.zero_()
        mx.C_re[0, 0] = scale
        mx.C_im[1, 0] = -scale  # 2 Re(-i s h) = 2 s Im h
        mx.D.zero_()
        mx.D[0] = 10.0 / float(x[0])
        mx.D[1] = 10.0 / float(x[1])
        out = mx.out  # Linear(H, 2H) -> GLU(a, b) = a * sigmoid(b)
        out.weight.zero_()
        out.bias.zero_()
        H = mx.d_model
        out.weight[0, 0] = 1.0
        out.weight[1, 1] = 1.0
        # a_c = gelu(y_c) - 10 - 2 scale * (Re, Im) hstar - embedding: the residual is 2 scale (h - h*)
        e = model.embed.weight[1]
        out.bias[0] = -10.0 - 2 * scale * float(hstar.real) - float(e[0])
        out.bias[1] = -10.0 - 2 * scale * float(hstar.imag) - float(e[1])
        out.bias[H : 2 * H] = 30.0  # gates open
        # residual r = (2 s Re(h - h*), 2 s Im(h - h*), 1); h_t - h* = -h* A^t, label t mod m
        om = complex(math.cos(2 * math.pi / m), math.sin(2 * math.pi / m))
        for k in range(m):
            v = -complex(hstar) * om**k
            v /= abs(v)
            model.head.weight[k] = torch.tensor([v.real, v.imag, 0.0])
        model.head.bias.zero_()
    return Construction(
        "modcount-s4d", model, cfg, "", "", {"m": m, "h_star": [hstar.real.item(), hstar.imag.item()]}
    )


@register(
    "offset-s4d",
    "P2",
    "offset prediction with ONE S4D layer (Khavari2025 App. C): the counting channel "
    "rotates by 2 pi/10 on each 1 around its fixed point and rests at 0 on 0s",
    mixers=("s4d",),
)
def offset_s4d() -> Construction:
    n = 10
    model, cfg = blank_model("offset", layers="s4d", d_model=3, d_state=2)
    mx = model.mixer(0, S4D)
    with torch.no_grad():
        # token 0 -> (1, 0, 0); token 1 -> (0, 1, 1); channel 2 counts (input 0 on token 0: h stays 0)
        model.embed.weight.copy_(torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 1.0]]))
        _s4d_rotation(mx, 2, 2 * math.pi / n)
        for c in range(2):
            mx.log_A_real[c].fill_(5.0)
        x1 = layer_input(model, 0, model.embed.weight[1])
        dA, dB = mx.discrete()
        hstar = complex((dB[2, 0] * x1[2] / (1 - dA[2, 0])).to(torch.complex128))  # orbit h_k = h*(1 - A^k)
        nvec = hstar / abs(hstar)  # inward normal at 0
        kappa = 2.0 / abs(hstar)
        # 2 Re(C h) = kappa <n, h> = kappa |h*| (1 - cos(2 pi k/n)) in [0, 4]
        mx.C_re.zero_()
        mx.C_im.zero_()
        mx.C_re[2, 0] = kappa * nvec.real / 2
        mx.C_im[2, 0] = kappa * nvec.imag / 2  # Re((a+ib)(x+iy)) = ax - by: use conj(n)
        mx.C_im[2, 0] *= -1
        mx.D.zero_()
        mx.D[2] = 10.0 / float(x1[2])  # token 1: y = 10 + g (linear GELU); token 0: y = 0, gelu(0) = 0
        out = mx.out
        out.weight.zero_()
        out.bias.zero_()
        H = mx.d_model
        out.weight[2, 2] = 1.0
        out.bias[H : 2 * H] = 30.0
        # residual: token 0 -> (1, 0, 0); token 1 -> (0, 1, 1 + 10 + g). score = g - tau on token 1, < 0 on token 0
        tau = 2.0 * (1 - math.cos(2 * math.pi / n)) / 2  # half the smallest non-zero g
        model.head.weight.zero_()
        model.head.weight[1] = torch.tensor([-1.0, -(11.0 + tau), 1.0]) / 2
        model.head.weight[0] = -model.head.weight[1]
        model.head.bias.zero_()
    return Construction("offset-s4d", model, cfg, "", "", {"n": n, "tau": tau})
