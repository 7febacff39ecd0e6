"""KDA as the mixer runs it: fla's kernels on CUDA where ``fla`` is installed (``ops.kda.fla``), this folder's
chunked form (``ops.kda.chunk``) elsewhere, the step loop of ``ops.dplr.reference`` for chunk 1."""

from __future__ import annotations

from torch import Tensor

from statetrack.ops import dispatch
from statetrack.ops.dplr.chunk import CHUNK
from statetrack.ops.dplr.reference import dplr_recurrent
from statetrack.ops.fla import needs_grad
from statetrack.ops.kda.chunk import kda_chunked
from statetrack.ops.kda.reference import kda_terms


def kda_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    log_w: Tensor,
    S0: Tensor | None = None,
    chunk: int = CHUNK,
    neg: bool = False,
) -> tuple[Tensor, Tensor]:
    """KDA (Kimi Linear; fla's ``kda``): S_t = (I - beta_t k_t k_t^T) diag(alpha_t) S_{t-1} + beta_t k_t v_t^T,
    o_t = S_t^T q_t, alpha_t = exp(log_w_t) per key channel: Gated DeltaNet with a diagonal gate.

    q, k, log_w (B, T, H, d_k); v (B, T, H, d_v); beta (B, T, H). On CUDA with fla, the gated delta rule's
    rules (``ops.fla``): beta in [0, 1] runs fla's ``chunk_kda`` (bfloat16 q, k, v); ``neg`` its float32
    ``fused_recurrent_kda`` when no gradient is needed, else the PyTorch form. Elsewhere its own sub-chunked
    form (``ops.kda.chunk``, a hand-written backward pass) when chunk > 1, else the step loop."""
    if q.shape[1] and dispatch.use_fla(q):
        grad = needs_grad(q, k, v, beta, log_w, S0)
        if not neg or not grad:
            from statetrack.ops.kda.fla import kda_fla

            return kda_fla(q, k, v, beta, log_w, S0, "recurrent" if neg else "chunk")
    if chunk and chunk > 1:
        return kda_chunked(q, k, v, beta, log_w, S0, chunk)
    bk, a, b = kda_terms(k, beta, log_w)
    return dplr_recurrent(q, bk, v, a, b, log_w, S0)
