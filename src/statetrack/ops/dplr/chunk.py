"""Diagonal-plus-low-rank transitions, chunked: the recurrence of Gated DeltaNet, Gated DeltaProduct, KDA, RWKV-7
and GLA.

Per head, with a matrix state S (d_k, d_v)::

    S_t = diag(w_t) S_{t-1} + b_t (a_t^T S_{t-1}) + k_t v_t^T          o_t = S_t^T q_t

so the transition is A_t = diag(w_t) + b_t a_t^T (a diagonal decay w_t = exp(log_w_t) in (0, 1] plus a
rank-one term), and the write is k_t v_t^T. The mixers fill it in:

* GLA (Yang2023):           log_w per key channel, no rank-one term (a = b = None);
* Gated DeltaNet (Yang2025): log_w one number per head (``(..., 1)``), a = k, b = -exp(log_w) beta k,
  the write k' = beta k: A_t = alpha_t (I - beta_t k_t k_t^T);
* KDA (Kimi Linear):         log_w per key channel, a = alpha (.) k, b = -beta k, the write beta k:
  A_t = (I - beta_t k_t k_t^T) diag(alpha_t), Gated DeltaNet with a per-channel gate;
* Gated DeltaProduct:        Gated DeltaNet over n_h sub-steps per token (:func:`gated_delta_product`);
* RWKV-7 (Peng2025):         log_w per key channel, a = kappa_hat, b = -kappa_hat * a_lr (the in-context
  learning rate): A_t = diag(w_t) - (kappa_hat (.) a_lr) kappa_hat^T.

Shapes: q, k, a, b (B, T, H, d_k); v (B, T, H, d_v); log_w (B, T, H, d_k) or (B, T, H, 1), finite and
<= 0; S0 (B, H, d_k, d_v) or None. Every function returns (o (B, T, H, d_v), S_T).

Three forms (the first two in ``ops.dplr.reference``):

* :func:`dplr_ref` -- step by step in float64: the reference.
* :func:`dplr_recurrent` -- the same loop in the inputs' dtype (one token at a time: the step path).
* :func:`dplr_chunked` -- the chunked form for training and evaluation. Inside a chunk of C steps
  with the state S_0 entering it, write E(t, s) = prod_{s < r <= t} w_r (per key channel, computed
  as exp of a segment sum of log_w, never as a ratio of running products) and z_t = S_{t-1}^T a_t. Then

      S_t = E(t, 0) S_0 + sum_{s <= t} E(t, s) (b_s z_s^T + k_s v_s^T)

  and the z_t solve a unit lower-triangular system: (I - M_ab) Z = (a (.) E(., 0)) S_0 + M_ak V with
  M_ab[t, s] = a_t^T E(t - 1, s) b_s (s < t), M_ak likewise with k_s. Everything that does not depend
  on S_0 is computed for all chunks at once (the solve through one explicit inverse per chunk); the loop
  over chunks only carries the state: S <- M_i S + R_i with a (d_k, d_k) matrix M_i per chunk. Autograd
  differentiates it (the loop runs T / C times). Only products and exponentials of sums of log_w <= 0
  appear, so no factor exceeds 1 and nothing divides by a decay.

The mixers' ops live in their folders (``ops.gated_delta.rule``: ``gated_delta_rule``, ``gated_delta_product``;
``ops.kda.rule.kda_rule``; ``ops.dplr.rwkv7.rwkv7_rule``; ``ops.gla.rule.gla_rule``). On CUDA they run
flash-linear-attention's kernels where ``fla`` is installed (each folder's ``fla.py``, the rules of ``ops.fla``);
everything else runs this chunked form, except the gated delta rule (and so Gated DeltaProduct), GLA and KDA,
which have dedicated chunked forms with hand-written backward passes (``ops.gated_delta.chunk``, ``ops.gla.chunk``,
``ops.kda.chunk``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from statetrack.ops.chunks import chunk_layout, segsum, zeros_state
from statetrack.ops.dplr.reference import dplr_recurrent

CHUNK = 16  # default steps per chunk of the chunked form


def _pair(x: Tensor, E: Tensor, y: Tensor) -> Tensor:
    """[t, s] = sum_d x_t[d] E[t, s, d] y_s[d]: x, y (..., C, D), E (..., C, C, D or 1) -> (..., C, C)."""
    if E.shape[-1] == 1:
        return (x @ y.transpose(-1, -2)) * E.squeeze(-1)
    return (x.unsqueeze(-2) * E * y.unsqueeze(-3)).sum(-1)


# long: a chunked scan read top to bottom beside its float64 reference (one body, its float operations in order)
def dplr_chunked(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    a: Tensor | None,
    b: Tensor | None,
    log_w: Tensor,
    S0: Tensor | None = None,
    chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:
    """Chunked form: same contract as :func:`dplr_recurrent`."""
    B, T, H, dk = k.shape
    dv = v.shape[-1]
    S = zeros_state(k, v) if S0 is None else S0
    if T == 0:
        return v.new_zeros(v.shape), S
    C, n, pad = chunk_layout(T, chunk)
    if pad:  # padded steps: w = 1 (log_w = 0), no rank-one term, no write, no query
        q, k, v, log_w = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v, log_w))
        if a is not None and b is not None:
            a, b = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (a, b))
    # chunk-major: (B, H, n, C, .)
    cm = lambda x: x.reshape(B, n, C, H, x.shape[-1]).permute(0, 3, 1, 2, 4)  # noqa: E731
    q, k, v, log_w = cm(q), cm(k), cm(v), cm(log_w)
    seg = segsum(log_w)  # (B, H, n, C, C, D): log E(t, s), s <= t
    E = seg.exp()
    W = log_w.cumsum(-2)  # log E(t, 0)
    Et0 = W.exp()  # (B, H, n, C, D)
    Eend = E[..., -1, :, :]  # E(C, s), (B, H, n, C, D)
    Mqk = _pair(q, E, k)  # [t, s] = q_t^T E(t, s) k_s, s <= t
    G1 = q * Et0  # (B, H, n, C, dk): o gets G1 S_0
    O0 = Mqk @ v
    Kend = k * Eend
    Mst = torch.diag_embed(Et0[..., -1, :].expand(*k.shape[:3], dk))  # (B, H, n, dk, dk): E(C, 0) S_0
    R = Kend.transpose(-1, -2) @ v  # (B, H, n, dk, dv)
    if a is not None and b is not None:  # the rank-one term b a^T (a and b come together)
        a, b = cm(a), cm(b)
        # E(t - 1, s) for s < t: the segment sums shifted by one row, strictly lower
        prev = torch.cat([torch.full_like(seg[..., :1, :, :], float("-inf")), seg[..., :-1, :, :]], -3)
        Ep = prev.exp()
        Mab = _pair(a, Ep, b)  # strictly lower
        Mak = _pair(a, Ep, k)
        eye = torch.eye(C, dtype=v.dtype, device=v.device)
        Tinv = torch.linalg.solve_triangular(
            eye - Mab, eye.expand(Mab.shape), upper=False, unitriangular=True
        )
        Wprev = torch.cat([torch.zeros_like(W[..., :1, :]), W[..., :-1, :]], -2)  # log E(t - 1, 0)
        A1 = Tinv @ (a * Wprev.exp())  # Z = A1 S_0 + U0
        U0 = Tinv @ (Mak @ v)
        Mqb = _pair(q, E, b)
        G1 = G1 + Mqb @ A1
        O0 = O0 + Mqb @ U0
        Bend = (b * Eend).transpose(-1, -2)  # (B, H, n, dk, C)
        Mst = Mst + Bend @ A1
        R = R + Bend @ U0
    states = []
    for i in range(n):  # only the state passes between chunks
        states.append(S)
        S = Mst[:, :, i] @ S + R[:, :, i]
    Ss = torch.stack(states, 2)  # (B, H, n, dk, dv): the state entering each chunk
    o = G1 @ Ss + O0
    o = o.permute(0, 2, 3, 1, 4).reshape(B, n * C, H, dv)[:, :T]
    return o, S


def dplr(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    a: Tensor | None,
    b: Tensor | None,
    log_w: Tensor,
    S0: Tensor | None = None,
    chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:
    """The PyTorch training form: chunked when chunk > 1, else the step loop."""
    if chunk and chunk > 1:
        return dplr_chunked(q, k, v, a, b, log_w, S0, chunk)
    return dplr_recurrent(q, k, v, a, b, log_w, S0)
