"""Selective diagonal scan with an outer-product input: h_t = a_t * h_{t-1} + x_t (outer) B_t.

a (B, T, E, N) real or complex; x (B, T, E) and Bm (B, T, N) real; h0 (B, E, N) or None. Returns
h (B, T, E, N) in a's dtype. This is Mamba's (and AUSSM's, DCD's) recurrence: ``diag_scan(a, x[..., None]
* Bm[..., None, :], h0)`` without materialising the input term b (B, T, E, N) or, in the backward
pass, its gradient products: the outer product is written straight into the output step by step,
and the gradients of x and Bm are batched matmuls of the state gradient (dL/dx_t = Re(g_t) B_t,
dL/dB_t = x_t^T Re(g_t)). First-order gradients only (``diag_scan`` itself supports double backward).
``selective_scan_ref`` is the float64 reference. On CUDA, complex a runs the Triton kernels of
``ops.triton_scans`` (``ops.dispatch``; ``STATETRACK_KERNELS=0`` keeps the PyTorch form).

``polar_readout`` is the complex layers' whole recurrence from the angle and modulus of their transitions,
a_t = r_t exp(i theta_t), with the readout y_t = Re(sum_n C_t,n h_t,n); it returns (y, h_T) instead of the
states: on the CPU in float32 a C kernel (``ops/selective/complex_scan.c``) keeps each sequence's state in the
cache, writes the (B, T, E, N) states only for the backward pass and returns the gradients of the angle
and modulus directly; ``polar_readout_ref`` is its float64 reference.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from statetrack.ops import cpu_kernels, dispatch
from statetrack.ops.cpu_kernels import I64, PTR
from statetrack.ops.diag.scan import diag_scan, loop_reverse, polar, use_chunked

#: the C kernel of the complex scan with its readout: its source in this folder and its functions' argument types
KERNEL: tuple[str, cpu_kernels.Signatures] = (
    "selective/complex_scan",
    (
        ("statetrack_cscan_fwd", (I64,) * 4 + (PTR,) * 10),
        ("statetrack_cscan_bwd", (I64,) * 4 + (PTR,) * 16),
    ),
)


def _fwd(a: Tensor, x: Tensor, Bm: Tensor, h0: Tensor) -> Tensor:
    out = torch.empty(a.shape, dtype=a.dtype, device=a.device)
    # every step's input x_t (outer) B_t in one product, written into the output (its real part where the
    # output is complex), then one multiply-add per step: h_t = x_t B_t + a_t h_{t-1}
    if a.is_complex():
        parts = torch.view_as_real(out)
        torch.mul(x.unsqueeze(-1), Bm.unsqueeze(-2), out=parts[..., 0])
        parts[..., 1].zero_()
    else:
        torch.mul(x.unsqueeze(-1), Bm.unsqueeze(-2), out=out)
    prev = h0
    for o, at in zip(out.unbind(1), a.unbind(1), strict=True):
        o.addcmul_(at, prev)
        prev = o
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
        g = loop_reverse(a, gh)  # a new tensor: the gradient of a is formed in it below
        cj = (lambda z: z.conj()) if h.is_complex() else (lambda z: z)
        g0 = g[:, 0] * cj(a[:, 0])
        # contiguous first: a batched matmul over the strided real view of a complex tensor copies each of
        # its B*T small matrices apart (4-5x slower than the contraction on one dense copy)
        gr = (g.real if g.is_complex() else g).contiguous()
        gx = torch.einsum("bten,btn->bte", gr, Bm)
        gB = torch.einsum("bte,bten->btn", x, gr)
        g[:, 1:].mul_(cj(h[:, :-1]))  # ga_t = g_t conj(h_{t-1})
        g[:, 0].mul_(cj(h0))
        return g, gx, gB, g0


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


def _readout_torch(
    r: Tensor | None, theta: Tensor, x: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor
) -> tuple[Tensor, Tensor]:
    h = selective_scan(polar(r, theta), x, Bm, h0)
    # Re(sum_n C_n h_n) = sum_n (Re C_n Re h_n - Im C_n Im h_n), one batched matmul over (n, re/im)
    c = torch.stack([Cm.real, -Cm.imag], -1).flatten(-2).unsqueeze(-1)  # (B, T, 2N, 1)
    return (torch.view_as_real(h).flatten(-2) @ c).squeeze(-1), h[:, -1]


def _readout_c_forward(
    c: Tensor, s: Tensor, r: Tensor | None, x: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor, keep_states: bool
) -> tuple[Tensor, Tensor, Tensor | None]:
    B, T, E, N = c.shape
    H = torch.empty(B, T, E, N, dtype=h0.dtype) if keep_states else None
    y, hT = torch.empty(B, T, E, dtype=x.dtype), torch.empty_like(h0)
    p = cpu_kernels.ptr
    cpu_kernels.library(*KERNEL).statetrack_cscan_fwd(
        B, T, E, N, p(c), p(s), p(r), p(x), p(Bm), p(Cm), p(h0), p(H), p(y), p(hT)
    )
    return y, hT, H


class _PolarReadoutC(torch.autograd.Function):
    """The C kernel with gradients (dense float32 / complex64 inputs; r None: modulus 1)."""

    @staticmethod
    def forward(
        ctx: Any, r: Tensor | None, theta: Tensor, x: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor
    ) -> tuple[Tensor, Tensor]:
        c, s = torch.cos(theta), torch.sin(theta)
        y, hT, H = _readout_c_forward(c, s, r, x, Bm, Cm, h0, keep_states=True)
        ctx.save_for_backward(c, s, r, x, Bm, Cm, h0, H)
        return y, hT

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, gy: Tensor | None, ghT: Tensor | None) -> tuple[Tensor | None, ...]:
        c, s, r, x, Bm, Cm, h0, H = ctx.saved_tensors
        gy = torch.zeros_like(x) if gy is None else cpu_kernels.dense(gy)
        ghT = cpu_kernels.dense(ghT)
        gth, gx, gB, gC, gh0 = (torch.empty_like(t) for t in (c, x, Bm, Cm, h0))
        gr = None if r is None else torch.empty_like(r)
        B, T, E, N = c.shape
        p = cpu_kernels.ptr
        cpu_kernels.library(*KERNEL).statetrack_cscan_bwd(
            B, T, E, N, *(p(t) for t in (c, s, r, x, Bm, Cm, h0, H, gy, ghT, gth, gr, gx, gB, gC, gh0))
        )
        return gr, gth, gx, gB, gC, gh0


def polar_readout(
    r: Tensor | None, theta: Tensor, x: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """y_t = Re(sum_n C_t,n h_t,n) of the states h_t = a_t h_{t-1} + x_t (outer) B_t with a_t = r_t exp(i
    theta_t), and the last state: r (modulus; None: 1) and theta (B, T, E, N) real, x (B, T, E) and Bm (B,
    T, N) real, Cm (B, T, N) complex, h0 (B, E, N) complex or None (zeros) -> y (B, T, E), h_T (B, E, N).
    The C kernel on the CPU in float32 (``ops.dispatch``), else ``selective_scan`` of ``polar(r, theta)``
    and the readout as one batched matmul."""
    B, T, E, N = theta.shape
    if h0 is None:
        h0 = torch.zeros(B, E, N, dtype=theta.dtype.to_complex(), device=theta.device)
    if T == 0:
        return x.new_zeros(x.shape), h0
    if not (theta.dtype == torch.float32 and dispatch.use_cpu_kernels(x)):
        return _readout_torch(r, theta, x, Bm, Cm, h0)
    dense = cpu_kernels.dense
    if r is not None:
        r = dense(r.expand(theta.shape))
    args = (
        r,
        dense(theta),
        dense(x),
        dense(Bm.to(x.dtype)),
        dense(Cm.to(h0.dtype)),
        dense(h0.to(torch.complex64)),
    )
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in args):
        y, hT = _PolarReadoutC.apply(*args)
        return y, hT
    with torch.no_grad():  # evaluation: no states kept
        c, s = torch.cos(args[1]), torch.sin(args[1])
        y, hT, _ = _readout_c_forward(c, s, r, *args[2:], keep_states=False)
    return y, hT
