"""Depthwise causal convolution (Mamba's and DeltaNet's short conv) as K shifted multiply-adds.

Same contract as ``layers.base.causal_conv``: x (B, T, C), buf (B, C, K-1) the previous K-1 inputs;
returns y (B, T, C) and the new buffer. It works in the (B, T, C) layout (no transposes) and only
multiplies and adds, so it runs anywhere. Why not ``F.conv1d``: on this CPU a grouped conv1d costs
20-40 ms per call even for a (3, 16, 12) input in float32 and 0.25-0.4 s in float64 (docs/benchmarks.md),
which dominates small models and float64 tests.

Without gradients, on the CPU in float32, a C kernel (``ops/common/conv.c``) forms each output row once
instead of K passes over a concatenation of the buffer and the chunk, in the same arithmetic: used where
a probe, once per process, finds it equal to the PyTorch form to the bit (``c_rounds_alike``), so that
evaluation and validation give the numbers they gave before (``STATETRACK_KERNELS=0`` keeps the
PyTorch form, see ``ops.dispatch``).
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from statetrack.ops import cpu_kernels, dispatch
from statetrack.ops.cpu_kernels import I64, PTR

#: the C kernel: its source (ops/common, the C of the modules the recurrences share) and its argument types
KERNEL: tuple[str, cpu_kernels.Signatures] = (
    "common/conv",
    (("statetrack_causal_conv", (I64,) * 4 + (PTR,) + (I64,) * 2 + (PTR,) * 4),),
)


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


def _torch_form(x: Tensor, buf: Tensor, w: Tensor, bias: Tensor | None) -> tuple[Tensor, Tensor]:
    """The shifted multiply-adds (with gradients where asked): y (B, T, C) and the padded input xt."""
    T = x.shape[1]
    xt = torch.cat([buf.transpose(1, 2).to(x.dtype), x], dim=1)  # (B, K-1+T, C)
    if torch.is_grad_enabled() and (xt.requires_grad or w.requires_grad):
        y = _CausalConv.apply(xt, w, T)
    else:
        y = _shifted_sum(xt, w, T)
    return (y if bias is None else y + bias), xt


def _c_form(x: Tensor, buf: Tensor, w: Tensor, bias: Tensor | None) -> Tensor:
    """The C kernel (no gradients, float32): y (B, T, C)."""
    B, T, C = x.shape
    K = w.shape[1]
    if x.stride(-1) != 1 or x.is_neg() or x.is_conj():  # else read in place: a slice of a projection
        x = cpu_kernels.dense(x)
    buf, b = cpu_kernels.dense(buf), cpu_kernels.dense(bias)
    wt = w.t().contiguous()  # (K, C): each tap's weights in a row
    y = torch.empty(B, T, C, dtype=x.dtype)
    p = cpu_kernels.ptr
    cpu_kernels.library(*KERNEL).statetrack_causal_conv(
        B, T, C, K, x.data_ptr(), x.stride(0), x.stride(1), p(buf), p(wt), p(b), p(y)
    )
    return y


@functools.cache
def c_rounds_alike() -> bool:
    """Does the C kernel give the PyTorch form's numbers to the bit on this machine? Checked once per
    process on probes with a tail that fills no vector register and with chunks shorter than the kernel."""
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for B, T, C, K in ((2, 37, 19, 4), (3, 40, 64, 4), (2, 2, 21, 4), (1, 9, 8, 1)):
            x, buf = torch.randn(B, T, C, generator=g), torch.randn(B, C, K - 1, generator=g)
            w, bias = torch.randn(C, K, generator=g), torch.randn(C, generator=g)
            if not torch.equal(_c_form(x, buf, w, bias), _torch_form(x, buf, w, bias)[0]):
                return False
    return True


def _use_c(x: Tensor, buf: Tensor, w: Tensor, bias: Tensor | None) -> bool:
    return (
        not (torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (x, buf, w, bias)))
        and dispatch.use_cpu_kernels(x)
        and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in (buf, w) if t is not None)
        and (bias is None or bias.dtype == torch.float32)
        and c_rounds_alike()
    )


def causal_conv(conv: nn.Conv1d, x: Tensor, buf: Tensor) -> tuple[Tensor, Tensor]:
    """Depthwise causal conv over a chunk as K shifted multiply-adds (the C kernel where it applies)."""
    K = conv.kernel_size[0]
    w = conv.weight[:, 0]  # (C, K)
    if not _use_c(x, buf, w, conv.bias):
        y, xt = _torch_form(x, buf, w, conv.bias)
        return y, xt[:, xt.shape[1] - (K - 1) :].transpose(1, 2)
    T = x.shape[1]
    # the last K-1 inputs of the buffer followed by the chunk, copied out (a small tensor, not a view
    # that would keep the chunk's projection alive)
    tail = x[:, T - (K - 1) :] if T >= K - 1 else torch.cat([buf.transpose(1, 2), x], dim=1)[:, T:]
    return _c_form(x, buf, w, conv.bias), tail.transpose(1, 2).contiguous()
