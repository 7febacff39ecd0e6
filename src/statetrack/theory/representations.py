"""Faithful orthogonal representations of a finite group, and how many reflections each element needs.

One DeltaProduct layer with n_h factors I - beta k k^T per token, beta in [0, 2], realises any
orthogonal map g that is a product of at most n_h reflections, i.e. (Cartan-Dieudonne, lemma CD of
docs/science.md) any g with rank(I - g) <= n_h. So it tracks a group H whose letters x have, in some
faithful orthogonal representation rho, rank(I - rho(x)) <= n_h; the state needs dim rho dimensions.
:func:`best_representation` searches a family that it can enumerate and returns the representation
with the fewest reflections per letter (then the smallest dimension):

* the permutation representation of H on each orbit of its points, restricted to the sum-zero
  subspace (the standard representation; rank(I - P) = points - cycles, the same as for P);
* 1-D signs and 2-D rotations (cyclic groups), 2-D rotations and reflections (dihedral groups),
  the rotation groups of the regular tetrahedron, cube and icosahedron in 3-D and the same groups
  with -I adjoined, and the quaternion units acting on R^4 by left multiplication;
* direct sums over the orbits (ranks add), whenever H acts faithfully on the chosen orbits.

With ``heads`` > 1 (a layer of independent recurrences in parallel, one per head, each with its own n_h
factors per token), the blocks of a block-diagonal representation may go to different heads: a head
needs only the reflections of its own blocks, so the layer needs the most that any one head needs
(:func:`_split_over_heads`, the fewest over every assignment of blocks to heads).

A catalogue group K matches H when there is an isomorphism, searched by sending a small generating
set of H to elements of K of the same orders and extending along the Cayley graph; every candidate
is checked on the whole multiplication table (rho(a then b) = rho(b) rho(a)), never assumed.
Conventions: ``group.mul(a, b)`` is "a, then b" and the state is a column vector, so the transition
of the word x_1 ... x_t is rho(x_t) ... rho(x_1) and rho must satisfy rho(mul(a, b)) = rho(b) rho(a).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from statetrack.algebra import group_from_generators
from statetrack.algebra.structure import SubgroupCalc
from statetrack.theory.monoid import closure

TOL = 1e-6


@dataclass
class Representation:
    """rho on the elements of H (ids of the ambient group), its name and what the letters need."""

    name: str
    dim: int
    matrices: dict[int, np.ndarray]  # ambient id -> (dim, dim) orthogonal matrix
    letter_ranks: dict[int, int] = field(default_factory=dict)  # letter id -> rank(I - rho(x)) (per head)
    head_dims: tuple[int, ...] = ()  # split over heads: the dimension each head holds (else one head, dim)

    @property
    def n_h(self) -> int:
        """Reflections the worst letter needs."""
        return max(self.letter_ranks.values(), default=0)

    @property
    def max_rank(self) -> int:
        """Reflections the worst element of H needs."""
        return max((reflections_needed(m) for m in self.matrices.values()), default=0)

    def as_dict(self) -> dict:
        return {"representation": self.name, "dim": self.dim, "n_h": self.n_h}


def reflections_needed(m: np.ndarray) -> int:
    """rank(I - m): the fewest reflections whose product is the orthogonal matrix m (CD)."""
    return int(np.linalg.matrix_rank(np.eye(len(m)) - m, tol=TOL))


def householder_factors(m: np.ndarray) -> list[np.ndarray]:
    """Unit normals n_1, ..., n_r, r = rank(I - m), with m = H_1 H_2 ... H_r, H_i = I - 2 n_i n_i^T.

    Cartan-Dieudonne, constructively: while m is not I, take x with m x != x (the column of m - I
    of largest norm), n = (m x - x)/|m x - x|; H = I - 2 n n^T swaps x and m x, so H m fixes x and
    every vector m already fixed (those are orthogonal to m x - x), and m <- H m fixes one dimension
    more. Applied to a state in the order H_r first ... H_1 last."""
    m = np.array(m, dtype=np.float64)
    d = len(m)
    out: list[np.ndarray] = []
    for _ in range(d):
        diff = m - np.eye(d)
        j = int(np.argmax(np.linalg.norm(diff, axis=0)))
        if np.linalg.norm(diff[:, j]) < TOL:
            break
        n = diff[:, j] / np.linalg.norm(diff[:, j])
        out.append(n)
        m = (np.eye(d) - 2 * np.outer(n, n)) @ m
    if not np.allclose(m, np.eye(d), atol=1e-8):
        raise ValueError("the matrix is not orthogonal: it is no product of Householder reflections")
    return out


# -- the catalogue of finite orthogonal groups -----------------------------------------------------------
def _rot2(a: float) -> np.ndarray:
    return np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])


def _axis_rotation(axis, angle: float) -> np.ndarray:
    u = np.asarray(axis, dtype=np.float64)
    u = u / np.linalg.norm(u)
    k = np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * (k @ k)


_CYC3 = np.array([[0.0, 0, 1], [1, 0, 0], [0, 1, 0]])  # the 3-fold rotation about (1, 1, 1)
_HALF_Z = np.diag([-1.0, -1.0, 1.0])
_QUARTER_Z = np.array([[0.0, -1, 0], [1, 0, 0], [0, 0, 1]])
_PHI = (1 + 5**0.5) / 2


def _quaternion_left(q) -> np.ndarray:
    a, b, c, d = q
    return np.array([[a, -b, -c, -d], [b, a, -d, c], [c, d, a, -b], [d, -c, b, a]], dtype=np.float64)


def _catalogue(order: int) -> list[tuple[str, list[np.ndarray]]]:
    """(name, generators) of the catalogue groups of this order."""
    out = []
    if order == 2:
        out.append(("the sign representation (1-D, -1 a reflection)", [np.array([[-1.0]])]))
    if order >= 3:
        out.append((f"2-D rotations by multiples of 2 pi/{order}", [_rot2(2 * math.pi / order)]))
    if order >= 4 and order % 2 == 0:
        m = order // 2
        name = (
            f"the symmetries of a regular {m}-gon (2-D rotations by 2 pi/{m} and reflections)"
            if m > 2
            else "the diagonal sign matrices diag(+-1, +-1) (2-D)"
        )
        out.append((name, [_rot2(2 * math.pi / m), np.diag([1.0, -1.0])]))
    platonic = {
        12: ("rotations of a regular tetrahedron (3-D)", [_HALF_Z, _CYC3]),
        24: ("rotations of a cube (3-D)", [_QUARTER_Z, _CYC3]),
        60: (
            "rotations of a regular icosahedron (3-D)",
            [_HALF_Z, _CYC3, _axis_rotation((0, 1, _PHI), 2 * math.pi / 5)],
        ),
    }
    if order in platonic:
        out.append(platonic[order])
    if order // 2 in platonic and order % 2 == 0:
        name, gens = platonic[order // 2]
        out.append((name.replace(" (3-D)", " with -I adjoined (3-D)"), gens + [-np.eye(3)]))
    if order == 8:
        out.append(
            (
                "the quaternion units acting on R^4 by left multiplication",
                [_quaternion_left((0, 1, 0, 0)), _quaternion_left((0, 0, 1, 0))],
            )
        )
    return out


def _key(m: np.ndarray) -> bytes:
    return (np.round(m, 6) + 0.0).tobytes()  # + 0.0 turns -0.0 into 0.0


@lru_cache(maxsize=64)
def _matrix_group(order: int, index: int) -> tuple[str, np.ndarray, np.ndarray] | None:
    """(name, elements (k, d, d), element orders) of catalogue entry ``index`` of this order."""
    name, gens = _catalogue(order)[index]
    elems = closure(np.eye(len(gens[0])), gens, lambda m, g: g @ m, key=_key, cap=order)
    if elems is None or len(elems) != order:
        return None
    arr = np.array(elems)
    orders = np.array([_matrix_order(m) for m in arr])
    return name, arr, orders


def _matrix_order(m: np.ndarray) -> int:
    p, k = m.copy(), 1
    while not np.allclose(p, np.eye(len(m)), atol=1e-6):
        p = m @ p
        k += 1
    return k


# -- abstract groups: generators and homomorphisms ---------------------------------------------------------
def _generators(group, sub: np.ndarray) -> list[int]:
    """A small generating set of the subgroup ``sub``: one element if cyclic, else a pair if one of
    a few seeded random pairs generates it, else the greedy set."""
    calc = SubgroupCalc(group)
    orders = group.element_orders[sub]
    top = sub[orders == len(sub)]
    if len(top):
        return [int(top[0])]
    rng = np.random.default_rng(0)
    for _ in range(60):
        a, b = rng.choice(sub, 2)
        if len(calc.closure([a, b])) == len(sub):
            return [int(a), int(b)]
    return calc.generators(sub)


def _extend(group, index: dict[int, int], gens: list[int], images: list[np.ndarray]) -> np.ndarray | None:
    """rho on every element of H (positions ``index``) from the images of the generators, by
    breadth-first search along the Cayley graph; None if the assignment is not well defined or not
    faithful."""
    n = len(index)
    d = images[0].shape[0]
    rho = np.full((n, d, d), np.nan)
    rho[index[0]] = np.eye(d)
    frontier = [0]
    while frontier:
        nxt = []
        for h in frontier:
            for g, mg in zip(gens, images, strict=True):
                hg = int(group.table[h, g])
                m = mg @ rho[index[h]]
                p = index[hg]
                if np.isnan(rho[p, 0, 0]):
                    rho[p] = m
                    nxt.append(hg)
                elif not np.allclose(rho[p], m, atol=1e-6):
                    return None
        frontier = nxt
    if len({_key(m) for m in rho}) != n:
        return None
    return rho


def _is_representation(group, ids: np.ndarray, rho: np.ndarray) -> bool:
    """rho(a then b) == rho(b) rho(a) on the whole multiplication table of H."""
    pos = {int(h): i for i, h in enumerate(ids)}
    prod = group.table[np.ix_(ids, ids)]
    lhs = rho[np.vectorize(pos.get)(prod)]  # (n, n, d, d): rho(a then b)
    rhs = np.einsum("bij,ajk->abik", rho, rho)  # rho(b) rho(a)
    return bool(np.allclose(lhs, rhs, atol=1e-6))


def _catalogue_matches(group, ids: np.ndarray, letters: list[int]) -> list[Representation]:
    """The catalogue groups isomorphic to H = ``ids``, each with the isomorphism whose letters need
    the fewest reflections."""
    n = len(ids)
    if n < 2 or n > 120:
        return []
    index = {int(h): i for i, h in enumerate(ids)}
    h_orders = sorted(int(o) for o in group.element_orders[ids])
    gens = _generators(group, ids)
    out = []
    for ci in range(len(_catalogue(n))):
        mg = _matrix_group(n, ci)
        if mg is None:
            continue
        name, elems, k_orders = mg
        if sorted(int(o) for o in k_orders) != h_orders:
            continue
        cands = [elems[k_orders == group.element_orders[g]] for g in gens]
        best = None
        floor = 1 if max(int(group.element_orders[x]) for x in letters) <= 2 else 2
        for imgs in itertools.product(*cands):
            rho = _extend(group, index, gens, list(imgs))
            if rho is None or not _is_representation(group, ids, rho):
                continue
            ranks = {x: reflections_needed(rho[index[x]]) for x in letters}
            if best is None or max(ranks.values()) < max(best[1].values()):
                best = (rho, ranks)
                if max(ranks.values()) <= floor:
                    break
        if best is not None:
            rho, ranks = best
            out.append(Representation(name, rho.shape[1], {int(h): rho[index[int(h)]] for h in ids}, ranks))
    return out


# -- permutation representations and direct sums -----------------------------------------------------------
def _orbits(perms: np.ndarray) -> list[list[int]]:
    n = perms.shape[1]
    seen, out = set(), []
    for s in range(n):
        if s in seen:
            continue
        orb, stack = {s}, [s]
        while stack:
            x = stack.pop()
            for y in perms[:, x]:
                if int(y) not in orb:
                    orb.add(int(y))
                    stack.append(int(y))
        seen |= orb
        if len(orb) > 1:
            out.append(sorted(orb))
    return out


def _sum_zero_basis(n: int) -> np.ndarray:
    """An orthonormal basis (n, n - 1) of the vectors of R^n whose entries sum to 0."""
    q, _ = np.linalg.qr(np.eye(n) - 1.0 / n)
    return q[:, : n - 1]


def _standard(group, ids: np.ndarray, orbit: list[int], letters: list[int]) -> Representation:
    n = len(orbit)
    pos = {p: i for i, p in enumerate(orbit)}
    basis = _sum_zero_basis(n)
    mats = {}
    for h in ids:
        perm = group.elements[h]
        p = np.zeros((n, n))
        for p_from in orbit:
            p[pos[int(perm[p_from])], pos[p_from]] = 1.0  # P e_i = e_h(i)
        mats[int(h)] = basis.T @ p @ basis
    name = (
        "the sign of the swap of 2 points (1-D)"
        if n == 2
        else f"the permutation representation on {n} points, on its {n - 1}-dimensional sum-zero subspace"
    )
    return Representation(name, n - 1, mats, {x: reflections_needed(mats[x]) for x in letters})


def _restriction(group, ids: np.ndarray, orbit: list[int]):
    """H acting on one orbit, as a Group, and the map from H's ids to its ids."""
    pos = {p: i for i, p in enumerate(orbit)}
    rows = [[pos[int(group.elements[h][p])] for p in orbit] for h in ids]
    gens = (
        [rows[i] for i in range(len(rows))]
        if len(rows) <= 8
        else [rows[int(np.flatnonzero(ids == g)[0])] for g in _generators(group, ids)]
    )
    sub = group_from_generators(gens, name="restriction")
    images = sub.ids_of(np.array(rows))
    return sub, {int(h): int(i) for h, i in zip(ids, images, strict=True)}


def _pull_back(rep: Representation, proj: dict[int, int], letters: list[int]) -> Representation:
    mats = {h: rep.matrices[i] for h, i in proj.items()}
    return Representation(rep.name, rep.dim, mats, {x: reflections_needed(mats[x]) for x in letters})


def _direct_sum(parts: list[Representation], ids: np.ndarray, letters: list[int]) -> Representation:
    if len(parts) == 1:
        return parts[0]
    dim = sum(p.dim for p in parts)
    mats = {}
    for h in ids:
        m = np.zeros((dim, dim))
        o = 0
        for p in parts:
            m[o : o + p.dim, o : o + p.dim] = p.matrices[int(h)]
            o += p.dim
        mats[int(h)] = m
    name = "the direct sum of " + " and ".join(p.name for p in parts)
    return Representation(name, dim, mats, {x: sum(p.letter_ranks[x] for p in parts) for x in letters})


def _faithful(parts: list[Representation], ids: np.ndarray) -> bool:
    keys = {b"".join(_key(p.matrices[int(h)]) for p in parts) for h in ids}
    return len(keys) == len(ids)


def _blocks(rep: Representation) -> list[list[int]]:
    """The finest common block-diagonal structure of rep's matrices: the coordinates, grouped into the
    connected components of the union of their non-zero patterns."""
    link = np.zeros((rep.dim, rep.dim), dtype=bool)
    for m in rep.matrices.values():
        link |= np.abs(m) > TOL
    block = list(range(rep.dim))  # each coordinate's block: the smallest coordinate linked to it
    changed = True
    while changed:
        changed = False
        for i, j in zip(*np.nonzero(link), strict=True):
            low = min(block[i], block[j])
            if block[i] != low or block[j] != low:
                block[i] = block[j] = low
                changed = True
    return [[c for c in range(rep.dim) if block[c] == b] for b in sorted(set(block))]


def _split_over_heads(rep: Representation, letters: list[int], heads: int) -> tuple[int, list[list[int]]]:
    """(the reflections per letter that the busiest head needs, the coordinates of each head) for the best
    assignment of rep's blocks to at most ``heads`` heads (every assignment, up to renaming the heads)."""
    blocks = _blocks(rep) if heads > 1 else [list(range(rep.dim))]
    ranks = [{x: reflections_needed(rep.matrices[x][np.ix_(b, b)]) for x in letters} for b in blocks]
    best: tuple[int, list[list[int]]] | None = None

    def assign(i: int, groups: list[list[int]]) -> None:
        nonlocal best
        if i == len(blocks):
            need = max(max(sum(ranks[j][x] for j in g) for x in letters) for g in groups)
            if best is None or need < best[0]:
                best = (need, [sorted(c for j in g for c in blocks[j]) for g in groups])
            return
        for g in groups:
            g.append(i)
            assign(i + 1, groups)
            g.pop()
        if len(groups) < heads:
            assign(i + 1, [*groups, [i]])

    assign(0, [])
    assert best is not None
    return best


def best_representation(group, subgroup, letters, heads: int = 1) -> Representation | None:
    """The faithful orthogonal representation of H = ``subgroup`` (ids of ``group``) in the family
    above whose ``letters`` need the fewest reflections (ties: the smallest dimension); with ``heads``
    > 1, the fewest in the busiest head, its blocks split over the heads (``head_dims``; ``letter_ranks``
    then count a letter's reflections in the head that needs the most). None for the trivial group."""
    ids = np.asarray(sorted(int(h) for h in subgroup))
    letters = sorted({int(x) for x in letters})
    rep = _best(group, tuple(ids.tolist()), tuple(letters), max(1, heads))
    if rep is None or heads <= 1:
        return rep
    need, groups = _split_over_heads(rep, letters, heads)
    if len(groups) == 1:
        return rep
    ranks = {x: max(reflections_needed(rep.matrices[x][np.ix_(g, g)]) for g in groups) for x in letters}
    dims = tuple(len(g) for g in groups)
    name = f"{rep.name}, split over {len(groups)} heads (dimensions {', '.join(map(str, dims))})"
    assert max(ranks.values()) == need
    return Representation(name, rep.dim, rep.matrices, ranks, dims)


@lru_cache(maxsize=128)
def _best(group, ids_t: tuple, letters_t: tuple, heads: int = 1) -> Representation | None:
    ids, letters = np.array(ids_t), list(letters_t)
    if len(ids) < 2:
        return None
    cands: list[Representation] = list(_catalogue_matches(group, ids, letters))
    orbit_options = []
    orbits = _orbits(group.elements[ids])
    for orb in orbits:
        opts = [_standard(group, ids, orb, letters)]
        if len(orbits) > 1 and len(orb) > 2:  # one orbit: the restriction is H itself, matched above
            sub, proj = _restriction(group, ids, orb)
            sub_ids = np.arange(sub.order)
            sub_letters = sorted({proj[x] for x in letters})
            for rep in _catalogue_matches(sub, sub_ids, sub_letters):
                opts.append(_pull_back(rep, proj, letters))
        orbit_options.append(opts)
    if len(orbit_options) <= 6:
        choices = [opts + [None] for opts in orbit_options]
        for combo in itertools.product(*choices):
            parts = [p for p in combo if p is not None]
            if not parts:
                continue
            score = max(sum(p.letter_ranks[x] for p in parts) for x in letters)
            if heads == 1 and cands and score > min(c.n_h for c in cands):
                continue
            if _faithful(parts, ids):
                cands.append(_direct_sum(parts, ids, letters))
    else:
        cands.append(_direct_sum([opts[0] for opts in orbit_options], ids, letters))
    if not cands:
        return None
    best = min(cands, key=lambda r: (_split_over_heads(r, letters, heads)[0], r.dim))
    # never assumed: checked on the whole multiplication table of H (also under python -O)
    if len(ids) <= 360 and not _is_representation(group, ids, np.array([best.matrices[int(h)] for h in ids])):
        raise RuntimeError(f"{best.name} is not a representation of the group generated by the inputs")
    return best
