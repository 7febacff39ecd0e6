"""flash-linear-attention's GLA kernel behind this package's signature (imported only on CUDA where ``fla`` is
installed)."""

from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops.fla import KERNELS, fla_state


def gla_fla(
    q: Tensor, k: Tensor, v: Tensor, log_w: Tensor, S0: Tensor | None = None, kernel: str = "chunk"
) -> tuple[Tensor, Tensor]:
    """fla's GLA: ``kernel`` "chunk" (bfloat16 q, k, v; float32 gates and state; the default) or
    "recurrent" (float32 throughout)."""
    from fla.ops.gla.chunk import chunk_gla, fused_recurrent_gla

    dtype = v.dtype
    log_w = log_w.to(torch.float32)
    if kernel == "chunk":
        q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
        o, S = chunk_gla(q, k, v, log_w, scale=1.0, initial_state=fla_state(S0), output_final_state=True)
    elif kernel == "recurrent":
        q, k, v = (t.to(torch.float32) for t in (q, k, v))
        o, S = fused_recurrent_gla(
            q, k, v, gk=log_w, scale=1.0, initial_state=fla_state(S0), output_final_state=True
        )
    else:
        raise ValueError(f"unknown GLA kernel {kernel!r}; allowed: {', '.join(KERNELS)}")
    return o.to(dtype), S.to(dtype)
