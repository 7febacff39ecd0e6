"""Mamba's selective scan with the transition computed inside the scan (never stored).

    a_t = exp(Delta_t A)              (Mamba; Negative Mamba: a_t = 2 exp(Delta_t A) - 1)
    h_t = a_t * h_{t-1} + (Delta_t u_t) (outer) B_t          y_t = h_t C_t

Shapes: dt, u (B, T, E); A (E, N) (negative reals, natural units); Bm, Cm (B, T, N); h0 (B, E, N) or
None. Returns y (B, T, E) and the last state h_T (B, E, N).

``mamba_scan_ref`` is the step-by-step float64 reference. ``mamba_scan`` is the fast form. Composed
from separate ops, a training step writes and reads a dozen (B, T, E, N) tensors (Delta A, its
exponential, the scan's input and output, the state gradient, the products for dDelta and dA); here
the forward loop computes a_t for one step at a time in a (B, E, N) buffer that stays in cache and
stores only the states h; the backward loop recomputes a_t the same way and reduces the gradients
of Delta and A step by step, so the only (B, T, E, N) tensors are h and the state gradient. The
exponential is ``exp2`` of Delta (A log2 e) (on the 2-core CPU ``exp2`` runs 2.5x faster than
``exp``), and Negative Mamba's 2 exp(z) - 1 is exp2(z log2 e + 1) - 1. Without gradients (evaluation)
h is not stored at all: a ring of eight (B, N, E) buffers, memory flat in length (``_forward_stream``).

On CUDA (float32, bfloat16, float16) ``mamba_scan`` runs the Triton kernels of ``ops.triton_scans``
instead, and on the CPU in float32 the C kernel of ``ops/mamba/mamba_scan.c`` (``_MambaScanC``: the
state of each (b, e) pair in registers, one pass per step; the backward pass reduces every gradient
step by step, so the saved states are the only (B, T, E, N) tensor). Same contract;
``STATETRACK_KERNELS=0`` keeps these PyTorch forms, see ``ops.dispatch``.
"""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from statetrack.ops import cpu_kernels, dispatch
from statetrack.ops.consts import LOG2E
from statetrack.ops.cpu_kernels import I64, INT, PTR

#: the largest state size N the C kernel takes (its per-pair state lives in fixed arrays)
MAMBA_NMAX = 64
#: the C kernel: its source in this folder and its functions' argument types
KERNEL: tuple[str, cpu_kernels.Signatures] = (
    "mamba/mamba_scan",
    (
        ("statetrack_mamba_fwd", (I64,) * 4 + (INT,) + (PTR,) * 9),
        ("statetrack_mamba_bwd", (I64,) * 4 + (INT,) + (PTR,) * 16),
        ("statetrack_mamba_fwd_gated", (I64,) * 4 + (INT,) + (PTR,) * 5 + (I64,) + (PTR,) * 5),
    ),
)


def _readout(H: Tensor, C: Tensor) -> Tensor:
    """sum_n H[..., e, n] C[..., n]: (B, T, E, N), (B, T, N) -> (B, T, E).

    Written as (1, N) @ (N, E) on a transposed view: the batched matrix-vector form (E, N) @ (N, 1)
    is 3x slower on the 2-core CPU (29 vs 9 ms at (16384, 128, 16))."""
    return (C.unsqueeze(-2) @ H.transpose(-1, -2)).squeeze(-2)


def _transition(dtv: Tensor, A2: Tensor, neg: bool, out: Tensor) -> Tensor:
    """out <- exp2(Delta_t A2) (Mamba) or exp2(Delta_t A2 + 1) = 2 exp(Delta_t A) (Negative Mamba)."""
    torch.mul(dtv, A2, out=out)
    if neg:
        out.add_(1.0)
    return out.exp2_()


def _forward(
    dt: Tensor, A2: Tensor, xu: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor, neg: bool
) -> tuple[Tensor, Tensor, Tensor]:
    """Training forward loop: stores every h (B, T, E, N) for the backward pass; y from one batched matmul."""
    B, T, E = xu.shape
    N = A2.shape[-1]
    a = torch.empty(B, E, N, dtype=xu.dtype, device=xu.device)
    dtv, xv, bv = dt.unsqueeze(-1).unbind(1), xu.unsqueeze(-1).unbind(1), Bm.unsqueeze(-2).unbind(1)
    H = torch.empty(B, T, E, N, dtype=xu.dtype, device=xu.device)
    hs = H.unbind(1)
    prev = h0
    for t in range(T):
        _transition(dtv[t], A2, neg, a)
        if neg:
            a.sub_(1.0)
        h = hs[t]
        torch.mul(xv[t], bv[t], out=h)
        h.addcmul_(a, prev)
        prev = h
    return _readout(H, Cm), H, prev


def _forward_stream(
    dt: Tensor, A2: Tensor, xu: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor, neg: bool, ring: int = 8
) -> tuple[Tensor, Tensor]:
    """Evaluation loop (no gradients): memory flat in length.

    The state is held as (B, N, E), in a ring of ``ring`` buffers: the readout y_t = C_t h_t runs
    once per ``ring`` steps as one batched (1, N) @ (N, E) matmul over the ring (contiguous, and one
    call instead of eight; 76 against 90 us per step at B 64, E 64, N 16 on the 2-core CPU), and the
    input term broadcasts along the fast axis. Negative Mamba's update
    h_t = x_t B_t + (2 e_t - 1) h_{t-1}, e_t = exp(Delta_t A), takes two fused ops on a stored state
    p = s h_{t-1} whose sign s flips every step: p - s x_t B_t - 2 e_t p = -s h_t (the sign is undone
    on y and h_T at the end)."""
    B, T, E = xu.shape
    A2t = A2.t().contiguous()  # (N, E)
    R = torch.empty(ring, B, A2.shape[-1], E, dtype=xu.dtype, device=xu.device)
    rs, e = R.unbind(0), torch.empty_like(R[0])
    yt = torch.empty(T, B, 1, E, dtype=xu.dtype, device=xu.device)
    Ct = Cm.transpose(0, 1).unsqueeze(-2).contiguous()  # (T, B, 1, N)
    dtv, xv = dt.unsqueeze(-2).unbind(1), xu.unsqueeze(-2).unbind(1)  # (B, 1, E) each
    bv = Bm.unsqueeze(-1).unbind(1)  # (B, N, 1)
    prev, sign = h0.transpose(1, 2).contiguous(), 1.0
    for t in range(T):
        _transition(
            dtv[t], A2t, False, e
        )  # e_t = exp(Delta_t A); Negative Mamba's 2 e_t - 1 is folded into the update
        k = t % ring
        h = rs[k]
        if neg:
            torch.addcmul(prev, xv[t], bv[t], value=-sign, out=h)
            h.addcmul_(e, prev, value=-2.0)
            sign = -sign
        else:
            torch.mul(xv[t], bv[t], out=h)
            h.addcmul_(e, prev)
        prev = h
        if k == ring - 1 or t == T - 1:
            torch.matmul(Ct[t - k : t + 1], R[: k + 1], out=yt[t - k : t + 1])
    if neg:
        yt[0::2].neg_()  # stored with sign -1 after steps 0, 2, 4, ...
        prev = prev * sign
    y = (
        yt.squeeze(-2).transpose(0, 1).contiguous()
    )  # (B, T, E): the ops after it are slow on a time-major view
    return y, prev.transpose(1, 2).contiguous()


class _MambaScan(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(
        ctx: Any, dt: Tensor, A: Tensor, u: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor, neg: bool
    ) -> tuple[Tensor, Tensor]:
        A2 = A * LOG2E
        xu = dt * u
        y, H, hT = _forward(dt, A2, xu, Bm, Cm, h0, neg)
        ctx.save_for_backward(dt, A, u, xu, Bm, Cm, H, h0)
        ctx.neg = neg
        return y, hT.clone()

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, gy: Tensor | None, ghT: Tensor | None) -> tuple[Tensor | None, ...]:
        dt, A, u, xu, Bm, Cm, H, h0 = ctx.saved_tensors
        neg = ctx.neg
        B, T, E = u.shape
        N = A.shape[-1]
        A2 = A * LOG2E
        if gy is None:
            gy = torch.zeros_like(u)
        gC = (gy.unsqueeze(-2) @ H).squeeze(-2)  # (B, T, N)
        G = torch.empty_like(H)  # dL/dh_t
        gs, hs = G.unbind(1), H.unbind(1)
        e = torch.empty(B, E, N, dtype=u.dtype, device=u.device)
        a_buf = torch.empty_like(e) if neg else e
        P, tmp, Q = torch.empty_like(e), torch.empty_like(e), torch.zeros_like(e)
        gdt = torch.empty(B, T, E, dtype=u.dtype, device=u.device)
        dtv, gyv, cv = dt.unsqueeze(-1).unbind(1), gy.unsqueeze(-1).unbind(1), Cm.unsqueeze(-2).unbind(1)
        gdv = gdt.unbind(1)
        for t in range(T - 1, -1, -1):
            g = gs[t]
            torch.mul(gyv[t], cv[t], out=g)
            if t == T - 1:
                if ghT is not None:
                    g.add_(ghT)
            else:
                g.addcmul_(a_buf, gs[t + 1])  # a_{t+1}, computed in the previous iteration
            _transition(dtv[t], A2, neg, e)  # e = da_t / d(Delta_t A)
            torch.mul(g, hs[t - 1] if t else h0, out=P)  # dL/da_t
            P.mul_(e)  # dL/d(Delta_t A)
            torch.mul(P, A, out=tmp)
            torch.sum(tmp, -1, out=gdv[t])
            Q.addcmul_(P, dtv[t])
            if neg:
                torch.sub(e, 1.0, out=a_buf)
        gh0 = a_buf * gs[0]  # a_0 (T >= 1: mamba_scan returns before the scan for T = 0)
        gxu = _readout(G, Bm)  # (B, T, E)
        gB = (xu.unsqueeze(-2) @ G).squeeze(-2)  # (B, T, N)
        gdt.addcmul_(gxu, u)
        return gdt, Q.sum(0), gxu * dt, gB, gC, gh0, None


def _forward_c(
    dt: Tensor, A: Tensor, u: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor, neg: bool, keep_states: bool
) -> tuple[Tensor, Tensor, Tensor | None, Tensor, Tensor]:
    """The C kernel's forward (contiguous float32 inputs): y, h_T, and the states H (B, E, T, N) for
    the backward pass (None when ``keep_states`` is false); A log2(e) and Delta u, which it reads."""
    B, T, E = u.shape
    N = A.shape[-1]
    A2, xu = (A * LOG2E).contiguous(), dt * u
    H = torch.empty(B, E, T, N, dtype=u.dtype) if keep_states else None
    y, hT = torch.empty(B, T, E, dtype=u.dtype), torch.empty(B, E, N, dtype=u.dtype)
    p = cpu_kernels.ptr
    cpu_kernels.library(*KERNEL).statetrack_mamba_fwd(
        B, T, E, N, int(neg), p(dt), p(A2), p(xu), p(Bm), p(Cm), p(h0), p(H), p(y), p(hT)
    )
    return y, hT, H, A2, xu


class _MambaScanC(torch.autograd.Function):
    """The C kernel with gradients (contiguous float32 inputs)."""

    @staticmethod
    def forward(
        ctx: Any, dt: Tensor, A: Tensor, u: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor, neg: bool
    ) -> tuple[Tensor, Tensor]:
        y, hT, H, A2, xu = _forward_c(dt, A, u, Bm, Cm, h0, neg, keep_states=True)
        ctx.save_for_backward(dt, A, A2, u, xu, Bm, Cm, H, h0)
        ctx.neg = neg
        return y, hT

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, gy: Tensor | None, ghT: Tensor | None) -> tuple[Tensor | None, ...]:
        dt, A, A2, u, xu, Bm, Cm, H, h0 = ctx.saved_tensors
        B, T, E = u.shape
        N = A.shape[-1]
        gy = torch.zeros_like(u) if gy is None else cpu_kernels.dense(gy)
        ghT = cpu_kernels.dense(ghT)
        gdt, gxu = torch.empty_like(u), torch.empty_like(u)
        gB, gC = torch.empty_like(Bm), torch.empty_like(Cm)
        Q, gh0 = torch.empty_like(h0), torch.empty_like(h0)
        p = cpu_kernels.ptr
        cpu_kernels.library(*KERNEL).statetrack_mamba_bwd(
            B,
            T,
            E,
            N,
            int(ctx.neg),
            p(dt),
            p(A),
            p(A2),
            p(xu),
            p(Bm),
            p(Cm),
            p(h0),
            p(H),
            p(gy),
            p(ghT),
            p(gdt),
            p(gxu),
            p(gB),
            p(gC),
            p(Q),
            p(gh0),
        )
        gdt.addcmul_(gxu, u)
        return gdt, Q.sum(0), gxu * dt, gB, gC, gh0, None


def _mamba_scan_c(
    dt: Tensor, A: Tensor, u: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor, neg: bool
) -> tuple[Tensor, Tensor]:
    dt, A, u, Bm, Cm, h0 = (cpu_kernels.dense(t) for t in (dt, A, u, Bm, Cm, h0))
    if torch.is_grad_enabled() and any(t.requires_grad for t in (dt, A, u, Bm, Cm, h0)):
        return _MambaScanC.apply(dt, A, u, Bm, Cm, h0, neg)
    with torch.no_grad():  # evaluation: no states kept
        y, hT, _, _, _ = _forward_c(dt, A, u, Bm, Cm, h0, neg, keep_states=False)
        return y, hT


def mamba_scan(
    dt: Tensor, A: Tensor, u: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor | None = None, neg: bool = False
) -> tuple[Tensor, Tensor]:
    """Fast form of :func:`mamba_scan_ref` (same contract, in the inputs' dtype): the Triton kernels on
    CUDA, the C kernel on the CPU in float32 (``ops.dispatch``), the PyTorch loops otherwise."""
    if dispatch.use_triton(u):
        from statetrack.ops.triton_scans import mamba_scan_triton  # optional: imports triton (CUDA)

        return mamba_scan_triton(dt, A, u, Bm, Cm, h0, neg)
    B, T, E = u.shape
    if h0 is None:
        h0 = torch.zeros(B, E, A.shape[-1], dtype=u.dtype, device=u.device)
    dt, A, Bm, Cm, h0 = (t.to(u.dtype) for t in (dt, A, Bm, Cm, h0))
    if T == 0:
        return u.new_zeros(u.shape), h0
    if dispatch.use_cpu_kernels(u) and A.shape[-1] <= MAMBA_NMAX:
        return _mamba_scan_c(dt, A, u, Bm, Cm, h0, bool(neg))
    if torch.is_grad_enabled() and any(t.requires_grad for t in (dt, A, u, Bm, Cm, h0)):
        return _MambaScan.apply(dt, A, u, Bm, Cm, h0, bool(neg))
    with torch.no_grad():
        return _forward_stream(dt, A * LOG2E, dt * u, Bm, Cm, h0, bool(neg))


def _rows(x: Tensor) -> int | None:
    """The stride between the rows of a (B, T, N) tensor whose rows the C kernel can read in place (a
    slice of the projection that made B_t and C_t), else None."""
    B, T, _ = x.shape
    st = x.stride(1)
    in_place = x.stride(2) == 1 and (B == 1 or x.stride(0) == T * st) and not (x.is_neg() or x.is_conj())
    return st if in_place else None


def _gated_c(
    dt: Tensor, A: Tensor, u: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor, neg: bool, D: Tensor, g: Tensor
) -> tuple[Tensor, Tensor]:
    B, T, E = u.shape
    N = A.shape[-1]
    bc = _rows(Bm)
    if bc is None or _rows(Cm) != bc:
        Bm, Cm, bc = cpu_kernels.dense(Bm), cpu_kernels.dense(Cm), N
    dt, u, g, h0, D = (cpu_kernels.dense(t) for t in (dt, u, g, h0, D))
    A2 = (A * LOG2E).contiguous()
    out, hT = torch.empty(B, T, E, dtype=u.dtype), torch.empty(B, E, N, dtype=u.dtype)
    p = cpu_kernels.ptr
    cpu_kernels.library(*KERNEL).statetrack_mamba_fwd_gated(
        B,
        T,
        E,
        N,
        int(neg),
        p(dt),
        p(A2),
        p(u),
        Bm.data_ptr(),
        Cm.data_ptr(),
        bc,
        p(D),
        p(g),
        p(h0),
        p(out),
        p(hT),
    )
    return out, hT


def _gated_torch(
    dt: Tensor, A: Tensor, u: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor, neg: bool, D: Tensor, g: Tensor
) -> tuple[Tensor, Tensor]:
    y, hT = mamba_scan(dt, A, u, Bm, Cm, h0, neg)
    return (y + D * u) * g, hT


@functools.cache
def gated_rounds_alike() -> bool:
    """Does the C kernel of :func:`mamba_scan_gated` give the composed ops' numbers to the bit on this
    machine? Checked once per process on probes (both transitions, B_t and C_t read in place and not)."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for B, T, E, N, neg in ((2, 33, 19, 16, False), (3, 20, 64, 5, True)):
            dt = torch.rand(B, T, E, generator=gen)
            A = -torch.rand(E, N, generator=gen) * 3 - 0.1
            u, g = torch.randn(B, T, E, generator=gen), torch.randn(B, T, E, generator=gen)
            bc = torch.randn(B, T, 2 + 2 * N, generator=gen)
            h0, D = torch.randn(B, E, N, generator=gen), torch.randn(E, generator=gen)
            for Bm, Cm in (
                (bc[..., 2 : 2 + N], bc[..., 2 + N :]),
                (torch.randn(B, T, N, generator=gen),) * 2,
            ):
                args = (dt, A, u, Bm, Cm, h0, neg, D, g)
                (o1, h1), (o2, h2) = _gated_c(*args), _gated_torch(*args)
                if not (torch.equal(o1, o2) and torch.equal(h1, h2)):
                    return False
    return True


def mamba_scan_gated(
    dt: Tensor, A: Tensor, u: Tensor, Bm: Tensor, Cm: Tensor, h0: Tensor, neg: bool, D: Tensor, g: Tensor
) -> tuple[Tensor, Tensor]:
    """Without gradients (evaluation, validation): ``(y + D u) * g`` and h_T, y from :func:`mamba_scan`:
    the Mamba layer's readout with its skip term and gate. On the CPU in float32 one pass of the C kernel
    (B_t and C_t read in place, no (B, T, E) temporaries) where it gives the composed ops' numbers to the
    bit (:func:`gated_rounds_alike`); the composed ops otherwise. h0 (B, E, N) is required."""
    B, T, E = u.shape
    if (
        T > 0
        and not torch.is_grad_enabled()
        and dispatch.use_cpu_kernels(u)
        and all(t.dtype == torch.float32 and t.device.type == "cpu" for t in (dt, A, Bm, Cm, h0, D, g))
        and A.shape[-1] <= MAMBA_NMAX
        and gated_rounds_alike()
    ):
        return _gated_c(dt, A, u, Bm, Cm, h0, neg, D, g)
    return _gated_torch(dt, A, u, Bm, Cm, h0, neg, D, g)
