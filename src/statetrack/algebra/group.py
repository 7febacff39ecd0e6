"""Finite groups as concrete permutation groups with a multiplication table.

A :class:`Group` is built once from permutation generators: its elements are enumerated (closure
under the generators), sorted, and given stable integer ids, and the full multiplication table is
stored as a numpy array. Everything else (the word problem, structure) reads that table.

Conventions
-----------
* Permutations are in *array form*: ``p[x]`` is the image of point ``x`` (points ``0 .. degree-1``).
* Element ids: the elements are sorted lexicographically by array form. The identity is the
  lexicographically smallest permutation, so **id 0 is the identity**. For ``Cn`` id ``k`` is the
  rotation ``x -> x + k mod n``; for a direct product ``GxH`` the ids are ``|H| * g + h``.
* Composition, left to right (the sympy convention): ``mul(i, j)`` is "apply ``i`` first, then
  ``j``", whose array form is ``r[x] = perm(j)[perm(i)[x]]``. This equals sympy's
  ``Permutation(perm(i)) * Permutation(perm(j))``.
* Word problem: the prefix product ``y_t = x_1 x_2 ... x_t`` composes in reading order, i.e. the
  state after step ``t`` is "apply ``x_1``, then ``x_2``, ..., then ``x_t``", and
  ``y_t = mul(y_{t-1}, x_t)``.

Size cap: groups of order above :data:`MAX_ORDER` (5040 = |S7|) are refused with a UserError before
any enumeration. 5040 admits S7, A7, C5040 and every group used in the papers (C60, A4xC5, A5, S5);
its table is 5040^2 int16 = 48 MiB and builds in a few seconds.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from statetrack.algebra.structure import structure_of
from statetrack.errors import UserError

#: Largest group order accepted (|S7|).
MAX_ORDER = 5040
#: Largest permutation degree accepted for generators (the regular action of C5040 needs 5040).
MAX_DEGREE = 5040

_HASH_SEED = 0x5EED_7A8C


def _hash_weights(degree: int) -> np.ndarray:
    rng = np.random.default_rng([_HASH_SEED, degree])
    return rng.integers(1, 2**63, size=degree, dtype=np.uint64) | np.uint64(1)


def _codes(perms: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row (wrap-around arithmetic); ``Group`` checks the result exactly."""
    with np.errstate(over="ignore"):
        return (perms.astype(np.uint64) * weights).sum(axis=-1, dtype=np.uint64)


def too_big(name: str, order) -> UserError:
    return UserError(
        f"group {name!r} has order {order}, above the cap of {MAX_ORDER} elements; "
        f"allowed: groups of order <= {MAX_ORDER}"
    )


def _check_generators(generators, name: str) -> np.ndarray:
    """Validate permutation generators (array forms); pad shorter ones with fixed points."""
    try:
        gens = [[int(v) for v in g] for g in generators]
    except (TypeError, ValueError):
        raise UserError(
            f"group {name!r}: generators must be lists of integers (array forms), got {generators!r}"
        ) from None
    if not gens:
        raise UserError(
            f"group {name!r}: at least one generator is needed; allowed: a non-empty "
            "list of array forms such as [[1, 0, 2], [1, 2, 0]]"
        )
    degree = max(1, max(len(g) for g in gens))
    if degree > MAX_DEGREE:
        raise UserError(
            f"group {name!r}: generators act on {degree} points, above the cap of "
            f"{MAX_DEGREE}; allowed: permutations of at most {MAX_DEGREE} points"
        )
    out = np.empty((len(gens), degree), dtype=np.int32)
    for k, g in enumerate(gens):
        if sorted(g) != list(range(len(g))):
            raise UserError(
                f"group {name!r}: generator {g!r} is not a permutation of "
                f"0..{len(g) - 1}; allowed: array forms (the image of 0, 1, ..., n-1)"
            )
        out[k] = g + list(range(len(g), degree))
    return out


def _closure(gens: np.ndarray, name: str, cap: int = MAX_ORDER) -> np.ndarray:
    """All products of the generators (breadth first), refusing more than ``cap`` elements."""
    degree = gens.shape[1]
    w = _hash_weights(degree)
    ident = np.arange(degree, dtype=gens.dtype)[None, :]
    seen = {int(_codes(ident, w)[0])}
    elements = [ident]
    frontier = ident
    count = 1
    while len(frontier):
        # products "apply f, then g": r[x] = g[f[x]]
        prods = gens[:, frontier].transpose(1, 0, 2).reshape(-1, degree)
        codes = _codes(prods, w)
        _, first = np.unique(codes, return_index=True)
        new = []
        for k in np.sort(first):
            c = int(codes[k])
            if c not in seen:
                seen.add(c)
                new.append(k)
        count += len(new)
        if count > cap:
            raise too_big(name, f"> {cap}")
        frontier = prods[new]
        elements.append(frontier)
    return np.concatenate(elements, axis=0)


def _base(elements: np.ndarray) -> list[int]:
    """Points whose images tell all elements apart (greedy: add a point when it splits more).

    Exactness does not depend on the hash used here: ``Group`` checks that the base images of the
    elements are distinct before using them.
    """
    n = len(elements)
    base: list[int] = []
    distinct = 1
    codes = np.zeros(n, dtype=np.uint64)
    mult = np.uint64(0x9E3779B97F4A7C15)
    for x in range(elements.shape[1]):
        if distinct == n:
            break
        with np.errstate(over="ignore"):
            cand = codes * mult + elements[:, x].astype(np.uint64) + np.uint64(1)
        k = len(np.unique(cand))
        if k > distinct:
            base.append(x)
            codes, distinct = cand, k
    return base or [0]


class Group:
    """A finite group with stable element ids and a multiplication table.

    Attributes: ``name``, ``order``, ``degree``, ``elements`` ((order, degree) array forms, row ``i``
    is element ``i``), ``table`` ((order, order) int array, ``table[i, j] = mul(i, j)``),
    ``inverses`` ((order,) int array), ``identity`` (always 0), ``generators`` (ids of the
    generators the group was built from). See the module docstring for the conventions.
    """

    identity = 0

    def __init__(self, name: str, generators, *, _cap: int = MAX_ORDER):
        gens = _check_generators(generators, name)
        self.name = name
        elems = _closure(gens, name, _cap)
        order_idx = np.lexsort(elems.T[::-1])  # lexicographic by array form
        elems = elems[order_idx]
        assert (elems[0] == np.arange(elems.shape[1])).all(), "identity must sort first"
        dtype = np.int16 if elems.shape[1] < 2**15 else np.int32
        self.elements: np.ndarray = elems.astype(dtype)
        self.elements.setflags(write=False)
        self.order = int(len(elems))
        self.degree = int(elems.shape[1])
        # a base: points whose images determine an element; products are looked up by them
        self.base = _base(self.elements)
        self._weights = _hash_weights(len(self.base))
        codes = _codes(self.elements[:, self.base], self._weights)
        # exact mixed-radix codes and a dense lookup when they are small enough (always under the cap
        # for the named groups); a sorted 64-bit hash otherwise
        self._dense = None
        if self.degree ** len(self.base) <= 1 << 24:
            self._radix = self.degree ** np.arange(len(self.base), dtype=np.int64)
            self._dense = np.full(self.degree ** len(self.base), -1, dtype=np.int32)
            self._dense[self.elements[:, self.base].astype(np.int64) @ self._radix] = np.arange(self.order)
        self._sort = np.argsort(codes, kind="stable")
        self._sorted_codes = codes[self._sort]
        if len(np.unique(codes)) != self.order:  # pragma: no cover - astronomically unlikely
            raise RuntimeError(f"hash collision while building {name}")
        self.table = self._build_table()
        # exact check that the element set is closed under the generators (so it is the whole
        # group, whatever the hashes did): (i then g) looked up == (i then g) composed
        for g in gens:
            gi = self.table[:, self.ids_of(g[None])[0]]
            if not (self.elements[gi] == g[self.elements]).all():  # pragma: no cover
                raise RuntimeError(f"hash collision while building {name}")
        self.table.setflags(write=False)
        self.inverses = np.argmax(self.table == 0, axis=1).astype(self.table.dtype)
        self.inverses.setflags(write=False)
        self.generators = tuple(int(i) for i in self.ids_of(gens))

    # -- construction helpers -------------------------------------------------------------------
    def _lookup(self, base_images: np.ndarray) -> np.ndarray:
        """Ids of the elements with the given images of the base points (shape (k, len(base)))."""
        if self._dense is not None:
            return self._dense[base_images.astype(np.int64) @ self._radix].astype(np.int64)
        pos = np.searchsorted(self._sorted_codes, _codes(base_images, self._weights))
        return self._sort[np.minimum(pos, self.order - 1)]

    def ids_of(self, perms) -> np.ndarray:
        """Ids of permutations given in array form (shape (k, degree)); they must be elements."""
        perms = np.asarray(perms, dtype=np.int64).reshape(-1, self.degree)
        ids = self._lookup(perms[:, self.base])
        if not (self.elements[ids] == perms).all():
            raise UserError(f"permutation not in group {self.name}")
        return ids

    def _build_table(self) -> np.ndarray:
        n, e = self.order, self.elements.astype(np.int64)
        dtype = np.int16 if n < 2**15 else np.int32
        table = np.empty((n, n), dtype=dtype)
        at_base = e[:, self.base]  # (n, |base|)
        block = max(1, 2_000_000 // max(1, n * len(self.base)))
        for start in range(0, n, block):
            rows = at_base[start : start + block]  # first factor i, on the base
            # (i then j)[b] = e[j][e[i][b]]: a product is determined by its base images
            prod = e[:, rows].transpose(1, 0, 2)  # (rows, n, |base|)
            table[start : start + len(rows)] = self._lookup(prod.reshape(-1, len(self.base))).reshape(
                len(rows), n
            )
        return table

    # -- the API --------------------------------------------------------------------------------
    def mul(self, i: int, j: int) -> int:
        """Id of "apply element ``i``, then element ``j``" (see the module docstring)."""
        return int(self.table[i, j])

    def inv(self, i: int) -> int:
        return int(self.inverses[i])

    def perm(self, i: int) -> list[int]:
        """Array form of element ``i``: the image of 0 .. degree-1."""
        return [int(v) for v in self.elements[i]]

    def name_of(self, i: int) -> str:
        """Element ``i`` in cycle notation on the points 1 .. degree: 'e' (the identity), '(1 2)(3 4 5)'."""
        p = self.elements[i]
        seen = [False] * len(p)
        cycles = []
        for a in range(len(p)):
            if seen[a] or int(p[a]) == a:
                continue
            cyc, b = [], a
            while not seen[b]:
                seen[b] = True
                cyc.append(b + 1)
                b = int(p[b])
            cycles.append("(" + " ".join(map(str, cyc)) + ")")
        return "".join(cycles) or "e"

    def prefix_products(self, words: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
        """Prefix products ``y_t = y_0 x_1 ... x_t`` for a (batch, T) array of ids (y_0 = identity)."""
        words = np.asarray(words)
        y = np.zeros(words.shape[0], dtype=np.int64) if start is None else np.asarray(start, np.int64)
        out = np.empty(words.shape, dtype=np.int64)
        table = self.table
        for t in range(words.shape[1]):
            y = table[y, words[:, t]]
            out[:, t] = y
        return out

    @cached_property
    def element_orders(self) -> np.ndarray:
        ids = np.arange(self.order)
        cur = ids.copy()
        orders = np.zeros(self.order, dtype=np.int64)
        k = 1
        while (orders == 0).any():
            orders[(cur == 0) & (orders == 0)] = k
            cur = self.table[cur, ids]
            k += 1
        return orders

    @property
    def is_abelian(self) -> bool:
        return bool((self.table == self.table.T).all())

    def structure(self) -> dict:
        return structure_of(self)

    def __len__(self) -> int:
        return self.order

    def __repr__(self) -> str:
        return f"<Group {self.name} order={self.order} degree={self.degree}>"
