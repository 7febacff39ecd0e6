"""Gated linear attention's recurrence in its own chunked form, sub-chunked, with a hand-written backward pass.

Per head, with a matrix state S (d_k, d_v) and a decay w_t = exp(log_w_t) in (0, 1] per key channel::

    S_t = diag(w_t) S_{t-1} + k_t v_t^T          o_t = S_t^T q_t

(Yang2023; ``ops.gla.rule.gla_rule``). Inside a chunk of C steps with the state S_0 entering it, write
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


def sub_pairs(m: int, like: Tensor) -> tuple[Tensor, Tensor]:
    """The pairs (i, j) of sub-chunks with j < i, as two index tensors."""
    ij = torch.tril_indices(m, m, -1, device=like.device)
    return ij[0], ij[1]


def sub_decays(lw: Tensor, c: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Chunk-major log-decays lw (..., C, D) -> in sub-chunks of c steps (m = C / c): alpha (..., m, c, D),
    beta (..., m, c, D), G (..., P, D) for the P pairs of :func:`sub_pairs` and the diagonal blocks' pairwise
    decays (..., m, c, c, D) (zero above the diagonal)."""
    ls = lw.unflatten(-2, (-1, c))
    la = ls.cumsum(-2)
    ii, jj = sub_pairs(ls.shape[-3], lw)
    G = segsum(la[..., -1, :])[..., ii - 1, jj, :]  # [i - 1, j] = sum of the sub-chunk totals j < l < i
    return la.exp(), exclusive_suffix(ls).exp(), G.exp(), segsum(ls).exp()


def decayed_pairs(
    xs: Tensor, ks: Tensor, alpha: Tensor, beta: Tensor, G: Tensor, Dd: Tensor
) -> tuple[Tensor, Tensor]:
    """A (p, ..., C, C) with A[t, s] = sum_d x_t[d] E(t, s)[d] k_s[d] (s <= t, else 0) for p stacked
    sub-chunked xs (p, ..., m, c, d) and keys ks (..., m, c, d), from :func:`sub_decays`; and the diagonal
    blocks' decayed keys Dk[t, s] = E(t, s) (.) k_s (..., m, c, c, d), which the backward pass reads."""
    m, c = ks.shape[-3:-1]
    ii, jj = sub_pairs(m, ks)
    A = xs.new_zeros(*xs.shape[:-3], m, m, c, c)  # [i, j, t, s]
    A[..., ii, jj, :, :] = ((xs * alpha)[..., ii, :, :] * G.unsqueeze(-2)) @ (ks * beta)[
        ..., jj, :, :
    ].transpose(-1, -2)
    Dk = Dd * ks.unsqueeze(-3)
    Ad = (Dk @ xs.movedim(0, -1)).movedim(-1, 0)  # (p, ..., m, c, c): one matrix-vector product per row t
    A.diagonal(0, -4, -3).copy_(Ad.movedim(-3, -1))
    return A.transpose(-3, -2).reshape(*A.shape[:-4], m * c, m * c), Dk


def decayed_apply(
    dA: Tensor, xs: Tensor, ks: Tensor, alpha: Tensor, beta: Tensor, G: Tensor, Dd: Tensor, Dk: Tensor
) -> tuple[Tensor, Tensor]:
    """The gradients of :func:`decayed_pairs` for dL/dA (p, ..., C, C): (dxs (p, ..., m, c, d), dk (..., m, c,
    d)) with dx_t = sum_s dA[t, s] E(t, s) (.) k_s and dk_s = sum_{x, t} dA[t, s] E(t, s) (.) x_t."""
    m, c = ks.shape[-3:-1]
    ii, jj = sub_pairs(m, ks)
    dAb = dA.unflatten(-1, (m, c)).unflatten(-3, (m, c)).transpose(-3, -2)  # [i, j, t, s]
    dP, Gt = dAb[..., ii, jj, :, :], G.unsqueeze(-2)
    dx = torch.zeros_like(xs).index_add_(xs.dim() - 3, ii, (dP @ (ks * beta)[..., jj, :, :]) * Gt) * alpha
    dkP = ((dP.transpose(-1, -2) @ (xs * alpha)[..., ii, :, :]) * Gt).sum(0)
    dk = torch.zeros_like(ks).index_add_(ks.dim() - 3, jj, dkP) * beta
    dAd = dAb.diagonal(0, -4, -3).movedim(-1, -3)  # (p, ..., m, c, c)
    dAd = dAd.unsqueeze(-1)  # broadcast products and sums: faster here than batches of tiny matmuls
    Y = dAd[0] * xs[0].unsqueeze(-2)  # (..., m, c, c, d): [t, s] = sum_x dA[t, s] x_t, summed in place
    for i in range(1, len(xs)):
        Y.addcmul_(dAd[i], xs[i].unsqueeze(-2))
    return dx + (dAd * Dk).sum(-2), dk + Y.mul_(Dd).sum(-3)


def chunk_decays(lw: Tensor, c: int) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
    """Chunk-major log-decays lw (..., C, D) -> (E(t, 0) (..., C, D), E(C, s) (..., C, D), :func:`sub_decays`)."""
    return lw.cumsum(-2).exp(), exclusive_suffix(lw).exp(), sub_decays(lw, c)


def to_chunks(xs: tuple[Tensor, ...], n: int, C: int, pad: int) -> list[Tensor]:
    """(B, T, H, d) or (B, T, H) tensors -> chunk-major (B, H, n, C, d) or (B, H, n, C), padded with zeros at
    the end to n C steps."""
    out = []
    for x in xs:
        x = F.pad(x, (0, 0) * (x.dim() - 2) + (0, pad)) if pad else x
        B, _, H = x.shape[:3]
        out.append(x.reshape(B, n, C, H, *x.shape[3:]).movedim(3, 1))
    return out


def from_chunks(o: Tensor, T: int) -> Tensor:
    """Chunk-major o (B, H, n, C, d) -> (B, T, H, d), the padded steps dropped."""
    B, H, n, C, d = o.shape
    return o.permute(0, 2, 3, 1, 4).reshape(B, n * C, H, d)[:, :T]


def _chunk_forward(
    q: Tensor, k: Tensor, v: Tensor, lw: Tensor, S0: Tensor, c: int
) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
    """The chunked form on chunk-major q, k, lw (B, H, n, C, d_k), v (B, H, n, C, d_v) with sub-chunks of c
    steps. Returns o (B, H, n, C, d_v), S_T and what the backward pass needs."""
    eb, eK, subs = chunk_decays(lw, c)
    sub = lambda x: x.unflatten(-2, (-1, c))  # noqa: E731
    A, Dk = decayed_pairs(sub(q).unsqueeze(0), sub(k), *subs)
    A = A.squeeze(0)
    KtV = (k * eK).transpose(-1, -2) @ v  # what a chunk writes into the state it hands on
    eC = eb[..., -1, :].unsqueeze(-1)  # (B, H, n, d_k, 1)
    Ss = torch.empty(KtV.shape, dtype=v.dtype, device=v.device)  # the state entering each chunk
    S = S0
    for i in range(KtV.shape[2]):
        Ss[:, :, i] = S
        S = eC[:, :, i] * S + KtV[:, :, i]
    o = (q * eb) @ Ss + A @ v
    return o, S, (A, eb, eK, eC, Ss, S, *subs, Dk)


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
        dqi, dki = decayed_apply((dO @ v.transpose(-1, -2)).unsqueeze(0), sub(q).unsqueeze(0), sub(k), *subs)
        dq = (dO @ Ss.transpose(-1, -2)) * eb + dqi[0].flatten(-3, -2)
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
    -> (o (B, T, H, d_v), S_T); ``ops.gla.rule.gla_rule``'s contract. ``sub``: steps per sub-chunk (the chunk is
    cut at its greatest common divisor with ``chunk``)."""
    T = k.shape[1]
    S = zeros_state(k, v) if S0 is None else S0
    if T == 0:
        return v.new_zeros(v.shape), S
    C, c, n, pad = layout(T, chunk, sub)
    # padded steps: w = 1 (log_w = 0), no write, no query
    q, k, v, log_w = to_chunks((q, k, v, log_w), n, C, pad)
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v, log_w, S)):
        o, S = _GLAChunked.apply(q, k, v, log_w, S, c)
    else:
        o, S, _ = _chunk_forward(q, k, v, log_w, S, c)
    return from_chunks(o, T), S
