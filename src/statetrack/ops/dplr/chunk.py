"""Diagonal-plus-low-rank transitions: the recurrence of Gated DeltaNet, Gated DeltaProduct, KDA, RWKV-7 and GLA.

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

Three forms:

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

On CUDA, the mixers' ops (:func:`gated_delta_rule`, :func:`gated_delta_product`, :func:`kda_rule`,
:func:`rwkv7_rule`, :func:`gla_rule`) run
flash-linear-attention's kernels where ``fla`` is installed (``ops.fla``); everything else runs
the chunked form, except the gated delta rule (and so Gated DeltaProduct), GLA and KDA, which have dedicated
chunked forms with hand-written backward passes (``ops.gated_delta.chunk``, ``ops.gla.chunk``, ``ops.kda.chunk``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from statetrack.ops import dispatch
from statetrack.ops.chunks import chunk_layout, segsum, zeros_state
from statetrack.ops.deltanet.chunk import interleave
from statetrack.ops.gated_delta.chunk import gated_delta_chunked
from statetrack.ops.gla.chunk import gla_chunked
from statetrack.ops.kda.chunk import kda_chunked

CHUNK = 16  # default steps per chunk of the chunked form


def dplr_step(
    q: Tensor, k: Tensor, v: Tensor, a: Tensor | None, b: Tensor | None, log_w: Tensor, S: Tensor
) -> tuple[Tensor, Tensor]:
    """One step: q, k, a, b (B, H, d_k), v (B, H, d_v), log_w (B, H, d_k or 1), S (B, H, d_k, d_v)
    -> (o (B, H, d_v), S)."""
    new = torch.exp(log_w).unsqueeze(-1) * S + k.unsqueeze(-1) * v.unsqueeze(-2)
    if a is not None and b is not None:
        z = torch.einsum("bhk,bhkv->bhv", a, S)
        new = new + b.unsqueeze(-1) * z.unsqueeze(-2)
    return torch.einsum("bhk,bhkv->bhv", q, new), new


def dplr_recurrent(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    a: Tensor | None,
    b: Tensor | None,
    log_w: Tensor,
    S0: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Step-by-step loop in the inputs' dtype."""
    S = zeros_state(k, v) if S0 is None else S0
    out = []
    for t in range(q.shape[1]):
        o, S = dplr_step(
            q[:, t],
            k[:, t],
            v[:, t],
            None if a is None else a[:, t],
            None if b is None else b[:, t],
            log_w[:, t],
            S,
        )
        out.append(o)
    o = torch.stack(out, 1) if out else v.new_zeros(v.shape)
    return o, S


def dplr_ref(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    a: Tensor | None,
    b: Tensor | None,
    log_w: Tensor,
    S0: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Reference: the step-by-step loop in float64."""
    d = torch.float64
    a, b, S0 = (None if x is None else x.to(d) for x in (a, b, S0))
    return dplr_recurrent(q.to(d), k.to(d), v.to(d), a, b, log_w.to(d), S0)


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


# -- the mixers' recurrences ------------------------------------------------------------------------
def gated_delta_terms(k: Tensor, beta: Tensor, g: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Gated DeltaNet as a DPLR recurrence: k (B, T, H, d_k), beta, g (B, T, H) (log of the gate alpha)
    -> (write key beta k, a = k, b = -alpha beta k, log_w (B, T, H, 1))."""
    bk = beta.unsqueeze(-1) * k
    return bk, k, -torch.exp(g).unsqueeze(-1) * bk, g.unsqueeze(-1)


def _needs_grad(*xs: Tensor | None) -> bool:
    """Will autograd want a gradient of any of these (fla's recurrent kernels have no backward pass)?"""
    return torch.is_grad_enabled() and any(x is not None and x.requires_grad for x in xs)


def gated_delta_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    g: Tensor,
    S0: Tensor | None = None,
    chunk: int = CHUNK,
    neg: bool = False,
) -> tuple[Tensor, Tensor]:
    """S_t = alpha_t (I - beta_t k_t k_t^T) S_{t-1} + beta_t k_t v_t^T, o_t = S_t^T q_t, alpha_t = exp(g_t).

    q, k (B, T, H, d_k) (k L2-normalised), v (B, T, H, d_v), beta, g (B, T, H). ``neg`` says beta may
    reach 2 (eigenvalues down to -1). On CUDA with fla: beta in [0, 1] runs fla's chunk kernel; with
    ``neg`` the float32 recurrent kernel when no gradient is needed (evaluation), else this module's
    chunked form (fla's recurrent kernel has no backward pass, and its chunk kernel's bfloat16 keys do
    not keep reflections exact: ``ops.fla``). Elsewhere its own chunked form (``ops.gated_delta.chunk``,
    a hand-written backward pass) when chunk > 1, else the step loop."""
    if q.shape[1] and dispatch.use_fla(q):
        grad = _needs_grad(q, k, v, beta, g, S0)
        from statetrack.ops.fla import gated_chunk_backward, gated_delta_rule_fla

        if not grad or (not neg and gated_chunk_backward()):
            return gated_delta_rule_fla(q, k, v, beta, g, S0, "recurrent" if neg else "chunk")
    if chunk and chunk > 1:
        return gated_delta_chunked(q, k, v, beta, g, S0, chunk)
    bk, a, b, log_w = gated_delta_terms(k, beta, g)
    return dplr_recurrent(q, bk, v, a, b, log_w, S0)


def gated_delta_product(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    g: Tensor,
    S0: Tensor | None = None,
    chunk: int = CHUNK,
    neg: bool = False,
) -> tuple[Tensor, Tensor]:
    """Gated DeltaProduct (Siems2025; fla's ``gated_delta_product``): per token t the gate, then n_h delta steps,

        S <- alpha_t S;  S <- (I - beta_j k_j k_j^T) S + beta_j k_j v_j^T  (j = 1..n_h);  o_t = S^T q_t,

    so A(x_t) = alpha_t prod_j (I - beta_j k_j k_j^T). q (B, T, H, d_k); k (B, T, n_h, H, d_k) (each k_j
    L2-normalised); v (B, T, n_h, H, d_v); beta (B, T, n_h, H); g (B, T, H) the log-gate. Run as the gated
    delta rule over T n_h sub-steps with the gate on each token's first sub-step and the query on its last
    (``ops.deltanet.chunk.interleave``), as fla's own layer runs its recurrent kernel; on CUDA with fla and
    beta in [0, 1], fla's ``chunk_gated_delta_product`` (bfloat16 q, k, v, as every chunk kernel here);
    with ``neg`` the gated delta rule's exactness rule (``ops.fla``). Returns (o (B, T, H, d_v), S_T)."""
    nh = k.shape[2]
    if q.shape[1] and dispatch.use_fla(q) and not neg:
        from statetrack.ops.fla import gated_chunk_backward, gated_delta_product_fla

        grad = _needs_grad(q, k, v, beta, g, S0)
        if not grad or gated_chunk_backward():
            return gated_delta_product_fla(q, k, v, beta, g, S0)
    qq, kk, vv, bb = interleave(q, k, v, beta)
    gg = torch.zeros_like(bb)
    gg[:, ::nh] = g
    o, S = gated_delta_rule(qq, kk, vv, bb, gg, S0, chunk, neg)  # chunk: sub-steps per chunk
    return o[:, nh - 1 :: nh], S


def kda_terms(k: Tensor, beta: Tensor, log_w: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Kimi Delta Attention as a DPLR recurrence: k (B, T, H, d_k) (L2-normalised), beta (B, T, H), log_w (B, T,
    H, d_k) the per-channel log-gate -> (write key beta k, a = alpha (.) k, b = -beta k): A = (I - beta k k^T)
    diag(alpha) = diag(alpha) - beta k (alpha (.) k)^T."""
    bk = beta.unsqueeze(-1) * k
    return bk, torch.exp(log_w) * k, -bk


def kda_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    beta: Tensor,
    log_w: Tensor,
    S0: Tensor | None = None,
    chunk: int = CHUNK,
    neg: bool = False,
) -> tuple[Tensor, Tensor]:
    """KDA (Kimi Linear; fla's ``kda``): S_t = (I - beta_t k_t k_t^T) diag(alpha_t) S_{t-1} + beta_t k_t v_t^T,
    o_t = S_t^T q_t, alpha_t = exp(log_w_t) per key channel: Gated DeltaNet with a diagonal gate.

    q, k, log_w (B, T, H, d_k); v (B, T, H, d_v); beta (B, T, H). On CUDA with fla, the gated delta rule's
    rules (``ops.fla``): beta in [0, 1] runs fla's ``chunk_kda`` (bfloat16 q, k, v); ``neg`` its float32
    ``fused_recurrent_kda`` when no gradient is needed, else the PyTorch form. Elsewhere its own sub-chunked
    form (``ops.kda.chunk``, a hand-written backward pass) when chunk > 1, else the step loop."""
    if q.shape[1] and dispatch.use_fla(q):
        grad = _needs_grad(q, k, v, beta, log_w, S0)
        if not neg or not grad:
            from statetrack.ops.fla import kda_fla

            return kda_fla(q, k, v, beta, log_w, S0, "recurrent" if neg else "chunk")
    if chunk and chunk > 1:
        return kda_chunked(q, k, v, beta, log_w, S0, chunk)
    bk, a, b = kda_terms(k, beta, log_w)
    return dplr_recurrent(q, bk, v, a, b, log_w, S0)


def rwkv7_terms(kappa: Tensor, a_lr: Tensor) -> tuple[Tensor, Tensor]:
    """RWKV-7's rank-one term from the normalised removal key kappa_hat and the in-context learning
    rate a_lr (both (B, T, H, d_k)): (a, b) = (kappa_hat, -kappa_hat * a_lr)."""
    return kappa, -kappa * a_lr


#: the narrowest head fla 0.6.0's ``chunk_rwkv7`` compiles for, in key and in value channels: its products
#: need K >= 16 (Triton's "Input shapes should have M >= 1, N >= 1 and K >= 16": on an H100 for d_k = 8,
#: and on an H200 for d_k = 16 with d_v = 8, the spec rwkv7(heads=2) at width 16; bench/gpu_check.py)
RWKV7_FLA_MIN_DK = 16


def rwkv7_fla_fits(d_k: int, d_v: int) -> bool:
    """Do heads of d_k key and d_v value channels fit fla's RWKV-7 kernels (both at least
    ``RWKV7_FLA_MIN_DK``)?"""
    return min(d_k, d_v) >= RWKV7_FLA_MIN_DK


def rwkv7_rule(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    log_w: Tensor,
    kappa: Tensor,
    a_lr: Tensor,
    S0: Tensor | None = None,
    chunk: int = CHUNK,
) -> tuple[Tensor, Tensor]:
    """S_t = (diag(w_t) - (kappa_hat_t * a_t) kappa_hat_t^T) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t.

    q (RWKV's receptance r), k (the replacement key), kappa (the normalised removal key), a_lr, log_w
    (B, T, H, d_k); v (B, T, H, d_v). On CUDA with fla, fla's chunk kernel where d_k and d_v are both at least
    ``RWKV7_FLA_MIN_DK`` (it does not compile for narrower heads), this module's chunked form otherwise."""
    if q.shape[1] and rwkv7_fla_fits(q.shape[-1], v.shape[-1]) and dispatch.use_fla(q):
        from statetrack.ops.fla import rwkv7_fla

        return rwkv7_fla(q, k, v, log_w, kappa, a_lr, S0)
    a, b = rwkv7_terms(kappa, a_lr)
    return dplr(q, k, v, a, b, log_w, S0, chunk)


def gla_rule(
    q: Tensor, k: Tensor, v: Tensor, log_w: Tensor, S0: Tensor | None = None, chunk: int = CHUNK
) -> tuple[Tensor, Tensor]:
    """S_t = diag(w_t) S_{t-1} + k_t v_t^T, o_t = S_t^T q_t (gated linear attention). On CUDA with fla, fla's
    chunk kernel; elsewhere its own sub-chunked form (``ops.gla.chunk``, a hand-written backward pass) when
    chunk > 1, else the step loop."""
    if q.shape[1] and dispatch.use_fla(q):
        from statetrack.ops.fla import gla_fla

        return gla_fla(q, k, v, log_w, S0)
    if chunk and chunk > 1:
        return gla_chunked(q, k, v, log_w, S0, chunk)
    return dplr_recurrent(q, k, v, None, None, log_w, S0)


def dplr_transition(a: Tensor | None, b: Tensor | None, log_w: Tensor, dk: int) -> Tensor:
    """The transition matrices diag(w) + b a^T: (..., d_k) -> (..., d_k, d_k)."""
    w = torch.exp(log_w).expand(*log_w.shape[:-1], dk)
    A = torch.diag_embed(w)
    if a is not None and b is not None:
        A = A + b.unsqueeze(-1) * a.unsqueeze(-2)
    return A
