"""Depthwise causal convolution (Mamba's and DeltaNet's short conv) as K shifted multiply-adds.

Same contract as ``layers.base.causal_conv``: x (B, T, C), buf (B, C, K-1) the previous K-1 inputs;
returns y (B, T, C) and the new buffer. It works in the (B, T, C) layout (no transposes) and only
multiplies and adds, so it runs anywhere. Why not ``F.conv1d``: on this CPU a grouped conv1d costs
20-40 ms per call even for a (3, 16, 12) input in float32 and 0.25-0.4 s in float64 (docs/benchmarks.md),
which dominates small models and float64 tests.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn


def causal_conv_ref(conv: nn.Conv1d, x: Tensor, buf: Tensor) -> tuple[Tensor, Tensor]:
    """Reference: PyTorch's conv1d on the buffer followed by the chunk."""
    k = conv.kernel_size[0]
    xt = torch.cat([buf, x.transpose(1, 2)], dim=-1)
    y = nn.functional.conv1d(xt, conv.weight, conv.bias, groups=conv.groups)
    return y.transpose(1, 2), xt[..., xt.shape[-1] - (k - 1):]


def causal_conv(conv: nn.Conv1d, x: Tensor, buf: Tensor) -> tuple[Tensor, Tensor]:
    """Depthwise causal conv over a chunk as K shifted multiply-adds."""
    K = conv.kernel_size[0]
    T = x.shape[1]
    w = conv.weight[:, 0]  # (C, K)
    xt = torch.cat([buf.transpose(1, 2).to(x.dtype), x], dim=1)  # (B, K-1+T, C)
    y = xt[:, :T] * w[:, 0]
    for j in range(1, K):
        y = torch.addcmul(y, xt[:, j:j + T], w[:, j])
    if conv.bias is not None:
        y = y + conv.bias
    return y, xt[:, xt.shape[1] - (K - 1):].transpose(1, 2)
