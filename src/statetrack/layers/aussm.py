"""Complex diagonal selective SSMs: AUSSM, Simple AUSSM and the general complex-disc class (DCD).

All three share Mamba's block: x -> in_proj -> (u, z); u -> optional depthwise causal conv -> silu;
a low-rank projection of u (rank R = ceil(d_model / 16), as Mamba's Delta) drives the transition;
B_t = W_B u_t (real), C_t = W_C u_t (complex: two real projections); per channel e and state n

    h_t = A_bar_t * h_{t-1} + b_t      (complex state, E x N per sequence)
    y_t = Re(sum_n C_t,n h_t,n) + D u_t,  gated by silu(z_t), then out_proj.

* ``aussm`` (Karuvally2025, public code's form): A_bar_t = exp(i theta_t), theta_t = W_A u_t + b_A,
  b_A ~ U(-pi, pi); |A_bar| = 1 exactly; b_t = B_t u_t. W_A is low rank (E -> R -> E*N).
* ``saussm`` ("Simple AUSSM"): theta_t = Delta_t * Lambda, Delta_t = softplus(dt_proj(.)) per channel as in
  Mamba, Lambda (E, N) a learned constant (init pi * (n + 1), the spacing of S4D-Lin's imaginary parts);
  b_t = Delta_t B_t u_t.
* ``dcd``: A_bar_t = r_t exp(i theta_t) with r_t = exp(-Delta_t exp(A_log)) in (0, 1] (Mamba's magnitude,
  A_log = log(1..N)) and theta_t = W_A u_t + b_A (AUSSM's angle); b_t = Delta_t B_t u_t.

The angle is kept: A_bar_t is built per step from theta_t (``ops.unit_phase``), never as a product of
rounded unit numbers.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from statetrack.layers.base import (
    MambaInput,
    Mixer,
    check_conv,
    check_expand,
    init_dt_bias,
)
from statetrack.ops import polar, selective_scan, unit_phase
from statetrack.ops.mamba import mamba_transition


class _ComplexSelective(MambaInput, Mixer):
    """Shared block; subclasses define ``_ab(u, low) -> (A_bar complex (..., E, N), input scale (..., E))``."""

    uses_dt = False
    uses_theta = False

    def __init__(self, d_model, d_state, conv=4, expand=2, dt_min=1e-3, dt_max=1e-1):
        super().__init__(d_model, d_state)
        check_conv(self.name, conv)
        check_expand(self.name, expand)
        E, N = expand * d_model, d_state
        self.R = R = math.ceil(d_model / 16)
        n_low = R * (int(self.uses_dt) + int(self.uses_theta))
        self._init_input(d_model, E, conv)
        self.x_proj = nn.Linear(E, n_low + 3 * N, bias=False)  # [low-rank | B | C_re | C_im]
        self.n_low = n_low
        if self.uses_dt:
            self.dt_proj = nn.Linear(R, E)
            init_dt_bias(self.name, self.dt_proj, dt_min, dt_max)
        if self.uses_theta:
            self.theta_proj = nn.Linear(R, E * N)  # W_A (low rank), bias b_A
            with torch.no_grad():
                self.theta_proj.bias.uniform_(-math.pi, math.pi)
        self.D = nn.Parameter(torch.ones(E))
        self.out_proj = nn.Linear(E, d_model, bias=False)

    def activation_bytes(self):
        # A_bar and h (T, E, N) complex64, the angle (and modulus) before them, and the projections
        return 8 * 3 * self.d_inner * self.d_state + 4 * (8 * self.d_inner + 4 * self.d_state)

    def init_state(self, batch, device=None, dtype=None):
        dtype = dtype or self.D.dtype
        h = torch.zeros(batch, self.d_inner, self.d_state, device=device, dtype=dtype.to_complex())
        return (h, self._conv_state(batch, device, dtype))

    def _split(self, u):
        low, Bm, Cr, Ci = self.x_proj(u).split([self.n_low, self.d_state, self.d_state, self.d_state], dim=-1)
        return low, Bm, torch.complex(Cr, Ci)

    def _dt(self, low):
        return F.softplus(self.dt_proj(low[..., : self.R]))

    def _theta(self, low):
        E, N = self.d_inner, self.d_state
        return self.theta_proj(low[..., low.shape[-1] - self.R :]).unflatten(-1, (E, N))

    def _ab(self, low):
        raise NotImplementedError

    def _terms(self, u):
        """-> A_bar (..., E, N), the input x = scale * u (..., E), B (..., N), C (..., N) complex."""
        low, Bm, Cm = self._split(u)
        a, scale = self._ab(low)
        return a, scale * u, Bm, Cm

    def _out(self, h, Cm, u, z):
        # Re(sum_n C_n h_n) = sum_n (Re C_n Re h_n - Im C_n Im h_n), as one batched matmul over (n, re/im)
        c = torch.stack([Cm.real, -Cm.imag], -1).flatten(-2).unsqueeze(-1)  # (..., 2N, 1)
        y = (torch.view_as_real(h).flatten(-2) @ c).squeeze(-1) + self.D * u
        return self.out_proj(y * F.silu(z))

    def forward(self, x, state=None):
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        h0, buf = state
        u, z, buf = self._pre(x, buf, chunk=True)
        a, xin, Bm, Cm = self._terms(u)
        h = selective_scan(a, xin, Bm, h0)  # h_t = a_t h_{t-1} + xin_t (outer) B_t
        return self._out(h, Cm, u, z), (h[:, -1], buf)

    def step(self, x, state):
        h, buf = state
        u, z, buf = self._pre(x, buf, chunk=False)
        a, xin, Bm, Cm = self._terms(u)
        h = a * h + xin.unsqueeze(-1) * Bm.unsqueeze(-2)
        return self._out(h, Cm, u, z), (h, buf)

    def eigenvalues(self, x):
        """A_bar(x_t) for inputs x (B, T, d_model), conv history from zeros: (B, T, E * N) complex."""
        _, buf = self.init_state(x.shape[0], x.device, x.dtype)
        u, _, _ = self._pre(x, buf, chunk=True)
        return self._ab(self._split(u)[0])[0].flatten(-2)


class AUSSM(_ComplexSelective):
    name = "aussm"
    uses_theta = True

    def __init__(self, d_model, d_state, conv=4, expand=2):  # no Delta: no dt range
        super().__init__(d_model, d_state, conv=conv, expand=expand)

    def _ab(self, low):
        return unit_phase(self._theta(low)), torch.ones((), dtype=low.dtype, device=low.device)


class SimpleAUSSM(_ComplexSelective):
    name = "saussm"
    uses_dt = True

    def __init__(self, d_model, d_state, **kw):
        super().__init__(d_model, d_state, **kw)
        n = torch.arange(1, d_state + 1, dtype=torch.get_default_dtype())
        self.Lambda = nn.Parameter((math.pi * n).repeat(self.d_inner, 1))

    def _ab(self, low):
        dt = self._dt(low)
        return unit_phase(dt.unsqueeze(-1) * self.Lambda), dt


class DCD(_ComplexSelective):
    name = "dcd"
    uses_dt = True
    uses_theta = True

    def __init__(self, d_model, d_state, **kw):
        super().__init__(d_model, d_state, **kw)
        self.A_log = nn.Parameter(
            torch.log(torch.arange(1, d_state + 1, dtype=torch.get_default_dtype())).repeat(self.d_inner, 1)
        )

    def _ab(self, low):
        dt = self._dt(low)
        r = mamba_transition(dt, -torch.exp(self.A_log))  # Mamba's magnitude exp(-Delta exp(A_log))
        return polar(r, self._theta(low)), dt
