"""The theory oracle: can this stack of mixers solve this task at every length, in finite precision?

``oracle(layers, task) -> Verdict(verdict, basis, reason, facts)`` with verdict ``possible``,
``impossible`` or ``open``, the basis (a short name of docs/science.md: a theorem, a construction or
NL for non-linear recurrences), a one-sentence reason and the facts it used (monoid size, aperiodic,
maximal subgroups, holonomy height, the depth or representation a construction needs). The rules
read only the mixers' declared :class:`Properties` (input dependence, eigenvalue domain, structure,
n_h, linear) and the task's algebra (:mod:`statetrack.theory.algebra`), never a task's name, so a new
mixer needs no new rule and a language gets one verdict however it is given.

Layers are read as classes by :mod:`statetrack.theory.layer_classes` (nonlinear, attention, lti,
nonneg, real, complex, householder, dplr, pd, pd-rows).

A verdict is never stronger than its rule's hypotheses as the code implements them: each rule states them
on the declared properties of the layers it reads (:data:`HYPOTHESES`; :func:`check_hypotheses`), a
'possible' verdict names the layers its construction uses (``facts['layers']``), and where a construction
holds eigenvalues of modulus 1 that a layer reaches only through float32 rounding (its
``Properties.rounding``: Negative Mamba's -1, LRU's |lambda| = 1, PD-SSM's |d| = 1, ...) the verdict carries
``condition = 'rounding'`` (shown as 'T5 [rounding]') and says how.

Possibility comes from constructions, and a stack can do whatever any of its layers (in order) can
do: the other layers are switched off by zeroing their output projection, and the residual
connection carries the input past them.

* NL: a non-linear recurrent layer simulates any DFA (finite-state task) with enough units.
* P5: one PD-SSM layer (column one-hot times diagonal) runs the task's minimal automaton on one-hot
  states; the row form of PD-SSM's public code, any permutation automaton (group word problems).
* P1: on a fixed input whose labels are periodic with period p after N tokens, one diagonal layer
  with a constant eigenvalue exp(2 pi i/p) (and, if N > 0, one of modulus below 1) counts it.
* P2: the same layer predicts the offset.
* T6 (with lemma CD): one Householder layer whose factors have eigenvalues in [-1,1] tracks a group
  H when some faithful orthogonal representation rho of H has rank(I - rho(x)) <= n_h for every
  input letter x (:mod:`statetrack.theory.representations` finds the best one it can enumerate).
* P4: a layer that tracks a parity, then a Householder layer with factors in [-1,1], track any group
  with a faithful 2-D orthogonal representation (cyclic and dihedral groups), one reflection per token.
* T5: layer i tracks the factor G_(i-1)/G_i of a subnormal series, abelian for a complex layer,
  elementary abelian 2 for a real (+-1) layer; the greedy series (derived subgroups, subgroups of
  squares) is the fastest, so it decides. P3 is its two-layer case for S3.
* SF / KR: the holonomy cascade of the task's monoid (height h) in k = SF-depth(h) input-dependent
  diagonal layers whose eigenvalues include [0,1] (resets, delays): star-free tasks (aperiodic
  monoid) in non-negative layers (SF, Sarrof2024), tasks whose maximal subgroups are elementary
  abelian 2-groups in real layers or abelian in complex-disc layers (KR). Below k layers: open.

Impossibility needs a theorem that covers EVERY layer:

* T1c: PD's stacks with one RWKV-7 layer (diagonal plus rank-one, similar to symmetric, eigenvalues in
  (-1/2, 1]) on a constant input: its cast state ends constant or alternating with period 2, so the
  output on u x^n has period dividing 2 (times PD's doublings) and a letter of period 3 or more defeats it.
  Parity (period 2) stays open, and so does every task where a layer before an RWKV-7 layer may
  alternate (its products can have complex eigenvalues).
* T1: every layer has eigenvalues in [0,1] and the monoid is not aperiodic (parity at any depth and
  any structure; other tasks with diagonal layers through a periodic witness u w^n, or any structure
  with a single repeated letter).
* T2 / T4: every layer is diagonal and either time-invariant (any eigenvalues) or non-negative
  input-dependent: fails whenever words of every length multiple of W move the label.
* T3: the (0^k 1^m)^T witnesses for non-negative diagonal stacks.
* PD: every layer is real diagonal (or, on a constant input, a single real Householder factor): the
  output on u w^n is eventually periodic in n with period dividing 2^(number of layers with -1), so
  an element whose powers have another period cannot be tracked.
* T5: every layer is diagonal (each class above is a special case of complex diagonal): k layers
  cannot track a group of derived length > k (or a non-solvable one); with real eigenvalues only,
  not one whose shortest elementary-abelian-2 series is longer than k (or absent).

Everything else is ``open``, with the reason naming what is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from statetrack.layers.properties import DECLARED, EigenvalueDomain, Structure
from statetrack.spec import parse_layers
from statetrack.theory.algebra import TaskAlgebra, task_algebra
from statetrack.theory.layer_classes import (
    COMPLEX,
    CONTRACTING,
    DIAGONAL,
    LINEAR,
    NONNEG,
    REAL_NEG,
    SELECTIVE_DIAGONAL,
    LayerClass,
    LayerInfo,
    layer_infos,
)
from statetrack.theory.precision import KEEPS, ONE_HOT, SIGNS, Hold, reflection_hold, rotation_hold
from statetrack.theory.representations import Representation, best_representation

#: what an input-dependent diagonal layer can hold beside resets (A = 0), delays (A in (0,1)) and
#: keeps (A = 1): the group factors of the holonomy cascade it can carry (SF / KR)
CASCADE_GROUPS = {
    EigenvalueDomain.NONNEG: "trivial",
    EigenvalueDomain.REAL_HALF_NEG: "trivial",
    EigenvalueDomain.DAMPED_ROTATIONS: "trivial",
    EigenvalueDomain.REAL: "elementary abelian 2",
    EigenvalueDomain.COMPLEX_DISC: "abelian",
}
_CASCADE_RANK = {"trivial": 0, "elementary abelian 2": 1, "abelian": 2}

#: the statements the oracle's bases refer to: their names in docs/science.md
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

# -- what each rule assumes of the layers it reads ---------------------------------------------------------
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


#: (decision, basis) -> its hypothesis
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
        layer=lambda i, _f: (_selective(i) and i.domain in _COMPLEX_SELECTIVE | {_D.REAL}) or _reflecting(i),
        unit=lambda _f: True,
    ),
    ("possible", "T5"): Hypothesis(
        "input-dependent diagonal layers with eigenvalue -1 or unit-modulus rotations, or a "
        "reflecting Householder layer for parity on a fixed input",
        layer=lambda i, _f: (_selective(i) and i.domain in _COMPLEX_SELECTIVE | {_D.REAL}) or _reflecting(i),
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
            and _CASCADE_RANK.get(CASCADE_GROUPS.get(i.domain, ""), -1) >= _CASCADE_RANK[f["cascade_groups"]]
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


def _exact_first(layers: list[LayerInfo]) -> list[LayerInfo]:
    """The layers, those that reach modulus 1 in exact arithmetic first (a construction picks the first that
    fits, so a stack with such a layer gets a verdict without the rounding condition)."""
    return sorted(layers, key=lambda i: bool(i.props.rounding))


def _constructed(
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


def _sign_hold(i: LayerInfo) -> Hold:
    """How float32 holds the sign flip -1 of a layer: exactly in a real or Householder layer, as the rotation by
    pi (a float32 angle) in a complex one."""
    return rotation_hold([2]) if i.cls in (LayerClass.COMPLEX, LayerClass.DAMPED) else SIGNS


def _group_orders(alg: TaskAlgebra) -> list[int]:
    """The orders of the rotations a complex channel may need for the task's groups: their element orders."""
    return sorted(alg.monoid.periods - {1}) if alg.monoid is not None else []


# -- rules ----------------------------------------------------------------------------------------
def _n(k: int, what: str) -> str:
    return f"{k} {what}" + ("" if k == 1 else "s")


def sf_depth(height: int) -> int:
    """Layers the holonomy cascade of height h needs (docs/science.md, SF-depth): 1 for h <= 1 (the
    one level reads the input letter itself), h + 1 otherwise (level i reads the states of the levels
    above it one step back: a first layer delays the input, then one layer per level)."""
    return 1 if height <= 1 else height + 1


def _hname(alg: TaskAlgebra) -> str:
    if alg.all_inputs and alg.group is not None:
        return alg.group.name
    return f"the group generated by the inputs (order {alg.h_order})"


def _possible(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    if any(i.cls == LayerClass.NONLINEAR for i in infos):
        nl = next(i for i in infos if i.cls == LayerClass.NONLINEAR)
        return _constructed(
            "NL",
            f"{nl.spec} is a non-linear recurrence, which the theorems do not cover; with enough "
            f"units it simulates the finite automaton of {alg.task} directly",
            [nl],
        )
    v = _pd_possible(infos, alg)
    if v is not None:
        return v
    if alg.kind == "offset":
        complex_any = _exact_first(
            [
                i
                for i in infos
                if i.cls == LayerClass.COMPLEX or (i.cls == LayerClass.LTI and i.domain in COMPLEX)
            ]
        )
        if complex_any:
            return _constructed(
                "P2",
                f"{complex_any[0].spec} can hold a constant complex eigenvalue exp(2 pi i/10) on "
                f"the unit circle, which counts the burst: h0 = 1, A = exp(2 pi i/n), B = 1 - A (P2, "
                f"Khavari2025 App. C)",
                [complex_any[0]],
                hold=rotation_hold([10], every_k=False),
            )
        return None
    if alg.monoid is None:
        return None
    if alg.fixed_input:
        v = _fixed_input_possible(infos, alg)
        if v is not None:
            return v
    if alg.is_group:
        v = _group_possible(infos, alg)
        if v is not None:
            return v
    return _cascade(infos, alg)[0]


def _pd_possible(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """P5: one PD-SSM layer runs the task's minimal automaton on one-hot states (any finite automaton in the
    column form; a permutation automaton, i.e. a group word problem, in the row form)."""
    n = alg.n_states
    pd = next((i for i in infos if i.cls == LayerClass.PD), None)
    if pd is not None and n is not None:
        return _constructed(
            "P5",
            f"{pd.spec}'s transition is a column one-hot matrix times a diagonal: with the "
            f"diagonal at 1 the one-hot matrix of each input is its transition map in the task's "
            f"minimal automaton ({n} states), which moves a one-hot state e_q to e_delta(q, x); "
            f"one layer with a state of size >= {n} runs the automaton from e_0 and a linear read-out "
            f"gives the label (P5, Terzic2025; construction dfa-pdssm)",
            [pd],
            {"state_size_needed": n},
            ONE_HOT,
        )
    rows = next((i for i in infos if i.cls == LayerClass.PD_ROWS), None)
    if rows is not None and n is not None and alg.is_group:
        return _constructed(
            "P5",
            f"{rows.spec}'s transition is a diagonal times a row one-hot matrix, which reads "
            f"a map through its preimages; the inputs of {alg.task} permute the {alg.h_order} elements "
            f"of {_hname(alg)}, so the row one-hot matrix of x^-1's map moves e_y to e_(y x) and one "
            f"layer with a state of size >= {alg.h_order} tracks the group (P5 for a permutation "
            f"automaton, Terzic2025)",
            [rows],
            {"state_size_needed": alg.h_order, "permutation": True},
            ONE_HOT,
        )
    return None


def _fixed_input_possible(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    # parity on a fixed witness input: whatever solves parity solves it
    if alg.parity_on_fixed_input:
        sign = _exact_first(
            [
                i
                for i in infos
                if i.cls in (LayerClass.REAL, LayerClass.COMPLEX)
                or (i.cls == LayerClass.HOUSEHOLDER and i.factor_domain == EigenvalueDomain.REAL)
            ]
        )
        if sign:
            return _constructed(
                "T5" if sign[0].cls != LayerClass.HOUSEHOLDER else "T6",
                f"{sign[0].spec} tracks parity on every input (an input-dependent eigenvalue -1 for "
                f"bit 1, +1 for bit 0), so on this fixed input too",
                [sign[0]],
                hold=_sign_hold(sign[0]),
            )
    p, pre = alg.period, alg.preperiod
    if p is None:  # no periodic labels known
        return None
    for i in _exact_first(infos):
        if i.cls not in DIAGONAL:
            continue
        dom = i.domain
        root = p == 1 or dom in COMPLEX or (p == 2 and dom in REAL_NEG)
        decay = pre == 0 or dom != "unit circle"
        if not (root and decay) or (pre == 0 and dom not in COMPLEX):
            continue  # without a pre-period, real layers are decided by the group rules (T5)
        count = (
            f"a constant eigenvalue exp(2 pi i/{p}) counts the period (time invariance suffices)"
            if p > 2
            else "a constant eigenvalue -1 counts the period"
            if p == 2
            else "the labels are constant afterwards"
        )
        pre_s = (
            f"; a channel with a constant eigenvalue of modulus below 1 fed a constant input moves "
            f"monotonically to its fixed point and tells the first {pre} tokens apart from the rest"
            if pre
            else ""
        )
        return _constructed(
            "P1",
            f"the input is fixed and the labels are periodic with period {p} after {pre} tokens: "
            f"in {i.spec} {count}{pre_s} (P1, Khavari2025 Prop. 4.2)",
            [i],
            {"label_period": p, "preperiod": pre},
            None if p == 1 else SIGNS if dom in REAL_NEG else rotation_hold([p], every_k=False),
        )
    return None


def _group_possible(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """A construction that tracks the task's group with these layers: Householder layers (T6, P4), else
    diagonal ones (T5, P3); None when none applies."""
    st = alg.h_structure()
    hname = _hname(alg)
    found = _householder_possible(infos, alg, hname)
    return found if found is not None else _diagonal_possible(infos, alg, st, hname)


def _householder_possible(infos: list[LayerInfo], alg: TaskAlgebra, hname: str) -> Verdict | None:
    """T6 (one layer of enough reflections per token) or P4 (a parity layer, then one reflection per token
    twisted by that parity)."""
    hh = [
        i
        for i in infos
        if i.cls == LayerClass.HOUSEHOLDER and i.factor_domain == EigenvalueDomain.REAL and i.props.n_h
    ]
    rep = best_representation(alg.group, alg.subgroup, alg.support) if hh else None
    if rep is not None:  # None: the trivial group
        facts = {"representation": rep.name, "dim": rep.dim, "n_h_needed": rep.n_h}
        for i in _exact_first(hh):
            split = best_representation(alg.group, alg.subgroup, alg.support, i.heads) if i.heads > 1 else rep
            assert split is not None
            if (i.props.n_h or 0) >= split.n_h:
                return _constructed(
                    "T6",
                    _t6_reason(hname, split, i),
                    [i],
                    _t6_facts(split),
                    reflection_hold(split, alg.support),
                )
        # P4: a parity layer, then one reflection per token twisted by that parity (2-D representations)
        for j, i in enumerate(infos):
            sign = _exact_first(
                [
                    p
                    for p in infos[:j]
                    if p.cls in (LayerClass.REAL, LayerClass.COMPLEX)
                    or (p.cls == LayerClass.HOUSEHOLDER and p.factor_domain == EigenvalueDomain.REAL)
                ]
            )
            if i in hh and sign and rep.dim <= 2:
                return _constructed(
                    "P4",
                    f"{hname} has a faithful 2-D orthogonal representation, {rep.name}; "
                    f"{sign[0].spec} tracks the parity s of the rotation letters read so far, and "
                    f"{i.spec} applies one reflection per token, F0^s rho(x) F0^s' with F0 a fixed "
                    f"reflection, so its state is F0^s rho(y) w0 (P4: two Householder layers track the "
                    f"cyclic and dihedral groups, Siems2025)",
                    [sign[0], i],
                    facts,
                    _sign_hold(sign[0]) & reflection_hold(rep, alg.support),
                )
    return None


def _t6_facts(rep: Representation) -> dict:
    """What T6 used: the representation, its dimension, the reflections per letter (in the busiest head) and,
    split over heads, the dimension each head holds."""
    facts = {"representation": rep.name, "dim": rep.dim, "n_h_needed": rep.n_h}
    return {**facts, "head_dims": list(rep.head_dims)} if rep.head_dims else facts


def _t6_reason(hname: str, rep: Representation, i: LayerInfo) -> str:
    """T6's reason: rho(x) as reflections (lemma CD), in one head or its blocks split over the layer's heads."""
    if not rep.head_dims:
        return (
            f"{hname} has a faithful orthogonal representation, {rep.name}, in "
            f"which every input letter x has rank(I - rho(x)) <= {rep.n_h}, i.e. rho(x) is a "
            f"product of {_n(rep.n_h, 'reflection')} (lemma CD); {i.spec} with n_h = "
            f"{i.props.n_h} and factor eigenvalues in [-1,1] applies rho(x) per token and tracks "
            f"it in one layer with a state of size >= {rep.dim} (T6; construction "
            f"orth-deltaproduct)"
        )
    return (
        f"{hname} has a faithful orthogonal representation, {rep.name}: block diagonal, with "
        f"rank(I - rho_j(x)) <= {rep.n_h} for every input letter x in every head's block rho_j, i.e. each "
        f"block of rho(x) is a product of {_n(rep.n_h, 'reflection')} (lemma CD); {i.spec} runs "
        f"{i.heads} heads as independent recurrences in parallel, each with {_n(i.props.n_h or 1, 'factor')} "
        f"with eigenvalues in [-1,1] per token, so head j applies rho_j(x) on a state of size >= its block's "
        f"dimension and the heads together track the direct sum, which is faithful (T6 per head)"
    )


def _diagonal_possible(infos: list[LayerInfo], alg: TaskAlgebra, st: dict, hname: str) -> Verdict | None:
    """T5 (one diagonal layer per factor of a subnormal series; P3: S3 in two complex layers)."""
    cands = [i for i in infos if i.cls in (LayerClass.COMPLEX, LayerClass.REAL)]
    chosen: list[LayerInfo] = []
    for layers in ([i for i in cands if not i.props.rounding], cands):  # layers exact at modulus 1 first
        ops = ["d" if i.cls == LayerClass.COMPLEX else "s" for i in layers]
        if ops and alg.descend(ops):
            chosen = layers[: next(k for k in range(1, len(ops) + 1) if alg.descend(ops[:k]))]
            break
    if chosen:
        kinds = {i.cls for i in chosen}
        used = len(chosen)
        dl = st["derived_length"]
        facts = {"derived_length": dl, "elementary_2_series_length": st["elementary_2_series_length"]}
        basis = "T5"
        if kinds == {LayerClass.REAL}:
            why = (
                f"{hname} has a subnormal series with elementary abelian 2 factors of length "
                f"{st['elementary_2_series_length']}; {_n(used, 'real [-1,1] input-dependent diagonal layer')} "
                f"suffice, one sign-flip layer per factor (T5 construction, DiagLimits2026)"
            )
        elif kinds == {LayerClass.COMPLEX}:
            p3 = st["order"] == 6 and dl == 2  # S3 in two complex layers: construction P3
            basis = "P3" if p3 else basis
            why = (
                f"{hname} has derived length {dl}; {_n(used, 'input-dependent complex diagonal layer')} "
                f"suffice, one per abelian factor (T5" + (", construction P3)" if p3 else ")")
            )
        else:
            why = (
                f"{hname} has a subnormal series whose factors match the layers (abelian for each complex "
                f"layer, elementary abelian 2 for each real one), so the T5 construction applies layer by layer"
            )
        rotates = any(i.cls == LayerClass.COMPLEX for i in chosen)
        return _constructed(
            basis, why, chosen, facts, rotation_hold(_group_orders(alg)) if rotates else SIGNS
        )
    return None


def _cascade(infos: list[LayerInfo], alg: TaskAlgebra) -> tuple[Verdict | None, str | None]:
    """SF / KR: (a possible verdict, or None with the reason why the depth is short or unknown)."""
    m = alg.monoid
    if m is None or m.size is None or m.holonomy_height is None or m.is_group:
        return None, None  # a group needs no resets: T5 and T6 decide
    need = (
        "trivial"
        if m.aperiodic
        else "elementary abelian 2"
        if m.groups_elementary_2
        else "abelian"
        if m.groups_abelian
        else None
    )
    if need is None:
        return None, None
    k = sf_depth(m.holonomy_height)
    ok = [
        i
        for i in infos
        if i.cls in SELECTIVE_DIAGONAL
        and i.domain in CASCADE_GROUPS
        and _CASCADE_RANK[CASCADE_GROUPS[i.domain]] >= _CASCADE_RANK[need]
    ]
    basis = "SF" if m.aperiodic else "KR"
    layer_kind = {
        "trivial": "input-dependent diagonal layers with eigenvalues including [0,1]",
        "elementary abelian 2": "real or complex-disc input-dependent diagonal layers",
        "abelian": "complex-disc input-dependent diagonal layers",
    }[need]
    what = (
        f"is star-free (its syntactic monoid, of size {m.size}, is aperiodic: Schutzenberger1965)"
        if m.aperiodic
        else f"has a monoid of size {m.size} whose maximal subgroups are all {need}"
    )
    facts = {"depth_needed": k, "cascade_groups": need, "eligible_layers": len(ok)}
    head = (
        f"{alg.task} {what}; its holonomy cascade has height {m.holonomy_height} (Eilenberg1976), which "
        f"{k} {layer_kind} realise (resets A = 0, delays A in (0,1), keeps A = 1"
        + ("" if need == "trivial" else f", and {need} group channels")
        + "; SF-depth)"
    )
    if len(ok) >= k:
        exact = [i for i in ok if not i.props.rounding]
        pick = exact[:k] if len(exact) >= k else ok[:k]
        who = pick[0].spec if k == 1 else "this stack"
        return _constructed(
            basis,
            f"{head}; {who} has {len(ok)} such layers ({basis}" + (", Sarrof2024)" if m.aperiodic else ")"),
            pick,
            facts,
            _cascade_hold(pick, need, alg),
        ), None
    return None, (
        f"{head}, so it is possible with >= {k} such layers ({basis}); this stack has {len(ok)}, and "
        f"no result here decides fewer"
    )


def _cascade_hold(pick: list[LayerInfo], need: str, alg: TaskAlgebra) -> Hold:
    """How float32 holds a cascade: keeps (1) and signs (-1) exactly; a complex layer's group channels as
    rotations (by pi for elementary abelian 2 factors)."""
    if need == "trivial":
        return KEEPS
    if not any(i.cls == LayerClass.COMPLEX for i in pick):
        return SIGNS
    return rotation_hold([2] if need == "elementary abelian 2" else _group_orders(alg))


def _impossible(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    if alg.kind in ("offset", "unknown") or alg.monoid is None:
        return None
    linear = all(i.cls in LINEAR for i in infos)
    if not linear:
        return None
    diagonal = all(i.cls in DIAGONAL for i in infos)
    all_nonneg = all(_converging(i) for i in infos)
    # T1 / T3: non-negative eigenvalues everywhere (or products of positive semi-definite contractions)
    if all_nonneg and alg.aperiodic is False:
        v = _nonneg_impossible(alg, diagonal, [i for i in infos if i.domain not in NONNEG])
        if v is not None:
            return v
    # T2 / T4: time-invariant diagonal and non-negative input-dependent diagonal layers
    if all(i.cls == LayerClass.LTI or i.cls == LayerClass.NONNEG for i in infos) and alg.aligned_witness:
        return _aligned_impossible(infos, alg)
    v = _period_doubling(infos, alg)
    if v is not None:
        return v
    # T5 upper bounds: every layer diagonal, inputs the whole group
    if diagonal and alg.is_group and alg.all_inputs:
        return _diagonal_impossible(infos, alg)
    return None


def _converging(i: LayerInfo) -> bool:
    """T1's layers: eigenvalues in [0,1], or a product of Householder factors with eigenvalues in [0,1] (and
    gates in (0,1]), whatever the product's declared domain: a product of positive semi-definite contractions,
    whose only eigenvalue of modulus 1 is 1 (lemma PSC), so the powers of a fixed transition converge."""
    if i.cls == LayerClass.HOUSEHOLDER:
        return i.factor_domain == EigenvalueDomain.NONNEG
    return i.domain in NONNEG


def _psc_clause(products: list[LayerInfo]) -> str:
    """T1's hypothesis as met: lemma PSC for the Householder layers whose product is not declared [0,1]."""
    if not products:
        return "every layer has eigenvalues in [0,1]"
    names = ", ".join(i.spec for i in products)
    return (
        f"every layer has eigenvalues in [0,1] or is a product of positive semi-definite contractions ({names}: "
        f"each factor I - beta k k^T with beta in [0,1] is symmetric positive semi-definite with "
        f"eigenvalues in [0,1], and so is a gate in (0,1]; the product of such contractions has its eigenvalues "
        f"in the closed unit disc, and 1 is the only one of modulus 1, since a unit-modulus eigenvector must "
        f"keep its norm through every factor and so be fixed by each (lemma PSC): no -1 and no rotation, and "
        f"the powers of a fixed transition converge)"
    )


def _nonneg_impossible(alg: TaskAlgebra, diagonal: bool, products: list[LayerInfo]) -> Verdict | None:
    """T1 / T3 / T4 where every layer has eigenvalues in [0,1] (or is a product of positive semi-definite
    contractions: ``products``, lemma PSC) and the task is not aperiodic: the state converges on a witness
    whose label keeps changing."""
    if alg.fixed_input:
        letter_witness = len(alg.fixed_word or ()) == 1 and (alg.block_period or 0) > 1
    else:
        letter_witness = any(p > 1 for p in alg.letter_periods())
    if diagonal or alg.is_parity or letter_witness:
        word = alg.fixed_word if alg.parity_on_fixed_input else None
        if word and word[0] == 0 and list(word) == sorted(word) and sum(word) % 2 == 1 and diagonal:
            return Verdict(
                Decision.IMPOSSIBLE,
                "T3",
                "every layer has eigenvalues in [0,1] and the input is (0^k 1^m)^T "
                "with m odd: products of non-negative diagonal transitions stay non-negative, so the "
                "state converges per period while the parity keeps flipping (T3, Khavari2025 Lemma 4.3)",
            )
        if word and len(word) > 1 and word[0] == 1 and sum(word) == 1 and diagonal:
            return Verdict(
                Decision.IMPOSSIBLE,
                "T4",
                "every layer has eigenvalues in [0,1]: on the periodic input "
                "(1 0^(W-1))^T each layer's state converges per phase (Khavari2025 App. B, case 2) "
                "while the parity alternates",
            )
        what = (
            "parity"
            if alg.is_parity
            else "an input u x^n with one letter x repeated, whose label is periodic in n"
            if letter_witness
            else "a periodic input u w^n whose label is periodic (Khavari2025 App. B, case 2)"
        )
        return Verdict(
            Decision.IMPOSSIBLE,
            "T1",
            f"{_psc_clause(products)}, so on {what} the state "
            f"converges in finite precision while the label keeps changing (T1"
            f"{'' if alg.is_parity else ' witness generalized from 1^T'})",
        )
    return None


def _aligned_impossible(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict:
    """T2 / T4 where every layer is time-invariant diagonal or non-negative input-dependent diagonal and the
    task has an aligned witness: the state is periodic while the label is not."""
    basis = "T2" if all(i.cls == LayerClass.LTI for i in infos) and alg.is_parity else "T4"
    if alg.is_parity:
        why = (
            "the layers are time-invariant diagonal"
            if basis == "T2"
            else "every layer is time-invariant diagonal or non-negative input-dependent diagonal"
        )
        return Verdict(
            Decision.IMPOSSIBLE,
            basis,
            f"{why}: choosing W with W q_j integer for every time-invariant "
            f"eigenvalue phase, the input (1 0^(W-1))^T makes every layer's state periodic with "
            f"period W, so the output cannot follow T mod 2 (T4, Khavari2025 Thm 4.4"
            f"{'; Sarrof2024 Thm 13' if basis == 'T2' else ''})",
        )
    return Verdict(
        Decision.IMPOSSIBLE,
        basis,
        f"every layer is time-invariant diagonal or non-negative input-dependent "
        f"diagonal, and words of every length divisible by W move the label of {alg.task}, so the "
        f"witness u w^n of T4 (|w| a multiple of the phase alignment W; Khavari2025 Thm 4.4) makes "
        f"the state periodic while the label is not",
    )


def _diagonal_impossible(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """T5's upper bounds where every layer is diagonal and the inputs are the whole group: a group that is
    not solvable, of derived length above the depth, or (real layers) without a short enough series of
    elementary abelian 2 factors."""
    st = alg.h_structure()
    k = len(infos)
    g = _hname(alg)  # all inputs: the group's name
    if not st["is_solvable"]:
        return Verdict(
            Decision.IMPOSSIBLE,
            "T5",
            f"{g} is not solvable, so it has no subnormal series with abelian "
            f"factors and no number of diagonal layers tracks it (T5, DiagLimits2026; every diagonal "
            f"layer is a special case of an input-dependent complex diagonal one)",
        )
    if st["derived_length"] > k:
        return Verdict(
            Decision.IMPOSSIBLE,
            "T5",
            f"{g} has derived length {st['derived_length']} > {k}: "
            f"{_n(k, 'diagonal layer')} track only groups with an abelian subnormal series of length "
            f"<= {k} (T5, DiagLimits2026; every diagonal layer is a special case of an input-dependent "
            f"complex diagonal one)",
            {"derived_length": st["derived_length"]},
        )
    if all(i.domain in NONNEG | REAL_NEG for i in infos):
        e2 = st["elementary_2_series_length"]
        if e2 is None or e2 > k:
            why = (
                f"its order {st['order']} is not a power of 2, so it has no subnormal series with "
                f"elementary abelian 2 factors"
                if e2 is None
                else f"its shortest subnormal series with elementary abelian 2 factors has length {e2} > {k}"
            )
            return Verdict(
                Decision.IMPOSSIBLE,
                "T5",
                f"every layer has real eigenvalues (sign flips only) and {g}: "
                f"{why} (T5, DiagLimits2026: real diagonal layers track exactly such series)",
                {"elementary_2_series_length": e2},
            )
    return None


def _period_bound(infos: list[LayerInfo], single_letter: bool) -> int | None:
    """The period (in repetitions of w) that the output on u w^n can have, eventually, under PD:
    non-negative diagonal layers keep it, real diagonal layers at most double it, a single real
    Householder factor at most doubles a constant input; None when a layer is not covered."""
    period = 1
    for i in infos:
        if i.cls in (LayerClass.LTI, LayerClass.NONNEG, LayerClass.REAL) and i.domain in NONNEG:
            continue
        if i.cls in (LayerClass.LTI, LayerClass.REAL) and i.domain in REAL_NEG:
            period *= 2
        elif (
            i.cls == LayerClass.HOUSEHOLDER
            and i.props.n_h == 1
            and single_letter
            and period == 1
            and i.factor_domain in (EigenvalueDomain.NONNEG, EigenvalueDomain.REAL)
        ):
            period = 2 if i.factor_domain == EigenvalueDomain.REAL else 1
        elif i.cls == LayerClass.DPLR and i.domain in CONTRACTING and single_letter and period == 1:
            period = 2  # T1c: on a constant input the cast state ends constant or alternating with period 2
        else:
            return None
    return period


def _period_doubling(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """PD: an element whose powers have a period that does not divide the stack's period bound."""
    if alg.fixed_input:
        cands = [
            (
                {alg.block_period} if alg.block_period else set(),
                len(alg.fixed_word or ()) == 1,
                "the fixed input word",
            )
        ]
    else:
        cands = [(set(alg.letter_periods()), True, "an input letter")]
        if alg.monoid is not None:
            cands.append((alg.monoid.periods, False, "an element (a word)"))
    for periods, single, what in cands:
        bound = _period_bound(infos, single)
        bad = sorted(p for p in periods if bound is not None and bound % p)
        if not bad:
            continue
        p = bad[-1]
        hh = any(i.cls == LayerClass.HOUSEHOLDER for i in infos)
        dplr = [i.spec for i in infos if i.cls == LayerClass.DPLR]
        if dplr:
            return Verdict(
                Decision.IMPOSSIBLE,
                "T1c",
                f"{', '.join(dplr)} has diagonal-plus-rank-one transitions similar to symmetric matrices "
                f"with real eigenvalues in (min w - 1, 1], within (-1/2, 1]; it is the only such layer and "
                f"reads a constant input (the layers before it, if any, are non-negative and converge), so "
                f"on u x^n the powers of its transition converge and its cast state ends constant or "
                f"alternating with period 2 (Grazzi2024 v5, Lemma 1): the output has period dividing "
                f"{bound}, but {what} of {alg.task} has powers of period {p} (T1c)",
                {"period": p, "period_bound": bound},
            )
        layers = (
            "every layer is real diagonal or, on a constant input, a single real Householder factor I - beta k k^T "
            "(symmetric, eigenvalues 1 and 1 - beta), possibly times a gate in (0,1]: a scalar, or a diagonal "
            "Diag(alpha) (KDA's (I - beta k k^T) Diag(alpha), similar to the symmetric Diag(alpha)^(1/2) "
            "(I - beta k k^T) Diag(alpha)^(1/2)), whose eigenvalues are real, in [-1,1]"
            if hh
            else "every layer is diagonal with real eigenvalues"
        )
        return Verdict(
            Decision.IMPOSSIBLE,
            "PD",
            f"{layers}, so on u w^n the output is eventually periodic in n with "
            f"period dividing {bound}; but {what} of {alg.task} has powers of period {p}, and a "
            f"syntactic context u . v turns that period into the label's (PD)",
            {"period": p, "period_bound": bound},
        )
    return None


def _open(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict:
    if alg.kind == "unknown":
        return Verdict(Decision.OPEN, "-", f"{alg.description}; no rule of this toolkit applies")
    if any(i.cls == LayerClass.ATTENTION for i in infos):
        return Verdict(Decision.OPEN, "-", f"{alg.task} with {', '.join(i.spec for i in infos)}: {TC0}")
    if alg.kind == "offset":
        return Verdict(
            Decision.OPEN,
            "-",
            "the offset labels depend only on the last 11 inputs (a definite, star-free "
            "language), but no construction in the sources covers these layers (Khavari2025 reports "
            "that Mamba learns it without an explanation)",
        )
    if alg.monoid is not None:
        _, short = _cascade(infos, alg)
        if short is not None and any(i.cls in SELECTIVE_DIAGONAL for i in infos):
            return Verdict(Decision.OPEN, "-", short)
    for rule in (_damped_open, _dplr_open):
        v = rule(infos, alg)
        if v is not None:
            return v
    if any(i.cls == LayerClass.HOUSEHOLDER and i.factor_domain == EigenvalueDomain.REAL for i in infos):
        return Verdict(
            Decision.OPEN,
            "-",
            f"Householder layers with eigenvalues in [-1,1] recognise every regular language "
            f"with enough layers (T6, Grazzi2024), but no bound in the sources shows that this depth "
            f"suffices for {alg.task}; one-factor periodicity (PD) covers only a first layer on a "
            f"constant input",
        )
    v = _pd_rows_open(infos, alg)
    if v is not None:
        return v
    if any(i.cls == LayerClass.HOUSEHOLDER and i.factor_domain is None for i in infos):
        return Verdict(
            Decision.OPEN,
            "-",
            "a Householder layer's factor eigenvalue range is not declared; no rule applies",
        )
    if alg.is_group and not alg.all_inputs and alg.kind == "group":
        return Verdict(
            Decision.OPEN,
            "-",
            f"the inputs of {alg.task} are a proper subset of the group; T5's bounds are "
            f"stated for inputs from the whole group and no construction here covers these layers",
        )
    return Verdict(
        Decision.OPEN,
        "-",
        f"no theorem or construction in this toolkit's sources decides {alg.task} for "
        f"{', '.join(i.spec for i in infos)}",
    )


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


def quotient_ceiling(infos: list[LayerInfo], alg: TaskAlgebra) -> dict:
    """For a group task a stack cannot track: the largest quotient H / N it can still track and the
    accuracy that buys on uniformly distributed labels, 1 / |N| (the long-range and balanced draws'
    labels are uniform). The series is T5's greedy one: a complex layer takes the derived subgroup, a real
    one (or a Householder layer whose factors reach -1, at least a sign flip) the subgroup of squares;
    non-negative and time-invariant layers track no non-trivial group (T1, T4). For S3 with one complex or
    real layer: H / A3 = C2 (the sign), ceiling 1/3; for A5 (perfect) and parity: 1/|H|, chance."""
    if alg.group is None or alg.subgroup is None:
        return {}
    ops = [
        "d" if i.cls in (LayerClass.COMPLEX, LayerClass.DAMPED) else "s"
        for i in infos
        if i.cls in (LayerClass.COMPLEX, LayerClass.DAMPED, LayerClass.REAL, LayerClass.DPLR)
        or (i.cls == LayerClass.HOUSEHOLDER and i.factor_domain == EigenvalueDomain.REAL)
    ]
    n = alg.residual(ops)
    return {"quotient_tracked": alg.h_order // n, "accuracy_ceiling": 1.0 / n}


def oracle(layers: str, task: str) -> Verdict:
    """Verdict for a layer spec on a task string (see the module docstring). An impossible verdict on a
    group task carries ``quotient_tracked`` and ``accuracy_ceiling`` (:func:`quotient_ceiling`)."""
    infos = layer_infos(layers)
    alg = task_algebra(task)
    if alg.monoid is not None and alg.monoid.size == 1:
        v = Verdict(
            Decision.POSSIBLE,
            "-",
            f"the labels of {task} never change; a constant output solves it",
            {"layers": []},
        )
    else:
        v = _possible(infos, alg) or _impossible(infos, alg) or _open(infos, alg)
    extra = quotient_ceiling(infos, alg) if v.verdict == Decision.IMPOSSIBLE else {}
    return Verdict(v.verdict, v.basis, v.reason, {**alg.facts(), **v.facts, **extra}, v.condition)


# -- the table ---------------------------------------------------------------------------------------
DEFAULT_TABLE_LAYERS = (
    "rnn",
    "gru",
    "transformer",
    "s4d",
    "s4d*2",
    "mamba",
    "mamba*2",
    "mamba,s4d",
    "negmamba",
    "negmamba*2",
    "negmamba,aussm",
    "aussm",
    "aussm*2",
    "aussm*3",
    "saussm",
    "dcd*2",
    "deltanet",
    "deltanet(neg=true)",
    "deltaproduct(nh=2,neg=true)",
    "deltaproduct(nh=3,neg=true)",
    "mamba2",
    "mamba2(neg=true)",
    "mamba3",
    "mamba3*2",
    "gateddeltanet",
    "gateddeltanet(neg=true)",
    "gateddeltanet(neg=true)*2",
    "rwkv7",
    "rwkv7*2",
    "mlstm",
    "slstm",
    "lru",
    "gla",
    "gateddeltaproduct(neg=true)",
    "kda(neg=true)",
    "pdssm",
)
DEFAULT_TABLE_TASKS = (
    "parity",
    "modcount:3",
    "offset",
    "group:C6",
    "group:V4",
    "group:C2xC4",
    "group:Q8",
    "group:S3",
    "group:A4",
    "group:S4",
    "group:A5",
    "tomita:3",
    "tomita:5",
    "tomita:6",
)


def oracle_table(layers: list[str] | None = None, tasks: list[str] | None = None) -> list[dict]:
    """One row per (layers, task). Default layers: those of the default list whose mixers exist."""
    if layers is None:
        layers = [s for s in DEFAULT_TABLE_LAYERS if all(l.name in DECLARED for l in parse_layers(s))]
    tasks = list(tasks or DEFAULT_TABLE_TASKS)
    rows = []
    for spec in layers:
        for t in tasks:
            v = oracle(spec, t)
            rows.append({"layers": spec, "task": t, **v.as_dict()})
    return rows
