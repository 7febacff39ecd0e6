"""Diagonal linear recurrence h_t = a_t * h_{t-1} + b_t (elementwise), real or complex.

``diag_scan_ref`` is the step-by-step reference (computed in float64 / complex128).
``diag_scan`` is the fast form used for training and evaluation; it is exact for a_t of any sign,
zero included, because it never divides by or takes the logarithm of a_t.
"""
from __future__ import annotations

import torch
from torch import Tensor


def diag_scan_ref(a: Tensor, b: Tensor, h0: Tensor | None = None) -> Tensor:
    """Reference: a, b of shape (B, T, ...); h0 of shape (B, ...) or None (zeros). Returns (B, T, ...)."""
    wide = torch.complex128 if (a.is_complex() or b.is_complex()) else torch.float64
    a, b = a.to(wide), b.to(wide)
    h = torch.zeros_like(b[:, 0]) if h0 is None else h0.to(wide)
    out = []
    for t in range(a.shape[1]):
        h = a[:, t] * h + b[:, t]
        out.append(h)
    return torch.stack(out, dim=1)


def diag_scan(a: Tensor, b: Tensor, h0: Tensor | None = None) -> Tensor:
    """Fast scan with the same contract as :func:`diag_scan_ref`, in the inputs' dtype.

    A loop over time that unbinds the inputs once and writes into a preallocated output: on a CPU
    this beats log-depth scans at training shapes, and its backward pass stays linear in length.
    """
    T = a.shape[1]
    dtype = torch.promote_types(a.dtype, b.dtype)
    a, b = a.to(dtype), b.to(dtype)
    h = torch.zeros_like(b[:, 0]) if h0 is None else h0.to(dtype)
    a_t, b_t = a.unbind(1), b.unbind(1)
    out = []
    for t in range(T):
        h = torch.addcmul(b_t[t], a_t[t], h)
        out.append(h)
    return torch.stack(out, dim=1)
