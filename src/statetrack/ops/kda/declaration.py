"""KDA's declaration: A_t = (I - beta_t k_t k_t^T) diag(alpha_t), alpha in (0, 1] per key channel."""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from statetrack.ops.deltanet.declaration import sample as delta_sample
from statetrack.ops.dplr.reference import dplr_transition
from statetrack.ops.kda.chunk import kda_chunked
from statetrack.ops.kda.reference import kda_ref, kda_terms
from statetrack.ops.recurrences import RealRange, Recurrence


def sample(g: torch.Generator, T: int) -> tuple[torch.Tensor, ...]:
    q, k, v, beta, S0 = delta_sample(g, T)
    return q, k, v, beta, -2 * torch.rand(k.shape, generator=g, dtype=torch.float64), S0


def eigenvalues(_q: Tensor, k: Tensor, _v: Tensor, beta: Tensor, log_w: Tensor, _S0: Tensor) -> Tensor:
    _, a, b = kda_terms(k, beta, log_w)
    return torch.linalg.eigvals(dplr_transition(a, b, log_w, k.shape[-1]))


RECURRENCE = Recurrence(
    name="kda",
    description="S_t = (I - beta_t k_t k_t^T) diag(alpha_t) S_{t-1} + beta_t k_t v_t^T (Kimi Delta Attention)",
    sample=sample,
    reference=kda_ref,
    forms={"chunked": kda_chunked, "chunked (4 steps)": functools.partial(kda_chunked, chunk=4)},
    eigenvalues=eigenvalues,
    eigenvalue_range=RealRange(-1.0, 1.0),
)
