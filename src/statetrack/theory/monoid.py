"""Facts about a finite transformation monoid: the transition monoid of a task's minimal automaton.

A task's letters act on a finite state set Q (a letter = the map q -> q.a); the monoid M they
generate is, for the minimal DFA of a language, its syntactic monoid (docs/science.md, "syntactic
monoid"). Maps are tuples in array form, ``m[q]`` = the image of q, composed left to right
(``compose(a, b)`` = a, then b), as words are read. :func:`monoid_facts` computes:

* ``size`` = |M| (None above :data:`MAX_MONOID` elements, where nothing else is computed either);
* ``aperiodic``: every m has m^n = m^(n+1) for large n, i.e. every maximal subgroup is trivial; by
  Schutzenberger's theorem (Schutzenberger1965) the language is then star-free;
* ``groups``: the maximal subgroups of M up to isomorphism. The maximal subgroup at an idempotent e
  is the group of units of eMe; in a transformation monoid it acts faithfully on the image of e, so
  it is computed as the permutation group that the elements of eMe induce there. Idempotents with
  the same image are L-related (e f = e, f e = f), so one idempotent per image suffices. Each group
  comes with its order, element orders, abelian, solvable, derived length and the length of its
  shortest subnormal series with elementary abelian 2-factors;
* ``periods``: the periods of the sequences n -> m^n, which are exactly the element orders of the
  maximal subgroups (m^n ends in the group of the idempotent power of m);
* ``holonomy_height``: the height h(Q) of the state set in Eilenberg's holonomy decomposition
  (Eilenberg1976; Egri-Nagy & Nehaniv 2015): the images Q.m and the singletons, preordered by
  subduction (A <= B iff A is contained in B.m for some m in M); h = 0 on singletons and h(A) = 1 +
  the largest h strictly below A. M divides a cascade of h(Q) levels, each a product of
  permutation-reset automata whose groups divide maximal subgroups of M (so they are resets only
  when M is aperiodic). The depth rule SF-depth of docs/science.md reads it;
* ``aligned_witness``: whether, for EVERY W, some word of length divisible by W has a non-aperiodic
  image (the T4 witness, see :mod:`statetrack.theory.actions`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from statetrack.algebra import group_from_generators
from statetrack.algebra.structure import SubgroupCalc, series_lengths
from statetrack.errors import UserError

#: monoids above this many elements are not enumerated (their facts stay unknown)
MAX_MONOID = 20000
#: holonomy heights are computed only up to this many distinct images
MAX_IMAGES = 600


def compose(a: tuple, b: tuple) -> tuple:
    """a, then b."""
    return tuple(b[i] for i in a)


@dataclass(frozen=True)
class GroupFacts:
    """One maximal subgroup (up to isomorphism)."""

    order: int
    abelian: bool
    solvable: bool | None
    derived_length: int | None
    elementary_2_length: int | None  # shortest subnormal series with elementary abelian 2 factors
    element_orders: tuple[int, ...]  # the distinct element orders
    degree: int = 0  # points it permutes (the image of its idempotent)

    @property
    def exponent(self) -> int:
        return int(math.lcm(*self.element_orders))

    @property
    def elementary_2(self) -> bool:
        """Abelian with every element of order 1 or 2."""
        return self.abelian and set(self.element_orders) <= {1, 2}

    def as_dict(self) -> dict:
        return {
            "order": self.order,
            "abelian": self.abelian,
            "solvable": self.solvable,
            "derived_length": self.derived_length,
            "exponent": self.exponent,
        }


@dataclass
class MonoidFacts:
    """What the oracle's rules read about a task's monoid (see the module docstring)."""

    size: int | None
    aperiodic: bool | None
    groups: list[GroupFacts] = field(default_factory=list)  # non-trivial maximal subgroups
    holonomy_height: int | None = None
    aligned_witness: bool | None = None
    is_group: bool = False  # every letter is a permutation: M is a group

    @property
    def periods(self) -> set[int]:
        """Periods of the power sequences of the elements (1 for the aperiodic ones)."""
        out = {1}
        for g in self.groups:
            out.update(g.element_orders)
        return out

    @property
    def groups_abelian(self) -> bool:
        return all(g.abelian for g in self.groups)

    @property
    def groups_elementary_2(self) -> bool:
        return all(g.elementary_2 for g in self.groups)

    def as_dict(self) -> dict:
        return {
            "monoid_size": self.size,
            "aperiodic": self.aperiodic,
            "groups": [g.as_dict() for g in self.groups],
            "holonomy_height": self.holonomy_height,
        }


def group_facts(group, sub=None) -> GroupFacts:
    """GroupFacts of ``group`` (an :class:`statetrack.algebra.Group`) or of its subgroup ``sub``."""
    sub = np.arange(group.order) if sub is None else np.asarray(sub)
    solvable, dl, e2 = series_lengths(group, sub)
    orders = sorted({int(v) for v in group.element_orders[sub]})
    moved = (group.elements[sub] != np.arange(group.degree)[None, :]).any(axis=0).sum()
    return GroupFacts(
        int(len(sub)), SubgroupCalc(group).is_abelian(sub), solvable, dl, e2, tuple(orders), int(moved)
    )


# -- enumeration -------------------------------------------------------------------------------------
def closure(start, generators, product, key=lambda x: x, cap: int | None = None) -> list | None:
    """Everything reachable from ``start`` by ``product(x, g)`` with g in ``generators``, breadth
    first (``start`` first); ``key`` makes elements hashable; None once more than ``cap`` are found."""
    seen, frontier, out = {key(start)}, [start], [start]
    while frontier:
        nxt = []
        for x in frontier:
            for g in generators:
                p = product(x, g)
                k = key(p)
                if k not in seen:
                    seen.add(k)
                    nxt.append(p)
                    out.append(p)
                    if cap is not None and len(out) > cap:
                        return None
        frontier = nxt
    return out


def enumerate_monoid(letters: list[tuple]) -> np.ndarray | None:
    """All elements (rows, array form), the identity first; None above MAX_MONOID."""
    out = closure(tuple(range(len(letters[0]))), letters, compose, cap=MAX_MONOID)
    return None if out is None else np.array(out, dtype=np.int64)


def _maximal_subgroups(elems: np.ndarray) -> list[GroupFacts]:
    idem = (np.take_along_axis(elems, elems, axis=1) == elems).all(axis=1)
    found: dict[tuple, GroupFacts] = {}
    by_image: dict[frozenset, int] = {}
    for i in np.flatnonzero(idem).tolist():
        by_image.setdefault(frozenset(elems[i].tolist()), int(i))
    for img, i in by_image.items():
        if len(img) < 2:
            continue
        e = elems[i]
        # e m e for every m: r[q] = e[m[e[q]]]
        eme = np.unique(e[elems[:, e]], axis=0)
        pts = np.array(sorted(img))
        on = eme[:, pts]
        perm_rows = on[(np.sort(on, axis=1) == pts[None, :]).all(axis=1)]
        relabel = {int(p): k for k, p in enumerate(pts)}
        perms = [[relabel[int(v)] for v in row] for row in perm_rows]
        if len(perms) < 2:
            continue
        try:
            g = group_from_generators(perms, name=f"H(image {len(pts)})")
        except UserError:  # above the group engine's cap: only the order is known
            gf = GroupFacts(len(perms), False, None, None, None, (), len(pts))
        else:
            gf = group_facts(g)
        key = (gf.order, gf.abelian, gf.derived_length, gf.element_orders)
        found.setdefault(key, gf)
    return sorted(found.values(), key=lambda g: (g.order, g.element_orders))


def holonomy_height(letters: list[tuple], elems: np.ndarray) -> int | None:
    """h(Q) in the holonomy decomposition (see the module docstring); None if too many images."""
    n = len(letters[0])
    images = {frozenset(r.tolist()) for r in elems}
    images |= {frozenset([q]) for q in range(n)}
    if len(images) > MAX_IMAGES:
        return None
    letter_arrays = [np.asarray(a) for a in letters]

    def orbit(b: frozenset) -> set[frozenset]:
        seen, stack = {b}, [b]
        while stack:
            s = stack.pop()
            idx = np.fromiter(s, dtype=np.int64)
            for a in letter_arrays:
                t = frozenset(a[idx].tolist())
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        return seen

    orbits = {b: orbit(b) for b in images}

    def below(a: frozenset, b: frozenset) -> bool:  # a <= b (subduction)
        return any(a <= c for c in orbits[b])

    memo: dict[frozenset, int] = {}

    def height(a: frozenset) -> int:
        if len(a) == 1:
            return 0
        if a not in memo:
            memo[a] = 1 + max(
                height(b) for b in images if len(b) <= len(a) and b != a and below(b, a) and not below(a, b)
            )
        return memo[a]

    return height(frozenset(range(n)))


def aligned_witness(letters: list[tuple], bad: set[tuple]) -> bool | None:
    """For every W, does a word of length divisible by W have an image in ``bad``? The sets M_L of
    images of words of length exactly L are eventually periodic in L with some period pi; the answer
    is whether M_L meets ``bad`` for L = 0 mod pi, L large."""
    ident = tuple(range(len(letters[0])))
    seen: dict[frozenset, int] = {}
    cur, L, history = frozenset({ident}), 0, []
    while cur not in seen and L < 5000:
        seen[cur] = L
        history.append(cur)
        cur = frozenset(compose(m, a) for m in cur for a in letters)
        L += 1
    if cur not in seen:
        return None
    L0, pi = seen[cur], L - seen[cur]
    Lstar = -(-max(L0, 1) // pi) * pi  # the first multiple of pi at or after L0 (and >= 1)
    return bool(history[L0 + (Lstar - L0) % pi] & bad)


def is_aperiodic_element(m: tuple) -> bool:
    return power_cycle(m)[1] == 1


def power_cycle(m: tuple) -> tuple[int, int]:
    """(index, period) of n -> m^n: m^(index + period) = m^index, both the smallest such."""
    seen = {}
    p, n = m, 1
    while p not in seen:
        seen[p] = n
        p = compose(p, m)
        n += 1
    return seen[p], n - seen[p]


def monoid_facts(letters: list[tuple], with_witness: bool = True) -> MonoidFacts:
    """The facts of the monoid generated by ``letters`` (maps in array form on the same states)."""
    is_group = all(sorted(a) == list(range(len(a))) for a in letters)
    elems = enumerate_monoid(letters)
    if elems is None:
        return MonoidFacts(None, None, is_group=is_group)
    groups = [g for g in _maximal_subgroups(elems) if g.order > 1]
    facts = MonoidFacts(
        int(len(elems)), not groups, groups, holonomy_height(letters, elems), is_group=is_group
    )
    if with_witness:
        bad = {tuple(r) for r in elems.tolist() if not is_aperiodic_element(tuple(r))}
        facts.aligned_witness = aligned_witness(letters, bad)
    return facts
