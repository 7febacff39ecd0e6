"""DeltaProduct constructions: S_n with one layer of n - 1 generalized Householder reflections (T6).
"""
from __future__ import annotations

import math

import torch

from statetrack.errors import UserError
from statetrack.theory.constructions.base import (SILU_ARGMIN, Construction, blank_model, nearest_head,
                                                   register, silu, silu_inv, spread_readout)


def _transpositions(perm: list[int]) -> list[tuple[int, int]]:
    """Transpositions t_1, t_2, ... (apply t_1 first) whose composition is ``perm`` (array form)."""
    n = len(perm)
    out = []
    cur = list(range(n))  # cur = composition so far, as an array form
    target = list(perm)
    # build left to right: after applying t_1..t_k, point i sits at cur[i]; fix points one by one
    for i in range(n):
        if cur[i] != target[i]:
            j = cur.index(target[i])  # the point currently mapped to target[i]
            a, b = cur[i], cur[j]
            out.append((a, b))
            cur = [b if v == a else a if v == b else v for v in cur]
    assert cur == target, (perm, out)
    return out


@register("sn-deltaproduct", "T6", "S_n with ONE DeltaProduct layer, eigenvalues in [-1,1] and n_h = n - 1: each "
          "input is a product of <= n - 1 transpositions, each the Householder reflection I - 2 k k^T, "
          "k = (e_a - e_b)/sqrt 2, about the centre -w0 v^T", default_arg="3", mixers=("deltaproduct",))
def sn_deltaproduct(arg: str) -> Construction:
    from statetrack.algebra import get_group

    n = int(arg)
    if not 3 <= n <= 5:
        raise UserError(f"sn-deltaproduct takes n in 3..5, got {n}")
    g = get_group(f"S{n}")
    G, nh = g.order, n - 1
    d = G + 2
    CONST, OUT = G, G + 1
    model, cfg = blank_model(f"group:S{n}", layers=f"deltaproduct(nh={nh},neg=true,conv=0)", d_model=d, d_state=n,
                        norm="none")
    mx = model.blocks[0].mixer
    dk, dv = mx.dk, mx.dv
    sizes = mx.sizes  # [dk, nh dk, nh dv]
    # q-hat (positive) and w0 (zero sum): spread the readout q . P_y w0 over the n! classes
    perms = [g.perm(y) for y in range(G)]

    def vals_of(cand):
        q = [0.2 + c for c in cand[:n]]
        w = [c - sum(cand[n:2 * n]) / n for c in cand[n:2 * n]]
        # (P_y w0)_{y(i)} = w0_i
        return [sum(q[p[i]] * w[i] for i in range(n)) for p in perms]

    best, gap = spread_readout(vals_of, size=2 * n, tries=400, seed=1)
    qhat = [0.2 + c for c in best[:n]]
    qn = math.sqrt(sum(x * x for x in qhat))
    qhat = [x / qn for x in qhat]
    w0 = [c - sum(best[n:2 * n]) / n for c in best[n:2 * n]]
    v1s = 1e-5 / max(abs(x) for x in w0)  # o stays far below sqrt(eps): the output RMSNorm is linear there
    mneg = silu(SILU_ARGMIN)
    ppos = silu_inv(-mneg)
    with torch.no_grad():
        e = torch.zeros(G, d)
        for i in range(G):
            e[i, i] = 1.0
            e[i, CONST] = 1.0
        model.embed.weight.copy_(e)
        Wq = mx.qkv.weight  # rows: q (dk) | k (nh dk) | v (nh dv)
        Wq.zero_()
        for i in range(dk):
            Wq[i, CONST] = silu_inv(qhat[i] * 0.25)
        mx.b_proj.weight.zero_()
        for y in range(G):
            ts = _transpositions(perms[y])
            assert len(ts) <= nh
            for j, (a, b) in enumerate(ts):
                # k = (e_a - e_b)/sqrt2 up to sign; pick the sign with k . w0 <= 0
                if w0[a] - w0[b] > 0:
                    a, b = b, a
                Wq[sizes[0] + j * dk + a, y] = ppos
                Wq[sizes[0] + j * dk + b, y] = SILU_ARGMIN
                kw = (w0[a] - w0[b]) / math.sqrt(2)
                Wq[sizes[0] + sizes[1] + j * dv + 0, y] = silu_inv(-kw * v1s)  # v_j = -(k . w0) v1
                mx.b_proj.weight[j, y] = 30.0  # beta = 2 sigmoid(30) = 2 in float32
            for j in range(len(ts), nh):
                mx.b_proj.weight[j, y] = -30.0  # beta ~ 2e-13 and k = 0: identity
        mx.o_norm.weight.fill_(1.0)
        eps = mx.o_norm.eps or torch.finfo(torch.float32).eps  # the norm is o / sqrt(eps) in its linear regime
        mx.o_proj.weight.zero_()
        mx.o_proj.weight[OUT, 0] = math.sqrt(eps) / v1s  # residual OUT = q . (P_y w0 - w0)
        qdotw = sum(q * w for q, w in zip(qhat, w0))
        vals = [sum(qhat[p[i]] * w0[i] for i in range(n)) - qdotw for p in perms]
        nearest_head(model, vals, OUT, CONST)
    return Construction("sn-deltaproduct", model, cfg, "", "", {"n": n, "n_h": nh, "relative_gap": gap})
