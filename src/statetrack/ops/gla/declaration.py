"""GLA's declaration: A_t = diag(w_t), w in (0, 1] per key channel."""

from __future__ import annotations

import functools

import torch

from statetrack.ops.gla.chunk import gla_chunked
from statetrack.ops.gla.reference import gla_ref
from statetrack.ops.recurrences import RealRange, Recurrence, rand, randn


def sample(
    g: torch.Generator, T: int, B: int = 2, H: int = 2, dk: int = 4, dv: int = 3
) -> tuple[torch.Tensor, ...]:
    q, k, v = (
        randn(g, B, T, H, dk),
        randn(g, B, T, H, dk),
        randn(g, B, T, H, dv),
    )
    return q, k, v, -2 * rand(g, B, T, H, dk), randn(g, B, H, dk, dv)


RECURRENCE = Recurrence(
    name="gla",
    description="S_t = diag(w_t) S_{t-1} + k_t v_t^T (gated linear attention)",
    sample=sample,
    reference=gla_ref,
    forms={"chunked": gla_chunked, "chunked (4 steps)": functools.partial(gla_chunked, chunk=4)},
    eigenvalues=lambda q, k, v, log_w, S0: torch.exp(log_w),
    eigenvalue_range=RealRange(0.0, 1.0),
)
