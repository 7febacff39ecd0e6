"""What the chunked forms share: the chunk layout of a sequence and a zero matrix state."""

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
