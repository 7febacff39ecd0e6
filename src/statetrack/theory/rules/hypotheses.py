"""What each rule assumes, stated on the declared properties of the layers it reads (:data:`HYPOTHESES`), and
:func:`check_hypotheses`, which checks a verdict against them: a verdict is never stronger than its rule's
hypotheses as the code implements them (tests/test_theory_hypotheses.py, for every mixer)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from statetrack.layers.properties import EigenvalueDomain, Structure
from statetrack.theory.layer_classes import LayerInfo, layer_infos
from statetrack.theory.rules.base import CASCADE_GROUPS, CASCADE_RANK, Condition, Decision, Verdict

_D = EigenvalueDomain

_COMPLEX_SELECTIVE = {_D.UNIT_CIRCLE, _D.COMPLEX_DISC}

_COMPLEX_ANY = _COMPLEX_SELECTIVE | {_D.COMPLEX_FIXED}


def _diagonal(i: LayerInfo) -> bool:
    return i.props.linear and i.props.structure in (Structure.DIAGONAL, Structure.SCALAR)


def _selective(i: LayerInfo) -> bool:
    return _diagonal(i) and i.props.input_dependent


def _reflecting(i: LayerInfo) -> bool:
    """A product of Householder factors whose eigenvalue 1 - beta reaches -1."""
    return i.props.structure == Structure.HOUSEHOLDER and i.factor_domain == _D.REAL


def _flips_sign(i: LayerInfo) -> bool:
    """An input-dependent diagonal layer with eigenvalue -1 (real, or a unit-modulus rotation), or a
    reflecting Householder layer."""
    return (_selective(i) and i.domain in _COMPLEX_SELECTIVE | {_D.REAL}) or _reflecting(i)


def _periodic_real(infos: list[LayerInfo], facts: dict) -> bool:
    """PD and T1c: every layer real diagonal, a single real Householder factor or a diagonal-plus-rank-one layer
    with eigenvalues in (-1/2, 1]; the last two only where every layer before them is non-negative (their input
    is constant on u x^n)."""
    for n, i in enumerate(infos):
        ok_diag = _diagonal(i) and i.domain in (_D.NONNEG, _D.REAL)
        single = (
            i.props.structure == Structure.HOUSEHOLDER
            and i.props.n_h == 1
            and i.factor_domain in (_D.NONNEG, _D.REAL)
        )
        dplr = i.props.structure == Structure.DPLR and i.domain == _D.REAL_HALF_NEG
        if not (ok_diag or single or dplr):
            return False
        if (single or dplr) and not all(j.domain == _D.NONNEG for j in infos[:n]):
            return False
    return "period_bound" in facts


@dataclass(frozen=True)
class Hypothesis:
    """What a rule assumes, stated on the declared properties of the layers it reads (``LayerInfo``, built from
    each mixer's :class:`Properties`): ``layer`` for each layer a construction runs on (a 'possible' verdict's
    ``facts['layers']``), ``stack`` for the whole stack (an 'impossible' verdict covers every layer), given the
    verdict's facts. ``unit``: the construction holds eigenvalues of modulus 1, so a layer that reaches them only
    through rounding must make the verdict say so. tests/test_theory_hypotheses.py checks every verdict against
    these, for every mixer."""

    text: str
    layer: Callable[[LayerInfo, dict], bool] = lambda _i, _f: True
    stack: Callable[[list[LayerInfo], dict], bool] = lambda _infos, _f: True
    unit: Callable[[dict], bool] = lambda _f: False


HYPOTHESES: dict[tuple[str, str], Hypothesis] = {
    ("possible", "-"): Hypothesis("the labels never change"),
    ("possible", "NL"): Hypothesis(
        "a non-linear recurrence",
        layer=lambda i, _f: not i.props.linear and i.props.structure == Structure.NONLINEAR,
    ),
    ("possible", "P1"): Hypothesis(
        "a diagonal layer with a constant eigenvalue exp(2 pi i/p) (p > 2: complex; p = 2: -1; p = 1: none)",
        layer=lambda i, f: (
            _diagonal(i)
            and (
                f["label_period"] == 1
                or i.domain in _COMPLEX_ANY
                or (f["label_period"] == 2 and i.domain == _D.REAL)
            )
        ),
        unit=lambda f: f["label_period"] > 1,
    ),
    ("possible", "P2"): Hypothesis(
        "a diagonal layer with a constant complex eigenvalue of modulus 1",
        layer=lambda i, _f: _diagonal(i) and i.domain in _COMPLEX_ANY,
        unit=lambda _f: True,
    ),
    ("possible", "P3"): Hypothesis(
        "two input-dependent diagonal layers with unit-modulus rotations",
        layer=lambda i, _f: _selective(i) and i.domain in _COMPLEX_SELECTIVE,
        unit=lambda _f: True,
    ),
    ("possible", "P4"): Hypothesis(
        "a sign layer (real, complex, or reflecting) then a reflecting Householder layer",
        layer=lambda i, _f: _flips_sign(i),
        unit=lambda _f: True,
    ),
    ("possible", "T5"): Hypothesis(
        "input-dependent diagonal layers with eigenvalue -1 or unit-modulus rotations, or a "
        "reflecting Householder layer for parity on a fixed input",
        layer=lambda i, _f: _flips_sign(i),
        unit=lambda _f: True,
    ),
    ("possible", "T6"): Hypothesis(
        "a Householder layer whose factors reach -1, with n_h >= the reflections needed (per head, with "
        "as many heads as the blocks split over)",
        layer=lambda i, f: (
            _reflecting(i)
            and (i.props.n_h or 1) >= f.get("n_h_needed", 1)
            and i.heads >= len(f.get("head_dims", [1]))
        ),
        unit=lambda _f: True,
    ),
    ("possible", "SF"): Hypothesis(
        "input-dependent diagonal layers whose eigenvalues include [0,1] (resets, delays, keeps)",
        layer=lambda i, _f: _selective(i) and i.domain in CASCADE_GROUPS,
        unit=lambda _f: True,
    ),
    ("possible", "KR"): Hypothesis(
        "input-dependent diagonal layers with [0,1] and the group channels' eigenvalues",
        layer=lambda i, f: (
            _selective(i)
            and CASCADE_RANK.get(CASCADE_GROUPS.get(i.domain, ""), -1) >= CASCADE_RANK[f["cascade_groups"]]
        ),
        unit=lambda _f: True,
    ),
    ("possible", "P5"): Hypothesis(
        "a one-hot-times-diagonal layer: column one-hot (any automaton) or row one-hot "
        "(a permutation automaton)",
        layer=lambda i, f: (
            i.props.input_dependent
            and (
                i.props.structure == Structure.PD
                or (i.props.structure == Structure.PD_ROWS and f.get("permutation", False))
            )
        ),
        unit=lambda _f: True,
    ),
    ("impossible", "T1"): Hypothesis(
        "every layer linear with eigenvalues in [0,1], or a product of Householder factors with eigenvalues in "
        "[0,1] (lemma PSC)",
        stack=lambda infos, _f: all(
            i.props.linear
            and (
                i.domain == _D.NONNEG
                if i.props.structure != Structure.HOUSEHOLDER
                else i.factor_domain == _D.NONNEG
            )
            for i in infos
        ),
    ),
    ("impossible", "T1c"): Hypothesis(
        "PD's layers, with one diagonal-plus-rank-one layer with eigenvalues in "
        "(-1/2, 1] on a constant input",
        stack=_periodic_real,
    ),
    ("impossible", "PD"): Hypothesis(
        "every layer real diagonal or a single real Householder factor on a constant input",
        stack=_periodic_real,
    ),
    ("impossible", "T2"): Hypothesis(
        "every layer time-invariant diagonal",
        stack=lambda infos, _f: all(_diagonal(i) and not i.props.input_dependent for i in infos),
    ),
    ("impossible", "T3"): Hypothesis(
        "every layer diagonal with eigenvalues in [0,1]",
        stack=lambda infos, _f: all(_diagonal(i) and i.domain == _D.NONNEG for i in infos),
    ),
    ("impossible", "T4"): Hypothesis(
        "every layer diagonal, time-invariant or with eigenvalues in [0,1]",
        stack=lambda infos, _f: all(
            _diagonal(i) and (not i.props.input_dependent or i.domain == _D.NONNEG) for i in infos
        ),
    ),
    ("impossible", "T5"): Hypothesis(
        "every layer diagonal (a special case of input-dependent complex diagonal)",
        stack=lambda infos, _f: all(_diagonal(i) for i in infos),
    ),
}


def check_hypotheses(layers: str, v: Verdict) -> list[str]:
    """What is wrong with verdict ``v`` for ``layers`` against its rule's :data:`HYPOTHESES`: [] when the layers'
    declared properties meet the rule's hypotheses and a construction through rounding says so."""
    if v.verdict == Decision.OPEN:
        return []
    h = HYPOTHESES.get((str(v.verdict), v.basis))
    if h is None:
        return [f"no hypothesis stated for ({v.verdict}, {v.basis})"]
    infos = layer_infos(layers)
    out = []
    if v.verdict == Decision.POSSIBLE:
        used = [infos[n] for n in v.facts.get("layers", [])]
        if "layers" not in v.facts:
            out.append("a possible verdict must name the layers its construction uses")
        out += [
            f"{i.spec} does not meet {v.basis}'s hypothesis: {h.text}"
            for i in used
            if not h.layer(i, v.facts)
        ]
        if h.unit(v.facts) and "float32_length" not in v.facts:
            out.append(
                "a construction that holds unit-modulus eigenvalues must state the length float32 holds it"
            )
        rounded = h.unit(v.facts) and any(i.props.rounding for i in used)
        if rounded != (v.condition == Condition.ROUNDING):
            out.append(
                f"condition {v.condition!r}, but the construction {'needs' if rounded else 'does not need'} "
                f"modulus 1 through rounding"
            )
    elif not h.stack(infos, v.facts):
        out.append(f"the stack does not meet {v.basis}'s hypothesis: {h.text}")
    return out
