"""The gated delta rule step by step: its terms as a DPLR recurrence and :func:`gated_delta_ref`, the DPLR reference
on them in float64."""

from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops.dplr.reference import dplr_ref


def gated_delta_terms(k: Tensor, beta: Tensor, g: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Gated DeltaNet as a DPLR recurrence: k (B, T, H, d_k), beta, g (B, T, H) (log of the gate alpha)
    -> (write key beta k, a = k, b = -alpha beta k, log_w (B, T, H, 1))."""
    bk = beta.unsqueeze(-1) * k
    return bk, k, -torch.exp(g).unsqueeze(-1) * bk, g.unsqueeze(-1)


def gated_delta_ref(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor, S0: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The gated delta rule step by step in float64: :func:`statetrack.ops.dplr.reference.dplr_ref` on its terms."""
    bk, a, b, log_w = gated_delta_terms(k, beta, g)
    return dplr_ref(q, bk, v, a, b, log_w, S0)
