"""The DPLR recurrence step by step (:func:`dplr_step`, :func:`dplr_recurrent`) and :func:`dplr_ref`, the loop in
float64: the reference of every DPLR form (this folder's chunked form, GLA's, the gated delta rule's, KDA's and
fla's kernels); the transitions as matrices (:func:`dplr_transition`)."""

from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops.chunks import zeros_state


def dplr_step(
    q: Tensor, k: Tensor, v: Tensor, a: Tensor | None, b: Tensor | None, log_w: Tensor, S: Tensor
) -> tuple[Tensor, Tensor]:
    """One step: q, k, a, b (B, H, d_k), v (B, H, d_v), log_w (B, H, d_k or 1), S (B, H, d_k, d_v)
    -> (o (B, H, d_v), S)."""
    new = torch.exp(log_w).unsqueeze(-1) * S + k.unsqueeze(-1) * v.unsqueeze(-2)
    if a is not None and b is not None:
        z = torch.einsum("bhk,bhkv->bhv", a, S)
        new = new + b.unsqueeze(-1) * z.unsqueeze(-2)
    return torch.einsum("bhk,bhkv->bhv", q, new), new


def dplr_recurrent(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    a: Tensor | None,
    b: Tensor | None,
    log_w: Tensor,
    S0: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Step-by-step loop in the inputs' dtype."""
    S = zeros_state(k, v) if S0 is None else S0
    out = []
    for t in range(q.shape[1]):
        o, S = dplr_step(
            q[:, t],
            k[:, t],
            v[:, t],
            None if a is None else a[:, t],
            None if b is None else b[:, t],
            log_w[:, t],
            S,
        )
        out.append(o)
    o = torch.stack(out, 1) if out else v.new_zeros(v.shape)
    return o, S


def dplr_ref(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    a: Tensor | None,
    b: Tensor | None,
    log_w: Tensor,
    S0: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Reference: the step-by-step loop in float64."""
    d = torch.float64
    a, b, S0 = (None if x is None else x.to(d) for x in (a, b, S0))
    return dplr_recurrent(q.to(d), k.to(d), v.to(d), a, b, log_w.to(d), S0)


def dplr_transition(a: Tensor | None, b: Tensor | None, log_w: Tensor, dk: int) -> Tensor:
    """The transition matrices diag(w) + b a^T: (..., d_k) -> (..., d_k, d_k)."""
    w = torch.exp(log_w).expand(*log_w.shape[:-1], dk)
    A = torch.diag_embed(w)
    if a is not None and b is not None:
        A = A + b.unsqueeze(-1) * a.unsqueeze(-2)
    return A
