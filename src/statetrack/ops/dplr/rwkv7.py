"""RWKV-7 as the mixer runs it: fla's chunk kernel on CUDA where ``fla`` is installed and the heads fit it
(``ops.dplr.fla``), the DPLR chunked form (``ops.dplr.chunk``) elsewhere."""

from __future__ import annotations

from torch import Tensor

from statetrack.ops import dispatch
from statetrack.ops.dplr.chunk import CHUNK, dplr


def rwkv7_terms(kappa: Tensor, a_lr: Tensor) -> tuple[Tensor, Tensor]:
    """RWKV-7's rank-one term from the normalised removal key kappa_hat and the in-context learning
    rate a_lr (both (B, T, H, d_k)): (a, b) = (kappa_hat, -kappa_hat * a_lr)."""
    return kappa, -kappa * a_lr


#: the narrowest head fla 0.6.0's ``chunk_rwkv7`` compiles for, in key and in value channels: its products
#: need K >= 16 (Triton's "Input shapes should have M >= 1, N >= 1 and K >= 16": on an H100 for d_k = 8,
#: and on an H200 for d_k = 16 with d_v = 8, the spec rwkv7(heads=2) at width 16; bench/gpu_check.py)
RWKV7_FLA_MIN_DK = 16


def rwkv7_fla_fits(d_k: int, d_v: int) -> bool:
    """Do heads of d_k key and d_v value channels fit fla's RWKV-7 kernels (both at least
    ``RWKV7_FLA_MIN_DK``)?"""
    return min(d_k, d_v) >= RWKV7_FLA_MIN_DK


def rwkv7_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_w: Tensor,
    kappa: Tensor,
    a_lr: Tensor,
    S0: Tensor | None = None,
    chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:
    """S_t = (diag(w_t) - (kappa_hat_t * a_t) kappa_hat_t^T) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t.

    q (RWKV's receptance r), k (the replacement key), kappa (the normalised removal key), a_lr, log_w
    (B, T, H, d_k); v (B, T, H, d_v). On CUDA with fla, fla's chunk kernel where d_k and d_v are both at least
    ``RWKV7_FLA_MIN_DK`` (it does not compile for narrower heads), this module's chunked form otherwise."""
    if q.shape[1] and rwkv7_fla_fits(q.shape[-1], v.shape[-1]) and dispatch.use_fla(q):
        from statetrack.ops.dplr.fla import rwkv7_fla

        return rwkv7_fla(q, k, v, log_w, kappa, a_lr, S0)
    a, b = rwkv7_terms(kappa, a_lr)
    return dplr(q, k, v, a, b, log_w, S0, chunk)
