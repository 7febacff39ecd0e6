"""The mLSTM recurrence (Beck2024, xLSTM): a matrix memory with scalar, exponentially gated updates.

Per head, with i_t = exp(ti_t) (the input gate's pre-activation ti_t) and f_t = sigmoid(tf_t) (passed
as log_f_t = logsigmoid(tf_t) <= 0)::

    C_t = f_t C_{t-1} + i_t k_t v_t^T        n_t = f_t n_{t-1} + i_t k_t
    h_t = C_t^T q_t / max(|n_t^T q_t|, 1)

Stored stabilised, as in the paper: a running log-scale m_t = max(log f_t + m_{t-1}, ti_t) and the
state (C~, n~, m) = (exp(-m) C, exp(-m) n, m), so that no exponential overflows::

    f'_t = exp(log f_t + m_{t-1} - m_t) in (0, 1],   i'_t = exp(ti_t - m_t) in (0, 1]
    C~_t = f'_t C~_{t-1} + i'_t k_t v_t^T,   n~_t likewise,   h_t = C~_t^T q_t / max(|n~_t^T q_t|, exp(-m_t))

h_t is the same number as without the stabiliser. The transition of the stored state is the scalar
f'_t in [0, 1] (``mlstm_transition``). Shapes: q, k (B, T, H, d_k), v (B, T, H, d_v), ti, log_f
(B, T, H); the state (C~ (B, H, d_k, d_v), n~ (B, H, d_k), m (B, H)), zeros by default. Each function
returns (h (B, T, H, d_v), state).

* :func:`mlstm_ref`: step by step in float64; :func:`mlstm_recurrent`: the same loop in the inputs'
  dtype (the step path).
* :func:`mlstm_chunked`: chunks of C steps. Inside a chunk, with b_t = sum_{r <= t} log f_r and the
  segment sums L[t, s] = sum_{s < r <= t} log f_r + ti_s (each summing its own terms), M_t = max_s L[t, s]
  and m_t = max(m_0 + b_t, M_t); the weights exp(L[t, s] - M_t) <= 1 and the intra-chunk products do not
  depend on the state entering the chunk, so they are computed for all chunks at once; the loop over
  chunks carries (C~, n~, m) only. Autograd differentiates it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from statetrack.ops.chunks import chunk_layout
from statetrack.ops.mlstm.reference import State, mlstm_recurrent, mlstm_zero_state

CHUNK = 16


def mlstm_chunked(
    q: Tensor, k: Tensor, v: Tensor, ti: Tensor, log_f: Tensor, state: State | None = None, chunk: int = CHUNK
) -> tuple[Tensor, State]:
    """Chunked form: same contract as :func:`mlstm_recurrent`."""
    B, T, H, dk = k.shape
    dv = v.shape[-1]
    state = mlstm_zero_state(B, H, dk, dv, v.dtype, v.device) if state is None else state
    if T == 0:
        return v.new_zeros(v.shape), state
    Cn, n, pad = chunk_layout(T, chunk)
    if pad:  # padded steps: f = 1, i = 0 (ti = -inf would do; a large negative keeps gradients finite)
        q, k, v = (F.pad(x, (0, 0, 0, 0, 0, pad)) for x in (q, k, v))
        log_f = F.pad(log_f, (0, 0, 0, pad))
        ti = F.pad(ti, (0, 0, 0, pad), value=-1e4)
    cm = lambda x: x.reshape(B, n, Cn, H, *x.shape[3:]).transpose(1, 3).transpose(2, 3)  # noqa: E731
    q, k, v = cm(q), cm(k), cm(v)  # (B, H, n, C, .)
    ti, log_f = cm(ti), cm(log_f)  # (B, H, n, C)
    strict = torch.ones(Cn, Cn, dtype=torch.bool, device=v.device).tril(-1)
    lower = torch.ones(Cn, Cn, dtype=torch.bool, device=v.device).tril()
    seg = log_f.unsqueeze(-1).expand(*log_f.shape, Cn).masked_fill(~strict, 0.0).cumsum(-2)  # [t, s]
    L = (seg + ti.unsqueeze(-2)).masked_fill(~lower, float("-inf"))
    M = L.amax(-1)  # (B, H, n, C)
    D = torch.exp(L - M.unsqueeze(-1))  # <= 1, zero above the diagonal
    b = log_f.cumsum(-1)  # log of the decay since the chunk's start
    QK = q @ k.transpose(-1, -2)
    num_in = (D * QK) @ v  # (B, H, n, C, dv)
    den_in = (D * QK).sum(-1)  # (B, H, n, C)
    Dend = D[..., -1, :]  # (B, H, n, C): weights of the chunk's steps in its last state
    R_C = (Dend.unsqueeze(-1) * k).transpose(-1, -2) @ v  # (B, H, n, dk, dv)
    R_n = (Dend.unsqueeze(-1) * k).sum(-2)  # (B, H, n, dk)
    Cs, ns, ms = [], [], []
    C, nn_, m = state
    for i in range(n):
        Cs.append(C)
        ns.append(nn_)
        ms.append(m)
        m_new = torch.maximum(m + b[:, :, i, -1], M[:, :, i, -1])
        g, r = torch.exp(m + b[:, :, i, -1] - m_new), torch.exp(M[:, :, i, -1] - m_new)
        C = g[..., None, None] * C + r[..., None, None] * R_C[:, :, i]
        nn_ = g[..., None] * nn_ + r[..., None] * R_n[:, :, i]
        m = m_new
    C0, n0, m0 = torch.stack(Cs, 2), torch.stack(ns, 2), torch.stack(ms, 2)  # entering each chunk
    mt = torch.maximum(m0.unsqueeze(-1) + b, M)
    g = torch.exp(m0.unsqueeze(-1) + b - mt)
    r = torch.exp(M - mt)
    num = g.unsqueeze(-1) * (q @ C0) + r.unsqueeze(-1) * num_in
    den = g * (q @ n0.unsqueeze(-1)).squeeze(-1) + r * den_in
    h = num / torch.maximum(den.abs(), torch.exp(-mt)).unsqueeze(-1)
    h = h.permute(0, 2, 3, 1, 4).reshape(B, n * Cn, H, dv)[:, :T]
    return h, (C, nn_, m)


def mlstm(
    q: Tensor, k: Tensor, v: Tensor, ti: Tensor, log_f: Tensor, state: State | None = None, chunk: int = CHUNK
) -> tuple[Tensor, State]:
    """The training form: chunked when chunk > 1, else the step loop."""
    if chunk and chunk > 1:
        return mlstm_chunked(q, k, v, ti, log_f, state, chunk)
    return mlstm_recurrent(q, k, v, ti, log_f, state)
