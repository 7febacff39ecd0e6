"""Mamba-3's recurrence step by step: its transitions, zero state, step and readout, and :func:`mamba3_scan_ref`,
the loop in float64: the reference of :func:`statetrack.ops.mamba3.scan.mamba3_scan`."""

from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops.diag.scan import polar


def mamba3_transition(log_decay: Tensor, phi: Tensor) -> Tensor:
    """a = exp(log_decay) exp(i phi): (B, T, H), (B, T, H, N2) -> (B, T, H, N2) complex, built from the
    angle per step (never a product of rounded unit numbers)."""
    return polar(torch.exp(log_decay).unsqueeze(-1).expand_as(phi), phi)


def mamba3_zero_state(
    B: int,
    H: int,
    P: int,
    N2: int,
    dtype: torch.dtype = torch.float32,
    device: torch.device | str | None = None,
) -> tuple[Tensor, Tensor]:
    c = dtype.to_complex()
    return torch.zeros(B, H, P, N2, dtype=c, device=device), torch.zeros(B, H, P, N2, dtype=c, device=device)


def mamba3_readout(h: Tensor, Cc: Tensor) -> Tensor:
    """Re(sum_n conj(C_n) h_n): h (..., P, N2), C (..., N2) -> (..., P)."""
    return (h.real * Cc.real.unsqueeze(-2) + h.imag * Cc.imag.unsqueeze(-2)).sum(-1)


def mamba3_step(
    log_decay: Tensor,
    phi: Tensor,
    x: Tensor,
    Bc: Tensor,
    Cc: Tensor,
    gamma: Tensor,
    beta: Tensor,
    state: tuple[Tensor, Tensor],
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """One step: log_decay, gamma, beta (B, H); phi, Bc, Cc (B, H, N2); x (B, H, P)."""
    h, u_prev = state
    a = mamba3_transition(log_decay, phi).unsqueeze(-2)  # (B, H, 1, N2)
    u = x.unsqueeze(-1) * Bc.unsqueeze(-2)
    h = a * h + gamma[..., None, None] * u + beta[..., None, None] * a * u_prev
    return mamba3_readout(h, Cc), (h, u)


def mamba3_scan_ref(
    log_decay: Tensor,
    phi: Tensor,
    x: Tensor,
    Bc: Tensor,
    Cc: Tensor,
    gamma: Tensor,
    beta: Tensor,
    state: tuple[Tensor, Tensor] | None = None,
) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """Reference: the step loop in float64 / complex128."""
    d, c = torch.float64, torch.complex128
    log_decay, phi, x, gamma, beta = (t.to(d) for t in (log_decay, phi, x, gamma, beta))
    Bc, Cc = Bc.to(c), Cc.to(c)
    B, T, H, P = x.shape
    if state is None:
        state = mamba3_zero_state(B, H, P, phi.shape[-1], d, x.device)
    else:
        state = (state[0].to(c), state[1].to(c))
    ys = []
    for t in range(T):
        y, state = mamba3_step(
            log_decay[:, t], phi[:, t], x[:, t], Bc[:, t], Cc[:, t], gamma[:, t], beta[:, t], state
        )
        ys.append(y)
    return (torch.stack(ys, 1) if ys else x.new_zeros(x.shape, dtype=d)), state
