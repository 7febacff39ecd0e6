"""Complex diagonal selective SSMs: AUSSM, Simple AUSSM and the general complex-disc class (DCD).

All three share Mamba's block: x -> in_proj -> (u, z); u -> optional depthwise causal conv -> silu;
low-rank projections of u drive the transition: Delta's of rank R = ceil(d_model / 16), as Mamba's, and
the angle's of rank ``theta_rank`` (default R; E makes W_A full rank, as the AUSSM authors' code);
B_t = W_B u_t (real), C_t = W_C u_t (complex: two real projections); per channel e and state n

    h_t = A_bar_t * h_{t-1} + b_t      (complex state, E x N per sequence)
    y_t = Re(sum_n C_t,n h_t,n) + D u_t,  gated by silu(z_t), then out_proj.

* ``aussm`` (Karuvally2025, public code's form): A_bar_t = exp(i theta_t), theta_t = W_A u_t + b_A,
  b_A ~ U(-pi, pi); |A_bar| = 1 exactly; b_t = B_t u_t. W_A is E -> theta_rank -> E*N: low rank by
  default; the authors' code maps u to all E*N angles at full rank (``theta_rank`` = E here). With
  ``theta_silu=false`` the angle reads the conv's output before the silu, as the authors' kernel does:
  theta_t is then linear in the tokens the conv sees, so a sequence's phase sums each token's
  contribution over the conv's taps, whatever its neighbours. B and C here are Mamba's, read from u_t at
  each step; with ``const_bc=true`` they are the authors' code's: learned constants per state coordinate
  (B_n = softplus(beta_n) > 0, the phase of their complex B folded into C; C_n = softplus(gamma_n) exp(i
  phi_n)), and the input is scaled by Delta_t = softplus(dt_proj(W_dt u_t)) of rank d_state:
  b_t = Delta_t u_t B.
* ``saussm`` ("Simple AUSSM"): theta_t = Delta_t * Lambda, Delta_t = softplus(dt_proj(.)) per channel as in
  Mamba, Lambda (E, N) a learned constant (init pi * (n + 1), the spacing of S4D-Lin's imaginary parts);
  b_t = Delta_t B_t u_t.
* ``dcd``: A_bar_t = r_t exp(i theta_t) with r_t = exp(-Delta_t exp(A_log)) in (0, 1] (Mamba's magnitude,
  A_log = log(1..N)) and theta_t = W_A u_t + b_A (AUSSM's angle); b_t = Delta_t B_t u_t.

The angle is kept: A_bar_t is built per step from theta_t (``ops.polar_readout``), never as a product of
rounded unit numbers.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from statetrack.errors import UserError
from statetrack.layers.base import (
    Device,
    MambaInput,
    Mixer,
    check_conv,
    check_expand,
    init_dt_bias,
)
from statetrack.ops import polar, polar_readout
from statetrack.ops.mamba.reference import mamba_transition


class _ComplexSelective(MambaInput, Mixer):
    """Shared block; subclasses define ``_polar(low) -> (r [..., E, N] or None, theta [..., E, N], input scale
    [..., E])``: A_bar = r exp(i theta), r None for modulus 1.

    Args:
        d_model (int): the width of the stream, x [B, T, d_model].
        d_state (int): the number N of complex state coordinates per channel (the state is [E, N]).
        conv (int): the kernel of the short depthwise causal conv over u, 0 to 64; default 4, 0 = none.
        expand (int): the inner width E = expand d_model, 1 to 16; default 2.
        dt_min (float), dt_max (float): the log-uniform range of the initial step Delta (Mamba's dt init),
            used by the subclasses with a Delta; default 1e-3, 1e-1.
        dt_rank (int): the rank of the map from u to Delta, for the subclasses with a Delta; 0 (default) =
            ceil(d_model / 16), Mamba's; at E = expand d_model or above it is full rank.
        theta_rank (int): the rank of W_A, which maps u to the angles, for the subclasses with an angle;
            0 (default) = ceil(d_model / 16), Mamba's rank of Delta; at E = expand d_model or above it is
            full rank.
        theta_silu (bool): for the subclasses with an angle, whether W_A reads u after the silu (default
            True) or the conv's output before it (False: the angle linear in the inputs, the AUSSM
            authors' kernel's form).
    """

    uses_dt = False
    uses_theta = False

    def __init__(
        self,
        d_model: int,
        d_state: int,
        conv: int = 4,
        expand: int = 2,
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        dt_rank: int = 0,
        theta_rank: int = 0,
        theta_silu: bool = True,
    ) -> None:
        super().__init__(d_model, d_state)
        self.theta_silu = theta_silu
        check_conv(self.name, conv)
        check_expand(self.name, expand)
        for what, rank in (("dt_rank", dt_rank), ("theta_rank", theta_rank)):
            if rank < 0:
                raise UserError(f"{self.name} {what}={rank} must be >= 0 (0 = ceil(d_model / 16))")
        E, N = expand * d_model, d_state
        mamba_rank = math.ceil(d_model / 16)
        self.R = R = min(dt_rank, E) if dt_rank else mamba_rank
        self.R_theta = min(theta_rank or mamba_rank, E) if self.uses_theta else 0
        n_low = R * int(self.uses_dt) + self.R_theta
        self._init_input(d_model, E, conv)
        self.x_proj = nn.Linear(E, n_low + 3 * N, bias=False)  # [low-rank | B | C_re | C_im]
        self.n_low = n_low
        if self.uses_dt:
            self.dt_proj = nn.Linear(R, E)
            init_dt_bias(self.name, self.dt_proj, dt_min, dt_max)
        if self.uses_theta:
            self.theta_proj = nn.Linear(self.R_theta, E * N)  # W_A (rank R_theta), bias b_A
            with torch.no_grad():
                self.theta_proj.bias.uniform_(-math.pi, math.pi)
        self.D = nn.Parameter(torch.ones(E))
        self.out_proj = nn.Linear(E, d_model, bias=False)

    def activation_bytes(self) -> int:
        # A_bar and h (T, E, N) complex64, the angle (and modulus) before them, and the projections
        return 8 * 3 * self.d_inner * self.d_state + 4 * (8 * self.d_inner + 4 * self.d_state)

    def init_state(
        self, batch: int, device: Device = None, dtype: torch.dtype | None = None
    ) -> tuple[Tensor, Tensor]:
        """(h [batch, E, N] complex, the conv's history [batch, E, conv - 1]), zeros."""
        dtype = dtype or self.D.dtype
        h = torch.zeros(batch, self.d_inner, self.d_state, device=device, dtype=dtype.to_complex())
        return (h, self._conv_state(batch, device, dtype))

    def _split(self, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """u [..., E] -> the low-rank inputs [..., n_low], B [..., N], C [..., N] complex."""
        low, Bm, Cr, Ci = self.x_proj(u).split([self.n_low, self.d_state, self.d_state, self.d_state], dim=-1)
        return low, Bm, torch.complex(Cr, Ci)

    def _read(
        self, x: Tensor, buf: Tensor, chunk: bool
    ) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        """x -> (u, z, the conv's history after x, the low-rank inputs, B, C): ``_pre`` then ``_split``, the
        angle's low-rank inputs read from the conv's output before the silu where ``theta_silu`` is False."""
        v, z, buf = self._pre_linear(x, buf, chunk)
        u = F.silu(v)
        low, Bm, Cm = self._split(u)
        return u, z, buf, self._low(u, v, low), Bm, Cm

    def _low(self, u: Tensor, v: Tensor, low: Tensor) -> Tensor:  # noqa: ARG002 (AUSSM's reads u)
        """The low-rank inputs ``low`` read from u, with the angle's read from v, the conv's output before the
        silu, where ``theta_silu`` is False."""
        if self.R_theta and not self.theta_silu:
            first = self.n_low - self.R_theta
            low = torch.cat([low[..., :first], F.linear(v, self.x_proj.weight[first : self.n_low])], dim=-1)
        return low

    def _dt(self, low: Tensor) -> Tensor:
        """Delta [..., E] = softplus(dt_proj(the first low-rank inputs, as many as dt_proj reads: R, or
        d_state for ``aussm(const_bc=true)``))."""
        return F.softplus(self.dt_proj(low[..., : self.dt_proj.in_features]))

    def _theta(self, low: Tensor) -> Tensor:
        """The angle theta [..., E, N] = W_A (the last R_theta low-rank inputs) + b_A."""
        E, N = self.d_inner, self.d_state
        return self.theta_proj(low[..., low.shape[-1] - self.R_theta :]).unflatten(-1, (E, N))

    def _polar(self, low: Tensor) -> tuple[Tensor | None, Tensor, Tensor]:
        """The low-rank inputs [..., n_low] -> (A_bar's modulus [..., E, N] or None for 1, its angle [..., E,
        N], the input's scale [..., E] or [])."""
        raise NotImplementedError

    def _ab(self, low: Tensor) -> tuple[Tensor, Tensor]:
        """The low-rank inputs [..., n_low] -> (A_bar [..., E, N] complex, the input's scale [..., E] or [])."""
        r, theta, scale = self._polar(low)
        return polar(r, theta), scale

    def _gate(self, y: Tensor, u: Tensor, z: Tensor) -> Tensor:
        """The readout y = Re(sum_n C_n h_n) [..., E] plus D u, gated by silu(z), then out_proj: u, z [..., E]
        -> [..., d_model]."""
        return self.out_proj((y + self.D * u) * F.silu(z))

    def forward(
        self, x: Tensor, state: tuple[Tensor, Tensor] | None = None
    ) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Args: x (Tensor): [B, T, d_model]; state: (h [B, E, N] complex, the conv's history
        [B, E, conv - 1]), None: zeros. Returns: y (Tensor): [B, T, d_model], the state after x."""
        if state is None:
            state = self.init_state(x.shape[0], x.device, x.dtype)
        h0, buf = state
        u, z, buf, low, Bm, Cm = self._read(x, buf, chunk=True)
        r, theta, scale = self._polar(low)
        # h_t = r_t exp(i theta_t) h_{t-1} + (scale u)_t (outer) B_t, y_t = Re(sum_n C_t,n h_t,n)
        y, h = polar_readout(r, theta, scale * u, Bm, Cm, h0)
        return self._gate(y, u, z), (h, buf)

    def step(self, x: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        """Args: x (Tensor): [B, d_model], one token; state: as ``forward``'s. Returns: y (Tensor):
        [B, d_model], the state after x."""
        h, buf = state
        u, z, buf, low, Bm, Cm = self._read(x, buf, chunk=False)
        a, scale = self._ab(low)
        h = a * h + (scale * u).unsqueeze(-1) * Bm.unsqueeze(-2)
        return self._gate((h * Cm.unsqueeze(-2)).sum(-1).real, u, z), (h, buf)

    def eigenvalues(self, x: Tensor) -> Tensor:
        """A_bar(x_t) for inputs x [B, T, d_model], conv history from zeros: [B, T, E * N] complex."""
        _, buf = self.init_state(x.shape[0], x.device, x.dtype)
        low = self._read(x, buf, chunk=True)[3]
        return self._ab(low)[0].flatten(-2)


class AUSSM(_ComplexSelective):
    """Adaptive unitary SSM: A_bar = exp(i theta(x)), theta = W_A u + b_A, |A_bar| = 1.

    Args:
        d_model (int): the width of the stream, x [B, T, d_model].
        d_state (int): the number N of complex state coordinates per channel (the state is [E, N]).
        conv (int): the kernel of the short depthwise causal conv over u, 0 to 64; default 4, 0 = none.
        expand (int): the inner width E = expand d_model, 1 to 16; default 2.
        theta_rank (int): the rank of W_A; 0 (default) = ceil(d_model / 16); E or above = full rank, the
            AUSSM authors' form.
        theta_silu (bool): W_A reads u after the silu (default True) or the conv's output before it
            (False, the AUSSM authors' kernel's form).
        const_bc (bool): B and C learned constants and the input scaled by Delta_t, as the AUSSM authors'
            code (True), or read from u_t at each step, as Mamba's (False, default).
        theta_scale (bool): the angle through one full-rank map W_A [E N, E] scaled by 1 / sqrt(d_model),
            theta = W_A u / sqrt(d_model) + b_A, as the authors' code (True; ``theta_rank`` then stays 0),
            or through ``theta_rank`` (False, default).
        dt_silu (bool): with ``const_bc``, whether Delta's projection reads u after the silu (True,
            default) or the conv's output before it (False, the authors' code).
    """

    name = "aussm"
    uses_theta = True

    # no Delta range: Delta, where const_bc has one, starts from nn.Linear's init, as in the authors' code
    def __init__(
        self,
        d_model: int,
        d_state: int,
        conv: int = 4,
        expand: int = 2,
        theta_rank: int = 0,
        theta_silu: bool = True,
        const_bc: bool = False,
        theta_scale: bool = False,
        dt_silu: bool = True,
    ) -> None:
        if theta_scale and theta_rank:
            raise UserError(f"aussm theta_scale=true is full rank: leave theta_rank at 0, not {theta_rank}")
        if not dt_silu and not const_bc:
            raise UserError("aussm dt_silu=false needs const_bc=true (only then has aussm a Delta)")
        super().__init__(
            d_model, d_state, conv=conv, expand=expand, theta_rank=theta_rank, theta_silu=theta_silu
        )
        self.const_bc, self.theta_scale, self.dt_silu = const_bc, theta_scale, dt_silu
        E, N = self.d_inner, d_state
        if theta_scale:  # x_proj keeps B and C (or Delta's inputs): the angle reads u or v whole
            self.R_theta = E
            self.x_proj = nn.Linear(E, 3 * N, bias=False)
            self.theta_proj = nn.Linear(E, E * N)  # W_A, bias b_A
            with torch.no_grad():
                self.theta_proj.bias.uniform_(-math.pi, math.pi)
        if const_bc:
            self.n_low = N + self.R_theta  # [Delta's rank-N inputs | the angle's]
            self.x_proj = nn.Linear(E, N if theta_scale else self.n_low, bias=False)
            self.dt_proj = nn.Linear(N, E)
            self.B = nn.Parameter(torch.randn(N))  # B_n = softplus(B) > 0
            self.C = nn.Parameter(torch.randn(2, N))  # C_n = softplus(C[0]) exp(i C[1])

    def _split(self, u: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        if not self.const_bc and self.theta_scale:
            Bm, Cr, Ci = self.x_proj(u).split([self.d_state] * 3, dim=-1)
            return u[..., :0], Bm, torch.complex(Cr, Ci)
        if not self.const_bc:
            return super()._split(u)
        shape = (*u.shape[:-1], self.d_state)
        Cm = torch.polar(F.softplus(self.C[0]), self.C[1])
        return self.x_proj(u), F.softplus(self.B).expand(shape), Cm.expand(shape)

    def _low(self, u: Tensor, v: Tensor, low: Tensor) -> Tensor:
        """As the block's, and: Delta's inputs read from v where ``dt_silu`` is False; under ``theta_scale``
        the angle's inputs are u or v whole, after x_proj's."""
        if not self.dt_silu:
            low = torch.cat(
                [F.linear(v, self.x_proj.weight[: self.d_state]), low[..., self.d_state :]], dim=-1
            )
        if self.theta_scale:
            return torch.cat([low, v if not self.theta_silu else u], dim=-1)
        return super()._low(u, v, low)

    def _theta(self, low: Tensor) -> Tensor:
        if not self.theta_scale:
            return super()._theta(low)
        w, E = self.theta_proj, self.d_inner
        theta = F.linear(low[..., low.shape[-1] - E :], w.weight) / math.sqrt(self.d_model) + w.bias
        return theta.unflatten(-1, (E, self.d_state))

    def _polar(self, low: Tensor) -> tuple[Tensor | None, Tensor, Tensor]:
        if self.const_bc:
            return None, self._theta(low), self._dt(low)
        return None, self._theta(low), torch.ones((), dtype=low.dtype, device=low.device)


class SimpleAUSSM(_ComplexSelective):
    """Simple AUSSM: A_bar = exp(i Delta(x) Lambda), Lambda [E, N] a learned constant; the input scaled by Delta.

    Args:
        d_model (int): the width of the stream, x [B, T, d_model].
        d_state (int): the number N of complex state coordinates per channel (the state is [E, N]).
        conv (int): the kernel of the short depthwise causal conv over u, 0 to 64; default 4, 0 = none.
        expand (int): the inner width E = expand d_model, 1 to 16; default 2.
        dt_min (float), dt_max (float): the log-uniform range of the initial Delta, which scales the angle
            and the input; default 1e-3, 1e-1.
        dt_rank (int): the rank of the map from u to Delta; 0 (default) = ceil(d_model / 16), Mamba's; E or
            above = full rank.
    """

    name = "saussm"
    uses_dt = True

    def __init__(
        self,
        d_model: int,
        d_state: int,
        conv: int = 4,
        expand: int = 2,
        dt_min: float = 1e-3,
        dt_max: float = 1e-1,
        dt_rank: int = 0,
    ) -> None:
        super().__init__(
            d_model, d_state, conv=conv, expand=expand, dt_min=dt_min, dt_max=dt_max, dt_rank=dt_rank
        )
        n = torch.arange(1, d_state + 1, dtype=torch.get_default_dtype())
        self.Lambda = nn.Parameter((math.pi * n).repeat(self.d_inner, 1))

    def _polar(self, low: Tensor) -> tuple[Tensor | None, Tensor, Tensor]:
        dt = self._dt(low)
        return None, dt.unsqueeze(-1) * self.Lambda, dt


class DCD(_ComplexSelective):
    """Input-dependent complex diagonal SSM: A_bar = r(x) exp(i theta(x)), r = exp(-Delta exp(A_log)) in (0, 1].

    Args:
        d_model (int): the width of the stream, x [B, T, d_model].
        d_state (int): the number N of complex state coordinates per channel (the state is [E, N]).
        conv (int): the kernel of the short depthwise causal conv over u, 0 to 64; default 4, 0 = none.
        expand (int): the inner width E = expand d_model, 1 to 16; default 2.
        dt_min (float), dt_max (float): the log-uniform range of the initial Delta, which sets the modulus
            r and scales the input; default 1e-3, 1e-1.
        dt_rank (int): the rank of the map from u to Delta; 0 (default) = ceil(d_model / 16); E or above =
            full rank.
        theta_rank (int): the rank of W_A; 0 (default) = ceil(d_model / 16); E or above = full rank.
        theta_silu (bool): W_A reads u after the silu (default True) or the conv's output before it (False).
    """

    name = "dcd"
    uses_dt = True
    uses_theta = True

    def __init__(self, d_model: int, d_state: int, **kw: Any) -> None:
        """The block's options (conv, expand, dt_min, dt_max, dt_rank, theta_rank, theta_silu), passed on."""
        super().__init__(d_model, d_state, **kw)
        self.A_log = nn.Parameter(
            torch.log(torch.arange(1, d_state + 1, dtype=torch.get_default_dtype())).repeat(self.d_inner, 1)
        )

    def _polar(self, low: Tensor) -> tuple[Tensor | None, Tensor, Tensor]:
        dt = self._dt(low)
        r = mamba_transition(dt, -torch.exp(self.A_log))  # Mamba's magnitude exp(-Delta exp(A_log))
        return r, self._theta(low), dt
