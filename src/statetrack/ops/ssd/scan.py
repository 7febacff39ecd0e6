"""Mamba-2's recurrence (DaoGu2024, "state space duality"): one scalar transition per head.

Per head h with P channels and a state (P, N)::

    a_t = exp(Delta_t A_h)   (Mamba-2; neg: 2 exp(Delta_t A_h) - 1, eigenvalues in [-1, 1], the ends through rounding)
    h_t = a_t h_{t-1} + Delta_t x_t (outer) B_t          y_t = h_t C_t

so A(x_t) = a_t I: a scalar times the identity. Shapes: dt (B, T, H); A (H,) (negative reals); x
(B, T, H, P); Bm, Cm (B, T, N) (shared by the heads: one group); h0 (B, H, P, N) or None. Returns
y (B, T, H, P) and h_T (B, H, P, N).

:func:`ssd_scan` is Mamba's fused selective scan (``ops.mamba.scan.mamba_scan``, Triton kernels on CUDA)
with each head's Delta and A repeated over its P channels: the recurrence is the same, a channel of
Mamba whose transition its head shares. :func:`ssd_scan_ref` is an independent step loop in float64
over the per-head scalar.
"""

from __future__ import annotations

from torch import Tensor

from statetrack.ops.mamba.scan import mamba_scan


def ssd_scan(
    dt: Tensor, A: Tensor, x: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor | None = None, neg: bool = False
) -> tuple[Tensor, Tensor]:
    """Fast form: the fused Mamba scan over the H * P channels (same contract as :func:`ssd_scan_ref`)."""
    B, T, H, P = x.shape
    N = Bm.shape[-1]
    dt_e = dt.repeat_interleave(P, dim=-1)  # (B, T, H * P)
    A_e = A.repeat_interleave(P).unsqueeze(-1).expand(H * P, N).contiguous()
    h0_e = None if h0 is None else h0.reshape(B, H * P, N)
    y, h = mamba_scan(dt_e, A_e, x.reshape(B, T, H * P), Bm, Cm, h0_e, neg=neg)
    return y.reshape(B, T, H, P), h.reshape(B, H, P, N)
