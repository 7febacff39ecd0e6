"""Kimi Delta Attention's recurrence in its own chunked form, sub-chunked, with a hand-written backward pass.

Per head, with a matrix state S (d_k, d_v) and a gate alpha_t = exp(log_w_t) in (0, 1] per key channel::

    S_t = (I - beta_t k_t k_t^T) diag(alpha_t) S_{t-1} + beta_t k_t v_t^T          o_t = S_t^T q_t

(Kimi Linear; ``ops.kda.rule.kda_rule``). With u_t = beta_t (v_t - (diag(alpha_t) S_{t-1})^T k_t) this is
S_t = diag(alpha_t) S_{t-1} + k_t u_t^T: GLA (``ops.gla.chunk``) writing u_t, so inside a chunk, with the state
S_0 entering it and E(t, s) = prod_{s < r <= t} alpha_r per channel, the delta rule's WY / UT form
(``ops.deltanet.chunk``, ``ops.gated_delta.chunk``) holds with the gate folded in per channel::

      U_v = (I + L)^{-1} diag(beta) V,  W = (I + L)^{-1} diag(beta) (K (.) E(., 0))      (one inverse)
      U = U_v - W S_0,  O = (Q (.) E(., 0)) S_0 + A_qk U,  S <- diag(E(C, 0)) S_0 + (K (.) E(C, .))^T U

with L[t, s] = beta_t A_kk[t, s] (s < t) and A_xk[t, s] = sum_d x_t[d] E(t, s)[d] k_s[d]: the decayed
pairs of ``ops.gla.chunk``, formed per sub-chunk without dividing by a decay. Every factor is at most 1.

The backward pass returns the gradients of q, k, v, beta, log_w and S_0. The gate's gradient uses, as in
``ops.gla.chunk``, that the decays enter only through q_t e^{b_t}, k_t e^{b_t} (the rows of A_kk and W), k_s
e^{-b_s} (the columns of A_qk, A_kk and the state's write) and the factor e^{b_C} of the state a chunk hands
on, b_t = sum_{r <= t} log_w_r: dL/db_t = q_t (.) dq_t + k_t (.) (dk_t^+ - dk_t^-) (the key's gradient
split by those two roles), plus (S_C (.) dS_C) summed over values at a chunk's last step.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from statetrack.ops.chunks import zeros_state
from statetrack.ops.deltanet.chunk import _masks, carry_grads, carry_states
from statetrack.ops.gla.chunk import (
    chunk_decays,
    decayed_apply,
    decayed_pairs,
    from_chunks,
    layout,
    rev_cumsum,
    to_chunks,
)

CHUNK = 16  # default steps per chunk of the chunked form
SUB = 8  # default steps per sub-chunk


def _chunk_forward(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, lw: Tensor, S0: Tensor, c: int
) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
    """The chunked form on chunk-major q, k, lw (B, H, n, C, d_k), v (B, H, n, C, d_v), beta (B, H, n, C) with
    sub-chunks of c steps. Returns o (B, H, n, C, d_v), S_T and what the backward pass needs."""
    eye, strict, _ = _masks(k.shape[-2], k)
    eb, eK, subs = chunk_decays(lw, c)
    ks = k.unflatten(-2, (-1, c))
    (Aqk, Akk), Dk = decayed_pairs(torch.stack([q.unflatten(-2, (-1, c)), ks]), ks, *subs)
    Akk = Akk * strict
    b = beta.unsqueeze(-1)
    M = b * Akk + eye
    Tinv = torch.linalg.solve_triangular(M, eye.expand(M.shape), upper=False, unitriangular=True)
    W, Uv = Tinv @ (b * k * eb), Tinv @ (b * v)
    eC = eb[..., -1, :].unsqueeze(-1)  # (B, H, n, d_k, 1)
    U, Ss, S = carry_states(Uv, W, (k * eK).transpose(-1, -2), S0, eC)
    o = (q * eb) @ Ss + Aqk @ U
    return o, S, (Aqk, Akk, eb, eK, eC, Tinv, W, Uv, U, Ss, S, *subs, Dk)


class _KDAChunked(torch.autograd.Function):
    """The chunked KDA recurrence with a hand-written backward: only the state gradient loops over chunks."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(
        ctx: Any, q: Tensor, k: Tensor, v: Tensor, beta: Tensor, lw: Tensor, S0: Tensor, c: int
    ) -> tuple[Tensor, Tensor]:
        o, S, saved = _chunk_forward(q, k, v, beta, lw, S0, c)
        ctx.c = c
        ctx.save_for_backward(q, k, v, beta, *saved)
        return o, S

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, dO: Tensor | None, dST: Tensor | None) -> tuple[Tensor | None, ...]:
        q, k, v, beta, Aqk, Akk, eb, eK, eC, Tinv, W, Uv, U, Ss, ST, *subs = ctx.saved_tensors
        _, strict, _ = _masks(k.shape[-2], k)
        sub = lambda x: x.unflatten(-2, (-1, ctx.c))  # noqa: E731
        if dO is None:
            dO = torch.zeros_like(U)
        dS = torch.zeros_like(ST) if dST is None else dST
        dU = Aqk.transpose(-1, -2) @ dO  # the part of dL/dU that does not pass through the state
        dSn, dS = carry_grads(dU, k * eK, W.transpose(-1, -2), (q * eb).transpose(-1, -2) @ dO, dS, eC)
        dq = dO @ Ss.transpose(-1, -2) * eb
        dk_minus = (U @ dSn.transpose(-1, -2)) * eK  # k_s e^{-b_s}'s part
        # W = Tinv diag(beta) (K (.) e^b) with dW = -dU S^T; U_v = Tinv diag(beta) V with dU_v = dU
        TinvT = Tinv.transpose(-1, -2)
        dRk = TinvT @ -(dU @ Ss.transpose(-1, -2))
        dRv = TinvT @ dU
        # Tinv = M^-1: dM = -(dR_k W^T + dR_v U_v^T); M[t, s] = beta_t A_kk[t, s] (s < t)
        dM = -(dRk @ W.transpose(-1, -2) + dRv @ Uv.transpose(-1, -2)) * strict
        b = beta.unsqueeze(-1)
        dA = torch.stack([dO @ U.transpose(-1, -2), b * dM])  # of A_qk and A_kk
        (dqi, dkr), dkc = decayed_apply(dA, torch.stack([sub(q), sub(k)]), sub(k), *subs)
        dq = dq + dqi.flatten(-3, -2)
        dk_plus = b * dRk * eb + dkr.flatten(-3, -2)  # k_t e^{b_t}'s part
        dk_minus = dk_minus + dkc.flatten(-3, -2)
        dbeta = (dM * Akk).sum(-1) + (dRk * k * eb).sum(-1) + (dRv * v).sum(-1)
        db = q * dq + k * (dk_plus - dk_minus)
        Sout = torch.cat([Ss[:, :, 1:], ST.unsqueeze(2)], 2)
        db[..., -1, :] += (Sout * dSn).sum(-1)  # S_C = diag(e^{b_C}) (...)
        return dq, dk_plus + dk_minus, b * dRv, dbeta, rev_cumsum(db, -2), dS, None


def kda_chunked(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    log_w: Tensor,
    S0: Tensor | None = None,
    chunk: int = CHUNK,
    sub: int = SUB,
) -> tuple[Tensor, Tensor]:
    """KDA, chunked: q, k, log_w (B, T, H, d_k) (log_w <= 0), v (B, T, H, d_v), beta (B, T, H), S0 (B, H, d_k,
    d_v) or None -> (o (B, T, H, d_v), S_T); ``ops.kda.rule.kda_rule``'s contract. ``sub``: steps per sub-chunk
    (the chunk is cut at its greatest common divisor with ``chunk``)."""
    T = k.shape[1]
    S = zeros_state(k, v) if S0 is None else S0
    if T == 0:
        return v.new_zeros(v.shape), S
    C, c, n, pad = layout(T, chunk, sub)
    # padded steps: k = 0, beta = 0, alpha = 1: the identity, no write, no query
    q, k, v, beta, log_w = to_chunks((q, k, v, beta, log_w), n, C, pad)
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v, beta, log_w, S)):
        o, S = _KDAChunked.apply(q, k, v, beta, log_w, S, c)
    else:
        o, S, _ = _chunk_forward(q, k, v, beta, log_w, S, c)
    return from_chunks(o, T), S
