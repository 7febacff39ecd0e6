"""Mamba's selective scan step by step in float64 (:func:`mamba_scan_ref`) and its transitions, the reference of
:func:`statetrack.ops.mamba.scan.mamba_scan`."""

from __future__ import annotations

import torch
from torch import Tensor


def mamba_transition(dt: Tensor, A: Tensor, neg: bool = False) -> Tensor:
    """A_bar = exp(Delta A) (Mamba) or 2 exp(Delta A) - 1 (Negative Mamba): dt (..., E), A (E, N) -> (..., E, N).
    The plain form, for one step and for the references; the scan forms it in its own loop."""
    a = torch.exp(dt.unsqueeze(-1) * A)
    return 2 * a - 1 if neg else a


def mamba_scan_ref(
    dt: Tensor, A: Tensor, u: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor | None = None, neg: bool = False
) -> tuple[Tensor, Tensor]:
    """Reference: the recurrence step by step in float64."""
    d = torch.float64
    dt, A, u, Bm, Cm = (t.to(d) for t in (dt, A, u, Bm, Cm))
    B, T, E = u.shape
    h = torch.zeros(B, E, A.shape[-1], dtype=d, device=u.device) if h0 is None else h0.to(d)
    ys = []
    for t in range(T):
        a = mamba_transition(dt[:, t], A, neg)
        h = a * h + (dt[:, t] * u[:, t])[..., None] * Bm[:, t, None, :]
        ys.append((h * Cm[:, t, None, :]).sum(-1))
    y = torch.stack(ys, 1) if ys else u.new_zeros(u.shape, dtype=d)
    return y, h
