"""Gated DeltaNet's recurrence in its own chunked form, with a hand-written backward pass.

Per head, with a matrix state S (d_k, d_v) and a scalar gate alpha_t = exp(g_t) in (0, 1]::

    S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T          o_t = S_t^T q_t

(Yang2025; ``ops.gated_delta.rule.gated_delta_rule``). The general DPLR chunked form
(``ops.dplr.chunk.dplr_chunked``) runs it through autograd with per-pair decay tensors; this is the delta rule's WY /
UT form
(``ops.deltanet.chunk``) with the gate folded in. Inside a chunk of C steps with the state S_0 entering
it, write E(t, s) = prod_{s < r <= t} alpha_r (exp of a segment sum of g, never a ratio of running
products: ``chunks.segsum``), e_t = E(t, 0) and u_t = beta_t (v_t - alpha_t S_{t-1}^T k_t), so that
S_t = e_t S_0 + sum_{s <= t} E(t, s) k_s u_s^T. Then, with L[t, s] = beta_t E(t, s) k_t . k_s (s < t)::

      U_v = (I + L)^{-1} diag(beta) V,  W = (I + L)^{-1} diag(beta e) K      (one unit-triangular inverse)
      U = U_v - W S_0,  O = diag(e) Q S_0 + (Q K^T (.) E) U,  S <- e_C S_0 + (diag(E(C, .)) K)^T U

Every decay factor is at most 1 and nothing divides by one. The solves of all chunks run at once; only
the last line's state loops over chunks, forward and (for the state's gradient) backward. The backward
pass returns the gradients of q, k, v, beta, g and S_0; the decays' gradients reach g through the
segment sums (each E(t, s) depends on the g_r with s < r <= t).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from statetrack.ops.chunks import chunk_layout, segsum, zeros_state
from statetrack.ops.deltanet.chunk import CHUNK, _masks, carry_grads, carry_states


def _decays(g: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """g (..., C) -> (E (..., C, C) lower-triangular with E[t, s] = E(t, s), e (..., C) = E(t, 0),
    E(C, s) (..., C), e_C (...))."""
    E = segsum(g.unsqueeze(-1)).squeeze(-1).exp()  # exp(-inf) = 0 above the diagonal
    e = g.cumsum(-1).exp()
    return E, e, E[..., -1, :], e[..., -1]


def _chunk_forward(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor, S0: Tensor
) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
    """The chunked form on chunk-major q, k (B, H, n, C, d_k), v (B, H, n, C, d_v), beta, g (B, H, n, C).
    Returns o (B, H, n, C, d_v), S_T and what the backward pass needs."""
    eye, strict, _ = _masks(k.shape[-2], k)
    E, e, eC_s, eC = _decays(g)
    kT = k.transpose(-1, -2)
    KK = k @ kT
    b = beta.unsqueeze(-1)
    M = b * KK * E * strict + eye
    Tinv = torch.linalg.solve_triangular(M, eye.expand(M.shape), upper=False, unitriangular=True)
    W, Uv = Tinv @ ((b * e.unsqueeze(-1)) * k), Tinv @ (b * v)
    QK = q @ kT
    Aqk = QK * E
    Kt = k * eC_s.unsqueeze(-1)  # E(C, s) k_s: what chunk i writes into the state it hands on
    U, Ss, S = carry_states(Uv, W, Kt.transpose(-1, -2), S0, eC[..., None, None])
    o = (q * e.unsqueeze(-1)) @ Ss + Aqk @ U
    return o, S, (KK, QK, E, e, eC_s, eC, Tinv, W, Uv, U, Ss)


def _gate_grad(
    dE: Tensor, de: Tensor, deC_s: Tensor, deC: Tensor, E: Tensor, e: Tensor, eC_s: Tensor, eC: Tensor
) -> Tensor:
    """dL/dg from the gradients of the decays (each already multiplied by its decay: d/d log): E(t, s) sums
    g_r over s < r <= t, e_t over r <= t, E(C, s) over r > s, e_C over the whole chunk."""
    _, strict, _ = _masks(E.shape[-1], E)
    below = (dE * E).flip(-2).cumsum(-2).flip(-2)  # [t, s] = sum_{t' >= t} dE[t', s] E[t', s]
    dg = (below * strict).sum(-1)  # g_r: sum over t >= r, s < r
    dg = dg + (de * e).flip(-1).cumsum(-1).flip(-1)  # g_r: every e_t with t >= r
    dl = deC_s * eC_s
    dg = dg + dl.cumsum(-1) - dl  # g_r: every E(C, s) with s < r
    return dg + (deC * eC).unsqueeze(-1)


class _GatedDeltaChunked(torch.autograd.Function):
    """The chunked gated delta rule with a hand-written backward: the reverse pass loops over chunks only
    for the state gradient; every other gradient is one batched matmul over all chunks."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(
        ctx: Any, q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor, S0: Tensor
    ) -> tuple[Tensor, Tensor]:
        o, S, saved = _chunk_forward(q, k, v, beta, g, S0)
        ctx.save_for_backward(q, k, v, beta, *saved)
        return o, S

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, dO: Tensor | None, dST: Tensor | None) -> tuple[Tensor, ...]:
        q, k, v, beta, KK, QK, E, e, eC_s, eC, Tinv, W, Uv, U, Ss = ctx.saved_tensors
        _, strict, _ = _masks(k.shape[-2], k)
        if dO is None:
            dO = torch.zeros_like(U)
        dS = torch.zeros_like(Ss[:, :, 0]) if dST is None else dST.clone()
        Qe, Kt = q * e.unsqueeze(-1), k * eC_s.unsqueeze(-1)
        dU = (QK * E).transpose(-1, -2) @ dO  # the part of dL/dU that does not pass through the state
        dSn, dS = carry_grads(dU, Kt, W.transpose(-1, -2), Qe.transpose(-1, -2) @ dO, dS, eC[..., None, None])
        dA = dO @ U.transpose(-1, -2)  # of Aqk = QK (.) E (E is 0 above the diagonal)
        dQK, dE = dA * E, dA * QK
        dQe = dO @ Ss.transpose(-1, -2)
        dKt = U @ dSn.transpose(-1, -2)
        dq = dQK @ k + dQe * e.unsqueeze(-1)
        dk = dQK.transpose(-1, -2) @ q + dKt * eC_s.unsqueeze(-1)
        de = (dQe * q).sum(-1)
        deC_s = (dKt * k).sum(-1)
        deC = (dSn * Ss).sum((-1, -2))
        # W = Tinv diag(beta e) K with dW = -dU S^T; U_v = Tinv diag(beta) V with dU_v = dU
        TinvT = Tinv.transpose(-1, -2)
        dRk = TinvT @ -(dU @ Ss.transpose(-1, -2))
        dRv = TinvT @ dU
        # Tinv = M^-1: dM = -Tinv^T dTinv Tinv^T = -(dR_k W^T + dR_v U_v^T); M[t, s] = beta_t KK E (s < t)
        dM = -(dRk @ W.transpose(-1, -2) + dRv @ Uv.transpose(-1, -2)) * strict
        b = beta.unsqueeze(-1)
        dKK = b * dM * E
        dE = dE + b * dM * KK
        rk = (dRk * k).sum(-1)
        dbeta = (dM * KK * E).sum(-1) + e * rk + (dRv * v).sum(-1)
        de = de + beta * rk
        dk = dk + (b * e.unsqueeze(-1)) * dRk + dKK @ k + dKK.transpose(-1, -2) @ k
        dv = b * dRv
        dg = _gate_grad(dE, de, deC_s, deC, E, e, eC_s, eC)
        return dq, dk, dv, dbeta, dg, dS


def gated_delta_chunked(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, g: Tensor, S0: Tensor | None = None, chunk: int = CHUNK
) -> tuple[Tensor, Tensor]:
    """The gated delta rule, chunked: q, k (B, T, H, d_k), v (B, T, H, d_v), beta, g (B, T, H) (g = log
    alpha <= 0), S0 (B, H, d_k, d_v) or None -> (o (B, T, H, d_v), S_T); ``ops.gated_delta.rule.gated_delta_rule``'s
    contract."""
    B, T, H, _ = k.shape
    dv = v.shape[-1]
    S = zeros_state(k, v) if S0 is None else S0
    if T == 0:
        return v.new_zeros(v.shape), S
    C, n, pad = chunk_layout(T, chunk)
    if pad:  # padded steps: k = 0, beta = 0, alpha = 1: the identity, no write, no query
        q, k, v = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v))
        beta, g = (F.pad(x, (0, 0, 0, pad)) for x in (beta, g))
    q, k, v = (x.reshape(B, n, C, H, -1).permute(0, 3, 1, 2, 4) for x in (q, k, v))  # (B, H, n, C, .)
    beta, g = (x.reshape(B, n, C, H).permute(0, 3, 1, 2) for x in (beta, g))
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v, beta, g, S)):
        o, S = _GatedDeltaChunked.apply(q, k, v, beta, g, S)
    else:
        o, S, _ = _chunk_forward(q, k, v, beta, g, S)
    return o.permute(0, 2, 3, 1, 4).reshape(B, n * C, H, dv)[:, :T], S
