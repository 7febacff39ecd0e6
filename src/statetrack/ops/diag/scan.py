"""Diagonal linear recurrence h_t = a_t * h_{t-1} + b_t (elementwise), real or complex.

``diag_scan_ref`` is the step-by-step reference (computed in float64 / complex128).
``diag_scan`` is the fast form used for training and evaluation. It is exact for a_t of any sign,
zero included, because it never divides by or takes the logarithm of a_t: every form below only
multiplies and adds.

The fast form (measured on a 2-core CPU, see docs/benchmarks.md) is:

* forward: a time loop that writes each step straight into the output (``addcmul`` with ``out=`` a
  view of it: a_t and b_t read once, h_t written once, no per-step allocation); for long sequences
  with a small per-step state, where the Python loop overhead dominates, a two-level chunked scan (a
  loop over the ~sqrt(T) positions of a chunk, vectorised over chunks, then a loop over the chunk
  carries), also multiply-add only;
* backward: a custom autograd function. The gradient of the state obeys the reverse recurrence
  g_t = dL/dh_t + conj(a_{t+1}) g_{t+1}, which is the same scan run backwards, so no per-step graph
  is stored; dL/db_t = g_t, dL/da_t = g_t * conj(h_{t-1}), dL/dh_0 = conj(a_0) g_0.

``unit_scan`` is the same recurrence for a_t = exp(i theta_t) given by its angle (AUSSM): each a_t is
built from its own angle (|a_t| = 1 to one rounding), never from a running product or a running sum
of angles. Measured in float32 over 100,000 steps of pure rotation (bench/accuracy.py): modulus
drift 1.7e-5 and error against the exact rotation 1.8e-5 (2e-5 to 8e-5 across seeds); a float32
cumulative sum of the angles is no better (3.4e-5), so it is not used.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

#: at most this many bytes per time step (256 float32, 128 complex64 numbers), long sequences use the
#: chunked scan: there the loop is bound by per-step overhead; above it the chunked form's extra
#: passes over memory cost more (measured crossover on the 2-core CPU, one thread)
CHUNKED_MAX_STEP_BYTES = 1024
#: ... and only from this length on
CHUNKED_MIN_T = 256


def scan_loop(a: Tensor, b: Tensor, h0: Tensor, out: Tensor | None = None) -> Tensor:
    """Time loop (no autograd). a (B, T, ...); b of a's shape (real b allowed with complex a: converted
    as it is read); h0 (B, ...); out: where to write h (a's shape and dtype), or None (a new tensor)."""
    out = torch.empty(a.shape, dtype=a.dtype, device=a.device) if out is None else out
    o, av, bv = out.unbind(1), a.unbind(1), b.unbind(1)
    prev = h0
    for t in range(len(o)):  # one pass: read a_t and b_t, write h_t (h_{t-1} is still in cache)
        torch.addcmul(bv[t], av[t], prev, out=o[t])
        prev = o[t]
    return out


def scan_chunked(a: Tensor, b: Tensor, h0: Tensor, L: int | None = None) -> Tensor:
    """Two-level scan (no autograd): local scans inside chunks of L steps, vectorised over chunks,
    then a scan over chunk carries, then h = local + cumprod(a) * carry. Multiply-add only."""
    B, T = a.shape[:2]
    S = a.shape[2:]
    L = L or max(1, int(math.sqrt(T)))
    n = -(-T // L)
    pad = n * L - T
    if pad:
        a = torch.cat([a, a.new_ones((B, pad) + S)], 1)
        b = torch.cat([b, b.new_zeros((B, pad) + S)], 1)
    a = a.reshape((B, n, L) + S)
    hl = b.reshape((B, n, L) + S).clone(memory_format=torch.contiguous_format)
    P = torch.cumprod(a, 2)
    hv, av = hl.unbind(2), a.unbind(2)
    for t in range(1, L):
        hv[t].addcmul_(av[t], hv[t - 1])
    carry = torch.empty((B, n) + S, dtype=hl.dtype, device=hl.device)
    cv, last, Pl = carry.unbind(1), hl[:, :, L - 1].unbind(1), P[:, :, L - 1].unbind(1)
    prev = h0
    for k in range(n):
        cv[k].copy_(prev)
        prev = torch.addcmul(last[k], Pl[k], prev)
    h = torch.addcmul(hl, P, carry.unsqueeze(2))
    return h.reshape((B, n * L) + S)[:, :T]


def use_chunked(a: Tensor) -> bool:
    return a.shape[1] >= CHUNKED_MIN_T and a[:, 0].numel() * a.element_size() <= CHUNKED_MAX_STEP_BYTES


def _scan(a: Tensor, b: Tensor, h0: Tensor, out: Tensor | None = None) -> Tensor:
    """The forward form for this shape (no autograd); b may be real with a complex a; out as in scan_loop."""
    if use_chunked(a):
        h = scan_chunked(a, b.to(a.dtype), h0)
        return h if out is None else out.copy_(h)
    return scan_loop(a, b, h0, out)


def loop_reverse(a: Tensor, gh: Tensor) -> Tensor:
    """g_t = gh_t + conj(a_{t+1}) g_{t+1}, g_{T-1} = gh_{T-1}, in place in a copy of gh (no autograd)."""
    g = gh.clone(memory_format=torch.contiguous_format)
    # one conjugate of the whole sequence: a conjugate per step costs an allocation each
    gv, av = g.unbind(1), (a[:, 1:].conj_physical() if a.is_complex() else a[:, 1:]).unbind(1)
    for t in range(len(gv) - 2, -1, -1):
        gv[t].addcmul_(av[t], gv[t + 1])
    return g


class _DiagScan(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx: Any, a: Tensor, b: Tensor, h0: Tensor) -> Tensor:
        h = _scan(a, b, h0)
        ctx.save_for_backward(a, h, h0)
        ctx.b_real = not b.is_complex() and a.is_complex()
        return h

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, gh: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        a, h, h0 = ctx.saved_tensors
        if use_chunked(a):
            # small state, long sequence: the chunked scan on the time-reversed sequence (copies are cheap here)
            ar = torch.cat([torch.zeros_like(a[:, :1]), a[:, 1:].flip(1)], 1)
            g = diag_scan(ar.conj_physical() if ar.is_complex() else ar, gh.flip(1)).flip(1)
        elif torch.is_grad_enabled():  # double backward: keep it differentiable
            ar = torch.cat([torch.zeros_like(a[:, :1]), a[:, 1:].flip(1)], 1)
            g = diag_scan(ar.conj() if ar.is_complex() else ar, gh.flip(1)).flip(1)
        else:  # the common case: one in-place reverse loop, no full-size temporaries but the result
            g = loop_reverse(a, gh)
        cj = (lambda x: x.conj()) if h.is_complex() else (lambda x: x)
        if torch.is_grad_enabled():
            ga = g * cj(torch.cat([h0.unsqueeze(1), h[:, :-1]], 1))
        else:
            ga = torch.empty_like(g)
            torch.mul(g[:, 1:], cj(h[:, :-1]), out=ga[:, 1:])
            torch.mul(g[:, 0], cj(h0), out=ga[:, 0])
        g0 = g[:, 0] * cj(a[:, 0])
        return ga, (g.real if ctx.b_real else g), g0


def diag_scan(a: Tensor, b: Tensor, h0: Tensor | None = None, out: Tensor | None = None) -> Tensor:
    """Fast scan with the same contract as :func:`diag_scan_ref`, in the promoted dtype of a and b.

    a and b broadcast against each other (e.g. a time-invariant ``a.expand(...)``).

    ``out`` (no gradients): write h into this tensor of the result's shape and dtype and return it.
    This is the streaming form: run a long sequence chunk by chunk, each chunk's ``h0`` the previous
    chunk's last state, into one reused buffer; memory stays that of one chunk whatever the length, and
    no fresh pages are touched per chunk (bench/bench_mixers.py, section stream)."""
    dtype = torch.promote_types(a.dtype, b.dtype)
    shape = torch.broadcast_shapes(a.shape, b.shape)
    # a real b stays real (the loop converts it as it reads it): one pass less
    bdtype = b.dtype if (dtype.is_complex and not b.is_complex() and b.dtype == dtype.to_real()) else dtype
    a, b = a.to(dtype).expand(shape), b.to(bdtype).expand(shape)
    h0 = torch.zeros((shape[0],) + shape[2:], dtype=dtype, device=b.device) if h0 is None else h0.to(dtype)
    if out is not None:
        if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad or h0.requires_grad):
            raise ValueError("diag_scan(out=...) does not support gradients")
        if out.shape != shape or out.dtype != dtype:
            raise ValueError(
                f"diag_scan out has shape {tuple(out.shape)} and dtype {out.dtype}; "
                f"expected {tuple(shape)} and {dtype}"
            )
        return _scan(a, b, h0, out)
    return _DiagScan.apply(a, b, h0)


class _Polar(torch.autograd.Function):
    """r * exp(i theta) with a real-arithmetic backward (autograd's backward of torch.polar multiplies
    full complex tensors by conjugate views, a slow path on CPU). r None means r = 1."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cuda", cast_inputs=torch.float32)
    def forward(ctx: Any, r: Tensor | None, theta: Tensor) -> Tensor:
        c, s = torch.cos(theta), torch.sin(theta)
        ctx.save_for_backward(r, c, s)
        return torch.complex(c, s) if r is None else torch.complex(r * c, r * s)

    @staticmethod
    @torch.amp.custom_bwd(device_type="cuda")
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, Tensor]:
        r, c, s = ctx.saved_tensors
        gr = torch.view_as_real(g) if g.is_complex() else torch.stack([g, torch.zeros_like(g)], -1)
        g_re, g_im = gr[..., 0], gr[..., 1]
        g_theta = c * g_im - s * g_re
        if r is None:
            return None, g_theta
        return c * g_re + s * g_im, r * g_theta


def polar(r: Tensor | None, theta: Tensor) -> Tensor:
    """r * exp(i theta) (r None: modulus 1), differentiable with a cheap real backward."""
    if r is not None:
        r, theta = torch.broadcast_tensors(r, theta)
    return _Polar.apply(r, theta)


def unit_phase(theta: Tensor) -> Tensor:
    """exp(i theta), computed fresh from each angle: modulus 1 to rounding.

    The angle is not wrapped first: wrapping in float32 rounds theta + pi (measured: 4x the error of
    letting cos/sin reduce the argument themselves)."""
    return polar(None, theta)


def unit_scan(theta: Tensor, b: Tensor, h0: Tensor | None = None) -> Tensor:
    """h_t = exp(i theta_t) h_{t-1} + b_t with real angles theta (B, T, ...); b complex or real."""
    return diag_scan(unit_phase(theta), b, h0)
