"""A verdict is never stronger than its rule's hypotheses: for every mixer (every variant whose options change
the maths), alone and stacked, on tasks of every kind, the layers a rule reads must have declared properties that
meet the hypotheses the rule states (theory.verdicts.HYPOTHESES), and a construction that needs modulus-1
eigenvalues a layer reaches only through float32 rounding must say so. The declared properties are checked
against the measured transitions in tests/test_mixers_zoo.py; together the two make each verdict sound."""

import pytest

from statetrack.layers import MIXERS
from statetrack.theory.verdicts import HYPOTHESES, Condition, check_hypotheses, oracle

VARIANTS = sorted(MIXERS) + [
    "mamba(neg=true)",
    "s4d(init=real)",
    "s4d(init=real,disc=bilinear)",
    "deltanet(neg=true)",
    "deltaproduct(neg=true)",
    "deltaproduct(nh=3)",
    "deltaproduct(nh=3,neg=true)",
    "mamba2(neg=true)",
    "mamba3(rope=false)",
    "mamba3(a_floor=0.0001)",
    "mamba3(data_angles=false)",
    "gateddeltanet(neg=true)",
    "gateddeltaproduct(neg=true)",
    "gateddeltaproduct(neg=true,nh=1)",
    "gateddeltaproduct(neg=true,nh=3)",
    "gateddeltaproduct(neg=true,heads=2)",
    "gateddeltaproduct(nh=3)",
    "kda(neg=true)",
    "pdssm(rows=true)",
]
TASKS = [
    "parity",
    "modcount:3",
    "group:C6",
    "group:S3",
    "group:A5",
    "group:C2xC4",
    "tomita:1",
    "tomita:3",
    "tomita:5",
    "evenpairs",
    "cycle:5",
    "offset",
    "witness:alt",
    "modarith:5",
    "group:A5/gens=2",
    "group:S5/gens=4",
]


@pytest.mark.parametrize("spec", VARIANTS)
def test_every_verdict_meets_its_rules_hypotheses(spec):
    for stack in (spec, f"{spec}*2", f"mamba,{spec}", f"{spec},negmamba"):
        for task in TASKS:
            v = oracle(stack, task)
            assert check_hypotheses(stack, v) == [], (stack, task, v.basis, v.reason)


def test_every_basis_has_a_hypothesis():
    from statetrack.theory.verdicts import BASES

    assert {b for _, b in HYPOTHESES} - {"-"} == set(BASES)


def test_rounding_is_said_where_the_construction_needs_it():
    # LRU counts mod 3 (P1) only through rounding: |lambda| = exp(-exp(nu)) < 1 at every finite nu
    v = oracle("lru", "modcount:3")
    assert (v.verdict, v.basis, v.condition) == ("possible", "P1", Condition.ROUNDING)
    assert "nu < -17.4" in v.reason and v.qualified_basis == "P1 [rounding]"
    # AUSSM's exp(i theta) has modulus exactly 1: no condition
    assert oracle("aussm", "modcount:3").condition == Condition.NONE
    assert oracle("aussm", "parity").condition == Condition.NONE
    # a construction that holds no unit-modulus eigenvalue needs none: labels constant after a pre-period (P1, p = 1)
    assert oracle("lstm", "parity").condition == Condition.NONE


def test_a_broken_declaration_is_caught():
    """The check is not vacuous: a verdict whose layers do not meet the rule, or that hides rounding, is named."""
    from dataclasses import replace

    v = oracle("negmamba", "parity")
    assert check_hypotheses("negmamba", v) == []
    assert check_hypotheses("mamba", v)  # mamba's [0,1] has no -1
    assert check_hypotheses("negmamba", replace(v, condition=Condition.NONE))  # hides rounding
    t1 = oracle("mamba", "parity")
    assert check_hypotheses("negmamba", t1)  # T1 needs [0,1] in every layer
