"""The delta rule step by step (:func:`delta_step`, its loop, and :func:`delta_rule_ref`, the loop in float64:
the reference of the chunked form and of fla's kernels) and the transition of DeltaProduct as a product of
generalized Householder matrices (:func:`householder_product`)."""

from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops.chunks import zeros_state


def delta_step(q: Tensor, k: Tensor, v: Tensor, beta: Tensor, S: Tensor) -> tuple[Tensor, Tensor]:
    """One step: q, k (B, H, d_k), v (B, H, d_v), beta (B, H), S (B, H, d_k, d_v) -> (o (B, H, d_v), S)."""
    kS = torch.einsum("bhk,bhkv->bhv", k, S)
    S = S + (beta.unsqueeze(-1) * k).unsqueeze(-1) * (v - kS).unsqueeze(-2)
    return torch.einsum("bhk,bhkv->bhv", q, S), S


def delta_rule_recurrent(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, S0: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Step-by-step loop in the inputs' dtype."""
    S = zeros_state(k, v) if S0 is None else S0
    out = []
    for t in range(q.shape[1]):
        o, S = delta_step(q[:, t], k[:, t], v[:, t], beta[:, t], S)
        out.append(o)
    o = torch.stack(out, 1) if out else v.new_zeros(v.shape)
    return o, S


def delta_rule_ref(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, S0: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """Reference: the step-by-step loop in float64."""
    d = torch.float64
    return delta_rule_recurrent(q.to(d), k.to(d), v.to(d), beta.to(d), None if S0 is None else S0.to(d))


def householder_product(k: Tensor, beta: Tensor) -> Tensor:
    """prod_j (I - beta_j k_j k_j^T) applied in order j = 1..n_h (the last on the left).

    k (..., n_h, d), beta (..., n_h) -> (..., d, d)."""
    d = k.shape[-1]
    A = torch.eye(d, dtype=k.dtype, device=k.device).expand(*k.shape[:-2], d, d)
    for j in range(k.shape[-2]):
        kj, bj = k[..., j, :], beta[..., j]
        A = A - bj[..., None, None] * kj.unsqueeze(-1) * (kj.unsqueeze(-2) @ A)
    return A
