"""Mamba-3's declaration: a_t = exp(log_decay_t) exp(i phi_t) per state pair, exponential-trapezoidal."""

from __future__ import annotations

import torch

from statetrack.ops.mamba3.reference import mamba3_scan_ref, mamba3_transition
from statetrack.ops.mamba3.scan import mamba3_scan
from statetrack.ops.recurrences import Disc, Recurrence, crandn, rand, randn


def sample(g: torch.Generator, T: int, B: int = 2, H: int = 2, P: int = 3, N2: int = 2) -> tuple:
    return (
        -rand(g, B, T, H) * 0.3,
        randn(g, B, T, H, N2) * 2,
        randn(g, B, T, H, P),
        crandn(g, B, T, H, N2),
        crandn(g, B, T, H, N2),
        rand(g, B, T, H),
        rand(g, B, T, H),
        (crandn(g, B, H, P, N2), crandn(g, B, H, P, N2)),
    )


RECURRENCE = Recurrence(
    name="mamba3",
    description="Mamba-3: complex transitions exp(Delta A) exp(i Delta theta) per state pair, trapezoidal "
    "(the C kernel on CPU float32)",
    sample=sample,
    reference=mamba3_scan_ref,
    forms={"mamba3_scan": mamba3_scan},
    eigenvalues=lambda log_decay, phi, *_: mamba3_transition(log_decay, phi),
    eigenvalue_range=Disc(1.0),
)
