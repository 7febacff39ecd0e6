"""flash-linear-attention's KDA kernels behind this package's signature (imported only on CUDA where ``fla`` is
installed; the rules of ``ops.fla``)."""

from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops.fla import KERNELS, fla_state


def kda_fla(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    log_w: Tensor,
    S0: Tensor | None = None,
    kernel: str = "chunk",
) -> tuple[Tensor, Tensor]:
    """fla's KDA: ``kernel`` "chunk" (``chunk_kda``: bfloat16 q, k, v; float32 gates, beta and state) or
    "recurrent" (``fused_recurrent_kda``, float32 throughout; no backward pass). The gate and beta are
    computed by the layer (fla's in-kernel gate, beta sigmoid and L2 norm are off)."""
    from fla.ops.kda.chunk import chunk_kda, fused_recurrent_kda

    dtype = v.dtype
    log_w, beta = log_w.to(torch.float32), beta.to(torch.float32)
    if kernel == "chunk":
        q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
        o, S = chunk_kda(
            q, k, v, log_w, beta, scale=1.0, initial_state=fla_state(S0), output_final_state=True
        )
    elif kernel == "recurrent":
        q, k, v = (t.to(torch.float32) for t in (q, k, v))
        o, S = fused_recurrent_kda(
            q, k, v, log_w, beta, scale=1.0, initial_state=fla_state(S0), output_final_state=True
        )
    else:
        raise ValueError(f"unknown KDA kernel {kernel!r}; allowed: {', '.join(KERNELS)}")
    return o.to(dtype), S.to(dtype)
