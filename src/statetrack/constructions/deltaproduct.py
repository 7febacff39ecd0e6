"""DeltaProduct constructions (T6 via lemma CD of docs/science.md): a group tracked by ONE layer whose
per-token transition is an orthogonal representation rho(x), written as rank(I - rho(x)) reflections.

:func:`orthogonal_deltaproduct` builds the layer from any faithful orthogonal representation:

* each token x's matrix rho(x) = H_1 ... H_r (Cartan-Dieudonne, r = rank(I - rho(x)) <= n_h,
  :func:`statetrack.theory.representations.householder_factors`); factor j of the layer is a
  reflection I - 2 k k^T (beta = 2 sigmoid(30) = 2 in float32, the key k = +-n_j: silu of the
  pre-activations, then L2-normalised); unused factors have beta = 2 sigmoid(-30) ~ 2e-13 and k = 0,
  the identity;
* the state starts at S_0 = 0, so the write terms move the centre of every reflection to -W V^T with
  W = I (dim x dim) and V = s I (the first dim value coordinates, s = 1e-5): v_j = -s k_j, so that
  S + W V^T -> H (S + W V^T) and S_t = s (rho(y_t) - I) V-block, y_t the prefix product;
* the query q (positive, the same at every token) reads o = S^T q = s (rho(y)^T q - q): a point of
  the orbit of q, in bijection with H when q has a trivial stabiliser (q is chosen by a seeded search
  that spreads the orbit). The head picks the nearest orbit point. |o| ~ 1e-5 stays far below
  sqrt(eps) = 3.2e-3 of the per-head RMSNorm, which is linear there.

``sn-deltaproduct:n`` uses the permutation matrices of S_n (each transposition a reflection with
k = (e_a - e_b)/sqrt 2, so n_h = n - 1); ``orth-deltaproduct:G`` uses the representation the oracle
finds for G (:func:`statetrack.theory.representations.best_representation`): S4 and A5 with n_h = 2
in a 3-dimensional state (the rotations of a cube and of an icosahedron).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from statetrack.algebra import get_group
from statetrack.constructions.base import (
    SILU_ARGMIN,
    Construction,
    blank_model,
    nearest_point_head,
    register,
    silu,
    silu_inv,
    spread_readout,
    token_embedding,
)
from statetrack.errors import UserError
from statetrack.layers.deltanet import DeltaProduct
from statetrack.theory.representations import best_representation, householder_factors

#: the scale of the write terms: |o| stays in the linear regime of the output RMSNorm
WRITE_SCALE = 1e-5
#: silu pre-activations +-30 give beta = 2 sigmoid(+-30) = 2 (exactly, in float32) or ~ 2e-13
BETA_LOGIT = 30.0


def _key_preactivation(n: np.ndarray) -> tuple[list[float], np.ndarray]:
    """z with silu(z) = c (+-n) for some c > 0 (a reflection does not see the sign of its normal):
    silu is bounded below by silu(SILU_ARGMIN) = -0.278, so c is limited by the most negative entry."""
    floor = -silu(SILU_ARGMIN) * 0.97
    best: tuple[float, np.ndarray] | None = None
    for sgn in (1.0, -1.0):
        m = sgn * n
        c = floor / max(float(-m.min()), 1e-12) if m.min() < 0 else 1.0
        c = min(c, 1.0)
        if best is None or c > best[0]:
            best = (c, m)
    assert best is not None
    c, m = best
    return [silu_inv(c * float(v)) if abs(v) > 1e-12 else 0.0 for v in m], m


def orthogonal_deltaproduct(task: str, rho: dict[int, np.ndarray], n_tokens: int, nh: int, seed: int = 1):
    """One DeltaProduct layer (neg=true, conv=0, d_state = dim rho) tracking the group whose token i
    acts by rho[i] and whose classes are the prefix products (class id = token id of the element).
    Returns (model, cfg, relative gap of the orbit readout)."""
    dim = len(next(iter(rho.values())))
    G = n_tokens
    d = G + 1 + dim
    CONST, OUT = G, list(range(G + 1, G + 1 + dim))
    model, cfg = blank_model(
        task, layers=f"deltaproduct(nh={nh},neg=true,conv=0)", d_model=d, d_state=dim, norm="none"
    )
    mx = model.mixer(0, DeltaProduct)
    dk, dv, sizes = mx.dk, mx.dv, mx.sizes  # sizes: [dk, nh dk, nh dv]
    mats = [np.asarray(rho[y], dtype=np.float64) for y in range(G)]

    def orbit(cand):
        q = np.array([0.2 + c for c in cand[:dim]])
        q = q / np.linalg.norm(q)
        return [(m.T @ q - q).tolist() for m in mats]

    best, gap = spread_readout(orbit, size=dim, tries=300, seed=seed)
    qhat = np.array([0.2 + c for c in best[:dim]])
    qhat = qhat / np.linalg.norm(qhat)
    token_embedding(model, G, CONST)
    with torch.no_grad():
        W = mx.qkv.weight  # rows: q (dk) | k (nh dk) | v (nh dv)
        W.zero_()
        mx.b_proj.weight.zero_()
        for i in range(dk):
            W[i, CONST] = silu_inv(float(qhat[i]) * 0.25)
        for y in range(G):
            normals = _factors(mats[y])
            if len(normals) > nh:
                raise UserError(f"token {y} needs {len(normals)} reflections, above n_h = {nh}")
            for j, n in enumerate(reversed(normals)):  # rho = H_1 ... H_r: H_r acts first
                z, k = _key_preactivation(n)
                for i in range(dk):
                    W[sizes[0] + j * dk + i, y] = z[i]
                    W[sizes[0] + sizes[1] + j * dv + i, y] = silu_inv(
                        -WRITE_SCALE * float(k[i])
                    )  # v_j = -s k
                mx.b_proj.weight[j, y] = BETA_LOGIT
            for j in range(len(normals), nh):
                mx.b_proj.weight[j, y] = -BETA_LOGIT  # k = 0 and beta ~ 0: the identity
        mx.o_norm.weight.fill_(1.0)
        eps = (
            mx.o_norm.eps or torch.finfo(torch.float32).eps
        )  # the norm is o / sqrt(eps) in its linear regime
        mx.o_proj.weight.zero_()
        for c, out in enumerate(OUT):
            mx.o_proj.weight[out, c] = math.sqrt(eps) / WRITE_SCALE  # residual OUT = rho(y)^T q - q
        nearest_point_head(model, [(m.T @ qhat - qhat).tolist() for m in mats], OUT, CONST)
    return model, cfg, gap


def _factors(m: np.ndarray) -> list[np.ndarray]:
    return householder_factors(m)


@register(
    "sn-deltaproduct",
    "T6",
    "S_n with ONE DeltaProduct layer, eigenvalues in [-1,1] and n_h = n - 1: the "
    "permutation matrices, each input a product of <= n - 1 transpositions, each the reflection "
    "I - 2 k k^T with k = (e_a - e_b)/sqrt 2, about the centre -W V^T",
    default_arg="3",
    mixers=("deltaproduct",),
)
def sn_deltaproduct(arg: str) -> Construction:
    n = int(arg)
    if not 3 <= n <= 5:
        raise UserError(f"sn-deltaproduct takes n in 3..5, got {n}")
    g = get_group(f"S{n}")
    rho = {}
    for y in range(g.order):
        p = np.zeros((n, n))
        p[g.perm(y), np.arange(n)] = 1.0  # P e_i = e_y(i)
        rho[y] = p
    model, cfg, gap = orthogonal_deltaproduct(f"group:S{n}", rho, g.order, n - 1)
    return Construction("sn-deltaproduct", model, cfg, "", "", {"n": n, "n_h": n - 1, "relative_gap": gap})


@register(
    "orth-deltaproduct",
    "T6",
    "a group G with ONE DeltaProduct layer, eigenvalues in [-1,1]: the faithful "
    "orthogonal representation the oracle finds for G (fewest reflections per element, lemma CD), each "
    "element written as rank(I - rho(g)) reflections; S4 and A5 need n_h = 2 in a 3-dimensional state",
    default_arg="S4",
    mixers=("deltaproduct",),
)
def orth_deltaproduct(arg: str) -> Construction:
    g = get_group(arg)
    if g.order < 2 or g.order > 120:
        raise UserError(f"orth-deltaproduct takes a group of order 2..120, got {g.name} (order {g.order})")
    rep = best_representation(g, np.arange(g.order), np.arange(g.order))
    assert rep is not None  # a group of order >= 2 has a faithful representation
    model, cfg, gap = orthogonal_deltaproduct(f"group:{g.name}", rep.matrices, g.order, rep.n_h)
    return Construction(
        "orth-deltaproduct",
        model,
        cfg,
        "",
        "",
        {"group": g.name, "representation": rep.name, "dim": rep.dim, "n_h": rep.n_h, "relative_gap": gap},
    )
