"""PD-SSM's recurrence (Terzic2025): transitions that are a one-hot matrix times a complex diagonal.

One complex state h (N,) per sequence, h_t = A_t h_{t-1} + b_t, with A_t given by an index map sigma_t
(N,) and a complex diagonal d_t (N,). Two forms:

* column one-hot (the paper's, ``rows=False``): A = P D, column n of P has its one in row sigma(n), so
  ``h_t[m] = sum_{n: sigma_t(n) = m} d_t[n] h_{t-1}[n] + b_t[m]``. A one-hot state e_q goes to
  d_q e_sigma(q): the transition function of a finite automaton, read forward;
* row one-hot (the public code's, ``rows=True``): A = diag(d) P, row m of P has its one in column
  sigma(m), so ``h_t[m] = d_t[m] h_{t-1}[sigma_t(m)] + b_t[m]`` (a gather).

Both are closed under products, which is what the scan uses. Column form: (A2 A1) has the map
sigma2 o sigma1 and the diagonal d1 * d2[sigma1]; row form: the map sigma1 o sigma2 and d2 * d1[sigma2].

Shapes: idx (B, T, N) int64 (sigma_t), d and b (B, T, N) complex, h0 (B, N) complex or None (zeros).
Every function returns (h (B, T, N), h_T).

* :func:`pd_ref` -- step by step with the dense matrices in complex128: the reference;
* :func:`pd_recurrent` -- the loop with gather / scatter-add in the inputs' dtype (the step path);
* :func:`pd_scan` -- the training and evaluation form: within chunks of ``chunk`` steps the affine
  maps (A_t, b_t) are composed by a doubling (Hillis-Steele) scan, log2(chunk) vectorised passes; a
  loop over the chunks carries the state. Only gathers, scatter-adds and products appear: a one-hot
  entry is never rounded, so a unit-modulus d keeps a one-hot state exactly.

The straight-through estimator (Terzic2025, eq. 3): the forward pass uses the hard one-hot P, and the
gradient of the loss with respect to P is passed to a soft (relaxed) matrix instead. :func:`pd_scan`
takes that soft matrix (``soft``, (B, T, N, N), its columns (rows) the softmax the hard P is the
argmax of) and adds to each b_t the term soft_t u_t - (soft_t u_t).detach(), whose value is 0 and whose
gradient is dL/dsoft_t = g_t u_t^T with g_t = dL/dh_t (the whole future's gradient) and u_t what P_t
multiplies (d_t (.) h_{t-1} in the column form, h_{t-1} in the row form, with d_t's factor applied to
g_t). u_t comes from a first pass without gradients; the second pass carries them. This is the
gradient of the dense straight-through product of the reference (tested).
"""

from __future__ import annotations

import torch
from torch import Tensor

from statetrack.ops.pdssm.reference import pd_apply, pd_recurrent, pd_start

#: steps per chunk of the doubling scan
CHUNK = 32


def _compose(idx2: Tensor, d2: Tensor, idx1: Tensor, d1: Tensor, rows: bool) -> tuple[Tensor, Tensor]:
    """A2 A1 as (idx, d)."""
    if rows:
        return torch.gather(idx1, -1, idx2), d2 * torch.gather(d1, -1, idx2)
    return torch.gather(idx2, -1, idx1), d1 * torch.gather(d2, -1, idx1)


def _scan(
    idx: Tensor, d: Tensor, b: Tensor, h0: Tensor | None, rows: bool, chunk: int
) -> tuple[Tensor, Tensor]:
    """The chunked doubling scan (see the module docstring)."""
    B, T, N = idx.shape
    h = pd_start(d, h0)
    if T == 0:
        return b.clone(), h
    C = max(1, min(chunk, T))
    n = -(-T // C)
    pad = n * C - T
    if pad:  # padded steps: the identity map, no input
        eye = torch.arange(N, device=idx.device).expand(B, pad, N)
        idx = torch.cat([idx, eye], 1)
        d = torch.cat([d, torch.ones_like(d[:, :pad])], 1)
        b = torch.cat([b, torch.zeros_like(b[:, :pad])], 1)
    idx, d, c = (x.reshape(B, n, C, N) for x in (idx, d, b))
    s = 1
    while s < C:  # after this pass, step t holds the composition of steps max(0, t - 2s + 1) .. t
        i2, d2, c2 = idx[:, :, s:], d[:, :, s:], c[:, :, s:]
        i1, d1, c1 = idx[:, :, :-s], d[:, :, :-s], c[:, :, :-s]
        ni, nd = _compose(i2, d2, i1, d1, rows)
        nc = pd_apply(i2, d2, c1, rows) + c2
        idx = torch.cat([idx[:, :, :s], ni], 2)
        d = torch.cat([d[:, :, :s], nd], 2)
        c = torch.cat([c[:, :, :s], nc], 2)
        s *= 2
    out = []
    for i in range(n):  # carry the state into each chunk: h_t = (A_t...A_1) h + c_t
        hi = pd_apply(idx[:, i], d[:, i], h.unsqueeze(1).expand(B, C, N), rows) + c[:, i]
        out.append(hi)
        h = hi[:, -1]
    hs = torch.cat(out, 1)[:, :T]
    return hs, hs[:, -1]


def pd_scan(
    idx: Tensor,
    d: Tensor,
    b: Tensor,
    h0: Tensor | None = None,
    rows: bool = False,
    chunk: int = CHUNK,
    soft: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """The training and evaluation form (chunk > 1; chunk <= 1 runs the loop). ``soft`` (B, T, N, N) or
    None: the relaxed P whose gradient the straight-through estimator passes (module docstring)."""
    run = (
        (lambda i, dd, bb: _scan(i, dd, bb, h0, rows, chunk))
        if chunk and chunk > 1
        else (lambda i, dd, bb: pd_recurrent(i, dd, bb, h0, rows))
    )
    if soft is None or not (torch.is_grad_enabled() and soft.requires_grad) or idx.shape[1] == 0:
        return run(idx, d, b)
    with torch.no_grad():
        h, _ = run(idx, d, b)
        prev = torch.cat([pd_start(d, h0).unsqueeze(1), h[:, :-1]], 1)
        u = prev if rows else d * prev
        scale = d.detach() if rows else None
    su = torch.einsum("btmn,btn->btm", soft.to(u.dtype), u)
    if scale is not None:
        su = scale * su
    return run(idx, d, b + (su - su.detach()))
