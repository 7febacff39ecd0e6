"""What the chunked forms share: the chunk layout of a sequence, a zero matrix state, segment sums of log-decays."""

from __future__ import annotations

import torch
from torch import Tensor


def chunk_layout(T: int, chunk: int) -> tuple[int, int, int]:
    """(chunk size C, number of chunks n, padded steps n C - T) for T > 0 steps in chunks of ``chunk``."""
    C = max(1, min(chunk, T))
    n = -(-T // C)
    return C, n, n * C - T


def zeros_state(k: Tensor, v: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """The zero matrix state (B, H, d_k, d_v) for keys k (B, T, H, d_k) and values v (B, T, H, d_v)."""
    B, _, H, dk = k.shape
    return torch.zeros(B, H, dk, v.shape[-1], dtype=dtype or v.dtype, device=v.device)


def segsum(x: Tensor) -> Tensor:
    """x (..., C, D) -> (..., C, C, D) with [t, s] = sum_{s < r <= t} x_r for s <= t and -inf above the
    diagonal: each entry sums its own terms (no difference of running sums, which loses the small
    segments of a long, strongly decaying chunk)."""
    C = x.shape[-2]
    rep = x.unsqueeze(-2).expand(*x.shape[:-2], C, C, x.shape[-1])  # [t, s] = x_t
    strict = torch.ones(C, C, dtype=torch.bool, device=x.device).tril(-1)
    seg = rep.masked_fill(~strict.unsqueeze(-1), 0.0).cumsum(-3)
    lower = torch.ones(C, C, dtype=torch.bool, device=x.device).tril()
    return seg.masked_fill(~lower.unsqueeze(-1), float("-inf"))
