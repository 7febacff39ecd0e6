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
from typing import Literal

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
    """S4D: a time-invariant diagonal SSM per channel, GELU and a GLU output linear.

    Args:
        d_model (int):
            D, the width of the input and the output: D independent SSMs.
        d_state (int):
            N, the real state size per channel: M = max(1, N // 2) complex modes.
        init (str):
            The continuous eigenvalues a_n: ``lin`` (S4D-Lin, -1/2 + i pi n), ``inv`` (S4D-Inv) or ``real``
            (-(n + 1), no imaginary part, which stays 0). Default: ``lin``.
        disc (str):
            The discretisation: ``zoh`` (A_bar = exp(Delta a)) or ``bilinear``
            (A_bar = (1 + Delta a/2) / (1 - Delta a/2)). Default: ``zoh``.
        dt_min (float), dt_max (float):
            The range in which the initial step Delta is log-uniform, per channel
            (0 < dt_min <= dt_max). Defaults: 1e-3, 1e-1.

    The state is h [B, D, M] complex.
    """

    name = "s4d"
    A_imag: Tensor  # a Parameter, or a buffer of zeros for init=real

    def __init__(
        self,
        d_model: int,
        d_state: int,
        init: Literal["lin", "inv", "real"] = "lin",
        disc: Literal["zoh", "bilinear"] = "zoh",
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
    ) -> None:
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

    def activation_bytes(self) -> int:
        # the input term and the states (T, H, M) complex64, their readout, and the GLU output (2H)
        return 8 * 3 * self.d_model * self.n_modes + 4 * 6 * self.d_model

    def init_state(
        self, batch: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> Tensor:
        """Zeros: h [batch, D, M] complex (of ``dtype``'s complex counterpart)."""
        dtype = dtype or self.log_dt.dtype
        return torch.zeros(batch, self.d_model, self.n_modes, device=device, dtype=dtype.to_complex())

    def _readout(self, h: Tensor, x: Tensor) -> Tensor:
        """h (..., D, M) complex and the input x (..., D) -> the output (..., D)."""
        y = 2 * (h * torch.complex(self.C_re, self.C_im)).sum(-1).real + self.D * x
        return F.glu(self.out(F.gelu(y)), dim=-1)

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The training path: the diagonal scan over the sequence (``ops.diag_scan``).

        Args:
            x (Tensor): [B, T, D] the input.
            state (Tensor, optional): h [B, D, M] complex before x; None: zeros.

        Returns:
            (Tensor, Tensor): the output [B, T, D] and the state after x.
        """
        B, T, H = x.shape
        if state is None:
            state = self.init_state(B, x.device, x.dtype)
        dA, dB = self.discrete()
        a = dA.to(state.dtype).expand(B, T, H, self.n_modes)
        b = dB.to(state.dtype) * x.unsqueeze(-1)
        h = diag_scan(a, b, state)
        return self._readout(h, x), h[:, -1]

    def step(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        """One token.

        Args:
            x (Tensor): [B, D] the input at one step.
            state (Tensor): h [B, D, M] complex.

        Returns:
            (Tensor, Tensor): the output [B, D] and the state after x.
        """
        dA, dB = self.discrete()
        h = dA.to(state.dtype) * state + dB.to(state.dtype) * x.unsqueeze(-1)
        return self._readout(h, x), h

    def eigenvalues(self, x: Tensor) -> Tensor:
        """A_bar, the same at every step, for inputs x [B, T, D]: [B, T, D * M] complex."""
        dA, _ = self.discrete()
        B, T, _ = x.shape
        return dA.reshape(-1).expand(B, T, -1)
