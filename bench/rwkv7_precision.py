"""RWKV-7's transitions are not contractions; what precision its chunked kernels keep (docs/gpu.md, docs/models.md).

    PYTHONPATH=src python bench/rwkv7_precision.py

1. Norms: the largest 2-norm of one transition A = diag(w) - (kappa (.) a) kappa^T and the largest spectral
   radius of a product of two, over the parametrisation's ranges (w in (0.545, 1), a in (0, 1), |kappa| = 1):
   the pair a = (0.01, 0.99), (0.99, 0.01) with w = 0.999 and removal keys kappa = (cos t, sin t) searched on
   a grid of angles (one per step: with the same kappa the product's radius stays 0.998), then a seeded
   random search.
2. Errors against the float64 step-by-step reference (``ops.dplr.reference.dplr_ref``), at T = 1,000 and 10,000, of
   (a) the float32 chunked form that runs on the CPU (``ops.dplr.rwkv7.rwkv7_rule``), and (b) float64 arithmetic on
   inputs rounded to bfloat16 (q, k, v, a, b), the rounding fla's chunk kernel applies before it accumulates in
   float32 (an emulation on the CPU of that kernel's input precision, not the kernel). Transitions from (i) the
   ``rwkv7`` layer at its initialisation on random inputs, (ii) uniform draws over the whole ranges, (iii) the
   alternating pair of 1, whose state grows by the radius 1.24 every two steps (at T = 200 only: it overflows
   float32 near T = 800). Error = max |o - o_ref| / max |o_ref| over the outputs, with the growth of the
   state's largest entry beside it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from statetrack.layers import build_mixer
from statetrack.ops.dplr.reference import dplr_ref
from statetrack.ops.dplr.rwkv7 import rwkv7_rule, rwkv7_terms
from statetrack.spec import parse_layers
from statetrack.training import memory

memory.configure()
W_MIN = 0.5452  # exp(-exp(-1/2))


def transition(w, a, kappa):
    return torch.diag_embed(w) - (kappa * a).unsqueeze(-1) * kappa.unsqueeze(-2)


def pair_keys(steps=180):
    """The removal keys (kappa_1, kappa_2) on a grid of angles that maximise rho(A2 A1) for the pair."""
    t = torch.arange(steps + 1, dtype=torch.float64) * torch.pi / steps
    k = torch.stack([t.cos(), t.sin()], -1)  # (angles, 2)
    w = torch.full((2,), 0.999, dtype=torch.float64)
    A1 = transition(w, torch.tensor([0.01, 0.99], dtype=torch.float64), k)  # (angles, 2, 2)
    A2 = transition(w, torch.tensor([0.99, 0.01], dtype=torch.float64), k)
    rho = torch.linalg.eigvals(A2[None] @ A1[:, None]).abs().amax(-1)  # [i, j]: kappa_1 = k_i, kappa_2 = k_j
    i, j = divmod(int(rho.argmax()), steps + 1)
    return k[i], k[j], float(rho.max()), torch.linalg.eigvals(A2[j] @ A1[i])


def norms(seed=0, n=200_000, d=2):
    k1, k2, rho, ev = pair_keys()
    w = torch.full((2,), 0.999, dtype=torch.float64)
    A1 = transition(w, torch.tensor([0.01, 0.99], dtype=torch.float64), k1)
    pair = (torch.linalg.matrix_norm(A1, 2).item(), rho, ev)
    g = torch.Generator().manual_seed(seed)
    r = lambda *s: torch.rand(*s, generator=g, dtype=torch.float64)  # noqa: E731
    w = W_MIN + (1 - W_MIN) * r(n, 2, d)
    a = r(n, 2, d) ** 3  # weighted towards the ends of (0, 1), where the growth is
    a = torch.where(r(n, 2, d) < 0.5, a, 1 - a)
    kap = F.normalize(torch.randn(n, 2, d, generator=g, dtype=torch.float64), dim=-1)
    A = transition(w, a, kap)
    one = torch.linalg.matrix_norm(A[:, 0], 2).max().item()
    ev = torch.linalg.eigvals(A[:, 1] @ A[:, 0])
    return (
        pair,
        one,
        (
            ev.abs().max().item(),
            float((ev.imag.abs() > 1e-9).any(-1).double().mean()),
            ev.imag.abs().max().item(),
        ),
    )


def bf16(x):
    return x.to(torch.bfloat16).to(torch.float64)


def errors(q, k, v, log_w, kappa, a_lr):
    """(float32 chunked, bfloat16 inputs in float64) relative errors, and max |S| growth."""
    d = torch.float64
    a, b = rwkv7_terms(kappa.to(d), a_lr.to(d))
    o_ref, S_ref = dplr_ref(q.to(d), k.to(d), v.to(d), a, b, log_w.to(d))
    o32, _ = rwkv7_rule(q.float(), k.float(), v.float(), log_w.float(), kappa.float(), a_lr.float())
    o_bf, _ = dplr_ref(bf16(q), bf16(k), bf16(v), bf16(a), bf16(b), log_w.to(d))
    scale = o_ref.abs().max()
    rel = lambda o: float((o.to(d) - o_ref).abs().max() / scale)  # noqa: E731
    return rel(o32), rel(o_bf), float(S_ref.abs().max())


def layer_terms(T, d_state=16, seed=0):
    torch.manual_seed(seed)
    (spec,) = parse_layers("rwkv7")
    m = build_mixer(spec, 64, d_state)
    x = torch.randn(2, T, 64)
    with torch.no_grad():  # the layer's own per-step terms, as its forward computes them
        r, kt, kappa, a, log_w, v, _ = m._terms(x, torch.zeros(2, 64))  # noqa: SLF001
    return r, kt, v, log_w, kappa, a


def uniform_terms(T, d_state=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    s = (2, T, 1, d_state)
    log_w = torch.log(W_MIN + (1 - W_MIN) * torch.rand(s, generator=g))
    q, k = torch.randn(s, generator=g), torch.randn(s, generator=g)
    v = torch.randn(2, T, 1, d_state, generator=g)
    return q, k, v, log_w, F.normalize(torch.randn(s, generator=g), dim=-1), torch.rand(s, generator=g)


def alternating_terms(T):
    s = (1, T, 1, 2)
    a = torch.tensor([[0.01, 0.99], [0.99, 0.01]]).repeat(T // 2 + 1, 1)[:T].reshape(s)
    k1, k2, _, _ = pair_keys()
    kappa = torch.stack([k1, k2]).float().repeat(T // 2 + 1, 1)[:T].reshape(s)
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(s, generator=g) for _ in range(3))
    return q, k, v, torch.full(s, torch.log(torch.tensor(0.999)).item()), kappa, a


def main():
    pair, one, two = norms()
    print(
        f"norms: the pair a = (0.01, 0.99), (0.99, 0.01), w = 0.999: |A1|_2 = {pair[0]:.3f}, max rho(A2 A1) "
        f"over the removal keys = {pair[1]:.3f} (eigenvalues {pair[2].numpy().round(3)}); over 200,000 draws "
        f"(d = 2, a weighted to the ends): max |A|_2 = {one:.3f}, max rho(A2 A1) = {two[0]:.3f}, complex "
        f"eigenvalues in {100 * two[1]:.1f}% of the products (largest imaginary part {two[2]:.3f})"
    )
    for T in (200, 1_000, 10_000):
        cases = (
            [("alternating pair", alternating_terms(T))]
            if T == 200
            else [("layer at init", layer_terms(T)), ("uniform ranges", uniform_terms(T))]
        )
        for name, terms in cases:
            e32, ebf, s = errors(*terms)
            print(
                f"T={T:>6,} {name:>16}: float32 chunked {e32:.1e}, bfloat16 inputs {ebf:.1e}, max |S_T| {s:.2e}"
            )


if __name__ == "__main__":
    main()
