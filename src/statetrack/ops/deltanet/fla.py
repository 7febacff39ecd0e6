"""The delta rule through flash-linear-attention's Triton kernels (CUDA; optional package ``fla-core``).

Same contract as ``ops.deltanet.chunk.delta_rule``: q, k (B, T, H, d_k), v (B, T, H, d_v), beta (B, T, H),
S0 (B, H, d_k, d_v) or None -> (o (B, T, H, d_v), S_T), o_t = S_t^T q_t. fla's layout is the same
([B, T, H, ...], state [B, H, K, V], o = q^T S); its two conventions that differ from ours are turned
off: the query scale (fla defaults to d_k^-1/2; ours is 1) and the in-kernel L2 normalisation of q and
k (our layers normalise them already; off by default in fla too). beta may lie anywhere in [0, 2].

Two kernels:

* ``"chunk"``: ``chunk_delta_rule``, the chunked WY form with tensor-core matmuls. It takes q, k, v
  in bfloat16 (it refuses float32; beta k and beta v are rounded to bfloat16 too); the state and the
  accumulations stay in float32. The fastest at long sequences.
* ``"recurrent"``: ``fused_recurrent_delta_rule``, one step at a time with the state in registers,
  everything in float32.

Which one ``delta_rule`` uses (:func:`default_kernel`): the float32 recurrent kernel when beta may
reach 2 (``neg=True``, eigenvalues down to -1), the bfloat16 chunk kernel otherwise. The reason: with
beta = 2 a step is a reflection, |eigenvalue| = 1, which is how these models track parity and other
groups over any length, and the chunk kernel's bfloat16 keys do not keep a product of reflections:
measured on an H100 (bench/bench_mixers.py, section reflections; docs/benchmarks.md), the state
after T steps that each reflect or not (beta 2 or 0) is off from float64 by 2.3e-2 at T = 1,024 and
8.9e-2 at T = 16,384 with the chunk kernel, against 7e-7 and 2.8e-6 with the recurrent one (our
float32 PyTorch form: 1e-6 and 4e-6).
Whether that costs a trained model its length generalization on parity was not measured. With
beta <= 1 every factor is a contraction, no unit-modulus eigenvalue is at stake, and the chunk
kernel's speed wins: forward + backward it runs as fast as fla's own chunk call, 2x faster than
the recurrent kernel at T = 1,024 and 7x at T = 4,096.
"""

from __future__ import annotations

import torch
from torch import Tensor

KERNELS = ("chunk", "recurrent")


def default_kernel(neg: bool) -> str:
    """The kernel ``delta_rule`` runs on CUDA: ``recurrent`` (float32) for beta in [0, 2], ``chunk`` (bfloat16
    inputs) for beta in [0, 1]."""
    return "recurrent" if neg else "chunk"


def delta_rule_fla(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, S0: Tensor | None = None, kernel: str = "recurrent"
) -> tuple[Tensor, Tensor]:
    """fla's ``kernel`` (``"chunk"`` or ``"recurrent"``) with our conventions; results in v's dtype,
    the state in float32 inside. Differentiable in q, k, v, beta and S0."""
    from fla.ops.delta_rule import chunk_delta_rule, fused_recurrent_delta_rule  # optional (the cuda extra)

    dtype = v.dtype
    S0 = None if S0 is None else S0.to(torch.float32)
    if S0 is not None and kernel == "recurrent" and torch.is_grad_enabled() and not S0.requires_grad:
        # fla 0.6.0's recurrent backward reads the initial state's gradient buffer whenever there is an
        # initial state, but allocates it only when that state requires a gradient (a Triton compile
        # error otherwise); the gradient given to this copy is dropped
        S0 = S0.detach().requires_grad_()
    beta = beta.to(torch.float32)
    if kernel == "chunk":
        q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
        o, S = chunk_delta_rule(
            q, k, v, beta, scale=1.0, initial_state=S0, output_final_state=True, use_qk_l2norm_in_kernel=False
        )
    elif kernel == "recurrent":
        q, k, v = (t.to(torch.float32) for t in (q, k, v))
        o, S = fused_recurrent_delta_rule(
            q, k, v, beta, scale=1.0, initial_state=S0, output_final_state=True, use_qk_l2norm_in_kernel=False
        )
    else:
        raise ValueError(f"unknown delta-rule kernel {kernel!r}; allowed: {', '.join(KERNELS)}")
    return o.to(dtype), S.to(dtype)
