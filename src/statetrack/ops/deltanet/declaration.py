"""The delta rule's declaration: A_t = I - beta_t k_t k_t^T with beta in [0, 2] (neg=true), eigenvalues 1 and
1 - beta_t."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from statetrack.ops.deltanet.chunk import delta_rule_chunked
from statetrack.ops.deltanet.reference import delta_rule_ref, householder_product
from statetrack.ops.recurrences import RealRange, Recurrence, rand, randn


def sample(
    g: torch.Generator, T: int, B: int = 2, H: int = 2, dk: int = 4, dv: int = 3
) -> tuple[torch.Tensor, ...]:
    q, k, v = (
        randn(g, B, T, H, dk),
        F.normalize(randn(g, B, T, H, dk), dim=-1),
        randn(g, B, T, H, dv),
    )
    return q, k, v, 2 * rand(g, B, T, H), randn(g, B, H, dk, dv)


RECURRENCE = Recurrence(
    name="deltanet",
    description="S_t = (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = S_t^T q_t (DeltaNet, DeltaProduct)",
    sample=sample,
    reference=delta_rule_ref,
    forms={
        "chunked": delta_rule_chunked,
        "chunked (4 steps)": functools.partial(delta_rule_chunked, chunk=4),
    },
    eigenvalues=lambda q, k, v, beta, S0: torch.linalg.eigvals(
        householder_product(k.unsqueeze(-2), beta.unsqueeze(-1))
    ),
    eigenvalue_range=RealRange(-1.0, 1.0),
)
