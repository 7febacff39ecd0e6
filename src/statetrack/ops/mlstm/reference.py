"""The mLSTM recurrence step by step: its gates with the stabiliser, the step, its loop, and :func:`mlstm_ref`,
the loop in float64: the reference of :func:`statetrack.ops.mlstm.chunk.mlstm`; its transitions as
matrices (:func:`mlstm_transition`)."""

from __future__ import annotations

import torch
from torch import Tensor

#: the stored state (C~ (B, H, d_k, d_v), n~ (B, H, d_k), m (B, H))
State = tuple[Tensor, Tensor, Tensor]


def mlstm_zero_state(
    B: int,
    H: int,
    dk: int,
    dv: int,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
) -> State:
    return (
        torch.zeros(B, H, dk, dv, dtype=dtype, device=device),
        torch.zeros(B, H, dk, dtype=dtype, device=device),
        torch.zeros(B, H, dtype=dtype, device=device),
    )


def mlstm_gates(ti: Tensor, log_f: Tensor, m: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(f', i', m_t) of one step from ti, log_f (B, H) and the previous scale m (B, H)."""
    m_new = torch.maximum(log_f + m, ti)
    return torch.exp(log_f + m - m_new), torch.exp(ti - m_new), m_new


def mlstm_step(
    q: Tensor, k: Tensor, v: Tensor, ti: Tensor, log_f: Tensor, state: State
) -> tuple[Tensor, State]:
    """One step: q, k (B, H, d_k), v (B, H, d_v), ti, log_f (B, H) -> (h (B, H, d_v), state)."""
    C, n, m = state
    fp, ip, m = mlstm_gates(ti, log_f, m)
    C = fp[..., None, None] * C + (ip[..., None] * k).unsqueeze(-1) * v.unsqueeze(-2)
    n = fp[..., None] * n + ip[..., None] * k
    num = torch.einsum("bhk,bhkv->bhv", q, C)
    den = torch.maximum((n * q).sum(-1).abs(), torch.exp(-m))
    return num / den.unsqueeze(-1), (C, n, m)


def mlstm_recurrent(
    q: Tensor, k: Tensor, v: Tensor, ti: Tensor, log_f: Tensor, state: State | None = None
) -> tuple[Tensor, State]:
    B, T, H, dk = k.shape
    state = mlstm_zero_state(B, H, dk, v.shape[-1], v.dtype, v.device) if state is None else state
    out = []
    for t in range(T):
        h, state = mlstm_step(q[:, t], k[:, t], v[:, t], ti[:, t], log_f[:, t], state)
        out.append(h)
    return (torch.stack(out, 1) if out else v.new_zeros(v.shape)), state


def mlstm_ref(
    q: Tensor, k: Tensor, v: Tensor, ti: Tensor, log_f: Tensor, state: State | None = None
) -> tuple[Tensor, State]:
    """Reference: the step-by-step loop in float64."""
    d = torch.float64
    if state is not None:
        C, n, m = state
        state = (C.to(d), n.to(d), m.to(d))
    return mlstm_recurrent(q.to(d), k.to(d), v.to(d), ti.to(d), log_f.to(d), state)


def mlstm_transition(ti: Tensor, log_f: Tensor, m0: Tensor | None = None) -> Tensor:
    """The scalar f'_t that multiplies the stored state at each step, along the gates' own scale
    trajectory from m0 (zeros): ti, log_f (B, T, H) -> (B, T, H)."""
    m = torch.zeros_like(ti[:, 0]) if m0 is None else m0
    out = []
    for t in range(ti.shape[1]):
        fp, _, m = mlstm_gates(ti[:, t], log_f[:, t], m)
        out.append(fp)
    return torch.stack(out, 1)
