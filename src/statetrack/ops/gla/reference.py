"""Gated linear attention step by step in float64: the DPLR reference with no rank-one term."""

from __future__ import annotations

from torch import Tensor

from statetrack.ops.dplr.reference import dplr_ref


def gla_ref(
    q: Tensor, k: Tensor, v: Tensor, log_w: Tensor, S0: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """S_t = diag(w_t) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t in float64: :func:`statetrack.ops.dplr.reference.dplr_ref`
    with a = b = None."""
    return dplr_ref(q, k, v, None, None, log_w, S0)
