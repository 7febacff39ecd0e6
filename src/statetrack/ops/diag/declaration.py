"""The diagonal recurrence's declaration: h_t = a_t h_{t-1} + b_t with complex a_t in the unit disc."""

from __future__ import annotations

import math

import torch

from statetrack.ops.diag.reference import diag_scan_ref
from statetrack.ops.diag.scan import diag_scan
from statetrack.ops.recurrences import Disc, Recurrence


def sample(g: torch.Generator, T: int, B: int = 2, N: int = 3) -> tuple[torch.Tensor, ...]:
    r = torch.rand(B, T, N, generator=g, dtype=torch.float64)
    theta = (2 * torch.rand(B, T, N, generator=g, dtype=torch.float64) - 1) * math.pi
    b = torch.randn(B, T, N, 2, generator=g, dtype=torch.float64)
    h0 = torch.randn(B, N, 2, generator=g, dtype=torch.float64)
    return torch.polar(r, theta), torch.view_as_complex(b), torch.view_as_complex(h0)


RECURRENCE = Recurrence(
    name="diag",
    description="h_t = a_t h_{t-1} + b_t, a_t complex in the unit disc (S4D, LRU; AUSSM and DCD on polar(r, theta))",
    sample=sample,
    reference=diag_scan_ref,
    forms={"diag_scan": diag_scan},
    eigenvalues=lambda a, b, h0: a,
    eigenvalue_range=Disc(1.0),
)
