"""Mamba-2 (DaoGu2024): Mamba with one scalar transition per head, A(x_t) = a_t I.

x -> in_proj -> (z, x, B, C, dt); (x, B, C) -> optional depthwise causal conv (kernel 4) -> silu;
Delta_t = softplus(dt_t + dt_bias) per head (dt_bias: Mamba's log-uniform init in [dt_min, dt_max]),
A_h = -exp(A_log_h) with A_h drawn uniformly in [1, 16] (the reference init); per head h with
P = ``headdim`` channels and state (P, N), one group of B and C shared by the heads::

    a_t = exp(Delta_t A_h) in (0, 1]          (neg=true: 2 exp(Delta_t A_h) - 1 in [-1, 1], as Grazzi2024
                                               extend Mamba; the same map as ``negmamba``)
    h_t = a_t h_{t-1} + Delta_t x_t B_t^T       y_t = h_t C_t + D_h x_t

then y -> RMSNorm(y * silu(z)) (the gated norm of the reference code) -> out_proj. Recurrence:
``ops.ssd.scan``. State: (h (B, H, P, N), conv buffer (B, E + 2N, conv - 1)).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.errors import UserError
from statetrack.layers.base import (
    Mixer,
    causal_conv_step,
    check_conv,
    check_expand,
    dt_bias_init,
)
from statetrack.ops import causal_conv
from statetrack.ops.mamba.reference import mamba_transition
from statetrack.ops.ssd.scan import ssd_scan

#: the reference code's range for -A at initialisation
A_INIT = (1.0, 16.0)

#: (h [B, H, P, N], the convolution's history [B, E + 2N, conv - 1])
Mamba2State = tuple[Tensor, Tensor]


class Mamba2(Mixer):
    """Mamba-2: a scalar transition a_t I per head, the gated RMSNorm on the output.

    Args:
        d_model (int):
            D, the width of the input and the output.
        d_state (int):
            N, the state size per channel (one group of B and C, shared by the heads).
        conv (int):
            The kernel size of the depthwise causal convolution on (x, B, C) (0 to 64); 0: no
            convolution. Default: 4.
        expand (int):
            The inner width E = expand * d_model (1 to 16). Default: 2.
        headdim (int):
            P, the channels per head; it must divide E, and H = E / P heads. Default: 8.
        neg (bool):
            a_t = 2 exp(Delta_t A_h) - 1 in [-1, 1] instead of exp(Delta_t A_h) in (0, 1]. Default: False.
        dt_min (float), dt_max (float):
            The range in which the initial step Delta = softplus(dt_bias) is log-uniform
            (0 < dt_min <= dt_max). Defaults: 1e-3, 1e-1.

    The state is (h [B, H, P, N], the convolution's history [B, E + 2N, conv - 1]).
    """

    name = "mamba2"

    def __init__(
        self,
        d_model: int,
        d_state: int,
        conv: int = 4,
        expand: int = 2,
        headdim: int = 8,
        neg: bool = False,
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
    ) -> None:
        super().__init__(d_model, d_state)
        check_conv(self.name, conv)
        check_expand(self.name, expand)
        E, N = expand * d_model, d_state
        if headdim < 1 or E % headdim:
            raise UserError(f"{self.name} headdim={headdim} must be >= 1 and divide expand * d_model = {E}")
        self.neg, self.k, self.d_inner, self.P, self.H = bool(neg), conv, E, headdim, E // headdim
        H = self.H
        self.sizes = [E, E, N, N, H]  # z, x, B, C, dt
        self.in_proj = nn.Linear(d_model, sum(self.sizes), bias=False)
        self.conv = nn.Conv1d(E + 2 * N, E + 2 * N, conv, groups=E + 2 * N) if conv > 0 else None
        self.dt_bias = nn.Parameter(dt_bias_init(self.name, H, dt_min, dt_max))
        self.A_log = nn.Parameter(torch.log(torch.empty(H).uniform_(*A_INIT)))
        self.D = nn.Parameter(torch.ones(H))
        self.norm = nn.RMSNorm(E, eps=1e-5)
        self.out_proj = nn.Linear(E, d_model, bias=False)

    def activation_bytes(self) -> int:
        return 4 * (10 * self.d_inner + 6 * self.d_state)

    def init_state(
        self, batch: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> Mamba2State:
        """Zeros: (h [batch, H, P, N], the convolution's history [batch, E + 2N, conv - 1])."""
        dtype = dtype or self.D.dtype
        h = torch.zeros(batch, self.H, self.P, self.d_state, device=device, dtype=dtype)
        buf = torch.zeros(
            batch, self.d_inner + 2 * self.d_state, max(self.k - 1, 0), device=device, dtype=dtype
        )
        return (h, buf)

    def _pre(
        self, x: Tensor, buf: Tensor, chunk: bool
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """x (..., d_model) -> z, x (..., H, P), B, C (..., N), Delta (..., H), buf."""
        z, xbc, dt = self.in_proj(x).split([self.d_inner, self.d_inner + 2 * self.d_state, self.H], dim=-1)
        if self.conv is not None:
            xbc, buf = (causal_conv if chunk else causal_conv_step)(self.conv, xbc, buf)
        xs, Bm, Cm = F.silu(xbc).split([self.d_inner, self.d_state, self.d_state], dim=-1)
        return z, xs.unflatten(-1, (self.H, self.P)), Bm, Cm, F.softplus(dt + self.dt_bias), buf

    def _out(self, y: Tensor, xs: Tensor, z: Tensor) -> Tensor:
        """y, xs (..., H, P), z (..., E) -> the output (..., D)."""
        y = (y + self.D[:, None] * xs).flatten(-2)
        return self.out_proj(self.norm(y * F.silu(z)))

    def forward(self, x: Tensor, state: Mamba2State | None = None) -> tuple[Tensor, Mamba2State]:
        """The training path: the scan over the sequence (``ops.ssd.scan``).

        Args:
            x (Tensor): [B, T, D] the input.
            state (tuple[Tensor, Tensor], optional): (h [B, H, P, N], the convolution's history
                [B, E + 2N, conv - 1]) before x; None: zeros.

        Returns:
            (Tensor, tuple[Tensor, Tensor]): the output [B, T, D] and the state after x.
        """
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        h, buf = state
        z, xs, Bm, Cm, dt, buf = self._pre(x, buf, chunk=True)
        y, h = ssd_scan(dt, -torch.exp(self.A_log), xs, Bm, Cm, h, neg=self.neg)
        return self._out(y, xs, z), (h, buf)

    def step(self, x: Tensor, state: Mamba2State) -> tuple[Tensor, Mamba2State]:
        """One token.

        Args:
            x (Tensor): [B, D] the input at one step.
            state (tuple[Tensor, Tensor]): (h [B, H, P, N], the convolution's history [B, E + 2N, conv - 1]).

        Returns:
            (Tensor, tuple[Tensor, Tensor]): the output [B, D] and the state after x.
        """
        h, buf = state
        z, xs, Bm, Cm, dt, buf = self._pre(x, buf, chunk=False)
        a = mamba_transition(dt, -torch.exp(self.A_log).unsqueeze(-1), self.neg)  # (B, H, 1)
        h = a.unsqueeze(-1) * h + (dt.unsqueeze(-1) * xs).unsqueeze(-1) * Bm[:, None, None, :]
        y = (h * Cm[:, None, None, :]).sum(-1)
        return self._out(y, xs, z), (h, buf)

    def eigenvalues(self, x: Tensor) -> Tensor:
        """a_t per head (the scalar of a_t I) for the inputs x [B, T, D]: [B, T, H] complex."""
        _, buf = self.init_state(x.shape[0], x.device, x.dtype)
        _, _, _, _, dt, _ = self._pre(x, buf, chunk=True)
        a = mamba_transition(dt, -torch.exp(self.A_log).unsqueeze(-1), self.neg).squeeze(-1)  # (B, T, H)
        return a.to(a.dtype.to_complex())
