"""Mamba-3's recurrence (Lahoti2026): a complex diagonal transition per head, discretised by the
exponential-trapezoidal rule.

Per head h (P channels) and complex state slot n (N2 of them; one slot is one pair of Mamba-3's real
state dimensions, rotated together by the data-dependent angle phi_t,n = Delta_t theta_t,n)::

    a_t = exp(Delta_t A_t) exp(i phi_t)                          (|a_t| <= 1: the decay times a rotation)
    u_t = x_t (outer) B_t                                         (B_t complex: a pair of real B entries)
    h_t = a_t h_{t-1} + gamma_t u_t + beta_t a_t u_{t-1}          gamma = lambda Delta, beta = (1 - lambda) Delta
    y_t = Re(sum_n conj(C_t,n) h_t,n)                             (= the real pairs' dot product C^T h)

(the paper's beta_t includes the decay exp(Delta_t A_t); here the whole a_t, rotation included, multiplies
u_{t-1}, which is what the rotated-B form of the paper computes). lambda = 1 is Mamba-2's
exponential-Euler rule. Shapes: log_decay = Delta A (B, T, H) <= 0; phi (B, T, H, N2); x (B, T, H, P);
Bc, Cc (B, T, H, N2) complex; gamma, beta (B, T, H); the state (h (B, H, P, N2) complex, u_prev
(B, H, P, N2) complex: the last input term, which the trapezoid reads at the next step). Returns
y (B, T, H, P) and the state.

:func:`mamba3_scan` runs a C kernel on the CPU in float32 (``ops/mamba3/mamba3_scan.c``: each (sequence, head,
channel) keeps its N2 slots and its last input term in registers; the backward pass reduces every gradient
step by step), and otherwise forms the input terms b_t (all steps at once) and runs ``diag_scan`` (the
multiply-add loop, or its chunked form; custom backward); :func:`mamba3_scan_ref` is the step loop in
float64 / complex128.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from statetrack.ops import cpu_kernels, dispatch
from statetrack.ops.cpu_kernels import I64, PTR
from statetrack.ops.diag.scan import diag_scan
from statetrack.ops.mamba3.reference import mamba3_readout, mamba3_transition, mamba3_zero_state

#: the largest number of complex slots N/2 the C kernel takes
MAMBA3_NMAX = 32
#: the C kernel: its source in this folder and its functions' argument types
KERNEL: tuple[str, cpu_kernels.Signatures] = (
    "mamba3/mamba3_scan",
    (
        ("statetrack_mamba3_fwd", (I64,) * 5 + (PTR,) * 20),
        ("statetrack_mamba3_bwd", (I64,) * 5 + (PTR,) * 33),
    ),
)


def _parts(z: Tensor) -> tuple[Tensor, Tensor]:
    return cpu_kernels.dense(z.real), cpu_kernels.dense(z.imag)


def _forward_c(
    ar: Tensor,
    ai: Tensor,
    x: Tensor,
    Br: Tensor,
    Bi: Tensor,
    Cr: Tensor,
    Ci: Tensor,
    gamma: Tensor,
    beta: Tensor,
    h0r: Tensor,
    h0i: Tensor,
    u0r: Tensor,
    u0i: Tensor,
    *,
    keep_states: bool,
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor | None, Tensor | None]:
    """The C kernel's forward (contiguous float32): y, the final state's parts, and the states (B, H, T, P,
    N2) for the backward pass (None when ``keep_states`` is false)."""
    B, T, H, P = x.shape
    N = ar.shape[-1]
    Hr, Hi = (torch.empty(B, H, T, P, N, dtype=x.dtype) for _ in range(2)) if keep_states else (None, None)
    y = torch.empty(B, T, H, P, dtype=x.dtype)
    hTr, hTi, uTr, uTi = (torch.empty_like(h0r) for _ in range(4))
    p = cpu_kernels.ptr
    cpu_kernels.library(*KERNEL).statetrack_mamba3_fwd(
        B,
        T,
        H,
        P,
        N,
        *(
            p(t)
            for t in (
                ar,
                ai,
                x,
                Br,
                Bi,
                Cr,
                Ci,
                gamma,
                beta,
                h0r,
                h0i,
                u0r,
                u0i,
                Hr,
                Hi,
                y,
                hTr,
                hTi,
                uTr,
                uTi,
            )
        ),
    )
    return y, hTr, hTi, uTr, uTi, Hr, Hi


class _Mamba3ScanC(torch.autograd.Function):
    """The C kernel with gradients (contiguous float32 parts of the complex inputs)."""

    @staticmethod
    def forward(
        ctx: Any,
        ar: Tensor,
        ai: Tensor,
        x: Tensor,
        Br: Tensor,
        Bi: Tensor,
        Cr: Tensor,
        Ci: Tensor,
        gamma: Tensor,
        beta: Tensor,
        h0r: Tensor,
        h0i: Tensor,
        u0r: Tensor,
        u0i: Tensor,
    ) -> tuple[Tensor, ...]:
        y, hTr, hTi, uTr, uTi, Hr, Hi = _forward_c(
            ar, ai, x, Br, Bi, Cr, Ci, gamma, beta, h0r, h0i, u0r, u0i, keep_states=True
        )
        ctx.save_for_backward(ar, ai, x, Br, Bi, Cr, Ci, gamma, beta, h0r, h0i, u0r, u0i, Hr, Hi)
        return y, hTr, hTi, uTr, uTi

    @staticmethod
    @once_differentiable
    def backward(
        ctx: Any,
        gy: Tensor | None,
        ghTr: Tensor | None,
        ghTi: Tensor | None,
        guTr: Tensor | None,
        guTi: Tensor | None,
    ) -> tuple[Tensor, ...]:
        saved = ctx.saved_tensors
        ar, x, h0r = saved[0], saved[2], saved[9]
        gy = torch.zeros_like(x) if gy is None else cpu_kernels.dense(gy)
        ends = [cpu_kernels.dense(g) for g in (ghTr, ghTi, guTr, guTi)]
        gar, gai, gBr, gBi, gCr, gCi = (torch.empty_like(ar) for _ in range(6))
        gx = torch.empty_like(x)
        ggamma, gbeta = (torch.empty_like(saved[7]) for _ in range(2))
        gh0r, gh0i, gu0r, gu0i = (torch.empty_like(h0r) for _ in range(4))
        B, T, H, P = x.shape
        p = cpu_kernels.ptr
        cpu_kernels.library(*KERNEL).statetrack_mamba3_bwd(
            B,
            T,
            H,
            P,
            ar.shape[-1],
            *(
                p(t)
                for t in (
                    *saved,
                    gy,
                    *ends,
                    gar,
                    gai,
                    gx,
                    gBr,
                    gBi,
                    gCr,
                    gCi,
                    ggamma,
                    gbeta,
                    gh0r,
                    gh0i,
                    gu0r,
                    gu0i,
                )
            ),
        )
        return gar, gai, gx, gBr, gBi, gCr, gCi, ggamma, gbeta, gh0r, gh0i, gu0r, gu0i


def _mamba3_scan_c(
    log_decay: Tensor,
    phi: Tensor,
    x: Tensor,
    Bc: Tensor,
    Cc: Tensor,
    gamma: Tensor,
    beta: Tensor,
    h0: Tensor,
    u_prev: Tensor,
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    ar, ai = _parts(mamba3_transition(log_decay, phi))
    dense = cpu_kernels.dense
    args: tuple[Tensor, ...] = (
        ar,
        ai,
        dense(x),
        *_parts(Bc),
        *_parts(Cc),
        dense(gamma),
        dense(beta),
        *_parts(h0),
        *_parts(u_prev),
    )
    if torch.is_grad_enabled() and any(t.requires_grad for t in args):
        y, hTr, hTi, uTr, uTi = _Mamba3ScanC.apply(*args)
    else:  # evaluation: no states kept
        with torch.no_grad():
            y, hTr, hTi, uTr, uTi, _, _ = _forward_c(*args, keep_states=False)
    return y, (torch.complex(hTr, hTi), torch.complex(uTr, uTi))


def mamba3_scan(
    log_decay: Tensor,
    phi: Tensor,
    x: Tensor,
    Bc: Tensor,
    Cc: Tensor,
    gamma: Tensor,
    beta: Tensor,
    state: tuple[Tensor, Tensor] | None = None,
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """Fast form of :func:`mamba3_scan_ref` (same contract, in the inputs' precision): the C kernel on the
    CPU in float32 (``ops.dispatch``), else the input terms formed at once and ``diag_scan``."""
    B, T, H, P = x.shape
    if state is None:
        state = mamba3_zero_state(B, H, P, phi.shape[-1], x.dtype, x.device)
    h0, u_prev = state
    if T == 0:
        return x.new_zeros(x.shape), state
    if dispatch.use_cpu_kernels(x) and phi.shape[-1] <= MAMBA3_NMAX:
        return _mamba3_scan_c(log_decay, phi, x, Bc, Cc, gamma, beta, h0, u_prev)
    a = mamba3_transition(log_decay, phi).unsqueeze(-2)  # (B, T, H, 1, N2)
    u = x.unsqueeze(-1) * Bc.unsqueeze(-2)  # (B, T, H, P, N2)
    u_before = torch.cat([u_prev.unsqueeze(1), u[:, :-1]], 1)
    b = gamma[..., None, None] * u + beta[..., None, None] * a * u_before
    h = diag_scan(a, b, h0)  # (B, T, H, P, N2)
    return mamba3_readout(h, Cc), (h[:, -1], u[:, -1])
