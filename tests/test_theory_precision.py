"""The oracle's claims carry their precision (issue 60, item 6): the length to which float32 holds a
construction (lemma F32, statetrack.theory.precision), checked against a float32 run of the recurrence; T6
counts heads; products of Householder factors in [0,1] are decided (lemma PSC); PD's text for KDA."""

import math

import numpy as np
import pytest
import torch

from statetrack.ops import diag_scan, polar
from statetrack.theory.precision import reflection_hold, reflections32, rotation_error, rotation_hold
from statetrack.theory.verdicts import check_hypotheses, oracle


def _first_failure(m: int, steps: int) -> int | None:
    """Count mod m as a float32 layer does (h_t = lambda h_(t-1) + 1, lambda = exp(2 pi i/m) from the float32
    angle, the project's scan): the first t at which the state leaves half the gap to the nearest other class
    point of the exact orbit."""
    lam = polar(None, torch.tensor(2 * math.pi / m, dtype=torch.float32))
    h = diag_scan(lam.expand(1, steps), torch.ones(1, steps), None)[0].to(torch.complex128)
    t = torch.arange(steps, dtype=torch.float64)
    w = complex(math.cos(2 * math.pi / m), math.sin(2 * math.pi / m))
    exact = (1 - torch.polar(torch.ones_like(t), 2 * math.pi * ((t + 1) % m) / m)) / (1 - w)
    half_gap = math.sin(math.pi / m) / abs(1 - w)
    bad = ((h - exact).abs() >= half_gap).nonzero()
    return int(bad[0]) if len(bad) else None


@pytest.mark.parametrize("m", [3000, 5000])
def test_the_stated_length_is_where_a_float32_run_fails(m):
    v = oracle("lru", f"modcount:{m}")
    n = v.facts["float32_length"]
    assert 1e4 < n < 2e5 and f"about {n:.2g} tokens" in v.reason
    first = _first_failure(m, 3 * n)
    assert first is not None and n / 2 < first < 2 * n, (n, first)
    # and the run holds well before it: the drift is linear, not a sudden jump
    assert first > 0.9 * n


def test_lru_mod_3_is_finite_in_float32_and_says_why():
    # the numbers: |lambda| = 1 + 1.6e-8 for exp(2 pi i/3) built in float32
    err, eps, delta = rotation_error(3)
    assert eps == pytest.approx(1.6e-8, rel=0.05) and abs(delta) > abs(eps)
    v = oracle("lru", "modcount:3")
    assert v.qualified_basis == "P1 [rounding]"
    assert 1e6 < v.facts["float32_length"] < 1e8
    assert v.facts["float32_length"] == int(math.sin(math.pi / 3) / err)
    assert "|lambda| - 1 = 1.6e-08" in v.reason
    # a unit-circle layer builds the same rotation: no rounding condition, but the same finite length
    assert oracle("aussm", "modcount:3").facts["float32_length"] == v.facts["float32_length"]


@pytest.mark.parametrize(
    "layers, task",
    [
        ("negmamba", "parity"),  # -1 and 1
        ("mamba2(neg=true)", "group:V4"),
        ("pdssm", "tomita:3"),  # one-hot maps
        ("pdssm(rows=true)", "group:S3"),
        ("mamba", "tomita:1"),  # keeps at 1
        ("deltanet(neg=true)", "parity"),  # a reflection about the axis e_1
        ("negmamba*2", "group:C2xC4"),
    ],
)
def test_signs_keeps_and_one_hot_maps_hold_at_every_length(layers, task):
    v = oracle(layers, task)
    assert v.verdict == "possible" and v.facts["float32_length"] is None, v.reason
    assert "In float32 it holds at every length" in v.reason


@pytest.mark.parametrize(
    "layers, task",
    [
        ("aussm", "parity"),
        ("aussm*2", "group:S3"),
        ("deltaproduct(nh=2,neg=true)", "group:A5"),
        ("s4d", "offset"),
    ],
)
def test_rotations_hold_to_a_finite_length(layers, task):
    v = oracle(layers, task)
    assert v.verdict == "possible" and 1e4 < v.facts["float32_length"] < 1e9, v.reason
    assert check_hypotheses(layers, v) == []


def test_a_construction_without_its_length_is_caught():
    from dataclasses import replace

    v = oracle("lru", "modcount:3")
    facts = {k: x for k, x in v.facts.items() if k != "float32_length"}
    assert any("float32" in e for e in check_hypotheses("lru", replace(v, facts=facts)))


def test_rotation_and_reflection_errors():
    assert rotation_hold([1]).length is None  # nothing rotates
    # the exact rotation by pi is -1, but cos and sin of the float32 angle pi give -1 and -8.7e-8
    assert rotation_hold([2]).length == int(1 / rotation_error(2)[0])
    # a reflection about a coordinate axis is exact; a generic one is not
    assert np.array_equal(reflections32(np.array([[-1.0]])), np.array([[-1.0]], dtype=np.float32))
    c, s = math.cos(2 * math.pi / 5), math.sin(2 * math.pi / 5)
    rot = np.array([[c, -s], [s, c]])
    assert 0 < np.linalg.norm(reflections32(rot) - rot, 2) < 1e-6


def test_reflection_hold_uses_the_worst_letter():
    from statetrack.theory.actions import task_algebra
    from statetrack.theory.representations import best_representation

    a = task_algebra("group:A5")
    rep = best_representation(a.group, a.subgroup, a.support)
    h = reflection_hold(rep, a.support)
    one = reflection_hold(rep, [int(a.support[0])])
    assert h.length is not None and (one.length is None or one.length >= h.length)


# -- T6 counts heads -------------------------------------------------------------------------------------
def test_t6_splits_a_direct_product_over_heads():
    one = oracle("gateddeltaproduct(neg=true)", "group:C2xC4")
    assert one.verdict == "open"  # one head needs 3 reflections for (sign, quarter turn)
    two = oracle("gateddeltaproduct(neg=true,heads=2)", "group:C2xC4")
    assert (two.verdict, two.basis) == ("possible", "T6"), two.reason
    assert two.facts["n_h_needed"] == 2 and sorted(two.facts["head_dims"]) == [1, 2]
    assert "2 heads" in two.reason and check_hypotheses("gateddeltaproduct(neg=true,heads=2)", two) == []
    # V4 = C2 x C2: one reflection per head with two heads; one head needs two
    assert oracle("deltanet(neg=true,heads=2)", "group:V4").basis == "T6"
    assert oracle("deltanet(neg=true,heads=2)", "group:V4").facts["n_h_needed"] == 1
    # C2 x C2 x C2 needs a head per factor with one reflection each
    assert oracle("deltanet(neg=true,heads=2)", "group:C2xC2xC2").verdict == "open"
    assert oracle("deltanet(neg=true,heads=3)", "group:C2xC2xC2").verdict == "possible"
    # heads do not help a group with no block-diagonal representation here (S3 in 2-D: irreducible)
    assert (
        oracle("deltanet(neg=true,heads=4)", "group:S3").verdict
        == oracle("deltanet(neg=true)", "group:S3").verdict
    )


def test_a_t6_verdict_on_more_heads_than_the_layer_has_is_caught():
    from dataclasses import replace

    v = oracle("gateddeltaproduct(neg=true,heads=2)", "group:C2xC4")
    wrong = replace(v, facts={**v.facts, "head_dims": [1, 1, 1]})
    assert check_hypotheses("gateddeltaproduct(neg=true,heads=2)", wrong) != []


# -- lemma PSC: products of Householder factors in [0,1] ---------------------------------------------------
def _product(rng, d: int, n: int, beta_max: float, gate: bool) -> np.ndarray:
    m = np.diag(rng.uniform(0.01, 1, d)) if gate else np.eye(d)
    for _ in range(n):
        k = rng.normal(size=d)
        k /= np.linalg.norm(k)
        beta = rng.choice([0.0, 1.0, rng.uniform(0, beta_max)]) if beta_max <= 1 else beta_max
        m = (np.eye(d) - beta * np.outer(k, k)) @ m
    return m


def test_products_of_psd_contractions_have_no_unit_eigenvalue_but_1():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        ev = np.linalg.eigvals(
            _product(rng, int(rng.integers(2, 6)), int(rng.integers(3, 6)), 1.0, rng.random() < 0.5)
        )
        assert np.abs(ev).max() <= 1 + 1e-9
        on_circle = ev[np.abs(ev) > 1 - 1e-9]
        assert np.allclose(on_circle, 1, atol=1e-6), ev
    # not vacuous: with beta up to 2 (reflections) the products have -1 and rotations
    ev = np.linalg.eigvals(_product(rng, 3, 3, 2.0, False))
    assert np.isclose(np.abs(ev), 1).all() and not np.allclose(ev, 1)


@pytest.mark.parametrize("layers", ["deltaproduct(nh=3)", "gateddeltaproduct(nh=3)", "deltaproduct(nh=4)"])
def test_three_or_more_factors_in_0_1_cannot_do_parity(layers):
    v = oracle(layers, "parity")
    assert (v.verdict, v.basis) == ("impossible", "T1"), v.reason
    assert "lemma PSC" in v.reason and check_hypotheses(layers, v) == []
    assert oracle(layers, "group:S3").verdict == "impossible"
    assert oracle(f"{layers},mamba", "parity").verdict == "impossible"


# -- PD names KDA's transition -------------------------------------------------------------------------------
def test_pd_describes_kda_as_a_factor_times_a_diagonal_gate():
    v = oracle("kda(neg=true)", "group:C3")
    assert (v.verdict, v.basis) == ("impossible", "PD")
    assert "(I - beta k k^T) Diag(alpha)" in v.reason and "similar to the symmetric" in v.reason
    rng = np.random.default_rng(1)
    for _ in range(500):  # the claim: real eigenvalues in [-1, 1] for beta in [0, 2], alpha in (0, 1]
        d = int(rng.integers(2, 6))
        k = rng.normal(size=d)
        k /= np.linalg.norm(k)
        a = (np.eye(d) - rng.uniform(0, 2) * np.outer(k, k)) @ np.diag(rng.uniform(1e-3, 1, d))
        ev = np.linalg.eigvals(a)
        assert np.abs(ev.imag).max() < 1e-9 and np.abs(ev.real).max() <= 1 + 1e-9
