"""flash-linear-attention's RWKV-7 kernel behind this package's signature (imported only on CUDA where ``fla``
is installed)."""

from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops.fla import fla_state


def rwkv7_fla(
    q: Tensor, k: Tensor, v: Tensor, log_w: Tensor, kappa: Tensor, a_lr: Tensor, S0: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """fla's chunked RWKV-7 kernel (bfloat16 inputs, float32 decay and state; not a contraction: the module
    docstring gives its measured error); fla's recurrent DPLR kernel has no backward pass, so training needs
    this one."""
    from fla.ops.rwkv7 import chunk_rwkv7

    dtype = v.dtype
    a, b = kappa, -kappa * a_lr
    q, k, v, a, b = (t.to(torch.bfloat16) for t in (q, k, v, a, b))
    o, S = chunk_rwkv7(
        q,
        log_w.to(torch.float32),
        k,
        v,
        a,
        b,
        scale=1.0,
        initial_state=fla_state(S0),
        output_final_state=True,
    )
    return o.to(dtype), S.to(dtype)
