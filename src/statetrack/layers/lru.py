"""The Linear Recurrent Unit (Orvieto2023, LRU): an input-independent complex diagonal recurrence.

N = d_state complex modes per layer (shared by the channels: a dense B and C mix them)::

    lambda_n = exp(-exp(nu_n) + i exp(theta_n))          (|lambda| < 1, fixed after training)
    h_t = diag(lambda) h_{t-1} + gamma (.) (B x_t)         y_t = Re(C h_t) + D (.) x_t

B (N, d_model) and C (d_model, N) complex, gamma_n = sqrt(1 - |lambda_n|^2) the paper's normalisation
(learned, as log gamma, from that value). Initialisation as in the paper: |lambda| uniform on the ring
r_min <= |lambda| <= r_max (uniform in area), phases uniform in [0, max_phase]; B and C Glorot-like
complex normals. Time-invariant: A does not depend on x. Recurrence: ``ops.diag_scan``
(multiply-add loop or chunked scan, with its own backward). State: h (B, N) complex.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from statetrack.errors import UserError
from statetrack.layers.base import Mixer
from statetrack.ops import diag_scan, polar


class LRU(Mixer):
    """The Linear Recurrent Unit: N complex modes lambda_n, fixed after training, mixed by dense B and C.

    Args:
        d_model (int):
            D, the width of the input and the output.
        d_state (int):
            N, the number of complex modes (shared by the channels).
        r_min (float), r_max (float):
            The ring on which |lambda| is drawn uniformly in area at initialisation
            (0 <= r_min < r_max < 1). Defaults: 0.9, 0.999.
        max_phase (float):
            The phases are drawn uniformly in [0, max_phase] (> 0). Default: 2 pi.

    The state is h [B, N] complex.
    """

    name = "lru"

    def __init__(
        self,
        d_model: int,
        d_state: int,
        r_min: float = 0.9,
        r_max: float = 0.999,
        max_phase: float = 2 * math.pi,
    ) -> None:
        super().__init__(d_model, d_state)
        if not 0 <= r_min < r_max < 1:
            raise UserError(f"{self.name} needs 0 <= r_min < r_max < 1, got r_min={r_min}, r_max={r_max}")
        if not max_phase > 0:
            raise UserError(f"{self.name} max_phase={max_phase} must be > 0")
        N, d = d_state, d_model
        u1, u2 = torch.rand(N), torch.rand(N)
        nu = torch.log(-0.5 * torch.log(u1 * (r_max**2 - r_min**2) + r_min**2))
        theta = torch.log(max_phase * u2)
        self.nu_log, self.theta_log = nn.Parameter(nu), nn.Parameter(theta)
        mod = torch.exp(-torch.exp(nu))
        self.gamma_log = nn.Parameter(torch.log(torch.sqrt(1 - mod**2)))
        self.B_re = nn.Parameter(torch.randn(N, d) / math.sqrt(2 * d))
        self.B_im = nn.Parameter(torch.randn(N, d) / math.sqrt(2 * d))
        self.C_re = nn.Parameter(torch.randn(d, N) / math.sqrt(N))
        self.C_im = nn.Parameter(torch.randn(d, N) / math.sqrt(N))
        self.D = nn.Parameter(torch.randn(d))

    def activation_bytes(self) -> int:
        return 8 * 3 * self.d_state + 4 * 4 * self.d_model

    def init_state(
        self, batch: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> Tensor:
        """Zeros: h [batch, N] complex (of ``dtype``'s complex counterpart)."""
        dtype = dtype or self.D.dtype
        return torch.zeros(batch, self.d_state, device=device, dtype=dtype.to_complex())

    def lam(self) -> Tensor:
        """The N eigenvalues lambda_n, complex."""
        return polar(torch.exp(-torch.exp(self.nu_log)), torch.exp(self.theta_log))

    def _input(self, x: Tensor) -> Tensor:
        """gamma (.) (B x): (..., d) -> (..., N) complex."""
        g = torch.exp(self.gamma_log)
        return torch.complex((x @ self.B_re.T) * g, (x @ self.B_im.T) * g)

    def _out(self, h: Tensor, x: Tensor) -> Tensor:
        """h (..., N) complex and the input x (..., D) -> Re(C h) + D (.) x (..., D)."""
        return h.real @ self.C_re.T - h.imag @ self.C_im.T + self.D * x

    def forward(self, x: Tensor, state: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """The training path: the diagonal scan over the sequence (``ops.diag_scan``).

        Args:
            x (Tensor): [B, T, D] the input.
            state (Tensor, optional): h [B, N] complex before x; None: zeros.

        Returns:
            (Tensor, Tensor): the output [B, T, D] and the state after x.
        """
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        b = self._input(x)
        h = diag_scan(self.lam().expand_as(b), b, state)
        return self._out(h, x), h[:, -1]

    def step(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        """One token.

        Args:
            x (Tensor): [B, D] the input at one step.
            state (Tensor): h [B, N] complex.

        Returns:
            (Tensor, Tensor): the output [B, D] and the state after x.
        """
        h = self.lam() * state + self._input(x)
        return self._out(h, x), h

    def eigenvalues(self, x: Tensor) -> Tensor:
        """lambda, the same at every step, for the inputs x [B, T, D]: [B, T, N] complex."""
        return self.lam().expand(*x.shape[:2], self.d_state)
