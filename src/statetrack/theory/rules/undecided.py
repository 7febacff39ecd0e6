"""The rules that give 'open': no theorem or construction of this toolkit's sources decides the cell, and the
reason names what is missing (a depth, a bound, a proof). The last rule always answers."""

from __future__ import annotations

from statetrack.layers.properties import EigenvalueDomain
from statetrack.theory.actions import TaskAlgebra
from statetrack.theory.layer_classes import SELECTIVE_DIAGONAL, LayerClass, LayerInfo
from statetrack.theory.rules.base import TC0, Decision, Verdict, rule
from statetrack.theory.rules.possible import cascade


def _open(reason: str) -> Verdict:
    return Verdict(Decision.OPEN, "-", reason)


@rule("unknown", Decision.OPEN, "-")
def _unknown(_infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """A task without an algebraic reading."""
    return _open(f"{alg.description}; no rule of this toolkit applies") if alg.kind == "unknown" else None


@rule("attention", Decision.OPEN, "-")
def _attention(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """Attention: no theorem here; TC0 != NC1 for non-solvable groups is a conjecture."""
    if not any(i.cls == LayerClass.ATTENTION for i in infos):
        return None
    return _open(f"{alg.task} with {', '.join(i.spec for i in infos)}: {TC0}")


@rule("offset-open", Decision.OPEN, "-")
def _offset_open(_infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """The offset without a complex layer (P2)."""
    if alg.kind != "offset":
        return None
    return _open(
        "the offset labels depend only on the last 11 inputs (a definite, star-free "
        "language), but no construction in the sources covers these layers (Khavari2025 reports "
        "that Mamba learns it without an explanation)"
    )


@rule("cascade-depth", Decision.OPEN, "-")
def _cascade_depth(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """Fewer input-dependent diagonal layers than the holonomy cascade needs (SF-depth)."""
    if alg.monoid is None:
        return None
    _, short = cascade(infos, alg)
    if short is not None and any(i.cls in SELECTIVE_DIAGONAL for i in infos):
        return _open(short)
    return None


@rule("damped", Decision.OPEN, "-")
def _damped_open(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """Open for a stack with a damped rotation layer (its decay floor keeps the modulus below 1)."""
    if not any(i.cls == LayerClass.DAMPED for i in infos):
        return None
    name = next(i.spec for i in infos if i.cls == LayerClass.DAMPED)
    return Verdict(
        Decision.OPEN,
        "-",
        f"{name} rotates its state by angles whose modulus the decay floor keeps below 1 "
        f"(exp(-a_floor |angle| / pi)), except angles too small to round the decay away from 1; no "
        f"result here decides {alg.task} for these layers: T5's constructions need unit-modulus "
        f"rotations (a_floor = 0 gives them), and T1's witness needs powers that converge, which the "
        f"tiny unit-modulus rotations do not",
    )


@rule("dplr", Decision.OPEN, "-")
def _dplr_open(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """Open for a stack with a diagonal-plus-rank-one layer (RWKV-7): what T1c leaves undecided and what
    would decide it."""
    dplr = [i for i in infos if i.cls == LayerClass.DPLR]
    if not dplr:
        return None
    name = dplr[0].spec
    periods = set(alg.letter_periods()) if not alg.fixed_input else {alg.block_period or 1}
    if len(dplr) == 1 and periods <= {1, 2} and 2 in periods:
        why = (
            f"on a repeated letter x with label period 2 ({'1^T' if alg.is_parity else 'x^n'}) the powers of "
            f"its transition converge in exact arithmetic, but its float32 state may end alternating with "
            f"period 2 (the negative eigenvalues reach about -0.45; Grazzi2024 v5, Lemma 1): T1c's argument "
            f"bounds the output's period by 2, which does not rule out a label of period 2. A proof that the "
            f"cast state of these transitions on x^n ends constant, or a weight setting whose float32 state "
            f"alternates there and tracks {alg.task} on every input, would decide it"
        )
    elif len(dplr) > 1 or any(i.index < dplr[0].index and i.cls != LayerClass.NONNEG for i in infos):
        why = (
            "a layer before an RWKV-7 layer may alternate with period 2, so the RWKV-7 layer reads letters x, "
            "y, x, y, ... whose products A(y) A(x) can have complex eigenvalues: T1c's period bound covers a "
            "constant input only. A bound for such products, or a construction, would decide it"
        )
    else:
        why = (
            f"T1c rules out tasks with a letter of period 3 or more at this depth, but {alg.task} has none, and "
            f"no result in this toolkit's sources decides it for these layers (Peng2025's regular-language "
            f"claim needs transitions outside this range). A construction with these parameter ranges, or a "
            f"family of inputs on which every such stack's states coincide while the labels differ, would "
            f"decide it"
        )
    return Verdict(
        Decision.OPEN,
        "-",
        f"{name} has diagonal-plus-rank-one transitions with real eigenvalues in (-1/2, 1]; {why}",
    )


@rule("householder-depth", Decision.OPEN, "-")
def _householder_depth(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """Householder layers with factors in [-1,1] beyond what T6, P4 and PD decide."""
    if not any(i.cls == LayerClass.HOUSEHOLDER and i.factor_domain == EigenvalueDomain.REAL for i in infos):
        return None
    return _open(
        f"Householder layers with eigenvalues in [-1,1] recognise every regular language "
        f"with enough layers (T6, Grazzi2024), but no bound in the sources shows that this depth "
        f"suffices for {alg.task}; one-factor periodicity (PD) covers only a first layer on a "
        f"constant input"
    )


@rule("pd-rows", Decision.OPEN, "-")
def _pd_rows_open(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """Open for a stack with PD-SSM's row form, which composes maps other than permutations in reverse."""
    rows = next((i for i in infos if i.cls == LayerClass.PD_ROWS), None)
    if rows is None:
        return None
    return Verdict(
        Decision.OPEN,
        "-",
        f"{rows.spec} is PD-SSM's row form (the public code's): a diagonal times a row one-hot matrix, "
        f"which reads each input's map through its preimages, so from the fixed initial state e_0 it "
        f"runs a permutation automaton (P5) but composes other maps in reverse order; {alg.task} is "
        f"not a group word problem, and no construction here covers it in this form (the column form, "
        f"pdssm, runs any automaton)",
    )


@rule("householder-undeclared", Decision.OPEN, "-")
def _householder_undeclared(infos: list[LayerInfo], _alg: TaskAlgebra) -> Verdict | None:
    """A Householder layer whose factors' eigenvalue range is not declared."""
    if not any(i.cls == LayerClass.HOUSEHOLDER and i.factor_domain is None for i in infos):
        return None
    return _open("a Householder layer's factor eigenvalue range is not declared; no rule applies")


@rule("subset", Decision.OPEN, "-")
def _subset(_infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """A group word problem whose inputs are a proper subset of the group (T5's bounds need them all)."""
    if not (alg.is_group and not alg.all_inputs and alg.kind == "group"):
        return None
    return _open(
        f"the inputs of {alg.task} are a proper subset of the group; T5's bounds are "
        f"stated for inputs from the whole group and no construction here covers these layers"
    )


@rule("no-result", Decision.OPEN, "-")
def _no_result(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """Everything else: no theorem or construction decides it."""
    return _open(
        f"no theorem or construction in this toolkit's sources decides {alg.task} for "
        f"{', '.join(i.spec for i in infos)}"
    )


#: in the order the oracle tries them
RULES = (
    _unknown,
    _attention,
    _offset_open,
    _cascade_depth,
    _damped_open,
    _dplr_open,
    _householder_depth,
    _pd_rows_open,
    _householder_undeclared,
    _subset,
    _no_result,
)
