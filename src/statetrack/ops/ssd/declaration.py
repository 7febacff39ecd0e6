"""Mamba-2's declaration: one scalar transition exp(Delta_t A_h) in (0, 1] per head."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from statetrack.ops.recurrences import RealRange, Recurrence, rand, randn
from statetrack.ops.ssd.reference import ssd_scan_ref
from statetrack.ops.ssd.scan import ssd_scan


def sample(
    g: torch.Generator, T: int, B: int = 2, H: int = 3, P: int = 2, N: int = 4
) -> tuple[torch.Tensor, ...]:
    dt = F.softplus(randn(g, B, T, H))
    A = -3 * rand(g, H)
    x, Bm, Cm = randn(g, B, T, H, P), randn(g, B, T, N), randn(g, B, T, N)
    return dt, A, x, Bm, Cm, randn(g, B, H, P, N)


RECURRENCE = Recurrence(
    name="ssd",
    description="Mamba-2: h_t = exp(Delta_t A_h) h_{t-1} + Delta_t x_t (outer) B_t per head, y_t = h_t C_t",
    sample=sample,
    reference=ssd_scan_ref,
    forms={"ssd_scan": ssd_scan},
    eigenvalues=lambda dt, A, *_: torch.exp(dt * A),
    eigenvalue_range=RealRange(0.0, 1.0),
)
