"""Selective diagonal scan with an outer-product input: h_t = a_t * h_{t-1} + x_t (outer) B_t.

a (B, T, E, N) real or complex; x (B, T, E) and Bm (B, T, N) real; h0 (B, E, N) or None. Returns
h (B, T, E, N) in a's dtype. This is Mamba's (and AUSSM's, DCD's) recurrence: ``diag_scan(a, x[..., None]
* Bm[..., None, :], h0)`` without materialising the input term b (B, T, E, N) or, in the backward
pass, its gradient products: the outer product is written straight into the output step by step,
and the gradients of x and Bm are batched matmuls of the state gradient (dL/dx_t = Re(g_t) B_t,
dL/dB_t = x_t^T Re(g_t)). First-order gradients only (``diag_scan`` itself supports double backward).
``selective_scan_ref`` is the float64 reference. On CUDA, complex a runs the Triton kernels of
``ops.triton_scans`` (``ops.dispatch``; ``STATETRACK_KERNELS=0`` keeps the PyTorch form).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from statetrack.ops import dispatch
from statetrack.ops.diag import diag_scan, diag_scan_ref, loop_reverse, use_chunked


def selective_scan_ref(a: Tensor, x: Tensor, Bm: Tensor, h0: Tensor | None = None) -> Tensor:
    return diag_scan_ref(a, x.double().unsqueeze(-1) * Bm.double().unsqueeze(-2), h0)


def _fwd(a: Tensor, x: Tensor, Bm: Tensor, h0: Tensor) -> Tensor:
    out = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    o, av, xv, bv = out.unbind(1), a.unbind(1), x.unsqueeze(-1).unbind(1), Bm.unsqueeze(-2).unbind(1)
    prev = h0
    tmp = (
        torch.empty(out.shape[:1] + out.shape[2:], dtype=x.dtype, device=x.device) if a.is_complex() else None
    )
    for t in range(len(o)):
        if tmp is None:
            torch.mul(xv[t], bv[t], out=o[t])
        else:  # real outer product, copied into the complex output (imaginary part 0)
            torch.mul(xv[t], bv[t], out=tmp)
            o[t].copy_(tmp)
        o[t].addcmul_(av[t], prev)
        prev = o[t]
    return out


class _SelectiveScan(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx: Any, a: Tensor, x: Tensor, Bm: Tensor, h0: Tensor) -> Tensor:
        h = _fwd(a, x, Bm, h0)
        ctx.save_for_backward(a, x, Bm, h, h0)
        return h

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, gh: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        a, x, Bm, h, h0 = ctx.saved_tensors
        g = loop_reverse(a, gh)
        cj = (lambda z: z.conj()) if h.is_complex() else (lambda z: z)
        ga = torch.empty_like(g)
        torch.mul(g[:, 1:], cj(h[:, :-1]), out=ga[:, 1:])
        torch.mul(g[:, 0], cj(h0), out=ga[:, 0])
        g0 = g[:, 0] * cj(a[:, 0])
        gr = g.real if g.is_complex() else g
        gx = (gr @ Bm.unsqueeze(-1)).squeeze(-1)  # (B, T, E)
        gB = (x.unsqueeze(-2) @ gr).squeeze(-2)  # (B, T, N)
        return ga, gx, gB, g0


def selective_scan(a: Tensor, x: Tensor, Bm: Tensor, h0: Tensor | None = None) -> Tensor:
    """h_t = a_t h_{t-1} + x_t (outer) B_t; same result as ``diag_scan(a, x[..., None] * Bm[..., None, :], h0)``."""
    if a.is_complex() and dispatch.use_triton(a):
        from statetrack.ops.triton_scans import selective_scan_triton  # optional: imports triton (CUDA)

        return selective_scan_triton(a, x, Bm, h0)
    rdtype = a.dtype.to_real() if a.is_complex() else a.dtype
    x, Bm = x.to(rdtype), Bm.to(rdtype)
    if h0 is None:
        h0 = torch.zeros(a.shape[:1] + a.shape[2:], dtype=a.dtype, device=a.device)
    else:
        h0 = h0.to(a.dtype)
    if use_chunked(a):  # long sequence, small state: the chunked scan on the (small) materialised input
        return diag_scan(a, x.unsqueeze(-1) * Bm.unsqueeze(-2), h0)
    return _SelectiveScan.apply(a, x, Bm, h0)
