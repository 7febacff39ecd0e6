"""Groups by name: ``Cn`` (alias ``Zn``), ``Dn`` (dihedral, order 2n), ``Sn``, ``An``, ``Q8``, ``V4`` and
direct products of any number of them joined by ``x`` (``C2xC4``, ``A4xC5``, ``C2xC2xC2``).

Names are case-insensitive and spaces are ignored (``a4 x c5`` is ``A4xC5``); ``n`` is a positive
integer. Each factor acts on its own block of points (Cn, Dn on n points for n >= 3, Sn, An on n
points, Q8 by its right-regular action on 8 points, V4 on 4 points); a product acts on the
concatenated blocks.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache

from statetrack.algebra.group import MAX_ORDER, Group, too_big
from statetrack.algebra.structure import structure_of
from statetrack.errors import UserError

ALLOWED_FORMS = (
    "Cn, Zn (cyclic), Dn (dihedral of order 2n), Sn, An (n >= 1), Q8, V4, "
    "and direct products joined by x such as C2xC4 or A4xC5"
)

_FACTOR = re.compile(r"^(?:([CZDSA])([1-9][0-9]{0,6})|(Q8)|(V4))$")


def _bad(value: str, whole: str) -> UserError:
    where = "" if value == whole else f" in {whole!r}"
    return UserError(f"unknown group {value!r}{where}; allowed: {ALLOWED_FORMS}")


def _cycle(n: int, points: list[int]) -> list[int]:
    """Array form on n points of the cycle points[0] -> points[1] -> ... -> points[0]."""
    p = list(range(n))
    for a, b in zip(points, points[1:] + points[:1], strict=True):
        p[a] = b
    return p


def _quaternion_generators() -> list[list[int]]:
    # elements 0..7 = 1, i, j, k, -1, -i, -j, -k; right-regular action x -> x * g
    units = {
        (0, 0): (1, 0),
        (0, 1): (1, 1),
        (0, 2): (1, 2),
        (0, 3): (1, 3),
        (1, 0): (1, 1),
        (1, 1): (-1, 0),
        (1, 2): (1, 3),
        (1, 3): (-1, 2),
        (2, 0): (1, 2),
        (2, 1): (-1, 3),
        (2, 2): (-1, 0),
        (2, 3): (1, 1),
        (3, 0): (1, 3),
        (3, 1): (1, 2),
        (3, 2): (-1, 1),
        (3, 3): (-1, 0),
    }

    def times(x: int, g: int) -> int:
        sx, ux = (-1 if x >= 4 else 1), x % 4
        sg, ug = (-1 if g >= 4 else 1), g % 4
        s, u = units[(ux, ug)]
        return u + (4 if s * sx * sg < 0 else 0)

    return [[times(x, g) for x in range(8)] for g in (1, 2)]


def _factor_order(kind: str, n: int) -> int | None:
    """Order of one named factor; None when it is astronomically large (Sn, An with n > 20)."""
    if kind in "SA":
        if n > 20:
            return None
        return math.factorial(n) if kind == "S" else max(1, math.factorial(n) // 2)
    return {"C": n, "D": 2 * n, "Q": 8, "V": 4}[kind]


def _factor_generators(kind: str, n: int) -> list[list[int]]:
    """Permutation generators of one named factor (only called once its order passed the cap)."""
    if kind == "C":
        return [_cycle(n, list(range(n)))]
    if kind == "D":
        if n == 1:
            return [[1, 0]]
        if n == 2:
            return [[1, 0, 3, 2], [2, 3, 0, 1]]
        return [_cycle(n, list(range(n))), [(-x) % n for x in range(n)]]
    if kind == "S":
        if n <= 2:
            return [_cycle(n, list(range(n)))]
        return [_cycle(n, [0, 1]), _cycle(n, list(range(n)))]
    if kind == "A":
        if n <= 2:
            return [list(range(n))]
        return [_cycle(n, [0, 1, k]) for k in range(2, n)]
    if kind == "Q":
        return _quaternion_generators()
    if kind == "V":
        return [[1, 0, 3, 2], [2, 3, 0, 1]]
    raise AssertionError(kind)


def parse_group_name(name: str) -> tuple[str, list[tuple[str, int]]]:
    """Canonical name and its factors [(kind, n)]; UserError on a malformed name."""
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"empty group name; allowed: {ALLOWED_FORMS}")
    whole = name.strip()
    compact = re.sub(r"\s+", "", whole).upper().replace("×", "X")
    factors = []
    for part in compact.split("X"):
        m = _FACTOR.match(part)
        if not m:
            raise _bad(part if part else whole, whole)
        if m.group(3):
            factors.append(("Q", 8))
        elif m.group(4):
            factors.append(("V", 4))
        else:
            kind = "C" if m.group(1) == "Z" else m.group(1)
            factors.append((kind, int(m.group(2))))
    canonical = "x".join(f"{k}{n}" for k, n in factors)
    return canonical, factors


def group_order_from_name(name: str) -> int:
    """The order of a named group, without building it (may exceed the cap)."""
    _, factors = parse_group_name(name)
    total = 1
    for k, n in factors:
        o = _factor_order(k, n)
        total *= o if o is not None else (math.factorial(n) // (2 if k == "A" else 1))
    return total


def generators_for(name: str) -> tuple[str, list[list[int]]]:
    """Canonical name and permutation generators of a named group (refusing those over the cap)."""
    canonical, factors = parse_group_name(name)
    orders = [_factor_order(k, n) for k, n in factors]
    if None in orders:
        kind, n = factors[orders.index(None)]
        raise too_big(canonical, f"{n}!/2" if kind == "A" else f"{n}!")
    order = math.prod(o for o in orders if o is not None)
    if order > MAX_ORDER:
        raise too_big(canonical, order)
    parts = [_factor_generators(k, n) for k, n in factors]
    degrees = [max(1, max(len(g) for g in gens)) for gens in parts]
    total = sum(degrees)
    gens_out: list[list[int]] = []
    offset = 0
    for gens, d in zip(parts, degrees, strict=True):
        for g in gens:
            p = list(range(total))
            for x, y in enumerate(g):
                p[offset + x] = offset + y
            gens_out.append(p)
        offset += d
    return canonical, gens_out


@lru_cache(maxsize=32)
def _cached(canonical: str) -> Group:
    _, gens = generators_for(canonical)
    return Group(canonical, gens)


def get_group(name: str) -> Group:
    """A group by name (see the module docstring); built once and cached."""
    canonical, _ = generators_for(name)  # validates and applies the size cap
    return _cached(canonical)


def group_from_generators(generators, name: str | None = None) -> Group:
    """The group generated by permutations in array form, e.g. ``[[1, 0, 2], [1, 2, 0]]`` (S3).

    Generators of different lengths are padded with fixed points. Refuses groups above the cap.
    """
    if name is None:
        try:
            name = "<" + ", ".join(str([int(v) for v in g]) for g in generators) + ">"
        except (TypeError, ValueError):
            name = "<generators>"
    return Group(name, generators)


#: The default rows of the structure table (the groups of Khavari2025, DiagLimits2026 and Merrill2024).
DEFAULT_GROUPS = ("C2", "C6", "C24", "C60", "V4", "Q8", "D4", "S3", "A4", "S4", "A5", "S5", "C2xC4", "A4xC5")


def structure_table(names=None) -> list[dict]:
    """One structure row per group name (default :data:`DEFAULT_GROUPS`)."""
    return [structure_of(get_group(n)) for n in (DEFAULT_GROUPS if names is None else names)]
