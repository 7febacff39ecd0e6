"""The group engine: conventions checked against sympy, structure against known facts."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sympy.combinatorics import Permutation, PermutationGroup

from statetrack.algebra import (
    DEFAULT_GROUPS,
    MAX_ORDER,
    get_group,
    group_from_generators,
    structure_of,
    structure_table,
)
from statetrack.errors import UserError

SMALL = [
    "C1",
    "C2",
    "C3",
    "C5",
    "C6",
    "Z4",
    "D1",
    "D2",
    "D3",
    "D4",
    "D5",
    "S1",
    "S2",
    "S3",
    "S4",
    "A3",
    "A4",
    "A5",
    "Q8",
    "V4",
    "C2xC4",
    "C2xS3",
    "S3xC3",
    "Q8xC2",
    "C2xC2xC2",
    "A4xC5",
]
HYP = settings(max_examples=60, deadline=None)


def sym(group, i) -> Permutation:
    return Permutation(group.perm(int(i)))


@HYP
@given(name=st.sampled_from(SMALL), data=st.data())
def test_prefix_products_match_sympy(name, data):
    g = get_group(name)
    word = data.draw(st.lists(st.integers(0, g.order - 1), min_size=1, max_size=30))
    labels = g.prefix_products(np.array([word]))[0]
    acc = Permutation(list(range(g.degree)))
    for x, y in zip(word, labels, strict=True):
        acc = acc * sym(g, x)  # sympy: p * q applies p first, then q
        assert acc.array_form == g.perm(y)


@HYP
@given(name=st.sampled_from(SMALL), data=st.data())
def test_group_axioms(name, data):
    g = get_group(name)
    ids = st.integers(0, g.order - 1)
    a, b, c = data.draw(ids), data.draw(ids), data.draw(ids)
    assert g.mul(g.mul(a, b), c) == g.mul(a, g.mul(b, c))
    assert g.mul(0, a) == a == g.mul(a, 0)
    assert g.mul(a, g.inv(a)) == 0 == g.mul(g.inv(a), a)
    # the composition convention in array form: (a then b)[x] = b[a[x]]
    pa, pb = g.perm(a), g.perm(b)
    assert g.perm(g.mul(a, b)) == [pb[pa[x]] for x in range(g.degree)]
    assert (sym(g, a) * sym(g, b)).array_form == g.perm(g.mul(a, b))


@pytest.mark.parametrize("name", SMALL)
def test_elements_ids_and_order(name):
    g = get_group(name)
    assert g.identity == 0 and g.perm(0) == list(range(g.degree))
    rows = [tuple(r) for r in g.elements.tolist()]
    assert rows == sorted(set(rows))  # distinct, lexicographic
    pg = PermutationGroup([Permutation(list(r)) for r in g.elements.tolist()])
    assert pg.order() == g.order
    assert sorted(g.table[3 % g.order].tolist()) == list(range(g.order))  # Latin square row
    assert g.elements.shape == (g.order, g.degree)


def test_named_orders_and_ids():
    expected = {
        "C7": 7,
        "D4": 8,
        "D6": 12,
        "S4": 24,
        "A5": 60,
        "S5": 120,
        "Q8": 8,
        "V4": 4,
        "C2xC4": 8,
        "A4xC5": 60,
        "C2xC2xC2": 8,
        "S1": 1,
        "A2": 1,
    }
    for name, order in expected.items():
        assert get_group(name).order == order
    c = get_group("C12")
    assert all(c.mul(i, j) == (i + j) % 12 for i in range(12) for j in range(12))
    p = get_group("C2xC4")
    assert all(
        p.mul(4 * a + b, 4 * c + d) == 4 * ((a + c) % 2) + (b + d) % 4
        for a in range(2)
        for b in range(4)
        for c in range(2)
        for d in range(4)
    )
    assert get_group("a4 x c5") is get_group("A4xC5")
    assert get_group("Z60").name == "C60"


def test_quaternion_relations():
    q = get_group("Q8")
    assert sorted(np.bincount(q.element_orders).tolist()) == sorted([0, 1, 1, 0, 6])
    minus_one = [i for i in range(8) if q.element_orders[i] == 2]
    assert len(minus_one) == 1
    assert all(q.mul(i, i) == minus_one[0] for i in range(8) if q.element_orders[i] == 4)
    assert not q.is_abelian


def test_from_generators():
    g = group_from_generators([[1, 0, 2], [1, 2, 0]])
    assert g.order == 6 and structure_of(g)["derived_length"] == 2
    assert group_from_generators([[1, 0], [0, 2, 1]]).order == 6  # padded with fixed points
    with pytest.raises(UserError):
        group_from_generators([[0, 0, 1]])
    with pytest.raises(UserError):
        group_from_generators([])
    with pytest.raises(UserError, match="cap"):
        group_from_generators([[1, 0, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 7, 0]])  # S8


@pytest.mark.parametrize(
    "bad",
    [
        "S0",
        "Q7",
        "C0",
        "X3",
        "C2x",
        "",
        "xC2",
        "S3xX",
        "Q",
        "A-1",
        "D",
        "S8",
        "C5041",
        "A4xA4xA4xA4",
        "S100000000",
    ],
)
def test_bad_names(bad):
    with pytest.raises(UserError) as e:
        get_group(bad)
    msg = str(e.value)
    assert "\n" not in msg and "allowed" in msg
    if bad and bad not in ("C2x", "xC2"):
        assert any(part in msg for part in bad.split("x") if part) or bad in msg


def test_cap_is_documented_and_s7_allowed():
    assert MAX_ORDER == 5040
    from statetrack.algebra import group_order_from_name

    assert group_order_from_name("S7") == 5040 and group_order_from_name("S8") == 40320
    s7 = get_group("S7")
    assert s7.order == 5040 and s7.table.dtype == np.int16
    assert s7.mul(1234, s7.inv(1234)) == 0


@pytest.mark.parametrize("k", [3, 8])  # 8: elements found by hashed base images, 3: dense lookup
def test_elementary_abelian_ids_are_bit_vectors(k):
    g = get_group("x".join(["C2"] * k))
    assert g.order == 2**k
    ids = np.arange(g.order)
    assert (g.table == (ids[:, None] ^ ids[None, :])).all()


KNOWN = {
    # name: (order, abelian, solvable, derived length, e2 length, exponent, composition factors)
    "C2": (2, True, True, 1, 1, 2, ["C2"]),
    "C6": (6, True, True, 1, None, 6, ["C2", "C3"]),
    "C24": (24, True, True, 1, None, 24, ["C2", "C2", "C2", "C3"]),
    "C60": (60, True, True, 1, None, 60, ["C2", "C2", "C3", "C5"]),
    "V4": (4, True, True, 1, 1, 2, ["C2", "C2"]),
    "Q8": (8, False, True, 2, 2, 4, ["C2", "C2", "C2"]),
    "D4": (8, False, True, 2, 2, 4, ["C2", "C2", "C2"]),
    "S3": (6, False, True, 2, None, 6, ["C2", "C3"]),
    "A4": (12, False, True, 2, None, 6, ["C3", "C2", "C2"]),
    "S4": (24, False, True, 3, None, 12, ["C2", "C3", "C2", "C2"]),
    "A5": (60, False, False, None, None, 30, ["A5"]),
    "S5": (120, False, False, None, None, 60, ["C2", "A5"]),
    "C2xC4": (8, True, True, 1, 2, 4, ["C2", "C2", "C2"]),
    "A4xC5": (60, False, True, 2, None, 30, ["C2", "C2", "C3", "C5"]),
}


def test_structure_table_known_values():
    rows = structure_table()
    assert [r["name"] for r in rows] == list(DEFAULT_GROUPS)
    for r in rows:
        order, abelian, solvable, dl, e2, exponent, factors = KNOWN[r["name"]]
        assert r["order"] == order
        assert r["is_abelian"] is abelian and r["is_solvable"] is solvable
        assert r["derived_length"] == dl == r["abelian_series_length"]
        assert r["elementary_2_series_length"] == e2
        assert r["exponent"] == exponent
        assert sorted(r["composition_factors"]) == sorted(factors)
    s4 = next(r for r in rows if r["name"] == "S4")
    assert s4["composition_factors"] == ["C2", "C3", "C2", "C2"]  # along S4 > A4 > V4 > C2 > 1
    assert s4["derived_series"] == [24, 12, 4, 1]


@pytest.mark.parametrize(
    "name,e2",
    [
        ("C1", 0),
        ("C2", 1),
        ("C3", None),
        ("C4", 2),
        ("C8", 3),
        ("C2xC2", 1),
        ("Q8", 2),
        ("D4", 2),
        ("C2xC4", 2),
        ("S3", None),
        ("Q8xC2", 2),
        ("D8", 3),
    ],
)
def test_elementary_2_series(name, e2):
    assert structure_of(get_group(name))["elementary_2_series_length"] == e2


@pytest.mark.parametrize("name", ["S3", "S4", "A4", "D5", "Q8", "A5", "S5", "C2xS3", "A4xC5"])
def test_structure_agrees_with_sympy(name):
    g = get_group(name)
    pg = PermutationGroup([Permutation(g.perm(i)) for i in g.generators])
    r = structure_of(g)
    assert r["is_solvable"] == pg.is_solvable and r["is_abelian"] == pg.is_abelian
    assert r["derived_series"] == [h.order() for h in pg.derived_series()]


def test_perfect_non_simple_group():
    # SL(2,5) acting on the 24 non-zero vectors of F_5^2: composition factors C2 (centre) and A5
    vecs = [(a, b) for a in range(5) for b in range(5) if (a, b) != (0, 0)]
    idx = {v: i for i, v in enumerate(vecs)}

    def act(m):
        return [idx[((m[0][0] * a + m[0][1] * b) % 5, (m[1][0] * a + m[1][1] * b) % 5)] for a, b in vecs]

    g = group_from_generators([act([[1, 1], [0, 1]]), act([[0, 4], [1, 0]])], name="SL(2,5)")
    r = structure_of(g)
    assert g.order == 120 and not r["is_solvable"] and r["derived_series"] == [120]
    assert r["composition_factors"] == ["C2", "A5"] or r["composition_factors"] == ["A5", "C2"]
