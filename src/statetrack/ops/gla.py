"""Gated linear attention's recurrence in its own chunked form, sub-chunked, with a hand-written backward pass.

Per head, with a matrix state S (d_k, d_v) and a decay w_t = exp(log_w_t) in (0, 1] per key channel::

    S_t = diag(w_t) S_{t-1} + k_t v_t^T          o_t = S_t^T q_t

(Yang2023; ``ops.dplr.gla_rule``). Inside a chunk of C steps with the state S_0 entering it, write
b_t = sum_{r <= t} log_w_r (per channel) and E(t, s) = exp(b_t - b_s) (s <= t). Then::

    o_t = (q_t (.) e^{b_t})^T S_0 + sum_{s <= t} A[t, s] v_s,   A[t, s] = sum_d q_t[d] E(t, s)[d] k_s[d]
    S_C = diag(e^{b_C}) S_0 + sum_s (k_s (.) E(C, s))^T v_s

A is formed without dividing by a decay (k_s e^{-b_s} overflows once a chunk decays strongly) and without
the (C, C, d_k) tensor of every pair: the chunk is cut into m sub-chunks of c steps (as fla's ``chunk_gla``),
and for t in sub-chunk i, s in an earlier sub-chunk j, E(t, s) = alpha_t G_ij beta_s with
alpha_t = exp(sum of log_w over the start of i .. t), beta_s = exp(sum over s + 1 .. the end of j) and
G_ij = exp(sum over the sub-chunks strictly between j and i): three factors <= 1, so A_ij = (Q alpha G_ij)
(K beta)^T is a matmul. Only the diagonal blocks take the pairwise (c, c, d_k) decays. Every exponent is a
sum of its own terms (``chunks.segsum``, forward and reverse cumulative sums), never a difference of long
running sums, which would lose the short segments of a strongly decaying chunk.

The backward pass returns the gradients of q, k, v, log_w and S_0. The decays' gradient uses that q_t
enters only as q_t e^{b_t} and k_s only as k_s e^{-b_s} (mathematically; the forward never forms them), so
dL/db_t = q_t (.) dq_t - k_t (.) dk_t, plus (S_C (.) dS_C) summed over values at a chunk's last step, and
dL/dlog_w is its reverse cumulative sum over the chunk. Only the state and its gradient loop over chunks.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from statetrack.ops.chunks import segsum, zeros_state

CHUNK = 16  # default steps per chunk of the chunked form
SUB = 8  # default steps per sub-chunk


def layout(T: int, chunk: int, sub: int) -> tuple[int, int, int, int]:
    """(chunk size C, sub-chunk size c (a divisor of C), number of chunks n, padded steps n C - T) for
    T > 0 steps: C is ``chunk``, or T rounded up to a multiple of c where that is shorter."""
    c = math.gcd(chunk, max(1, sub))
    C = min(chunk, -(-T // c) * c)
    n = -(-T // C)
    return C, c, n, n * C - T


def rev_cumsum(x: Tensor, dim: int) -> Tensor:
    """[t] = sum_{r >= t} x[r] along ``dim`` (each entry a sum of its own terms)."""
    return x.flip(dim).cumsum(dim).flip(dim)


def exclusive_suffix(x: Tensor) -> Tensor:
    """x (..., C, D) -> [s] = sum_{r > s} x_r (0 at the last step)."""
    return F.pad(rev_cumsum(x, -2)[..., 1:, :], (0, 0, 0, 1))


def sub_decays(lw: Tensor, c: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Chunk-major log-decays lw (..., C, D) -> in sub-chunks of c steps (m = C / c): alpha (..., m, c, D),
    beta (..., m, c, D), G (..., m, m, D) (zero where j >= i) and the diagonal blocks' pairwise decays
    (..., m, c, c, D) (zero above the diagonal)."""
    ls = lw.unflatten(-2, (-1, c))
    la = ls.cumsum(-2)
    seg = segsum(la[..., -1, :])  # [i, j] = sum of the sub-chunk totals j < l <= i
    G = torch.cat([torch.full_like(seg[..., :1, :, :], float("-inf")), seg[..., :-1, :, :]], -3)
    return la.exp(), exclusive_suffix(ls).exp(), G.exp(), segsum(ls).exp()


def decayed_pairs(qs: Tensor, ks: Tensor, alpha: Tensor, beta: Tensor, G: Tensor, Dd: Tensor) -> Tensor:
    """A (..., C, C) with A[t, s] = sum_d q_t[d] E(t, s)[d] k_s[d] (s <= t, else 0) from sub-chunked q, k
    (..., m, c, d) and :func:`sub_decays`."""
    m, c = qs.shape[-3:-1]
    Qh, Kh = qs * alpha, ks * beta
    A = (Qh.unsqueeze(-3) * G.unsqueeze(-2)) @ Kh.unsqueeze(-4).transpose(-1, -2)  # (..., m, m, c, c)
    Ad = (qs.unsqueeze(-2) * Dd * ks.unsqueeze(-3)).sum(-1)  # (..., m, c, c)
    A.diagonal(0, -4, -3).copy_(Ad.movedim(-3, -1))
    return A.transpose(-3, -2).reshape(*A.shape[:-4], m * c, m * c)


def decayed_apply(
    dA: Tensor, qs: Tensor, ks: Tensor, alpha: Tensor, beta: Tensor, G: Tensor, Dd: Tensor
) -> tuple[Tensor, Tensor]:
    """The gradients of :func:`decayed_pairs` for dL/dA (..., C, C): (dq, dk) (..., m, c, d) with
    dq_t = sum_s dA[t, s] E(t, s) (.) k_s and dk_s = sum_t dA[t, s] E(t, s) (.) q_t."""
    m, c = qs.shape[-3:-1]
    dAb = dA.unflatten(-1, (m, c)).unflatten(-3, (m, c)).transpose(-3, -2)  # [i, j, t, s]
    Gt = G.unsqueeze(-2)
    dq = ((dAb @ (ks * beta).unsqueeze(-4)) * Gt).sum(-3) * alpha
    dk = ((dAb.transpose(-1, -2) @ (qs * alpha).unsqueeze(-3)) * Gt).sum(-4) * beta
    dAd = dAb.diagonal(0, -4, -3).movedim(-1, -3).unsqueeze(-1) * Dd  # (..., m, c, c, d)
    return dq + (dAd * ks.unsqueeze(-3)).sum(-2), dk + (dAd * qs.unsqueeze(-2)).sum(-3)


def _chunk_forward(
    q: Tensor, k: Tensor, v: Tensor, lw: Tensor, S0: Tensor, c: int
) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
    """The chunked form on chunk-major q, k, lw (B, H, n, C, d_k), v (B, H, n, C, d_v) with sub-chunks of c
    steps. Returns o (B, H, n, C, d_v), S_T and what the backward pass needs."""
    subs = sub_decays(lw, c)
    sub = lambda x: x.unflatten(-2, (-1, c))  # noqa: E731
    A = decayed_pairs(sub(q), sub(k), *subs)
    eb = lw.cumsum(-2).exp()  # E(t, 0)
    eK = exclusive_suffix(lw).exp()  # E(C, s)
    KtV = (k * eK).transpose(-1, -2) @ v  # what a chunk writes into the state it hands on
    eC = eb[..., -1, :].unsqueeze(-1)  # (B, H, n, d_k, 1)
    Ss = torch.empty(KtV.shape, dtype=v.dtype, device=v.device)  # the state entering each chunk
    S = S0
    for i in range(KtV.shape[2]):
        Ss[:, :, i] = S
        S = eC[:, :, i] * S + KtV[:, :, i]
    o = (q * eb) @ Ss + A @ v
    return o, S, (A, eb, eK, eC, Ss, S, *subs)


class _GLAChunked(torch.autograd.Function):
    """The chunked GLA recurrence with a hand-written backward: only the state gradient loops over chunks."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(
        ctx: Any, q: Tensor, k: Tensor, v: Tensor, lw: Tensor, S0: Tensor, c: int
    ) -> tuple[Tensor, Tensor]:
        o, S, saved = _chunk_forward(q, k, v, lw, S0, c)
        ctx.c = c
        ctx.save_for_backward(q, k, v, *saved)
        return o, S

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, dO: Tensor | None, dST: Tensor | None) -> tuple[Tensor | None, ...]:
        q, k, v, A, eb, eK, eC, Ss, ST, *subs = ctx.saved_tensors
        c = ctx.c
        if dO is None:
            dO = torch.zeros_like(v)
        dS = torch.zeros_like(ST) if dST is None else dST
        QedO = (q * eb).transpose(-1, -2) @ dO
        dSn = torch.empty_like(Ss)  # dL/dS after each chunk
        for i in range(Ss.shape[2] - 1, -1, -1):
            dSn[:, :, i] = dS
            dS = eC[:, :, i] * dS + QedO[:, :, i]
        dv = A.transpose(-1, -2) @ dO + (k * eK) @ dSn
        sub = lambda x: x.unflatten(-2, (-1, c))  # noqa: E731
        dqi, dki = decayed_apply(dO @ v.transpose(-1, -2), sub(q), sub(k), *subs)
        dq = (dO @ Ss.transpose(-1, -2)) * eb + dqi.flatten(-3, -2)
        dk = (v @ dSn.transpose(-1, -2)) * eK + dki.flatten(-3, -2)
        db = q * dq - k * dk  # dL/db_t: q_t enters as q_t e^{b_t}, k_s as k_s e^{-b_s}
        Sout = torch.cat([Ss[:, :, 1:], ST.unsqueeze(2)], 2)
        db[..., -1, :] += (Sout * dSn).sum(-1)  # S_C = diag(e^{b_C}) (...)
        return dq, dk, dv, rev_cumsum(db, -2), dS, None


def gla_chunked(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_w: Tensor,
    S0: Tensor | None = None,
    chunk: int = CHUNK,
    sub: int = SUB,
) -> tuple[Tensor, Tensor]:
    """GLA, chunked: q, k, log_w (B, T, H, d_k) (log_w <= 0), v (B, T, H, d_v), S0 (B, H, d_k, d_v) or None
    -> (o (B, T, H, d_v), S_T); ``ops.dplr.gla_rule``'s contract. ``sub``: steps per sub-chunk (the chunk is
    cut at its greatest common divisor with ``chunk``)."""
    B, T, H, _ = k.shape
    dv = v.shape[-1]
    S = zeros_state(k, v) if S0 is None else S0
    if T == 0:
        return v.new_zeros(v.shape), S
    C, c, n, pad = layout(T, chunk, sub)
    if pad:  # padded steps: w = 1 (log_w = 0), no write, no query
        q, k, v, log_w = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v, log_w))
    q, k, v, log_w = (x.reshape(B, n, C, H, -1).permute(0, 3, 1, 2, 4) for x in (q, k, v, log_w))
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v, log_w, S)):
        o, S = _GLAChunked.apply(q, k, v, log_w, S, c)
    else:
        o, S, _ = _chunk_forward(q, k, v, log_w, S, c)
    return o.permute(0, 2, 3, 1, 4).reshape(B, n * C, H, dv)[:, :T], S
