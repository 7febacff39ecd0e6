"""Mamba (GuDao2024) and Negative Mamba (Grazzi2024), as in the minimal reference code.

x -> in_proj -> (u, z); u -> optional depthwise causal conv (kernel 4) -> silu;
Delta_t = softplus(dt_proj(W_dt u_t)), B_t = W_B u_t, C_t = W_C u_t, A = -exp(A_log) (A_log = log(1..N));
A_bar_t = exp(Delta_t A) in (0, 1]            (Mamba)
A_bar_t = 2 exp(Delta_t A) - 1 in [-1, 1]     (Negative Mamba, option neg=true; -1 and 1 only where float32 rounds
                                               the exponential to 0 or 1: Properties.rounding)
h_t = A_bar_t h_{t-1} + Delta_t B_t u_t;  y_t = (C_t h_t + D u_t) * silu(z_t) -> out_proj.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.layers.base import (
    MambaInput,
    Mixer,
    check_conv,
    check_expand,
    init_dt_bias,
)
from statetrack.ops import mamba_scan
from statetrack.ops.mamba.reference import mamba_transition
from statetrack.ops.mamba.scan import mamba_scan_gated

#: (h [B, E, N], the convolution's history [B, E, conv - 1])
MambaState = tuple[Tensor, Tensor]


class Mamba(MambaInput, Mixer):
    """Mamba's selective diagonal SSM; Negative Mamba's transition with ``neg``.

    Args:
        d_model (int):
            D, the width of the input and the output.
        d_state (int):
            N, the state size per inner channel.
        conv (int):
            The kernel size of the depthwise causal convolution on the input branch u (0 to 64); 0: no
            convolution. Default: 4.
        expand (int):
            The inner width E = expand * d_model (1 to 16). Default: 2.
        neg (bool):
            A_bar = 2 exp(Delta A) - 1 in [-1, 1] (Negative Mamba) instead of exp(Delta A) in (0, 1].
            Default: False.
        dt_min (float), dt_max (float):
            The range in which the initial step Delta = softplus(bias) is log-uniform
            (0 < dt_min <= dt_max). Defaults: 1e-3, 1e-1.

    The state is (h [B, E, N], the convolution's history [B, E, conv - 1]).
    """

    name = "mamba"

    def __init__(
        self,
        d_model: int,
        d_state: int,
        conv: int = 4,
        expand: int = 2,
        neg: bool = False,
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
    ) -> None:
        super().__init__(d_model, d_state)
        check_conv(self.name, conv)
        check_expand(self.name, expand)
        self.neg = bool(neg)
        E, N = expand * d_model, d_state
        R = math.ceil(d_model / 16)
        self._init_input(d_model, E, conv)
        self.x_proj = nn.Linear(E, R + 2 * N, bias=False)
        self.dt_proj = nn.Linear(R, E)
        init_dt_bias(self.name, self.dt_proj, dt_min, dt_max)
        self.A_log = nn.Parameter(
            torch.log(torch.arange(1, N + 1, dtype=torch.get_default_dtype())).repeat(E, 1)
        )
        self.D = nn.Parameter(torch.ones(E))
        self.out_proj = nn.Linear(E, d_model, bias=False)
        self.R = R

    def activation_bytes(self) -> int:
        # without gradients the scan keeps no (T, E, N) tensor (a ring of states); the per-step tensors
        # are the projections: u, z (2E), conv, Delta, B and C, y
        return 4 * (8 * self.d_inner + 4 * self.d_state)

    def init_state(
        self, batch: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> MambaState:
        """Zeros: (h [batch, E, N], the convolution's history [batch, E, conv - 1])."""
        h = torch.zeros(batch, self.d_inner, self.d_state, device=device, dtype=dtype)
        return (h, self._conv_state(batch, device, dtype))

    def _dt_bc(self, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """u (..., E) after conv and silu -> (Delta, B, C)."""
        dt_raw, Bm, Cm = self.x_proj(u).split([self.R, self.d_state, self.d_state], dim=-1)
        return F.softplus(self.dt_proj(dt_raw)), Bm, Cm

    def _transition(self, u: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """u (..., E) after conv and silu -> (A_bar, Delta, B, C)."""
        dt, Bm, Cm = self._dt_bc(u)
        return mamba_transition(dt, -torch.exp(self.A_log), self.neg), dt, Bm, Cm

    def forward(self, x: Tensor, state: MambaState | None = None) -> tuple[Tensor, MambaState]:
        """The training path: the selective scan over the sequence.

        Args:
            x (Tensor): [B, T, D] the input.
            state (tuple[Tensor, Tensor], optional): (h [B, E, N], the convolution's history
                [B, E, conv - 1]) before x; None: zeros.

        Returns:
            (Tensor, tuple[Tensor, Tensor]): the output [B, T, D] and the state after x.
        """
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        h0, buf = state
        u, z, buf = self._pre(x, buf, chunk=True)
        dt, Bm, Cm = self._dt_bc(u)
        if not torch.is_grad_enabled():  # evaluation: the skip term and the gate in the scan's pass
            y, h = mamba_scan_gated(dt, -torch.exp(self.A_log), u, Bm, Cm, h0, self.neg, self.D, F.silu(z))
            return self.out_proj(y), (h, buf)
        # h_t = A_bar_t h_{t-1} + (dt_t u_t) (outer) B_t, y_t = h_t C_t; A_bar_t computed inside the scan
        y, h = mamba_scan(dt, -torch.exp(self.A_log), u, Bm, Cm, h0, neg=self.neg)
        y = y + self.D * u
        return self.out_proj(y * F.silu(z)), (h, buf)

    def step(self, x: Tensor, state: MambaState) -> tuple[Tensor, MambaState]:
        """One token.

        Args:
            x (Tensor): [B, D] the input at one step.
            state (tuple[Tensor, Tensor]): (h [B, E, N], the convolution's history [B, E, conv - 1]).

        Returns:
            (Tensor, tuple[Tensor, Tensor]): the output [B, D] and the state after x.
        """
        h, buf = state
        u, z, buf = self._pre(x, buf, chunk=False)
        dA, dt, Bm, Cm = self._transition(u)
        h = dA * h + (dt * u).unsqueeze(-1) * Bm.unsqueeze(-2)
        y = (h * Cm.unsqueeze(-2)).sum(-1) + self.D * u
        return self.out_proj(y * F.silu(z)), (h, buf)

    def eigenvalues(self, x: Tensor) -> Tensor:
        """Eigenvalues of A_bar(x_t) for the inputs x [B, T, D], conv history from zeros: [B, T, E * N]
        complex."""
        h0, buf = self.init_state(x.shape[0], x.device, x.dtype)
        u, _, _ = self._pre(x, buf, chunk=True)
        dA = self._transition(u)[0]
        return dA.flatten(-2).to(dA.dtype.to_complex())


class NegativeMamba(Mamba):
    """Negative Mamba (Grazzi2024): :class:`Mamba` with ``neg=True`` for good; the same options less ``neg``.

    Args:
        d_model (int): D, the width of the input and the output.
        d_state (int): N, the state size per inner channel.
        **kw: ``conv``, ``expand``, ``dt_min``, ``dt_max`` as in :class:`Mamba`.
    """

    name = "negmamba"
    fixed_options = {"neg": True}

    def __init__(self, d_model: int, d_state: int, **kw: Any) -> None:
        super().__init__(d_model, d_state, **kw, **self.fixed_options)
