"""Mamba's declaration: A_bar = exp(Delta A) in (0, 1] per channel and state, formed inside the scan."""

from __future__ import annotations

import torch

from statetrack.ops.mamba.reference import mamba_scan_ref, mamba_transition
from statetrack.ops.mamba.scan import mamba_scan
from statetrack.ops.recurrences import RealRange, Recurrence, rand, randn


def sample(g: torch.Generator, T: int, B: int = 2, E: int = 3, N: int = 4) -> tuple[torch.Tensor, ...]:
    dt = rand(g, B, T, E) * 0.5
    A = -rand(g, E, N) * 3 - 0.1
    u, Bm, Cm = randn(g, B, T, E), randn(g, B, T, N), randn(g, B, T, N)
    return dt, A, u, Bm, Cm, randn(g, B, E, N)


RECURRENCE = Recurrence(
    name="mamba",
    description="h_t = exp(Delta_t A) h_{t-1} + Delta_t u_t B_t, y_t = h_t C_t (the C kernel on CPU float32)",
    sample=sample,
    reference=mamba_scan_ref,
    forms={"mamba_scan": mamba_scan},
    eigenvalues=lambda dt, A, *_: mamba_transition(dt, A),
    eigenvalue_range=RealRange(0.0, 1.0),
)
