"""The oracle's rules as registered objects (statetrack.theory.rules): each names its decision and the theorems
it gives it on, and each decides an example of its own (the first rule to answer there), on one of its bases."""

import pytest

from statetrack.layers.properties import EigenvalueDomain, Properties, Structure
from statetrack.theory.actions import task_algebra
from statetrack.theory.layer_classes import LayerClass, LayerInfo, layer_infos
from statetrack.theory.verdicts import BASES, HYPOTHESES, RULES, Decision, decide, oracle

#: rule -> (layers, task) where it is the first rule to answer
EXAMPLES = {
    "constant": ("rnn", "group:C1"),
    "nonlinear": ("rnn", "parity"),
    "one-hot": ("pdssm", "tomita:3"),
    "offset": ("s4d", "offset"),
    "fixed-input": ("s4d", "modcount:3"),
    "householder-group": ("deltaproduct(nh=2,neg=true)", "group:A5"),
    "diagonal-group": ("aussm*2", "group:S3"),
    "cascade": ("mamba", "tomita:1"),
    "converging": ("mamba", "parity"),
    "aligned": ("s4d", "parity"),
    "period": ("negmamba", "modcount:3"),
    "derived-series": ("aussm", "group:S3"),
    "unknown": ("s4d", "modarith:5"),
    "attention": ("transformer", "parity"),
    "offset-open": ("pdssm", "offset"),
    "cascade-depth": ("mamba", "tomita:2"),
    "damped": ("mamba3(a_floor=0.0001)", "parity"),
    "dplr": ("rwkv7", "parity"),
    "householder-depth": ("deltanet(neg=true)", "tomita:1"),
    "pd-rows": ("pdssm(rows=true)", "tomita:1"),
    "subset": ("aussm", "group:S5/transpositions"),
    "no-result": ("s4d", "tomita:1"),
}


def _undeclared_householder() -> list[LayerInfo]:
    """A plugin's Householder layer with n_h = 2 whose factor range is not declared (no built-in mixer lacks it)."""
    p = Properties(True, EigenvalueDomain.COMPLEX_DISC, Structure.HOUSEHOLDER, n_h=2)
    return [LayerInfo("plugin", p, LayerClass.HOUSEHOLDER, None)]


def test_rules_are_registered_once_in_order():
    names = [r.name for r in RULES]
    assert len(names) == len(set(names))
    order = [r.decision for r in RULES]
    ranks = {Decision.POSSIBLE: 0, Decision.IMPOSSIBLE: 1, Decision.OPEN: 2}
    assert order == sorted(order, key=ranks.__getitem__)
    assert RULES[-1].name == "no-result"


def test_each_rule_names_its_theorems():
    for r in RULES:
        assert r.bases and set(r.bases) <= set(BASES) | {"-"}, r.name
        assert r.doc, f"{r.name} says what it decides"
        assert set(r.theorems) == set(r.bases) - {"-"}
        assert all((str(r.decision), b) in HYPOTHESES for b in r.bases if r.decision != Decision.OPEN), r.name
    given = {b for r in RULES for b in r.bases}
    assert set(BASES) <= given, set(BASES) - given


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_each_rule_decides_an_example_on_its_bases(rule):
    if rule.name == "householder-undeclared":
        infos, alg = _undeclared_householder(), task_algebra("group:S3")
    else:
        layers, task = EXAMPLES[rule.name]
        infos, alg = layer_infos(layers), task_algebra(task)
    first, v = decide(infos, alg)
    assert first is rule, (first.name, v.reason)
    assert v.verdict == rule.decision and v.basis in rule.bases
    if rule.name != "householder-undeclared":
        w = oracle(*EXAMPLES[rule.name])
        assert (w.verdict, w.basis, w.reason) == (v.verdict, v.basis, v.reason)


def test_every_rule_has_an_example():
    assert set(EXAMPLES) | {"householder-undeclared"} == {r.name for r in RULES}
