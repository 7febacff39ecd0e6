"""Mamba-3 (Lahoti2026), single-input single-output (SISO): a complex-valued, data-dependent rotation
per pair of state dimensions, a scalar decay per head, and the exponential-trapezoidal discretisation.

x -> in_proj -> (z, x, B, C, dt, A, lambda, theta), as in the reference code (no short convolution):

* Delta_t = softplus(dt_t + dt_bias) per head (Mamba's dt init), A_t = -softplus(A_t) <= -a_floor
  (data-dependent, per head), lambda_t = sigmoid(.) per head (the trapezoid's weight);
* theta_t = pi tanh(.): N/2 data-dependent angles in (-pi, pi), shared by the heads; the rotation of
  slot n at step t is phi_t,n = Delta_t theta_t,n (the reference code's cumulative angle grows by
  Delta_t pi tanh(angle_t));
* B_t, C_t (one group, N each): RMSNorm over N, then a learned per-head bias (init 1); the pairs
  (B_2j, B_2j+1) are the complex numbers B_j of the N/2 slots;
* per head h with P = ``headdim`` channels (``ops.mamba3.scan``)::

      a_t = exp(Delta_t A_t) exp(i phi_t)
      h_t = a_t h_{t-1} + lambda_t Delta_t x_t B_t + (1 - lambda_t) Delta_t a_t x_{t-1} B_{t-1}
      y_t = Re(conj(C_t) h_t) + D_h x_t,   out = out_proj(y * silu(z)).

Options: ``trap=false`` uses lambda = 1 (the exponential-Euler rule of Mamba-2); ``rope=false`` sets
theta = 0 (real decays only: the ablation in which Mamba-3 loses parity); ``data_angles=false`` keeps the
rotations but makes them standard RoPE's, a fixed angle 10000^(-n/(N/2)) per slot n and step whatever the
input (the paper's other ablation: an input-dependent modulus times a time-invariant phase, so every input
of a length ends at the same phase, and parity's sign cannot follow the input); ``a_floor`` bounds A_t <= -a_floor
(the reference uses 1e-4; the default here is 0). With a floor, a rotation by phi = Delta theta needs
Delta >= |phi| / pi, so its modulus is at most exp(-a_floor |phi| / pi) < 1: a rotation by pi keeps
|a| <= exp(-1e-4) = 0.9999, and the state of a parity channel decays by e^-1 every 10^4 steps. Unit
modulus is then reached only by angles below pi 6e-8 / a_floor (where exp(-a_floor Delta) rounds to 1 in
float32): the declared domain is ``damped rotations``, for which no result here decides parity, while
without a floor the unit circle is reachable (``complex disc``). Simplified: the MIMO variant
is left out (it changes the input and output ranks per step, not the transition, so the theory's
verdicts are those of SISO), every state pair rotates (the reference default rotates half of them),
and B and C are normalised by a plain RMSNorm. State: (h (B, H, P, N/2) complex, the last input term
x_t B_t (B, H, P, N/2) complex, which the trapezoid reads at the next step).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.errors import UserError
from statetrack.layers.base import Mixer, check_expand, dt_bias_init
from statetrack.ops.mamba3.reference import mamba3_step, mamba3_transition, mamba3_zero_state
from statetrack.ops.mamba3.scan import mamba3_scan

#: the base of standard RoPE's frequencies (``data_angles=false``)
ROPE_BASE = 10000.0

#: (h, the last input term x_t B_t), each [B, H, P, N/2] complex
Mamba3State = tuple[Tensor, Tensor]


class Mamba3(Mixer):
    """Mamba-3 (SISO): a data-dependent rotation per pair of state dimensions, a scalar decay per head and
    the exponential-trapezoidal rule.

    Args:
        d_model (int):
            D, the width of the input and the output.
        d_state (int):
            N, the real state size per channel: N/2 complex slots; even and at least 2.
        expand (int):
            The inner width E = expand * d_model (1 to 16). Default: 2.
        headdim (int):
            P, the channels per head; it must divide E, and H = E / P heads. Default: 8.
        trap (bool):
            The exponential-trapezoidal rule with a learned weight lambda_t; False: lambda = 1, the
            exponential-Euler rule of Mamba-2. Default: True.
        rope (bool):
            The rotations; False: theta = 0, real decays only (the ablation that loses parity).
            Default: True.
        data_angles (bool):
            The rotation angles Delta_t theta_t depend on the input; False: standard RoPE's fixed angle
            10000^(-n/(N/2)) per slot n and step. Default: True.
        a_floor (float):
            A_t <= -a_floor (>= 0): a floor on the decay; 0: none (the unit circle is reachable).
            Default: 0.0.
        dt_min (float), dt_max (float):
            The range in which the initial step Delta = softplus(dt_bias) is log-uniform
            (0 < dt_min <= dt_max). Defaults: 1e-3, 1e-1.

    The state is (h [B, H, P, N/2] complex, the last input term x_t B_t [B, H, P, N/2] complex).
    """

    name = "mamba3"
    freqs: Tensor  # a buffer: standard RoPE's angle per slot and step (``data_angles=False``)

    def __init__(
        self,
        d_model: int,
        d_state: int,
        expand: int = 2,
        headdim: int = 8,
        trap: bool = True,
        rope: bool = True,
        data_angles: bool = True,
        a_floor: float = 0.0,
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
    ) -> None:
        super().__init__(d_model, d_state)
        check_expand(self.name, expand)
        E, N = expand * d_model, d_state
        if headdim < 1 or E % headdim:
            raise UserError(f"{self.name} headdim={headdim} must be >= 1 and divide expand * d_model = {E}")
        if N < 2 or N % 2:
            raise UserError(
                f"{self.name} needs an even d_state >= 2 (pairs of real state dimensions), got {N}"
            )
        if not a_floor >= 0:
            raise UserError(f"{self.name} a_floor={a_floor} must be >= 0")
        self.trap, self.rope, self.a_floor = bool(trap), bool(rope), float(a_floor)
        self.data_angles = bool(data_angles)
        self.d_inner, self.P, self.H, self.N2 = E, headdim, E // headdim, N // 2
        H = self.H
        self.sizes = [E, E, N, N, H, H, H, self.N2]  # z, x, B, C, dt, A, lambda, theta
        self.in_proj = nn.Linear(d_model, sum(self.sizes), bias=False)
        self.dt_bias = nn.Parameter(dt_bias_init(self.name, H, dt_min, dt_max))
        self.B_norm, self.C_norm = nn.RMSNorm(N, eps=1e-5), nn.RMSNorm(N, eps=1e-5)
        self.B_bias, self.C_bias = nn.Parameter(torch.ones(H, N)), nn.Parameter(torch.ones(H, N))
        self.D = nn.Parameter(torch.ones(H))
        self.out_proj = nn.Linear(E, d_model, bias=False)
        # data_angles=false: standard RoPE's fixed frequencies, 10000^(-n / (N/2)) radians per step for slot n
        self.register_buffer("freqs", ROPE_BASE ** (-torch.arange(self.N2) / self.N2), persistent=False)

    def activation_bytes(self) -> int:
        # per step: the projections, and per (head, channel, slot) a, the input term and h (complex64)
        return 4 * (6 * self.d_inner + 4 * self.d_state) + 8 * 4 * self.d_inner * self.N2

    def init_state(
        self, batch: int, device: torch.device | str | None = None, dtype: torch.dtype | None = None
    ) -> Mamba3State:
        """Zeros: (h, the last input term), each [batch, H, P, N/2] complex."""
        return mamba3_zero_state(batch, self.H, self.P, self.N2, dtype or self.D.dtype, device)

    def _terms(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """x (..., d_model) -> z, xs (..., H, P), log decay, phi, B, C (complex), gamma, beta."""
        z, xs, Bm, Cm, dt, A, lam, theta = self.in_proj(x).split(self.sizes, dim=-1)
        dt = F.softplus(dt + self.dt_bias)
        A = torch.clamp(-F.softplus(A), max=-self.a_floor)
        lam = torch.sigmoid(lam) if self.trap else torch.ones_like(lam)
        if self.rope and not self.data_angles:  # standard RoPE: a fixed angle per slot, whatever the input
            phi = self.freqs.to(dt.dtype).expand(*dt.shape, self.N2)
        elif self.rope:  # the angle Delta theta, theta = pi tanh(.) in (-pi, pi) as in the reference code
            phi = dt.unsqueeze(-1) * (math.pi * torch.tanh(theta)).unsqueeze(-2)
        else:
            phi = torch.zeros_like(dt).unsqueeze(-1).expand(*dt.shape, self.N2)
        Bm = self.B_norm(Bm).unsqueeze(-2) + self.B_bias  # (..., H, N)
        Cm = self.C_norm(Cm).unsqueeze(-2) + self.C_bias
        Bc = torch.complex(Bm[..., 0::2], Bm[..., 1::2])
        Cc = torch.complex(Cm[..., 0::2], Cm[..., 1::2])
        return z, xs.unflatten(-1, (self.H, self.P)), A * dt, phi, Bc, Cc, lam * dt, (1 - lam) * dt

    def _out(self, y: Tensor, xs: Tensor, z: Tensor) -> Tensor:
        """y, xs (..., H, P), z (..., E) -> the output (..., D)."""
        return self.out_proj(((y + self.D[:, None] * xs).flatten(-2)) * F.silu(z))

    def forward(self, x: Tensor, state: Mamba3State | None = None) -> tuple[Tensor, Mamba3State]:
        """The training path: the scan over the sequence (``ops.mamba3.scan``).

        Args:
            x (Tensor): [B, T, D] the input.
            state (tuple[Tensor, Tensor], optional): (h, the last input term), each [B, H, P, N/2]
                complex, before x; None: zeros.

        Returns:
            (Tensor, tuple[Tensor, Tensor]): the output [B, T, D] and the state after x.
        """
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        z, xs, ld, phi, Bc, Cc, gamma, beta = self._terms(x)
        y, state = mamba3_scan(ld, phi, xs, Bc, Cc, gamma, beta, state)
        return self._out(y, xs, z), state

    def step(self, x: Tensor, state: Mamba3State) -> tuple[Tensor, Mamba3State]:
        """One token.

        Args:
            x (Tensor): [B, D] the input at one step.
            state (tuple[Tensor, Tensor]): (h, the last input term), each [B, H, P, N/2] complex.

        Returns:
            (Tensor, tuple[Tensor, Tensor]): the output [B, D] and the state after x.
        """
        z, xs, ld, phi, Bc, Cc, gamma, beta = self._terms(x)
        y, state = mamba3_step(ld, phi, xs, Bc, Cc, gamma, beta, state)
        return self._out(y, xs, z), state

    def eigenvalues(self, x: Tensor) -> Tensor:
        """a_t per (head, slot), shared by the head's P channels, for the inputs x [B, T, D]:
        [B, T, H * N/2] complex."""
        _, _, ld, phi, _, _, _, _ = self._terms(x)
        return mamba3_transition(ld, phi).flatten(-2)
