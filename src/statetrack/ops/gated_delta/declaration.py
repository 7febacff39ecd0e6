"""The gated delta rule's declaration: A_t = alpha_t (I - beta_t k_t k_t^T), alpha in (0, 1], beta in [0, 2]."""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from statetrack.ops.deltanet.declaration import sample as delta_sample
from statetrack.ops.dplr.reference import dplr_transition
from statetrack.ops.gated_delta.chunk import gated_delta_chunked
from statetrack.ops.gated_delta.reference import gated_delta_ref, gated_delta_terms
from statetrack.ops.recurrences import RealRange, Recurrence


def sample(g: torch.Generator, T: int) -> tuple[torch.Tensor, ...]:
    q, k, v, beta, S0 = delta_sample(g, T)
    return q, k, v, beta, -2 * torch.rand(beta.shape, generator=g, dtype=torch.float64), S0


def eigenvalues(_q: Tensor, k: Tensor, _v: Tensor, beta: Tensor, gate: Tensor, _S0: Tensor) -> Tensor:
    _, a, b, log_w = gated_delta_terms(k, beta, gate)
    return torch.linalg.eigvals(dplr_transition(a, b, log_w, k.shape[-1]))


RECURRENCE = Recurrence(
    name="gated_delta",
    description="S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T (Gated DeltaNet, Gated "
    "DeltaProduct)",
    sample=sample,
    reference=gated_delta_ref,
    forms={
        "chunked": gated_delta_chunked,
        "chunked (4 steps)": functools.partial(gated_delta_chunked, chunk=4),
    },
    eigenvalues=eigenvalues,
    eigenvalue_range=RealRange(-1.0, 1.0),
)
