"""The DPLR recurrence's declaration, drawn as RWKV-7 fills it in: A_t = diag(w_t) - (kappa_t a_t) kappa_t^T with
w in (0.545, 1), a in (0, 1) and kappa unit: real eigenvalues in (-1/2, 1]."""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from statetrack.ops.dplr.chunk import dplr, dplr_chunked
from statetrack.ops.dplr.reference import dplr_ref, dplr_transition
from statetrack.ops.recurrences import RealRange, Recurrence, rand, randn


def sample(g: torch.Generator, T: int, B: int = 2, H: int = 2, dk: int = 4, dv: int = 3) -> tuple:
    q, k, v = (
        randn(g, B, T, H, dk),
        randn(g, B, T, H, dk),
        randn(g, B, T, H, dv),
    )
    kappa = F.normalize(randn(g, B, T, H, dk), dim=-1)
    log_w = -math.exp(-0.5) * rand(g, B, T, H, dk)  # w = exp(-e^-1/2 sigmoid(.))
    return q, k, v, kappa, -kappa * rand(g, B, T, H, dk), log_w, randn(g, B, H, dk, dv)


RECURRENCE = Recurrence(
    name="dplr",
    description="S_t = (diag(w_t) + b_t a_t^T) S_{t-1} + k_t v_t^T (RWKV-7; the reference of the gated family)",
    sample=sample,
    reference=dplr_ref,
    forms={"chunked": dplr, "chunked (4 steps)": functools.partial(dplr_chunked, chunk=4)},
    eigenvalues=lambda q, k, v, a, b, log_w, S0: torch.linalg.eigvals(
        dplr_transition(a, b, log_w, k.shape[-1])
    ),
    eigenvalue_range=RealRange(-0.5, 1.0),
)
