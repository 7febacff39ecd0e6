"""The selective scan's declaration: complex transitions a_t per (channel, state), the input x_t (outer) B_t."""

from __future__ import annotations

import math

import torch

from statetrack.ops.recurrences import Disc, Recurrence, rand, randn
from statetrack.ops.selective.reference import selective_scan_ref
from statetrack.ops.selective.scan import selective_scan


def sample(g: torch.Generator, T: int, B: int = 2, E: int = 3, N: int = 4) -> tuple[torch.Tensor, ...]:
    a = torch.polar(rand(g, B, T, E, N), (2 * rand(g, B, T, E, N) - 1) * math.pi)
    x, Bm = randn(g, B, T, E), randn(g, B, T, N)
    h0 = torch.view_as_complex(randn(g, B, E, N, 2))
    return a, x, Bm, h0


RECURRENCE = Recurrence(
    name="selective",
    description="h_t = a_t h_{t-1} + x_t (outer) B_t, a_t complex in the unit disc per channel and state (AUSSM, DCD)",
    sample=sample,
    reference=selective_scan_ref,
    forms={"selective_scan": selective_scan},
    eigenvalues=lambda a, x, Bm, h0: a,
    eigenvalue_range=Disc(1.0),
)
