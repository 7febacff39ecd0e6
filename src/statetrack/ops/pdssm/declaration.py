"""PD-SSM's declaration: A_t = P_t D_t, a column one-hot matrix times a complex diagonal of modulus below 1."""

from __future__ import annotations

import functools
import math

import torch

from statetrack.ops.pdssm.reference import pd_matrix, pd_ref
from statetrack.ops.pdssm.scan import pd_scan
from statetrack.ops.recurrences import Disc, Recurrence, rand, randn


def sample(g: torch.Generator, T: int, B: int = 2, N: int = 5) -> tuple[torch.Tensor, ...]:
    idx = torch.randint(0, N, (B, T, N), generator=g)
    d = torch.polar(rand(g, B, T, N), 2 * math.pi * rand(g, B, T, N))
    b, h0 = (
        torch.view_as_complex(randn(g, B, T, N, 2)),
        torch.view_as_complex(randn(g, B, N, 2)),
    )
    return idx, d, b, h0


RECURRENCE = Recurrence(
    name="pdssm",
    description="h_t = P_t D_t h_{t-1} + b_t, P one-hot per column, D complex diagonal with modulus below 1",
    sample=sample,
    reference=pd_ref,
    forms={"scan": pd_scan, "scan (4 steps)": functools.partial(pd_scan, chunk=4)},
    eigenvalues=lambda idx, d, b, h0: torch.linalg.eigvals(pd_matrix(idx, d)),
    eigenvalue_range=Disc(1.0),
)
