"""The diagonal recurrence h_t = a_t h_{t-1} + b_t step by step in float64 (complex128 for complex a or b): the
reference of :func:`statetrack.ops.diag.scan.diag_scan` and :func:`statetrack.ops.diag.scan.unit_scan`."""

from __future__ import annotations

import torch
from torch import Tensor


def diag_scan_ref(a: Tensor, b: Tensor, h0: Tensor | None = None) -> Tensor:
    """Reference: a, b of shape (B, T, ...); h0 of shape (B, ...) or None (zeros). Returns (B, T, ...)."""
    wide = torch.complex128 if (a.is_complex() or b.is_complex()) else torch.float64
    a, b = a.to(wide), b.to(wide)
    b = b.expand(torch.broadcast_shapes(a.shape, b.shape))
    h = torch.zeros_like(b[:, 0]) if h0 is None else h0.to(wide)
    out = []
    for t in range(a.shape[1]):
        h = a[:, t] * h + b[:, t]
        out.append(h)
    return torch.stack(out, dim=1)


def unit_scan_ref(theta: Tensor, b: Tensor, h0: Tensor | None = None) -> Tensor:
    """Reference for :func:`unit_scan`, in complex128."""
    return diag_scan_ref(torch.polar(torch.ones_like(theta, dtype=torch.float64), theta.double()), b, h0)
