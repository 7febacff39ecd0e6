"""What every rule of the oracle shares: the verdict (:class:`Verdict`, :class:`Decision`, :class:`Condition`), the
statements its bases name (:data:`BASES`), a rule as a registered object (:class:`Rule`, :func:`rule`), and the
helpers that build a 'possible' verdict from a construction (:func:`constructed`, with the length float32 holds it:
:mod:`statetrack.theory.precision`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from statetrack.layers.properties import EigenvalueDomain
from statetrack.theory.actions import TaskAlgebra
from statetrack.theory.layer_classes import LayerClass, LayerInfo
from statetrack.theory.precision import SIGNS, Hold, rotation_hold

CASCADE_GROUPS = {
    EigenvalueDomain.NONNEG: "trivial",
    EigenvalueDomain.REAL_HALF_NEG: "trivial",
    EigenvalueDomain.DAMPED_ROTATIONS: "trivial",
    EigenvalueDomain.REAL: "elementary abelian 2",
    EigenvalueDomain.COMPLEX_DISC: "abelian",
}


CASCADE_RANK = {"trivial": 0, "elementary abelian 2": 1, "abelian": 2}


BASES = {
    "T1": "non-negative eigenvalues in every layer: parity fails at any depth (Grazzi2024 Thm 1; Sarrof2024 Thm 2; "
    "Khavari2025 Thm 4.1)",
    "T1c": "one diagonal-plus-rank-one layer with real eigenvalues in (-1/2, 1] (RWKV-7) on a constant input: the "
    "powers of its transition converge and its float32 state ends constant or alternating with period 2 "
    "(Grazzi2024 v5 Lemma 1), so a letter of period 3 or more defeats it (this project; docs/science.md)",
    "T2": "time-invariant diagonal SSMs fail parity (Sarrof2024 Thm 13)",
    "T3": "non-negative diagonal SSMs fail on (0^k 1^m)^T, m odd (Khavari2025 Lemma 4.3)",
    "T4": "stacks of S4D and Mamba layers fail parity; witness (1 0^(W-1))^T (Khavari2025 Thm 4.4)",
    "T5": "k input-dependent complex diagonal layers track G iff G has an abelian subnormal series of length k "
    "(DiagLimits2026 Thms 1-2)",
    "T6": "products of generalized Householder matrices with eigenvalues in [-1,1] (Grazzi2024; Siems2025), "
    "with lemma CD (Cartan-Dieudonne) for the number of factors",
    "P1": "one S4D layer counts mod m: A = exp(2 pi i/m) (Khavari2025 Prop. 4.2); a decaying channel counts a "
    "pre-period",
    "P2": "one S4D layer predicts the offset: A = exp(2 pi i/n), B = 1 - A (Khavari2025 App. C)",
    "P3": "two AUSSM layers track S3 = C3 x| C2 (DiagLimits2026)",
    "P4": "a parity layer and a one-factor Householder layer with eigenvalues in [-1,1] track the cyclic and dihedral "
    "groups (Siems2025; the twisted-reflection construction of docs/science.md)",
    "SF": "star-free languages in non-negative input-dependent diagonal stacks (Sarrof2024), with the depth "
    "SF-depth of the holonomy cascade (Eilenberg1976)",
    "KR": "the holonomy cascade with abelian (complex disc) or elementary abelian 2 (real) group factors and resets, "
    "in SF-depth input-dependent diagonal layers (Eilenberg1976; DiagLimits2026)",
    "PD": "period doubling: real diagonal layers, or one real Householder factor on a constant input, at most "
    "double the period of their input",
    "P5": "one PD-SSM layer (a column one-hot matrix times a diagonal) runs any N-state finite automaton on one-hot "
    "states (Terzic2025); the row form of its public code, any permutation automaton (this project)",
    "NL": "a non-linear RNN (tanh, LSTM, GRU) simulates any finite automaton (Minsky1967; not subject to the theorems)",
}


TC0 = (
    "no theorem in this toolkit's sources decides it for attention; for non-solvable groups "
    "impossibility holds only under the conjecture TC0 != NC1 (Merrill2024)"
)


class Decision(StrEnum):
    """The oracle's answer: can the stack solve the task at every length?"""

    POSSIBLE = "possible"
    IMPOSSIBLE = "impossible"
    OPEN = "open"


class Condition(StrEnum):
    """What a verdict holds under, beyond the theorem: '' (nothing more), or ``rounding``: the construction
    holds eigenvalues of modulus 1 (1, -1, rotations) that a layer it uses reaches only where float32 rounding
    saturates its parametrisation (the layer's ``Properties.rounding``); in exact arithmetic those transitions
    have modulus below 1 and the state forgets."""

    NONE = ""
    ROUNDING = "rounding"


@dataclass(frozen=True)
class Verdict:
    verdict: Decision
    basis: str  # a key of BASES
    reason: str
    facts: dict = field(
        default_factory=dict
    )  # what the rule used (JSON-friendly); "layers": the layers it reads
    condition: Condition = Condition.NONE

    @property
    def qualified_basis(self) -> str:
        """The basis with its condition, as tables show it: 'T5' or 'T5 [rounding]'."""
        return f"{self.basis} [{self.condition}]" if self.condition else self.basis

    def as_dict(self) -> dict:
        return asdict(self)


#: what a rule reads and returns: the stack's layers and the task's algebra -> a verdict, or None (the next rule
#: is tried)
Apply = Callable[[list[LayerInfo], TaskAlgebra], "Verdict | None"]


@dataclass(frozen=True)
class Rule:
    """One rule of the oracle: its ``name``, the ``decision`` it gives, the ``bases`` it gives it on (keys of
    :data:`BASES`, the theorems and constructions of docs/science.md; '-' for none) and ``apply``. The oracle
    tries the registered rules in order (:data:`statetrack.theory.rules.RULES`) and answers with the first
    verdict; tests/test_theory_rules.py checks that each rule gives its verdicts on its bases only, and that each
    decides an example of its own."""

    name: str
    decision: Decision
    bases: tuple[str, ...]
    apply: Apply
    doc: str = ""

    @property
    def theorems(self) -> dict[str, str]:
        """The statements of the rule's bases (those of docs/science.md section 4)."""
        return {b: BASES[b] for b in self.bases if b in BASES}


def rule(name: str, decision: Decision, *bases: str) -> Callable[[Apply], Rule]:
    """Register a function ``(infos, alg) -> Verdict | None`` as a :class:`Rule` (its docstring is the rule's)."""
    return lambda apply: Rule(name, decision, bases, apply, (apply.__doc__ or "").strip())


def exact_first(layers: list[LayerInfo]) -> list[LayerInfo]:
    """The layers, those that reach modulus 1 in exact arithmetic first (a construction picks the first that
    fits, so a stack with such a layer gets a verdict without the rounding condition)."""
    return sorted(layers, key=lambda i: bool(i.props.rounding))


def constructed(
    basis: str, reason: str, used: list[LayerInfo], facts: dict | None = None, hold: Hold | None = None
) -> Verdict:
    """A 'possible' verdict from a construction on the layers ``used``. ``hold``: it holds eigenvalues of
    modulus 1 over any length, and float32 holds them to ``hold.length`` (``facts['float32_length']``; None:
    every length) for the reason given (:mod:`statetrack.theory.precision`); where a layer used reaches them only
    through float32 rounding, the verdict says so (condition ``rounding``, and the layer's note in the reason).
    None: it holds no such eigenvalue."""
    facts = {**(facts or {}), "layers": [i.index for i in used]}
    if hold is None:
        return Verdict(Decision.POSSIBLE, basis, reason, facts)
    facts["float32_length"] = hold.length
    rounded = [i for i in used if i.props.rounding]
    if not rounded:
        return Verdict(Decision.POSSIBLE, basis, f"{reason}. {hold.sentence()}", facts)
    notes = "; ".join(f"{i.spec}: {i.props.rounding}" for i in rounded)
    return Verdict(
        Decision.POSSIBLE,
        basis,
        f"{reason}. It holds in float32 through rounding only ({notes}); in exact "
        f"arithmetic these transitions have modulus below 1 and the state forgets. {hold.sentence()}",
        facts,
        Condition.ROUNDING,
    )


def sign_hold(i: LayerInfo) -> Hold:
    """How float32 holds the sign flip -1 of a layer: exactly in a real or Householder layer, as the rotation by
    pi (a float32 angle) in a complex one."""
    return rotation_hold([2]) if i.cls in (LayerClass.COMPLEX, LayerClass.DAMPED) else SIGNS


def group_orders(alg: TaskAlgebra) -> list[int]:
    """The orders of the rotations a complex channel may need for the task's groups: their element orders."""
    return sorted(alg.monoid.periods - {1}) if alg.monoid is not None else []


def n_of(k: int, what: str) -> str:
    return f"{k} {what}" + ("" if k == 1 else "s")


def group_name(alg: TaskAlgebra) -> str:
    if alg.all_inputs and alg.group is not None:
        return alg.group.name
    return f"the group generated by the inputs (order {alg.h_order})"
