"""flash-linear-attention's gated delta rule and gated delta product kernels behind this package's signatures
(imported only on CUDA where ``fla`` is installed; the rules of ``ops.fla``)."""

from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops.fla import KERNELS, fla_state


def gated_delta_rule_fla(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    g: Tensor,
    S0: Tensor | None = None,
    kernel: str = "recurrent",
) -> tuple[Tensor, Tensor]:
    """fla's gated delta rule; ``kernel`` "recurrent" (float32) or "chunk" (bfloat16 q, k, v)."""
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule

    dtype = v.dtype
    beta, g = beta.to(torch.float32), g.to(torch.float32)
    if kernel == "chunk":
        q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
        o, S = chunk_gated_delta_rule(
            q,
            k,
            v,
            g,
            beta,
            scale=1.0,
            initial_state=fla_state(S0),
            output_final_state=True,
            use_qk_l2norm_in_kernel=False,
        )
    elif kernel == "recurrent":
        q, k, v = (t.to(torch.float32) for t in (q, k, v))
        o, S = fused_recurrent_gated_delta_rule(
            q,
            k,
            v,
            g=g,
            beta=beta,
            scale=1.0,
            initial_state=fla_state(S0),
            output_final_state=True,
            use_qk_l2norm_in_kernel=False,
        )
    else:
        raise ValueError(f"unknown gated delta rule kernel {kernel!r}; allowed: {', '.join(KERNELS)}")
    return o.to(dtype), S.to(dtype)


def gated_delta_product_fla(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor, S0: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """fla's ``chunk_gated_delta_product`` (bfloat16 q, k, v; float32 gate, beta and state) for beta in [0, 1].
    k (B, T, n_h, H, d_k), v (B, T, n_h, H, d_v), beta (B, T, n_h, H) are laid out as fla's (T n_h) sub-steps."""
    from fla.ops.gated_delta_product import chunk_gated_delta_product

    dtype = v.dtype
    B, T, nh, H, _ = k.shape
    k, v = (t.reshape(B, T * nh, H, t.shape[-1]) for t in (k, v))
    q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
    o, S = chunk_gated_delta_product(
        q,
        k,
        v,
        g.to(torch.float32),
        beta.reshape(B, T * nh, H).to(torch.float32),
        num_householder=nh,
        scale=1.0,
        initial_state=fla_state(S0),
        output_final_state=True,
        use_qk_l2norm_in_kernel=False,
    )
    return o.to(dtype), S.to(dtype)
