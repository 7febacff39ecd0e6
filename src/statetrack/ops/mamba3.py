"""Mamba-3's recurrence (Lahoti2026): a complex diagonal transition per head, discretised by the
exponential-trapezoidal rule.

Per head h (P channels) and complex state slot n (N2 of them; one slot is one pair of Mamba-3's real
state dimensions, rotated together by the data-dependent angle phi_t,n = Delta_t theta_t,n)::

    a_t = exp(Delta_t A_t) exp(i phi_t)                          (|a_t| <= 1: the decay times a rotation)
    u_t = x_t (outer) B_t                                         (B_t complex: a pair of real B entries)
    h_t = a_t h_{t-1} + gamma_t u_t + beta_t a_t u_{t-1}          gamma = lambda Delta, beta = (1 - lambda) Delta
    y_t = Re(sum_n conj(C_t,n) h_t,n)                             (= the real pairs' dot product C^T h)

(the paper's beta_t includes the decay exp(Delta_t A_t); here the whole a_t, rotation included, multiplies
u_{t-1}, which is what the rotated-B form of the paper computes). lambda = 1 is Mamba-2's
exponential-Euler rule. Shapes: log_decay = Delta A (B, T, H) <= 0; phi (B, T, H, N2); x (B, T, H, P);
Bc, Cc (B, T, H, N2) complex; gamma, beta (B, T, H); the state (h (B, H, P, N2) complex, u_prev
(B, H, P, N2) complex: the last input term, which the trapezoid reads at the next step). Returns
y (B, T, H, P) and the state.

:func:`mamba3_scan` forms the input terms b_t (all steps at once) and runs ``diag_scan`` (the
multiply-add loop, or its chunked form; custom backward); :func:`mamba3_scan_ref` is the step loop in
float64 / complex128.
"""
from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops.diag import diag_scan, polar


def mamba3_transition(log_decay: Tensor, phi: Tensor) -> Tensor:
    """a = exp(log_decay) exp(i phi): (B, T, H), (B, T, H, N2) -> (B, T, H, N2) complex, built from the
    angle per step (never a product of rounded unit numbers)."""
    return polar(torch.exp(log_decay).unsqueeze(-1).expand_as(phi), phi)


def mamba3_zero_state(B: int, H: int, P: int, N2: int, dtype=torch.float32, device=None) -> tuple[Tensor, Tensor]:
    c = dtype.to_complex()
    return torch.zeros(B, H, P, N2, dtype=c, device=device), torch.zeros(B, H, P, N2, dtype=c, device=device)


def _readout(h: Tensor, Cc: Tensor) -> Tensor:
    """Re(sum_n conj(C_n) h_n): h (..., P, N2), C (..., N2) -> (..., P)."""
    return (h.real * Cc.real.unsqueeze(-2) + h.imag * Cc.imag.unsqueeze(-2)).sum(-1)


def mamba3_step(log_decay, phi, x, Bc, Cc, gamma, beta, state):
    """One step: log_decay, gamma, beta (B, H); phi, Bc, Cc (B, H, N2); x (B, H, P)."""
    h, u_prev = state
    a = mamba3_transition(log_decay, phi).unsqueeze(-2)  # (B, H, 1, N2)
    u = x.unsqueeze(-1) * Bc.unsqueeze(-2)
    h = a * h + gamma[..., None, None] * u + beta[..., None, None] * a * u_prev
    return _readout(h, Cc), (h, u)


def mamba3_scan_ref(log_decay, phi, x, Bc, Cc, gamma, beta, state=None):
    """Reference: the step loop in float64 / complex128."""
    d, c = torch.float64, torch.complex128
    log_decay, phi, x, gamma, beta = (t.to(d) for t in (log_decay, phi, x, gamma, beta))
    Bc, Cc = Bc.to(c), Cc.to(c)
    B, T, H, P = x.shape
    state = mamba3_zero_state(B, H, P, phi.shape[-1], d, x.device) if state is None else tuple(s.to(c) for s in state)
    ys = []
    for t in range(T):
        y, state = mamba3_step(log_decay[:, t], phi[:, t], x[:, t], Bc[:, t], Cc[:, t], gamma[:, t], beta[:, t], state)
        ys.append(y)
    return (torch.stack(ys, 1) if ys else x.new_zeros(x.shape, dtype=d)), state


def mamba3_scan(log_decay, phi, x, Bc, Cc, gamma, beta, state=None):
    """Fast form of :func:`mamba3_scan_ref` (same contract, in the inputs' precision)."""
    B, T, H, P = x.shape
    if state is None:
        state = mamba3_zero_state(B, H, P, phi.shape[-1], x.dtype, x.device)
    h0, u_prev = state
    if T == 0:
        return x.new_zeros(x.shape), state
    a = mamba3_transition(log_decay, phi).unsqueeze(-2)  # (B, T, H, 1, N2)
    u = x.unsqueeze(-1) * Bc.unsqueeze(-2)  # (B, T, H, P, N2)
    u_before = torch.cat([u_prev.unsqueeze(1), u[:, :-1]], 1)
    b = gamma[..., None, None] * u + beta[..., None, None] * a * u_before
    h = diag_scan(a, b, h0)  # (B, T, H, P, N2)
    return _readout(h, Cc), (h[:, -1], u[:, -1])
