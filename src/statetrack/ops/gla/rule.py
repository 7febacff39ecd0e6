"""Gated linear attention as the mixer runs it: fla's kernel on CUDA where ``fla`` is installed (``ops.gla.fla``),
this folder's chunked form (``ops.gla.chunk``) elsewhere, the step loop of ``ops.dplr.reference`` for chunk 1.
Its reference is :func:`statetrack.ops.dplr.reference.dplr_ref` with no rank-one term (a = b = None)."""

from __future__ import annotations

from torch import Tensor

from statetrack.ops import dispatch
from statetrack.ops.dplr.chunk import CHUNK
from statetrack.ops.dplr.reference import dplr_recurrent
from statetrack.ops.gla.chunk import gla_chunked


def gla_rule(
    q: Tensor, k: Tensor, v: Tensor, log_w: Tensor, S0: Tensor | None = None, chunk: int = CHUNK
) -> tuple[Tensor, Tensor]:
    """S_t = diag(w_t) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t (gated linear attention). On CUDA with fla, fla's
    chunk kernel; elsewhere its own sub-chunked form (``ops.gla.chunk``, a hand-written backward pass) when
    chunk > 1, else the step loop."""
    if q.shape[1] and dispatch.use_fla(q):
        from statetrack.ops.gla.fla import gla_fla

        return gla_fla(q, k, v, log_w, S0)
    if chunk and chunk > 1:
        return gla_chunked(q, k, v, log_w, S0, chunk)
    return dplr_recurrent(q, k, v, None, None, log_w, S0)
