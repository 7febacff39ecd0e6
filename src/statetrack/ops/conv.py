"""Depthwise causal convolution (Mamba's and DeltaNet's short conv) as K shifted multiply-adds.

Same contract as ``layers.base.causal_conv``: x (B, T, C), buf (B, C, K-1) the previous K-1 inputs;
returns y (B, T, C) and the new buffer. It works in the (B, T, C) layout (no transposes) and only
multiplies and adds, so it runs anywhere. Why not ``F.conv1d``: on this CPU a grouped conv1d costs
20-40 ms per call even for a (3, 16, 12) input in float32 and 0.25-0.4 s in float64 (docs/benchmarks.md),
which dominates small models and float64 tests.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable


def causal_conv_ref(conv: nn.Conv1d, x: Tensor, buf: Tensor) -> tuple[Tensor, Tensor]:
    """Reference: PyTorch's conv1d on the buffer followed by the chunk."""
    k = conv.kernel_size[0]
    xt = torch.cat([buf, x.transpose(1, 2)], dim=-1)
    y = nn.functional.conv1d(xt, conv.weight, conv.bias, groups=conv.groups)
    return y.transpose(1, 2), xt[..., xt.shape[-1] - (k - 1) :]


def _shifted_sum(xt: Tensor, w: Tensor, T: int) -> Tensor:
    """sum_j xt[:, j:j+T] * w[:, j]: xt (B, K-1+T, C), w (C, K) -> (B, T, C)."""
    y = xt[:, :T] * w[:, 0]
    for j in range(1, w.shape[1]):
        y.addcmul_(xt[:, j : j + T], w[:, j])
    return y


class _CausalConv(torch.autograd.Function):
    """The shifted multiply-adds with a hand-written backward. Through autograd each shift's backward
    allocated and zero-filled a full-size gradient of the padded input, copied its slice in and added
    the four up (about 20 passes over (B, T, C)); here the gradient of the padded input is written by
    K in-place multiply-adds, and each weight gradient is one product and sum (causal_conv forward +
    backward at (256, 64, 96) on the 2-core CPU: 16.7 -> 12.7 ms)."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx: Any, xt: Tensor, w: Tensor, T: int) -> Tensor:
        ctx.save_for_backward(xt, w)
        ctx.T = T
        return _shifted_sum(xt, w, T)

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, gy: Tensor) -> tuple[Tensor, Tensor, None]:
        xt, w = ctx.saved_tensors
        T, K = ctx.T, w.shape[1]
        gxt = torch.empty_like(xt)
        torch.mul(gy, w[:, 0], out=gxt[:, :T])
        gxt[:, T:].zero_()
        for j in range(1, K):
            gxt[:, j : j + T].addcmul_(gy, w[:, j])
        gw = torch.stack([(gy * xt[:, j : j + T]).sum((0, 1)) for j in range(K)], 1)
        return gxt, gw, None


def causal_conv(conv: nn.Conv1d, x: Tensor, buf: Tensor) -> tuple[Tensor, Tensor]:
    """Depthwise causal conv over a chunk as K shifted multiply-adds."""
    K = conv.kernel_size[0]
    T = x.shape[1]
    w = conv.weight[:, 0]  # (C, K)
    xt = torch.cat([buf.transpose(1, 2).to(x.dtype), x], dim=1)  # (B, K-1+T, C)
    if torch.is_grad_enabled() and (xt.requires_grad or w.requires_grad):
        y = _CausalConv.apply(xt, w, T)
    else:
        y = _shifted_sum(xt, w, T)
    if conv.bias is not None:
        y = y + conv.bias
    return y, xt[:, xt.shape[1] - (K - 1) :].transpose(1, 2)
