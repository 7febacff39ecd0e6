"""Mamba-2's recurrence step by step in float64: the reference of :func:`statetrack.ops.ssd.scan.ssd_scan`."""

from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops.mamba.reference import mamba_transition


def ssd_scan_ref(
    dt: Tensor, A: Tensor, x: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor | None = None, neg: bool = False
) -> tuple[Tensor, Tensor]:
    """Reference: the step loop in float64 with one scalar per head."""
    d = torch.float64
    dt, A, x, Bm, Cm = (t.to(d) for t in (dt, A, x, Bm, Cm))
    B, T, H, P = x.shape
    h = torch.zeros(B, H, P, Bm.shape[-1], dtype=d, device=x.device) if h0 is None else h0.to(d)
    ys = []
    for t in range(T):
        a = mamba_transition(dt[:, t], A.unsqueeze(-1), neg)  # (B, H, 1)
        h = a.unsqueeze(-1) * h + (dt[:, t, :, None] * x[:, t]).unsqueeze(-1) * Bm[:, t, None, None, :]
        ys.append((h * Cm[:, t, None, None, :]).sum(-1))
    y = torch.stack(ys, 1) if ys else x.new_zeros(x.shape, dtype=d)
    return y, h
