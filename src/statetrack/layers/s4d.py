"""S4D (Gu2022): a time-invariant diagonal SSM, one per channel.

Per channel, continuous A = diag(a_n) with Re(a_n) < 0, learnable step Delta (log-uniform init in
[dt_min, dt_max]), B = 1 (folded into C), complex C. With N = d_state real numbers of state there are
N/2 complex modes and the output is y = 2 Re(C h) + D x, then GELU and a gated (GLU) output linear,
as in the S4D reference code.

Options: init = lin (a_n = -1/2 + i pi n) | inv (S4D-Inv) | real (a_n = -(n+1), no imaginary part);
disc = zoh | bilinear.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.errors import UserError
from statetrack.layers.base import (
    Mixer,
    log_uniform_dt,
)
from statetrack.ops import diag_scan


class S4D(Mixer):
    name = "s4d"

    def __init__(self, d_model, d_state, init="lin", disc="zoh", dt_min=1e-3, dt_max=1e-1):
        super().__init__(d_model, d_state)
        if init not in ("lin", "inv", "real"):
            raise UserError(f"unknown s4d init {init!r}; allowed: inv, lin, real")
        if disc not in ("zoh", "bilinear"):
            raise UserError(f"unknown s4d disc {disc!r}; allowed: bilinear, zoh")
        self.init, self.disc = init, disc
        H, M = d_model, max(1, d_state // 2)
        self.n_modes = M
        n = torch.arange(M, dtype=torch.get_default_dtype())
        if init == "lin":
            re, im = torch.full((M,), 0.5), math.pi * n
        elif init == "inv":
            N = 2 * M
            re, im = torch.full((M,), 0.5), N / math.pi * (N / (2 * n + 1) - 1)
        else:
            re, im = n + 1, torch.zeros(M)
        self.log_A_real = nn.Parameter(torch.log(re).repeat(H, 1))
        if init == "real":
            self.register_buffer("A_imag", im.repeat(H, 1))
        else:
            self.A_imag = nn.Parameter(im.repeat(H, 1))
        self.log_dt = nn.Parameter(log_uniform_dt(self.name, H, dt_min, dt_max))
        # C is complex; kept as two real parameters so every optimiser, dtype cast and file format sees reals
        self.C_re = nn.Parameter(torch.randn(H, M) * 0.5**0.5)
        self.C_im = nn.Parameter(torch.randn(H, M) * 0.5**0.5)
        self.D = nn.Parameter(torch.randn(H))
        self.out = nn.Linear(H, 2 * H)

    def discrete(self) -> tuple[Tensor, Tensor]:
        """(A_bar, B_bar), each (H, M) complex."""
        A = torch.complex(-torch.exp(self.log_A_real), self.A_imag)
        dtA = A * torch.exp(self.log_dt)[:, None]
        if self.disc == "zoh":
            dA = torch.exp(dtA)
            dB = (dA - 1) / A
        else:
            dA = (1 + dtA / 2) / (1 - dtA / 2)
            dB = torch.exp(self.log_dt)[:, None] / (1 - dtA / 2)
        return dA, dB

    def activation_bytes(self):
        # the input term and the states (T, H, M) complex64, their readout, and the GLU output (2H)
        return 8 * 3 * self.d_model * self.n_modes + 4 * 6 * self.d_model

    def init_state(self, batch, device=None, dtype=None):
        dtype = dtype or self.log_dt.dtype
        return torch.zeros(batch, self.d_model, self.n_modes, device=device, dtype=dtype.to_complex())

    def _readout(self, h, x):
        y = 2 * (h * torch.complex(self.C_re, self.C_im)).sum(-1).real + self.D * x
        return F.glu(self.out(F.gelu(y)), dim=-1)

    def forward(self, x, state=None):
        B, T, H = x.shape
        if state is None:
            state = self.init_state(B, x.device, x.dtype)
        dA, dB = self.discrete()
        a = dA.to(state.dtype).expand(B, T, H, self.n_modes)
        b = dB.to(state.dtype) * x.unsqueeze(-1)
        h = diag_scan(a, b, state)
        return self._readout(h, x), h[:, -1]

    def step(self, x, state):
        dA, dB = self.discrete()
        h = dA.to(state.dtype) * state + dB.to(state.dtype) * x.unsqueeze(-1)
        return self._readout(h, x), h

    def eigenvalues(self, x):
        dA, _ = self.discrete()
        B, T, _ = x.shape
        return dA.reshape(-1).expand(B, T, -1)
