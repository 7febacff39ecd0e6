"""Accuracy of the fast scans against their float64 references (the numbers in docs/benchmarks.md).

PYTHONPATH=src python bench/accuracy.py
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from statetrack.ops import (
    delta_rule_chunked,
    delta_rule_recurrent,
    delta_rule_ref,
    diag_scan,
    diag_scan_ref,
    mamba_scan,
    mamba_scan_ref,
    unit_phase,
    unit_scan,
    unit_scan_ref,
)
from statetrack.training import memory

memory.configure()  # the allocator settings statetrack's entry points use (statetrack.training.memory)


def rel(x, ref):
    return float((x.detach().to(ref.dtype) - ref).abs().max() / ref.abs().max())


def main():
    torch.manual_seed(0)
    B, T, S = 4, 10_000, 16
    a = torch.rand(B, T, S) * 2 - 1
    b = torch.randn(B, T, S)
    print(
        f"diag_scan float32, a ~ U(-1,1), T=10,000: max rel err {rel(diag_scan(a, b), diag_scan_ref(a, b)):.1e}"
    )
    th = (torch.rand(B, T, S) * 2 - 1) * math.pi
    ac = torch.polar(torch.ones_like(th), th)
    bc = torch.randn(B, T, S, dtype=torch.complex64)
    print(
        f"diag_scan complex64, |a| = 1, T=10,000: max rel err {rel(diag_scan(ac, bc), diag_scan_ref(ac, bc)):.1e}"
    )
    print(
        f"unit_scan (from angles), T=10,000: max rel err {rel(unit_scan(th, bc), unit_scan_ref(th, bc)):.1e}"
    )
    T = 100_000
    th = (torch.rand(1, T, 64) * 2 - 1) * math.pi
    h = diag_scan(
        unit_phase(th), torch.zeros(1, T, 64, dtype=torch.complex64), torch.ones(1, 64, dtype=torch.complex64)
    )
    exact = torch.polar(torch.ones(64, dtype=torch.float64), th.double().sum(1)[0])
    phi = torch.polar(torch.ones(64), torch.cumsum(th, 1)[0, -1]).cdouble()
    print(
        f"pure rotation, 100,000 steps float32: modulus drift {float((h[0, -1].abs() - 1).abs().max()):.1e}, "
        f"error vs exact {float((h[0, -1].cdouble() - exact).abs().max()):.1e} "
        f"(float32 cumulative angle instead: {float((phi - exact).abs().max()):.1e})"
    )
    a = torch.rand(1, T, 4) * 2 - 1
    a[..., 0], a[..., 1] = 1.0, -1.0
    finite = bool(torch.isfinite(diag_scan(a, torch.randn(1, T, 4))).all())
    print(f"diag_scan 100,000 steps, |a| <= 1 incl. a = 1 and -1: finite = {finite}")
    g = torch.Generator().manual_seed(0)
    B, T, E, N = 2, 10_000, 8, 16
    dt, u = torch.rand(B, T, E, generator=g) * 0.5, torch.randn(B, T, E, generator=g)
    A = -torch.rand(E, N, generator=g) * 3 - 0.05
    Bm, Cm = torch.randn(B, T, N, generator=g), torch.randn(B, T, N, generator=g)
    for neg in (False, True):
        yr, hr = mamba_scan_ref(dt, A, u, Bm, Cm, neg=neg)
        ins = [t.clone().requires_grad_() for t in (dt, A, u, Bm, Cm)]
        y, h = mamba_scan(*ins, neg=neg)
        with torch.no_grad():
            ys, _ = mamba_scan(dt, A, u, Bm, Cm, neg=neg)
        print(
            f"mamba_scan float32 ({'Negative Mamba, a in (-1,1]' if neg else 'Mamba, a in (0,1]'}), T=10,000: "
            f"max rel err y {rel(y, yr):.1e}, h_T {rel(h, hr):.1e}, no-grad path y {rel(ys, yr):.1e}"
        )
    B, T, H, dk, dv = 2, 1000, 2, 16, 16
    for kind in ("beta U(0,1)", "beta U(0,2)", "repeated keys, beta in (1.999, 2)", "beta in (1.999, 2)"):
        q = F.normalize(torch.randn(B, T, H, dk, generator=g), dim=-1)
        k = F.normalize(torch.randn(B, T, H, dk, generator=g), dim=-1)
        if kind.startswith("repeated"):
            k = F.normalize(torch.randn(B, 1, H, dk, generator=g), dim=-1).expand(B, T, H, dk).clone()
            k[:, ::5] = F.normalize(torch.randn(B, k[:, ::5].shape[1], H, dk, generator=g), dim=-1)
        beta = {
            "beta U(0,1)": torch.rand(B, T, H, generator=g),
            "beta U(0,2)": 2 * torch.rand(B, T, H, generator=g),
        }.get(kind, 2 - 1e-3 * torch.rand(B, T, H, generator=g))
        v = torch.randn(B, T, H, dv, generator=g)
        S0 = torch.randn(B, H, dk, dv, generator=g)
        ro, _ = delta_rule_ref(q, k, v, beta, S0)
        errs = {
            f"C={c}": rel(delta_rule_chunked(q, k, v, beta, S0, chunk=c)[0], ro) for c in (16, 32, 64, 128)
        }
        errs["recurrent"] = rel(delta_rule_recurrent(q, k, v, beta, S0)[0], ro)
        print(f"delta rule float32 T=1,000, {kind}: " + ", ".join(f"{k} {v:.1e}" for k, v in errs.items()))


if __name__ == "__main__":
    main()
