"""The delta rule: a recurrence whose transitions are generalized Householder matrices.

Per head, with a matrix state S (d_k, d_v)::

    S_t = (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T          o_t = S_t^T q_t

(DeltaNet; DeltaProduct runs n_h such steps per token, see :func:`interleave`). Shapes: q, k (B, T, H, d_k),
v (B, T, H, d_v), beta (B, T, H), S0 (B, H, d_k, d_v) or None. Each function returns (o (B, T, H, d_v), S_T).

Three forms:

* :func:`delta_rule_ref` -- step by step in float64: the reference.
* :func:`delta_rule_recurrent` -- the same loop in the inputs' dtype: the inference form (one token
  at a time, fixed memory) and a training form for short sequences.
* :func:`delta_rule_chunked` -- the chunked WY / UT form (Yang2024) for training. Inside a
  chunk of C steps, with K, V, beta, Q the chunk's rows and L = tril(diag(beta) K K^T, -1)::

      U_v = (I + L)^{-1} diag(beta) V,  W = (I + L)^{-1} diag(beta) K      (a unit-triangular solve)
      U = U_v - W S,  O = Q S + tril(Q K^T) U,  S <- S + K^T U

  The solves of all chunks run in parallel; only the last three lines loop over chunks. W is the
  WY representation of the chunk's Householder products (H_i ... H_1 = I - sum_{j<=i} k_j w_j^T), and
  those products have norm <= 1 for beta in [0, 2], so nothing in the chunk grows. Measured against
  the float64 reference at T = 1,000 in float32 (bench/accuracy.py, tests/test_ops.py): relative error
  <= 1e-6 for beta in [0, 2] and <= 4e-5 for repeated keys with beta in (1.999, 2), at chunk sizes
  16 to 128 (the error grows mildly with the chunk). No fallback was needed. The default chunk,
  :data:`CHUNK` = 16 steps, is also the fastest here, forward + backward and forward alone, at
  batch 256 x 64 steps and batch 32 x 1,024 (8, 32 and 64 are 5-50% slower; docs/benchmarks.md).

  The backward pass is written by hand (``_DeltaChunked``): only the state gradient loops over
  chunks; every other gradient is one batched matmul over all chunks. The inverse of each chunk's
  unit-triangular matrix is formed explicitly (one solve against I): batched solves with many
  right-hand sides are slow on CPU.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.autograd.function import once_differentiable

from statetrack.ops import dispatch
from statetrack.ops.chunks import chunk_layout, zeros_state
from statetrack.ops.deltanet.reference import delta_rule_recurrent

CHUNK = 16  # default steps per chunk of the chunked form


def _masks(C: int, like: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(I, strictly lower, lower) C x C as 0/1 multipliers in like's dtype (torch.tril is several
    times slower than a multiply here)."""
    eye = torch.eye(C, dtype=like.dtype, device=like.device)
    lower = torch.ones(C, C, dtype=like.dtype, device=like.device).tril()
    return eye, lower - eye, lower


def _chunk_forward(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, S0: Tensor
) -> tuple[Tensor, Tensor, tuple[Tensor, ...]]:
    """The chunked form on chunk-major tensors q, k (B, H, n, C, d_k), v (B, H, n, C, d_v), beta
    (B, H, n, C). Returns o (B, H, n, C, d_v), S_T and what the backward pass needs."""
    eye, strict, lower = _masks(k.shape[-2], k)
    kT = k.transpose(-1, -2)
    KK = k @ kT
    M = beta.unsqueeze(-1) * KK * strict + eye
    # W = M^-1 diag(beta) K, U_v = M^-1 diag(beta) V through the explicit inverse Tinv = M^-1 (a solve
    # against I, then matmuls): batched solves with many right-hand sides are slow on CPU (4.4 vs 9.8 ms
    # for 512 chunks of 32 with d_k + d_v = 80)
    Tinv = torch.linalg.solve_triangular(M, eye.expand(M.shape), upper=False, unitriangular=True)
    b = beta.unsqueeze(-1)
    W, Uv = Tinv @ (b * k), Tinv @ (b * v)
    Aqk = (q @ kT) * lower
    U, Ss, S = carry_states(Uv, W, kT, S0)
    o = q @ Ss + Aqk @ U
    return o, S, (KK, Tinv, W, Uv, Aqk, U, Ss)


def carry_states(
    Uv: Tensor, W: Tensor, KT: Tensor, S0: Tensor, decay: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor]:
    """The loop over chunks of a WY / UT form: U_i = U_v,i - W_i S_i, S_(i+1) = decay_i S_i + KT_i U_i for
    chunk-major U_v (B, H, n, C, d_v), W (B, H, n, C, d_k), KT (B, H, n, d_k, C), decay (B, H, n, 1, 1) (one per
    chunk) or (B, H, n, d_k, 1) (one per key channel) or None (1). Returns (U, the state entering each chunk
    (B, H, n, d_k, d_v), the last state)."""
    Ss = torch.empty(W.shape[:3] + S0.shape[-2:], dtype=Uv.dtype, device=Uv.device)
    U = torch.empty_like(Uv)
    S = S0
    for i in range(W.shape[2]):  # only what depends on the carried state loops over chunks
        Ss[:, :, i] = S
        torch.sub(Uv[:, :, i], W[:, :, i] @ S, out=U[:, :, i])
        S = (S if decay is None else decay[:, :, i] * S) + KT[:, :, i] @ U[:, :, i]
    return U, Ss, S


def carry_grads(
    dU: Tensor, K: Tensor, WT: Tensor, QTdO: Tensor, dS: Tensor, decay: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """The reverse loop of :func:`carry_states` (with o = Q S_i + ... per chunk): adds the state's part to dU
    (in place) and returns (dL/dS after each chunk, dL/dS0). K (B, H, n, C, d_k) is KT's transpose, WT W's,
    QTdO = Q^T dO per chunk (B, H, n, d_k, d_v), dS the gradient of the last state, decay as there."""
    dSn = torch.empty(QTdO.shape, dtype=dS.dtype, device=dS.device)  # dL/dS after chunk i
    for i in range(K.shape[2] - 1, -1, -1):
        dSn[:, :, i] = dS
        dU[:, :, i] += K[:, :, i] @ dS
        dS = (dS if decay is None else decay[:, :, i] * dS) + QTdO[:, :, i] - WT[:, :, i] @ dU[:, :, i]
    return dSn, dS


class _DeltaChunked(torch.autograd.Function):
    """The chunked delta rule with a hand-written backward: the reverse pass loops over chunks only
    for the state gradient; every other gradient is one batched matmul over all chunks."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx: Any, q: Tensor, k: Tensor, v: Tensor, beta: Tensor, S0: Tensor) -> tuple[Tensor, Tensor]:
        o, S, saved = _chunk_forward(q, k, v, beta, S0)
        ctx.save_for_backward(q, k, v, beta, *saved)
        return o, S

    @staticmethod
    @once_differentiable
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, dO: Tensor | None, dST: Tensor | None) -> tuple[Tensor, ...]:
        q, k, v, beta, KK, Tinv, W, Uv, Aqk, U, Ss = ctx.saved_tensors
        _, strict, lower = _masks(k.shape[-2], k)
        if dO is None:
            dO = torch.zeros_like(U)
        dS = torch.zeros_like(Ss[:, :, 0]) if dST is None else dST.clone()
        dU = Aqk.transpose(-1, -2) @ dO  # the part of dL/dU that does not pass through the state
        dSn, dS = carry_grads(dU, k, W.transpose(-1, -2), q.transpose(-1, -2) @ dO, dS)
        dAqk = (dO @ U.transpose(-1, -2)) * lower
        dq = dO @ Ss.transpose(-1, -2) + dAqk @ k
        dk = dAqk.transpose(-1, -2) @ q + U @ dSn.transpose(-1, -2)
        # W = Tinv diag(beta) K with dW = -dU S^T; U_v = Tinv diag(beta) V with dU_v = dU
        TinvT = Tinv.transpose(-1, -2)
        dRk = TinvT @ -(dU @ Ss.transpose(-1, -2))
        dRv = TinvT @ dU
        # Tinv = M^-1: dM = -Tinv^T dTinv Tinv^T = -(dR_k W^T + dR_v U_v^T)
        dM = -(dRk @ W.transpose(-1, -2) + dRv @ Uv.transpose(-1, -2)) * strict
        dbeta = (dRk * k).sum(-1) + (dRv * v).sum(-1) + (dM * KK).sum(-1)
        b = beta.unsqueeze(-1)
        dk = dk + b * dRk
        dv = b * dRv
        dKK = b * dM  # M_ij = beta_i k_i . k_j for i > j
        dk = dk + dKK @ k + dKK.transpose(-1, -2) @ k
        return dq, dk, dv, dbeta, dS


def delta_rule_chunked(
    q: Tensor, k: Tensor, v: Tensor, beta: Tensor, S0: Tensor | None = None, chunk: int = CHUNK
) -> tuple[Tensor, Tensor]:
    """Chunked WY/UT form: same contract as :func:`delta_rule_recurrent`."""
    B, T, H, dk = k.shape
    dv = v.shape[-1]
    S = zeros_state(k, v) if S0 is None else S0
    if T == 0:
        return v.new_zeros(v.shape), S
    C, n, pad = chunk_layout(T, chunk)
    if pad:  # padded steps have k = 0, beta = 0: identity transition, no write
        q, k, v = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v))
        beta = F.pad(beta, (0, 0, 0, pad))
    # (B, H, n, C, .)
    q, k, v = (x.reshape(B, n, C, H, -1).permute(0, 3, 1, 2, 4) for x in (q, k, v))
    beta = beta.reshape(B, n, C, H).permute(0, 3, 1, 2)
    if torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v, beta, S)):
        o, S = _DeltaChunked.apply(q, k, v, beta, S)
    else:
        o, S, _ = _chunk_forward(q, k, v, beta, S)
    o = o.permute(0, 2, 3, 1, 4).reshape(B, n * C, H, dv)[:, :T]
    return o, S


def delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    S0: Tensor | None = None,
    chunk: int = CHUNK,
    neg: bool = False,
) -> tuple[Tensor, Tensor]:
    """Training form: chunked when chunk > 0, else the recurrent loop.

    On CUDA where flash-linear-attention is installed (``ops.dispatch``) it runs fla's kernels instead
    (``ops.deltanet.fla``; ``chunk`` is then unused): ``neg`` says beta may reach 2 (eigenvalues down to
    -1), which selects fla's float32 recurrent kernel; otherwise its chunk kernel (bfloat16 inputs)."""
    if q.shape[1] and dispatch.use_fla(q):
        from statetrack.ops.deltanet.fla import default_kernel, delta_rule_fla  # optional: imports fla (CUDA)

        return delta_rule_fla(q, k, v, beta, S0, default_kernel(neg))
    if chunk and chunk > 1:
        return delta_rule_chunked(q, k, v, beta, S0, chunk)
    return delta_rule_recurrent(q, k, v, beta, S0)


def interleave(q: Tensor, k: Tensor, v: Tensor, beta: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """DeltaProduct as a delta rule over n_h sub-steps per token.

    q (B, T, H, d_k); k (B, T, n_h, H, d_k); v (B, T, n_h, H, d_v); beta (B, T, n_h, H) ->
    tensors over T * n_h steps, q zero except at each token's last sub-step. Take the output at
    positions n_h - 1, 2 n_h - 1, ... (``o[:, n_h - 1 :: n_h]``)."""
    B, T, nh, H, dk = k.shape
    qq = torch.zeros_like(k)
    qq[:, :, -1] = q
    flat = lambda x: x.reshape(B, T * nh, *x.shape[3:])  # noqa: E731
    return flat(qq), flat(k), flat(v), flat(beta)
