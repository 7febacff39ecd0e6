"""KDA step by step: its terms as a DPLR recurrence and :func:`kda_ref`, the DPLR reference on them in float64."""

from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops.dplr.reference import dplr_ref


def kda_terms(k: Tensor, beta: Tensor, log_w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Kimi Delta Attention as a DPLR recurrence: k (B, T, H, d_k) (L2-normalised), beta (B, T, H), log_w (B, T,
    H, d_k) the per-channel log-gate -> (write key beta k, a = alpha (.) k, b = -beta k): A = (I - beta k k^T)
    diag(alpha) = diag(alpha) - beta k (alpha (.) k)^T."""
    bk = beta.unsqueeze(-1) * k
    return bk, torch.exp(log_w) * k, -bk


def kda_ref(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, log_w: Tensor, S0: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """KDA step by step in float64: :func:`statetrack.ops.dplr.reference.dplr_ref` on its terms."""
    bk, a, b = kda_terms(k, beta, log_w)
    return dplr_ref(q, bk, v, a, b, log_w, S0)
