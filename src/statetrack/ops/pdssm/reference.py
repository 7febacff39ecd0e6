"""PD-SSM's recurrence step by step: h_t = P_t D_t h_{t-1} + b_t (``rows``: D_t P_t), the transitions as
matrices (:func:`pd_matrix`), the step and its loop, and :func:`pd_ref`, the loop in complex128: the reference
of :func:`statetrack.ops.pdssm.scan.pd_scan`."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def pd_apply(idx: Tensor, d: Tensor, h: Tensor, rows: bool) -> Tensor:
    """A h for A given by (idx, d): idx, d, h (..., N) -> (..., N)."""
    if rows:
        return d * torch.gather(h, -1, idx)
    return torch.zeros_like(h).scatter_add(-1, idx, d * h)


def pd_start(d: Tensor, h0: Tensor | None) -> Tensor:
    return torch.zeros_like(d[:, 0]) if h0 is None else h0


def pd_matrix(idx: Tensor, d: Tensor, rows: bool = False) -> Tensor:
    """The dense transition matrices: idx, d (..., N) -> (..., N, N) in d's dtype."""
    N = idx.shape[-1]
    P = F.one_hot(idx, N).to(d.dtype)  # [..., i, j] = 1 where j = idx[i]
    if rows:
        return d.unsqueeze(-1) * P  # row m: d_m e_sigma(m)^T
    return P.transpose(-1, -2) * d.unsqueeze(-2)  # column n: d_n e_sigma(n)


def pd_step(idx: Tensor, d: Tensor, b: Tensor, h: Tensor, rows: bool = False) -> Tensor:
    """One step: idx, d, b, h (B, N) -> h_t (B, N)."""
    return pd_apply(idx, d, h, rows) + b


def pd_recurrent(
    idx: Tensor, d: Tensor, b: Tensor, h0: Tensor | None = None, rows: bool = False
) -> tuple[Tensor, Tensor]:
    """Step-by-step loop in the inputs' dtype."""
    h = pd_start(d, h0)
    out = []
    for t in range(idx.shape[1]):
        h = pd_step(idx[:, t], d[:, t], b[:, t], h, rows)
        out.append(h)
    return (torch.stack(out, 1) if out else b.clone()), h


def pd_ref(
    idx: Tensor,
    d: Tensor,
    b: Tensor,
    h0: Tensor | None = None,
    rows: bool = False,
    soft: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Reference: the dense matrices in complex128, step by step. With ``soft``, the matrices are the
    straight-through P = hard + soft - soft.detach() of Terzic2025's code (value: the hard one-hot)."""
    c = torch.complex128
    d, b = d.to(c), b.to(c)
    P = F.one_hot(idx, idx.shape[-1]).to(torch.float64)  # [..., i, j] = 1 where j = idx[i]
    if not rows:
        P = P.transpose(-1, -2)
    if soft is not None:
        s = soft.to(torch.float64)
        P = P + s - s.detach()
    A = (d.unsqueeze(-1) * P) if rows else (P * d.unsqueeze(-2))
    h = pd_start(d, None if h0 is None else h0.to(c))
    out = []
    for t in range(idx.shape[1]):
        h = torch.einsum("bmn,bn->bm", A[:, t], h) + b[:, t]
        out.append(h)
    return (torch.stack(out, 1) if out else b.clone()), h
