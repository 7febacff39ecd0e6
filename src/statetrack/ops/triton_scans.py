# long: two scans, each with its forward and backward Triton kernels beside their launchers
"""Triton kernels for the diagonal selective scans (CUDA; on CPU under ``TRITON_INTERPRET=1``).

Two scans, each with a forward and a backward kernel, each the same contract as the PyTorch op it
replaces on CUDA (``ops.mamba.scan.mamba_scan``, ``ops.selective.scan.selective_scan``; the op functions
dispatch here, see ``ops.dispatch``):

* :func:`mamba_scan_triton`: Mamba's and Negative Mamba's scan with the transition formed inside the
  kernel, a_t = exp(Delta_t A) or 2 exp(Delta_t A) - 1, h_t = a_t h_{t-1} + (Delta_t u_t) B_t,
  y_t = h_t C_t. Returns (y, h_T); gradients for dt, A, u, Bm, Cm and h0.
* :func:`selective_scan_triton`: h_t = a_t h_{t-1} + x_t B_t with complex a_t (AUSSM, Simple AUSSM,
  DCD). Returns every h_t (the op's contract); gradients for a, x, Bm and h0.

How they are laid out. One program per (sequence, block of ``block_e`` channels); the program holds
the block's state (block_e x N, real and imaginary parts as separate float32 planes for the complex
scan) in registers and walks the sequence in tiles of ``chunk`` steps. Inside a tile the steps are
combined by a parallel scan over the affine maps h -> a h + b (``tl.associative_scan``; multiply-add
only, so exact for a_t of any sign, zero included, like the PyTorch forms), then the carried state is
applied: one global load per tile instead of one per step. Everything accumulates in float32.

Backward. Mamba's forward stores the state only at tile boundaries (every ``chunk`` steps); the
backward kernel walks the tiles in reverse, recomputes the tile's states from that checkpoint, runs
the state gradient g_t = C_t dL/dy_t + a_{t+1} g_{t+1} as a reverse parallel scan inside the tile,
and forms every gradient from g, the recomputed states and the inputs. Gradients of A (summed over
the batch) and of B and C (summed over channels) are written per program and summed after the
kernel: deterministic, no atomics. The complex scan returns every state, so its backward reads
them instead of recomputing.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl
from torch import Tensor
from torch.autograd.function import once_differentiable

from statetrack.ops.consts import LOG2E

#: steps per tile: the checkpoint interval of Mamba's backward and the length of each in-register scan
CHUNK = 16
#: channels per program
BLOCK_E = 16


@triton.jit
def _affine(a1, b1, a2, b2):
    """Compose h -> a1 h + b1, then h -> a2 h + b2."""
    return a1 * a2, a2 * b1 + b2


@triton.jit
def _affine_complex(ar1, ai1, br1, bi1, ar2, ai2, br2, bi2):
    """The same for complex a, b given as (real, imaginary) planes."""
    return (
        ar1 * ar2 - ai1 * ai2,
        ar1 * ai2 + ai1 * ar2,
        ar2 * br1 - ai2 * bi1 + br2,
        ar2 * bi1 + ai2 * br1 + bi2,
    )


@triton.jit
def _transition(d, A2, NEG: tl.constexpr):
    """(a, da/d(Delta A)) for Delta d (TT, BE) and A2 = A log2(e) (BE, BN): exp2 of Delta A2, and for
    Negative Mamba 2 exp(Delta A) - 1 = exp2(Delta A2 + 1) - 1."""
    z = d[:, :, None] * A2[None, :, :]
    if NEG:
        e = tl.exp2(z + 1.0)
        return e - 1.0, e
    else:
        e = tl.exp2(z)
        return e, e


@triton.jit
def _last_row(x, rows, TT: tl.constexpr):
    return tl.sum(tl.where((rows == TT - 1)[:, None, None], x, 0.0), 0)


@triton.jit
def _first_row(x, rows):
    return tl.sum(tl.where((rows == 0)[:, None, None], x, 0.0), 0)


@triton.jit
def _program(E, N, TT: tl.constexpr, BE: tl.constexpr, BN: tl.constexpr):
    """This program's sequence b and channel block eb; the rows of a tile, its channels e and states n,
    their masks, and the (channel, state) offsets and mask."""
    b = tl.program_id(0).to(tl.int64)
    eb = tl.program_id(1)
    e = eb * BE + tl.arange(0, BE)
    n = tl.arange(0, BN)
    m_e, m_n = e < E, n < N
    return b, eb, tl.arange(0, TT), e, n, m_e, m_n, m_e[:, None] & m_n[None, :], e[:, None] * N + n[None, :]


@triton.jit
def _tile(c, rows, b, e, n, m_e, m_n, T, E, N, TT: tl.constexpr):
    """Tile c: its steps t and their mask, the offsets and masks of its (step, channel) elements in a
    (B, T, E) tensor and of its (step, state) elements in a (B, T, N) tensor."""
    t = c * TT + rows
    m_t = t < T
    return (
        t,
        m_t,
        b * T * E + t[:, None] * E + e[None, :],
        m_t[:, None] & m_e[None, :],
        b * T * N + t[:, None] * N + n[None, :],
        m_t[:, None] & m_n[None, :],
    )


@triton.jit
def _mamba_fwd_kernel(
    dt,
    A2,
    u,
    Bm,
    Cm,
    h0,
    y,
    hT,
    ckpt,
    T,
    E,
    N,
    n_tiles,
    NEG: tl.constexpr,
    SAVE: tl.constexpr,
    TT: tl.constexpr,
    BE: tl.constexpr,
    BN: tl.constexpr,
):
    b, eb, rows, e, n, m_e, m_n, m_en, en = _program(E, N, TT, BE, BN)
    a2 = tl.load(A2 + en, mask=m_en, other=0.0)
    h = tl.load(h0 + b * E * N + en, mask=m_en, other=0.0)
    for c in range(n_tiles):
        t, m_t, te, m_te, tn, m_tn = _tile(c, rows, b, e, n, m_e, m_n, T, E, N, TT)
        d = tl.load(dt + te, mask=m_te, other=0.0)  # Delta = 0 past the end: a = 1, b = 0
        x = d * tl.load(u + te, mask=m_te, other=0.0)
        bt = tl.load(Bm + tn, mask=m_tn, other=0.0)
        ct = tl.load(Cm + tn, mask=m_tn, other=0.0)
        a, _ = _transition(d, a2, NEG)
        if SAVE:
            tl.store(ckpt + (b * n_tiles + c) * E * N + en, h, mask=m_en)
        P, S = tl.associative_scan((a, x[:, :, None] * bt[:, None, :]), 0, _affine)
        hs = P * h[None, :, :] + S
        tl.store(y + te, tl.sum(hs * ct[:, None, :], 2), mask=m_te)
        h = _last_row(hs, rows, TT)
    tl.store(hT + b * E * N + en, h, mask=m_en)


# long: a Triton kernel: one program, its loads, loop and stores in one body
@triton.jit
def _mamba_bwd_kernel(
    dt,
    A,
    A2,
    u,
    Bm,
    Cm,
    ckpt,
    gy,
    ghT,
    gdt,
    gu,
    gA,
    gB,
    gC,
    gh0,
    T,
    E,
    N,
    B,
    n_tiles,
    NEG: tl.constexpr,
    TT: tl.constexpr,
    BE: tl.constexpr,
    BN: tl.constexpr,
):
    b, eb, rows, e, n, m_e, m_n, m_en, en = _program(E, N, TT, BE, BN)
    a_nat = tl.load(A + en, mask=m_en, other=0.0)
    a2 = tl.load(A2 + en, mask=m_en, other=0.0)
    G = tl.load(ghT + b * E * N + en, mask=m_en, other=0.0)  # dL/dh after the last step
    gA_acc = tl.zeros((BE, BN), dtype=tl.float32)
    part = (eb * B + b) * T * N  # this program's rows of the gB, gC partial sums
    for i in range(n_tiles):
        c = n_tiles - 1 - i
        t, m_t, te, m_te, tn, m_tn = _tile(c, rows, b, e, n, m_e, m_n, T, E, N, TT)
        # h_{t-1}: the tile's states recomputed from its checkpoint, the inputs shifted by one step
        # (row 0 is the identity map, so it returns the checkpoint itself)
        m_p = m_t & (rows > 0)
        m_pe = m_p[:, None] & m_e[None, :]
        d_p = tl.load(dt + te - E, mask=m_pe, other=0.0)
        x_p = d_p * tl.load(u + te - E, mask=m_pe, other=0.0)
        b_p = tl.load(Bm + tn - N, mask=m_p[:, None] & m_n[None, :], other=0.0)
        a_p, _ = _transition(d_p, a2, NEG)
        P, S = tl.associative_scan((a_p, x_p[:, :, None] * b_p[:, None, :]), 0, _affine)
        hc = tl.load(ckpt + (b * n_tiles + c) * E * N + en, mask=m_en, other=0.0)
        h_prev = P * hc[None, :, :] + S
        # this step
        d = tl.load(dt + te, mask=m_te, other=0.0)
        uu = tl.load(u + te, mask=m_te, other=0.0)
        x = d * uu
        bt = tl.load(Bm + tn, mask=m_tn, other=0.0)
        ct = tl.load(Cm + tn, mask=m_tn, other=0.0)
        gyt = tl.load(gy + te, mask=m_te, other=0.0)
        a, da = _transition(d, a2, NEG)
        # g_t = C_t gy_t + a_{t+1} g_{t+1}: a reverse scan (a_T = 1: Delta is 0 past the end)
        m_ne = ((t + 1) < T)[:, None] & m_e[None, :]
        a_n, _ = _transition(tl.load(dt + te + E, mask=m_ne, other=0.0), a2, NEG)
        Pg, Sg = tl.associative_scan((a_n, gyt[:, :, None] * ct[:, None, :]), 0, _affine, reverse=True)
        g = Pg * G[None, :, :] + Sg
        G = _first_row(g, rows)
        # gradients
        q = g * h_prev * da  # dL/d(Delta_t A)
        gA_acc += tl.sum(q * d[:, :, None], 0)
        gx = tl.sum(g * bt[:, None, :], 2)
        tl.store(gdt + te, tl.sum(q * a_nat[None, :, :], 2) + gx * uu, mask=m_te)
        tl.store(gu + te, gx * d, mask=m_te)
        tl.store(gB + part + t[:, None] * N + n[None, :], tl.sum(g * x[:, :, None], 1), mask=m_tn)
        h = a * h_prev + x[:, :, None] * bt[:, None, :]
        tl.store(gC + part + t[:, None] * N + n[None, :], tl.sum(h * gyt[:, :, None], 1), mask=m_tn)
    # dL/dh0 = a_0 g_0 (G is g_0 now)
    d0 = tl.load(dt + b * T * E + e, mask=m_e, other=0.0)
    a0, _ = _transition(d0[None, :], a2, NEG)
    tl.store(gh0 + b * E * N + en, tl.sum(a0, 0) * G, mask=m_en)
    tl.store(gA + b * E * N + en, gA_acc, mask=m_en)


def _grid_args(
    B: int, E: int, N: int, T: int, chunk: int | None, block_e: int | None
) -> tuple[tuple[int, int], int, int, int, int]:
    TT = chunk or CHUNK
    BE = min(block_e or BLOCK_E, triton.next_power_of_2(E))
    if TT & (TT - 1) or BE & (BE - 1):
        raise ValueError(f"chunk ({TT}) and block_e ({BE}) must be powers of 2")
    return (B, triton.cdiv(E, BE)), TT, BE, triton.next_power_of_2(N), triton.cdiv(T, TT)


def _f32(*ts: Tensor) -> tuple[Tensor, ...]:
    return tuple(t.detach().to(torch.float32).contiguous() for t in ts)


class _MambaScanTriton(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(
        ctx: Any,
        dt: Tensor,
        A: Tensor,
        u: Tensor,
        Bm: Tensor,
        Cm: Tensor,
        h0: Tensor,
        neg: bool,
        chunk: int | None,
        block_e: int | None,
    ) -> tuple[Tensor, Tensor]:
        out_dtype = u.dtype
        ctx.in_dtypes = [t.dtype for t in (dt, A, u, Bm, Cm, h0)]
        dt, A, u, Bm, Cm, h0 = _f32(dt, A, u, Bm, Cm, h0)
        B, T, E = u.shape
        N = A.shape[-1]
        grid, TT, BE, BN, n_tiles = _grid_args(B, E, N, T, chunk, block_e)
        A2 = A * LOG2E
        y = torch.empty_like(u)
        hT = torch.empty_like(h0)
        save = any(ctx.needs_input_grad[:6])  # False under no_grad: no checkpoints (evaluation)
        ckpt = torch.empty((B, n_tiles, E, N) if save else (1,), dtype=torch.float32, device=u.device)
        _mamba_fwd_kernel[grid](
            dt,
            A2,
            u,
            Bm,
            Cm,
            h0,
            y,
            hT,
            ckpt,
            T,
            E,
            N,
            n_tiles,
            NEG=bool(neg),
            SAVE=save,
            TT=TT,
            BE=BE,
            BN=BN,
        )
        if save:
            ctx.save_for_backward(dt, A, A2, u, Bm, Cm, h0, ckpt)
            ctx.cfg = (bool(neg), TT, BE)
        return y.to(out_dtype), hT.to(out_dtype)

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, gy: Tensor | None, ghT: Tensor | None) -> tuple[Tensor | None, ...]:
        dt, A, A2, u, Bm, Cm, h0, ckpt = ctx.saved_tensors
        neg, TT, BE = ctx.cfg
        B, T, E = u.shape
        N = A.shape[-1]
        grid, TT, BE, BN, n_tiles = _grid_args(B, E, N, T, TT, BE)
        gy = torch.zeros_like(u) if gy is None else gy.to(torch.float32).contiguous()
        ghT = torch.zeros_like(h0) if ghT is None else ghT.to(torch.float32).contiguous()
        gdt, gu = torch.empty_like(u), torch.empty_like(u)
        gA = torch.empty(B, E, N, dtype=torch.float32, device=u.device)
        gB = torch.empty(grid[1], B, T, N, dtype=torch.float32, device=u.device)
        gC = torch.empty_like(gB)
        gh0 = torch.empty_like(h0)
        _mamba_bwd_kernel[grid](
            dt,
            A,
            A2,
            u,
            Bm,
            Cm,
            ckpt,
            gy,
            ghT,
            gdt,
            gu,
            gA,
            gB,
            gC,
            gh0,
            T,
            E,
            N,
            B,
            n_tiles,
            NEG=neg,
            TT=TT,
            BE=BE,
            BN=BN,
        )
        grads = (gdt, gA.sum(0), gu, gB.sum(0), gC.sum(0), gh0)
        return (*(g.to(d) for g, d in zip(grads, ctx.in_dtypes, strict=True)), None, None, None)


def mamba_scan_triton(
    dt: Tensor,
    A: Tensor,
    u: Tensor,
    Bm: Tensor,
    Cm: Tensor,
    h0: Tensor | None = None,
    neg: bool = False,
    chunk: int | None = None,
    block_e: int | None = None,
) -> tuple[Tensor, Tensor]:
    """Triton form of ``ops.mamba.scan.mamba_scan`` (same contract; float32 inside, results in u's dtype).

    chunk: steps per tile and checkpoint interval (default :data:`CHUNK`); block_e: channels per
    program (default :data:`BLOCK_E`); both powers of 2."""
    B, T, E = u.shape
    if h0 is None:
        h0 = torch.zeros(B, E, A.shape[-1], dtype=u.dtype, device=u.device)
    if T == 0:
        return u.new_zeros(u.shape), h0.to(u.dtype)
    return _MambaScanTriton.apply(dt, A, u, Bm, Cm, h0, bool(neg), chunk, block_e)


# ---------------------------------------------------------------- complex selective scan


@triton.jit
def _cscan_fwd_kernel(
    a, x, Bm, h0, h, T, E, N, n_tiles, TT: tl.constexpr, BE: tl.constexpr, BN: tl.constexpr
):
    """a, h0, h: complex tensors as float32 (..., 2) views (real at even, imaginary at odd offsets)."""
    b, eb, rows, e, n, m_e, m_n, m_en, en = _program(E, N, TT, BE, BN)
    hr = tl.load(h0 + 2 * (b * E * N + en), mask=m_en, other=0.0)
    hi = tl.load(h0 + 2 * (b * E * N + en) + 1, mask=m_en, other=0.0)
    for c in range(n_tiles):
        t, m_t, te, m_te, tn, m_tn = _tile(c, rows, b, e, n, m_e, m_n, T, E, N, TT)
        ten = 2 * (te[:, :, None] * N + n[None, None, :])
        m_ten = m_te[:, :, None] & m_n[None, None, :]
        ar = tl.load(a + ten, mask=m_ten, other=1.0)  # a = 1, b = 0 past the end
        ai = tl.load(a + ten + 1, mask=m_ten, other=0.0)
        xt = tl.load(x + te, mask=m_te, other=0.0)
        bt = tl.load(Bm + tn, mask=m_tn, other=0.0)
        br = xt[:, :, None] * bt[:, None, :]
        Pr, Pi, Sr, Si = tl.associative_scan((ar, ai, br, tl.zeros_like(br)), 0, _affine_complex)
        Hr = Pr * hr[None, :, :] - Pi * hi[None, :, :] + Sr
        Hi = Pr * hi[None, :, :] + Pi * hr[None, :, :] + Si
        tl.store(h + ten, Hr, mask=m_ten)
        tl.store(h + ten + 1, Hi, mask=m_ten)
        hr = _last_row(Hr, rows, TT)
        hi = _last_row(Hi, rows, TT)


@triton.jit
def _cscan_bwd_kernel(
    a,
    x,
    Bm,
    h0,
    h,
    gh,
    ga,
    gx,
    gB,
    gh0,
    T,
    E,
    N,
    B,
    n_tiles,
    TT: tl.constexpr,
    BE: tl.constexpr,
    BN: tl.constexpr,
):
    b, eb, rows, e, n, m_e, m_n, m_en, en = _program(E, N, TT, BE, BN)
    h0r = tl.load(h0 + 2 * (b * E * N + en), mask=m_en, other=0.0)
    h0i = tl.load(h0 + 2 * (b * E * N + en) + 1, mask=m_en, other=0.0)
    Gr = tl.zeros((BE, BN), dtype=tl.float32)
    Gi = tl.zeros((BE, BN), dtype=tl.float32)
    part = (eb * B + b) * T * N
    for i in range(n_tiles):
        c = n_tiles - 1 - i
        t, m_t, te, m_te, tn, m_tn = _tile(c, rows, b, e, n, m_e, m_n, T, E, N, TT)
        ten = 2 * (te[:, :, None] * N + n[None, None, :])
        m_ten = m_te[:, :, None] & m_n[None, None, :]
        # g_t = gh_t + conj(a_{t+1}) g_{t+1}: a reverse scan (a_T = 1)
        m_next = ((t + 1) < T)[:, None, None] & m_ten
        anr = tl.load(a + ten + 2 * E * N, mask=m_next, other=1.0)
        ani = -tl.load(a + ten + 2 * E * N + 1, mask=m_next, other=0.0)
        ghr = tl.load(gh + ten, mask=m_ten, other=0.0)
        ghi = tl.load(gh + ten + 1, mask=m_ten, other=0.0)
        Pr, Pi, Sr, Si = tl.associative_scan((anr, ani, ghr, ghi), 0, _affine_complex, reverse=True)
        gr = Pr * Gr[None, :, :] - Pi * Gi[None, :, :] + Sr
        gi = Pr * Gi[None, :, :] + Pi * Gr[None, :, :] + Si
        Gr = _first_row(gr, rows)
        Gi = _first_row(gi, rows)
        # dL/da_t = g_t conj(h_{t-1}), h_{-1} = h0
        m_prev = (t >= 1)[:, None, None] & m_ten
        first = (t == 0)[:, None, None]
        hpr = tl.where(first, h0r[None, :, :], tl.load(h + ten - 2 * E * N, mask=m_prev, other=0.0))
        hpi = tl.where(first, h0i[None, :, :], tl.load(h + ten - 2 * E * N + 1, mask=m_prev, other=0.0))
        tl.store(ga + ten, gr * hpr + gi * hpi, mask=m_ten)
        tl.store(ga + ten + 1, gi * hpr - gr * hpi, mask=m_ten)
        # the input term x_t B_t is real: only Re(g) reaches x and B
        xt = tl.load(x + te, mask=m_te, other=0.0)
        bt = tl.load(Bm + tn, mask=m_tn, other=0.0)
        tl.store(gx + te, tl.sum(gr * bt[:, None, :], 2), mask=m_te)
        tl.store(gB + part + t[:, None] * N + n[None, :], tl.sum(gr * xt[:, :, None], 1), mask=m_tn)
    # dL/dh0 = g_0 conj(a_0)
    a0r = tl.load(a + 2 * (b * T * E * N + en), mask=m_en, other=0.0)
    a0i = tl.load(a + 2 * (b * T * E * N + en) + 1, mask=m_en, other=0.0)
    tl.store(gh0 + 2 * (b * E * N + en), Gr * a0r + Gi * a0i, mask=m_en)
    tl.store(gh0 + 2 * (b * E * N + en) + 1, Gi * a0r - Gr * a0i, mask=m_en)


def _planes(z: Tensor) -> Tensor:
    """A complex tensor as a contiguous complex64 tensor's float32 (..., 2) view."""
    return torch.view_as_real(z.detach().resolve_conj().to(torch.complex64).contiguous())


class _SelectiveScanTriton(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(
        ctx: Any, a: Tensor, x: Tensor, Bm: Tensor, h0: Tensor, chunk: int | None, block_e: int | None
    ) -> Tensor:
        out_dtype = a.dtype
        ctx.in_dtypes = [t.dtype for t in (a, x, Bm, h0)]
        ar, h0r = _planes(a), _planes(h0)
        x, Bm = _f32(x, Bm)
        B, T, E, N = a.shape
        grid, TT, BE, BN, n_tiles = _grid_args(B, E, N, T, chunk, block_e)
        h = torch.empty(B, T, E, N, 2, dtype=torch.float32, device=a.device)
        _cscan_fwd_kernel[grid](ar, x, Bm, h0r, h, T, E, N, n_tiles, TT=TT, BE=BE, BN=BN)
        ctx.save_for_backward(ar, x, Bm, h0r, h)
        ctx.cfg = (TT, BE)
        return torch.view_as_complex(h).to(out_dtype)

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, gh: Tensor) -> tuple[Tensor | None, ...]:
        ar, x, Bm, h0r, h = ctx.saved_tensors
        B, T, E, N = ar.shape[:4]
        grid, TT, BE, BN, n_tiles = _grid_args(B, E, N, T, *ctx.cfg)
        ga = torch.empty_like(h)
        gx = torch.empty_like(x)
        gB = torch.empty(grid[1], B, T, N, dtype=torch.float32, device=x.device)
        gh0 = torch.empty_like(h0r)
        _cscan_bwd_kernel[grid](
            ar, x, Bm, h0r, h, _planes(gh), ga, gx, gB, gh0, T, E, N, B, n_tiles, TT=TT, BE=BE, BN=BN
        )
        grads = (torch.view_as_complex(ga), gx, gB.sum(0), torch.view_as_complex(gh0))
        return (*(g.to(d) for g, d in zip(grads, ctx.in_dtypes, strict=True)), None, None)


def selective_scan_triton(
    a: Tensor,
    x: Tensor,
    Bm: Tensor,
    h0: Tensor | None = None,
    chunk: int | None = None,
    block_e: int | None = None,
) -> Tensor:
    """Triton form of ``ops.selective.scan.selective_scan`` for complex a (B, T, E, N): x (B, T, E) and
    Bm (B, T, N) real, h0 (B, E, N) complex or None. Returns h (B, T, E, N) in a's dtype, computed
    in complex64 (real and imaginary float32 planes). chunk, block_e as in :func:`mamba_scan_triton`."""
    if not a.is_complex():
        raise ValueError(f"selective_scan_triton takes a complex a, got {a.dtype}")
    if h0 is None:
        h0 = torch.zeros(a.shape[:1] + a.shape[2:], dtype=a.dtype, device=a.device)
    if a.shape[1] == 0:
        return torch.empty(a.shape, dtype=a.dtype, device=a.device)
    return _SelectiveScanTriton.apply(a, x, Bm, h0, chunk, block_e)
