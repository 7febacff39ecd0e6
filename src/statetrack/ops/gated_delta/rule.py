"""The gated delta rule and Gated DeltaProduct as the mixers run them: fla's kernels on CUDA where ``fla`` is
installed (``ops.gated_delta.fla``), this folder's chunked form (``ops.gated_delta.chunk``) elsewhere, the
step loop of ``ops.dplr.reference`` for chunk 1."""

from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops import dispatch
from statetrack.ops.deltanet.chunk import interleave
from statetrack.ops.dplr.chunk import CHUNK
from statetrack.ops.dplr.reference import dplr_recurrent
from statetrack.ops.fla import needs_grad
from statetrack.ops.gated_delta.chunk import gated_delta_chunked
from statetrack.ops.gated_delta.reference import gated_delta_terms


def gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    g: Tensor,
    S0: Tensor | None = None,
    chunk: int = CHUNK,
    neg: bool = False,
) -> tuple[Tensor, Tensor]:
    """S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = S_t^T q_t, alpha_t = exp(g_t).

    q, k (B, T, H, d_k) (k L2-normalised), v (B, T, H, d_v), beta, g (B, T, H). ``neg`` says beta may
    reach 2 (eigenvalues down to -1). On CUDA with fla: beta in [0, 1] runs fla's chunk kernel; with
    ``neg`` the float32 recurrent kernel when no gradient is needed (evaluation), else this module's
    chunked form (fla's recurrent kernel has no backward pass, and its chunk kernel's bfloat16 keys do
    not keep reflections exact: ``ops.fla``). Elsewhere its own chunked form (``ops.gated_delta.chunk``,
    a hand-written backward pass) when chunk > 1, else the step loop."""
    if q.shape[1] and dispatch.use_fla(q):
        grad = needs_grad(q, k, v, beta, g, S0)
        from statetrack.ops.fla import gated_chunk_backward
        from statetrack.ops.gated_delta.fla import gated_delta_rule_fla

        if not grad or (not neg and gated_chunk_backward()):
            return gated_delta_rule_fla(q, k, v, beta, g, S0, "recurrent" if neg else "chunk")
    if chunk and chunk > 1:
        return gated_delta_chunked(q, k, v, beta, g, S0, chunk)
    bk, a, b, log_w = gated_delta_terms(k, beta, g)
    return dplr_recurrent(q, bk, v, a, b, log_w, S0)


def gated_delta_product(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    g: Tensor,
    S0: Tensor | None = None,
    chunk: int = CHUNK,
    neg: bool = False,
) -> tuple[Tensor, Tensor]:
    """Gated DeltaProduct (Siems2025; fla's ``gated_delta_product``): per token t the gate, then n_h delta steps,

        S <- alpha_t S;  S <- (I - beta_j k_j k_j^T) S + beta_j k_j v_j^T  (j = 1..n_h);  o_t = S^T q_t,

    so A(x_t) = alpha_t prod_j (I - beta_j k_j k_j^T). q (B, T, H, d_k); k (B, T, n_h, H, d_k) (each k_j
    L2-normalised); v (B, T, n_h, H, d_v); beta (B, T, n_h, H); g (B, T, H) the log-gate. Run as the gated
    delta rule over T n_h sub-steps with the gate on each token's first sub-step and the query on its last
    (``ops.deltanet.chunk.interleave``), as fla's own layer runs its recurrent kernel; on CUDA with fla and
    beta in [0, 1], fla's ``chunk_gated_delta_product`` (bfloat16 q, k, v, as every chunk kernel here);
    with ``neg`` the gated delta rule's exactness rule (``ops.fla``). Returns (o (B, T, H, d_v), S_T)."""
    nh = k.shape[2]
    if q.shape[1] and dispatch.use_fla(q) and not neg:
        from statetrack.ops.fla import gated_chunk_backward
        from statetrack.ops.gated_delta.fla import gated_delta_product_fla

        grad = needs_grad(q, k, v, beta, g, S0)
        if not grad or gated_chunk_backward():
            return gated_delta_product_fla(q, k, v, beta, g, S0)
    qq, kk, vv, bb = interleave(q, k, v, beta)
    gg = torch.zeros_like(bb)
    gg[:, ::nh] = g
    o, S = gated_delta_rule(qq, kk, vv, bb, gg, S0, chunk, neg)  # chunk: sub-steps per chunk
    return o[:, nh - 1 :: nh], S
