"""The theory oracle: can this stack of mixers solve this task at every length, in finite precision?

``oracle(layers, task) -> Verdict(verdict, basis, reason, facts)`` with verdict ``possible``,
``impossible`` or ``open``, the basis (a short name of docs/science.md: a theorem, a construction or
NL for non-linear recurrences), a one-sentence reason and the facts it used (monoid size, aperiodic,
maximal subgroups, holonomy height, the depth or representation a construction needs). The rules
read only the mixers' declared :class:`Properties` (input dependence, eigenvalue domain, structure,
n_h, linear) and the task's algebra (:mod:`statetrack.theory.algebra`), never a task's name, so a new
mixer needs no new rule and a language gets one verdict however it is given.

Layers are read as classes by :mod:`statetrack.theory.layer_classes` (nonlinear, attention, lti,
nonneg, real, complex, householder, dplr).

Possibility comes from constructions, and a stack can do whatever any of its layers (in order) can
do: the other layers are switched off by zeroing their output projection, and the residual
connection carries the input past them.

* NL: a non-linear recurrent layer simulates any DFA (finite-state task) with enough units.
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

* T1c: every layer's transitions have real eigenvalues in [0,1] or (-1/2, 1] (RWKV-7's diagonal plus
  rank-one transitions, similar to symmetric matrices) and the task has a letter of period > 1 (parity
  included): the powers of that letter's transition converge, as in T1's witness 1^T.
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

from dataclasses import asdict, dataclass, field
from enum import StrEnum

from statetrack.errors import UserError
from statetrack.layers.properties import DECLARED, EigenvalueDomain
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
from statetrack.theory.representations import best_representation

#: what an input-dependent diagonal layer can hold beside resets (A = 0), delays (A in (0,1)) and
#: keeps (A = 1): the group factors of the holonomy cascade it can carry (SF / KR)
CASCADE_GROUPS = {EigenvalueDomain.NONNEG: "trivial", EigenvalueDomain.REAL_HALF_NEG: "trivial",
                  EigenvalueDomain.DAMPED_ROTATIONS: "trivial",
                  EigenvalueDomain.REAL_HALF_OPEN: "elementary abelian 2",
                  EigenvalueDomain.REAL: "elementary abelian 2", EigenvalueDomain.COMPLEX_DISC: "abelian"}
_CASCADE_RANK = {"trivial": 0, "elementary abelian 2": 1, "abelian": 2}

#: the statements the oracle's bases refer to: their names in docs/science.md
BASES = {
    "T1": "non-negative eigenvalues in every layer: parity fails at any depth (Grazzi2024 Thm 1; Sarrof2024 Thm 2; "
          "Khavari2025 Thm 4.1)",
    "T1c": "transitions whose eigenvalues are real and in (-1/2, 1] (RWKV-7): the powers of a repeated letter's "
           "transition converge, so parity fails at any depth, as in T1 (this project; docs/science.md)",
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
    "NL": "a non-linear RNN (tanh, LSTM, GRU) simulates any finite automaton (Minsky1967; not subject to the theorems)",
}

TC0 = ("no theorem in this toolkit's sources decides it for attention; for non-solvable groups "
       "impossibility holds only under the conjecture TC0 != NC1 (Merrill2024)")


class Decision(StrEnum):
    """The oracle's answer: can the stack solve the task at every length?"""

    POSSIBLE = "possible"
    IMPOSSIBLE = "impossible"
    OPEN = "open"


@dataclass(frozen=True)
class Verdict:
    verdict: Decision
    basis: str  # a key of BASES
    reason: str
    facts: dict = field(default_factory=dict)  # what the rule used (JSON-friendly)

    def as_dict(self) -> dict:
        return asdict(self)


# -- rules ----------------------------------------------------------------------------------------
def _n(k: int, what: str) -> str:
    return f"{k} {what}" + ("" if k == 1 else "s")


def sf_depth(height: int) -> int:
    """Layers the holonomy cascade of height h needs (docs/science.md, SF-depth): 1 for h <= 1 (the
    one level reads the input letter itself), h + 1 otherwise (level i reads the states of the levels
    above it one step back: a first layer delays the input, then one layer per level)."""
    return 1 if height <= 1 else height + 1


def _hname(alg: TaskAlgebra) -> str:
    return alg.group.name if alg.all_inputs else f"the group generated by the inputs (order {alg.h_order})"


def _possible(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    if any(i.cls == LayerClass.NONLINEAR for i in infos):
        name = next(i.spec for i in infos if i.cls == LayerClass.NONLINEAR)
        return Verdict(Decision.POSSIBLE, "NL", f"{name} is a non-linear recurrence, which the theorems do not cover; "
                       f"with enough units it simulates the finite automaton of {alg.task} directly")
    if alg.kind == "offset":
        complex_any = [i for i in infos
                       if i.cls == LayerClass.COMPLEX or (i.cls == LayerClass.LTI and i.domain in COMPLEX)]
        if complex_any:
            return Verdict(Decision.POSSIBLE, "P2", f"{complex_any[0].spec} can hold a constant complex eigenvalue "
                           f"exp(2 pi i/10) on the unit circle (to float precision), which counts the burst: "
                           f"h0 = 1, A = exp(2 pi i/n), B = 1 - A (P2, Khavari2025 App. C)")
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


def _fixed_input_possible(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    # parity on a fixed witness input: whatever solves parity solves it
    if alg.parity_on_fixed_input:
        sign = [i for i in infos if i.cls in (LayerClass.REAL, LayerClass.COMPLEX) or
                (i.cls == LayerClass.HOUSEHOLDER and i.factor_domain == EigenvalueDomain.REAL)]
        if sign:
            return Verdict(Decision.POSSIBLE, "T5" if sign[0].cls != LayerClass.HOUSEHOLDER else "T6",
                           f"{sign[0].spec} tracks parity on every input (an input-dependent eigenvalue -1 "
                           f"for bit 1, +1 for bit 0), so on this fixed input too")
    p, pre = alg.period, alg.preperiod
    for i in infos:
        if i.cls not in DIAGONAL:
            continue
        dom = i.domain
        root = p == 1 or dom in COMPLEX or (p == 2 and dom in REAL_NEG)
        decay = pre == 0 or dom != "unit circle"
        if not (root and decay) or (pre == 0 and dom not in COMPLEX):
            continue  # without a pre-period, real layers are decided by the group rules (T5)
        count = (f"a constant eigenvalue exp(2 pi i/{p}) counts the period (time invariance suffices)" if p > 2 else
                 "a constant eigenvalue -1 counts the period" if p == 2 else "the labels are constant afterwards")
        pre_s = (f"; a channel with a constant eigenvalue of modulus below 1 fed a constant input moves "
                 f"monotonically to its fixed point and tells the first {pre} tokens apart from the rest"
                 if pre else "")
        return Verdict(Decision.POSSIBLE, "P1", f"the input is fixed and the labels are periodic with period {p} after "
                       f"{pre} tokens: in {i.spec} {count}{pre_s} (P1, Khavari2025 Prop. 4.2)",
                       {"label_period": p, "preperiod": pre})
    return None


def _group_possible(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    st = alg.h_structure()
    hname = _hname(alg)
    hh = [i for i in infos
          if i.cls == LayerClass.HOUSEHOLDER and i.factor_domain == EigenvalueDomain.REAL and i.props.n_h]
    if hh:
        rep = best_representation(alg.group, alg.subgroup, alg.support)
        facts = {"representation": rep.name, "dim": rep.dim, "n_h_needed": rep.n_h}
        for i in hh:
            if i.props.n_h >= rep.n_h:
                return Verdict(Decision.POSSIBLE, "T6",
                               f"{hname} has a faithful orthogonal representation, {rep.name}, in "
                               f"which every input letter x has rank(I - rho(x)) <= {rep.n_h}, i.e. rho(x) is a "
                               f"product of {_n(rep.n_h, 'reflection')} (lemma CD); {i.spec} with n_h = "
                               f"{i.props.n_h} and factor eigenvalues in [-1,1] applies rho(x) per token and tracks "
                               f"it in one layer with a state of size >= {rep.dim} (T6; construction "
                               f"orth-deltaproduct)", facts)
        # P4: a parity layer, then one reflection per token twisted by that parity (2-D representations)
        for j, i in enumerate(infos):
            sign = [p for p in infos[:j] if p.cls in (LayerClass.REAL, LayerClass.COMPLEX) or
                    (p.cls == LayerClass.HOUSEHOLDER and p.factor_domain == EigenvalueDomain.REAL)]
            if i in hh and sign and rep.dim <= 2:
                return Verdict(Decision.POSSIBLE, "P4",
                               f"{hname} has a faithful 2-D orthogonal representation, {rep.name}; "
                               f"{sign[0].spec} tracks the parity s of the rotation letters read so far, and "
                               f"{i.spec} applies one reflection per token, F0^s rho(x) F0^s' with F0 a fixed "
                               f"reflection, so its state is F0^s rho(y) w0 (P4: two Householder layers track the "
                               f"cyclic and dihedral groups, Siems2025)", facts)
    ops = ["d" if i.cls == LayerClass.COMPLEX else "s" for i in infos if i.cls in (LayerClass.COMPLEX, LayerClass.REAL)]
    if ops and alg.descend(ops):
        kinds = {i.cls for i in infos if i.cls in (LayerClass.COMPLEX, LayerClass.REAL)}
        used = len(ops)
        dl = st["derived_length"]
        facts = {"derived_length": dl, "elementary_2_series_length": st["elementary_2_series_length"]}
        basis = "T5"
        if kinds == {LayerClass.REAL}:
            why = (f"{hname} has a subnormal series with elementary abelian 2 factors of length "
                   f"{st['elementary_2_series_length']}; {_n(used, 'real (-1,1] input-dependent diagonal layer')} "
                   f"suffice, one sign-flip layer per factor (T5 construction, DiagLimits2026)")
        elif kinds == {LayerClass.COMPLEX}:
            p3 = st["order"] == 6 and dl == 2  # S3 in two complex layers: construction P3
            basis = "P3" if p3 else basis
            why = (f"{hname} has derived length {dl}; {_n(used, 'input-dependent complex diagonal layer')} "
                   f"suffice, one per abelian factor (T5" + (", construction P3)" if p3 else ")"))
        else:
            why = (f"{hname} has a subnormal series whose factors match the layers (abelian for each complex "
                   f"layer, elementary abelian 2 for each real one), so the T5 construction applies layer by layer")
        return Verdict(Decision.POSSIBLE, basis, why, facts)
    return None


def _cascade(infos: list[LayerInfo], alg: TaskAlgebra) -> tuple[Verdict | None, str | None]:
    """SF / KR: (a possible verdict, or None with the reason why the depth is short or unknown)."""
    m = alg.monoid
    if m.size is None or m.holonomy_height is None or m.is_group:
        return None, None  # a group needs no resets: T5 and T6 decide
    need = ("trivial" if m.aperiodic else "elementary abelian 2" if m.groups_elementary_2 else
            "abelian" if m.groups_abelian else None)
    if need is None:
        return None, None
    k = sf_depth(m.holonomy_height)
    ok = [i for i in infos if i.cls in SELECTIVE_DIAGONAL and i.domain in CASCADE_GROUPS
          and _CASCADE_RANK[CASCADE_GROUPS[i.domain]] >= _CASCADE_RANK[need]]
    basis = "SF" if m.aperiodic else "KR"
    layer_kind = {"trivial": "input-dependent diagonal layers with eigenvalues including [0,1]",
                  "elementary abelian 2": "real or complex-disc input-dependent diagonal layers",
                  "abelian": "complex-disc input-dependent diagonal layers"}[need]
    what = (f"is star-free (its syntactic monoid, of size {m.size}, is aperiodic: Schutzenberger1965)"
            if m.aperiodic else f"has a monoid of size {m.size} whose maximal subgroups are all {need}")
    facts = {"depth_needed": k, "cascade_groups": need, "eligible_layers": len(ok)}
    head = (f"{alg.task} {what}; its holonomy cascade has height {m.holonomy_height} (Eilenberg1976), which "
            f"{k} {layer_kind} realise (resets A = 0, delays A in (0,1), keeps A = 1"
            + ("" if need == "trivial" else f", and {need} group channels") + "; SF-depth)")
    if len(ok) >= k:
        return Verdict(Decision.POSSIBLE, basis, f"{head}; {ok[0].spec if k == 1 else 'this stack'} has {len(ok)} such "
                       f"layers ({basis}" + (", Sarrof2024)" if m.aperiodic else ")"), facts), None
    return None, (f"{head}, so it is possible with >= {k} such layers ({basis}); this stack has {len(ok)}, and "
                  f"no result here decides fewer")


def _impossible(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    if alg.kind in ("offset", "unknown") or alg.monoid is None:
        return None
    linear = all(i.cls in LINEAR for i in infos)
    if not linear:
        return None
    diagonal = all(i.cls in DIAGONAL for i in infos)
    all_nonneg = all(i.domain in NONNEG for i in infos) and all(
        i.cls != LayerClass.HOUSEHOLDER or i.factor_domain == EigenvalueDomain.NONNEG for i in infos)
    contracting = [i for i in infos if i.domain in CONTRACTING]
    # T1c: real eigenvalues in (-1/2, 1] (and [0, 1]) everywhere: the powers of a repeated letter's
    # transition converge, so every witness of T1 built from one repeated letter applies
    if (contracting and all(i.domain in NONNEG | CONTRACTING for i in infos) and alg.aperiodic is False
            and all(i.cls != LayerClass.HOUSEHOLDER or i.factor_domain == EigenvalueDomain.NONNEG for i in infos)):
        if alg.fixed_input:
            letter_witness = len(alg.fixed_word) == 1 and alg.block_period > 1
        else:
            letter_witness = any(p > 1 for p in alg.letter_periods())
        if alg.is_parity or letter_witness:
            what = ("parity (witness 1^T)" if alg.is_parity else
                    "an input u x^n with one letter x repeated, whose label is periodic in n")
            names = ", ".join(i.spec for i in contracting)
            return Verdict(Decision.IMPOSSIBLE, "T1c", f"every layer's transitions have real eigenvalues in [0,1] or "
                           f"(-1/2, 1] ({names}: a diagonal plus rank-one matrix similar to a symmetric one, "
                           f"eigenvalues in (min w - 1, 1]), so on {what} the powers of the repeated letter's "
                           f"transition converge, every layer's state converges in finite precision and the "
                           f"output becomes constant while the label keeps changing (T1c, extending T1)")
    # T1 / T3: non-negative eigenvalues everywhere
    if all_nonneg and alg.aperiodic is False:
        if alg.fixed_input:
            letter_witness = len(alg.fixed_word) == 1 and alg.block_period > 1
        else:
            letter_witness = any(p > 1 for p in alg.letter_periods())
        if diagonal or alg.is_parity or letter_witness:
            word = alg.fixed_word if alg.parity_on_fixed_input else None
            if word and word[0] == 0 and list(word) == sorted(word) and sum(word) % 2 == 1 and diagonal:
                return Verdict(Decision.IMPOSSIBLE, "T3",
                               "every layer has eigenvalues in [0,1] and the input is (0^k 1^m)^T "
                               "with m odd: products of non-negative diagonal transitions stay non-negative, so the "
                               "state converges per period while the parity keeps flipping (T3, Khavari2025 Lemma 4.3)")
            if word and len(word) > 1 and word[0] == 1 and sum(word) == 1 and diagonal:
                return Verdict(Decision.IMPOSSIBLE, "T4", "every layer has eigenvalues in [0,1]: on the periodic input "
                               "(1 0^(W-1))^T each layer's state converges per phase (Khavari2025 App. B, case 2) "
                               "while the parity alternates")
            what = ("parity" if alg.is_parity else
                    "an input u x^n with one letter x repeated, whose label is periodic in n" if letter_witness else
                    "a periodic input u w^n whose label is periodic (Khavari2025 App. B, case 2)")
            return Verdict(Decision.IMPOSSIBLE, "T1", f"every layer has eigenvalues in [0,1], so on {what} the state "
                           f"converges in finite precision while the label keeps changing (T1"
                           f"{'' if alg.is_parity else ' witness generalized from 1^T'})")
    # T2 / T4: time-invariant diagonal and non-negative input-dependent diagonal layers
    if all(i.cls == LayerClass.LTI or i.cls == LayerClass.NONNEG for i in infos) and alg.aligned_witness:
        basis = "T2" if all(i.cls == LayerClass.LTI for i in infos) and alg.is_parity else "T4"
        if alg.is_parity:
            why = ("the layers are time-invariant diagonal" if basis == "T2" else
                   "every layer is time-invariant diagonal or non-negative input-dependent diagonal")
            return Verdict(Decision.IMPOSSIBLE, basis, f"{why}: choosing W with W q_j integer for every time-invariant "
                           f"eigenvalue phase, the input (1 0^(W-1))^T makes every layer's state periodic with "
                           f"period W, so the output cannot follow T mod 2 (T4, Khavari2025 Thm 4.4"
                           f"{'; Sarrof2024 Thm 13' if basis == 'T2' else ''})")
        return Verdict(Decision.IMPOSSIBLE, basis,
                       f"every layer is time-invariant diagonal or non-negative input-dependent "
                       f"diagonal, and words of every length divisible by W move the label of {alg.task}, so the "
                       f"witness u w^n of T4 (|w| a multiple of the phase alignment W; Khavari2025 Thm 4.4) makes "
                       f"the state periodic while the label is not")
    v = _period_doubling(infos, alg)
    if v is not None:
        return v
    # T5 upper bounds: every layer diagonal, inputs the whole group
    if diagonal and alg.is_group and alg.all_inputs:
        st = alg.h_structure()
        k = len(infos)
        g = alg.group.name
        if not st["is_solvable"]:
            return Verdict(Decision.IMPOSSIBLE, "T5",
                           f"{g} is not solvable, so it has no subnormal series with abelian "
                           f"factors and no number of diagonal layers tracks it (T5, DiagLimits2026; every diagonal "
                           f"layer is a special case of an input-dependent complex diagonal one)")
        if st["derived_length"] > k:
            return Verdict(Decision.IMPOSSIBLE, "T5", f"{g} has derived length {st['derived_length']} > {k}: "
                           f"{_n(k, 'diagonal layer')} track only groups with an abelian subnormal series of length "
                           f"<= {k} (T5, DiagLimits2026; every diagonal layer is a special case of an input-dependent "
                           f"complex diagonal one)", {"derived_length": st["derived_length"]})
        if all(i.domain in NONNEG | REAL_NEG for i in infos):
            e2 = st["elementary_2_series_length"]
            if e2 is None or e2 > k:
                why = (f"its order {st['order']} is not a power of 2, so it has no subnormal series with "
                       f"elementary abelian 2 factors" if e2 is None else
                       f"its shortest subnormal series with elementary abelian 2 factors has length {e2} > {k}")
                return Verdict(Decision.IMPOSSIBLE, "T5",
                               f"every layer has real eigenvalues (sign flips only) and {g}: "
                               f"{why} (T5, DiagLimits2026: real diagonal layers track exactly such series)",
                               {"elementary_2_series_length": e2})
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
        elif (i.cls == LayerClass.HOUSEHOLDER and i.props.n_h == 1 and single_letter and period == 1
              and i.factor_domain in (EigenvalueDomain.NONNEG, EigenvalueDomain.REAL)):
            period = 2 if i.factor_domain == EigenvalueDomain.REAL else 1
        else:
            return None
    return period


def _period_doubling(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """PD: an element whose powers have a period that does not divide the stack's period bound."""
    if alg.fixed_input:
        cands = [({alg.block_period}, len(alg.fixed_word) == 1, "the fixed input word")]
    else:
        cands = [(set(alg.letter_periods()), True, "an input letter"),
                 (alg.monoid.periods, False, "an element (a word)")]
    for periods, single, what in cands:
        bound = _period_bound(infos, single)
        bad = sorted(p for p in periods if bound is not None and bound % p)
        if not bad:
            continue
        p = bad[-1]
        hh = any(i.cls == LayerClass.HOUSEHOLDER for i in infos)
        layers = ("every layer is real diagonal or a single real Householder factor I - beta k k^T (symmetric, "
                  "eigenvalues 1 and 1 - beta) on a constant input" if hh else
                  "every layer is diagonal with real eigenvalues")
        return Verdict(Decision.IMPOSSIBLE, "PD", f"{layers}, so on u w^n the output is eventually periodic in n with "
                       f"period dividing {bound}; but {what} of {alg.task} has powers of period {p}, and a "
                       f"syntactic context u . v turns that period into the label's (PD)",
                       {"period": p, "period_bound": bound})
    return None


def _open(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict:
    if alg.kind == "unknown":
        return Verdict(Decision.OPEN, "-", f"{alg.description}; no rule of this toolkit applies")
    if any(i.cls == LayerClass.ATTENTION for i in infos):
        return Verdict(Decision.OPEN, "-", f"{alg.task} with {', '.join(i.spec for i in infos)}: {TC0}")
    if alg.kind == "offset":
        return Verdict(Decision.OPEN, "-", "the offset labels depend only on the last 11 inputs (a definite, star-free "
                       "language), but no construction in the sources covers these layers (Khavari2025 reports "
                       "that Mamba learns it without an explanation)")
    if alg.monoid is not None:
        _, short = _cascade(infos, alg)
        if short is not None and any(i.cls in SELECTIVE_DIAGONAL for i in infos):
            return Verdict(Decision.OPEN, "-", short)
    if any(i.cls == LayerClass.DAMPED for i in infos):
        name = next(i.spec for i in infos if i.cls == LayerClass.DAMPED)
        return Verdict(Decision.OPEN, "-",
                       f"{name} rotates its state by angles whose modulus the decay floor keeps below 1 "
                       f"(exp(-a_floor |angle| / pi)), except angles too small to round the decay away from 1; no "
                       f"result here decides {alg.task} for these layers: T5's constructions need unit-modulus "
                       f"rotations (a_floor = 0 gives them), and T1's witness needs powers that converge, which the "
                       f"tiny unit-modulus rotations do not")
    if any(i.cls == LayerClass.DPLR for i in infos):
        name = next(i.spec for i in infos if i.cls == LayerClass.DPLR)
        return Verdict(Decision.OPEN, "-", f"{name} has diagonal-plus-rank-one transitions with real eigenvalues in "
                       f"(-1/2, 1]; "
                       f"T1c rules out tasks with a letter of period > 1, but {alg.task} has none, and no result in "
                       f"this toolkit's sources decides it for these layers at this depth (Peng2025's regular-"
                       f"language claim needs transitions outside this range). A construction with these "
                       f"parameter ranges, or a family of inputs on which every such stack's states coincide "
                       f"while the labels differ, would decide it")
    if any(i.cls == LayerClass.HOUSEHOLDER and i.factor_domain == EigenvalueDomain.REAL for i in infos):
        return Verdict(Decision.OPEN, "-",
                       f"Householder layers with eigenvalues in [-1,1] recognise every regular language "
                       f"with enough layers (T6, Grazzi2024), but no bound in the sources shows that this depth "
                       f"suffices for {alg.task}; one-factor periodicity (PD) covers only a first layer on a "
                       f"constant input")
    if any(i.cls == LayerClass.HOUSEHOLDER and i.factor_domain is None for i in infos):
        return Verdict(Decision.OPEN, "-",
                       "a Householder layer's factor eigenvalue range is not declared; no rule applies")
    if alg.is_group and not alg.all_inputs and alg.kind == "group":
        return Verdict(Decision.OPEN, "-",
                       f"the inputs of {alg.task} are a proper subset of the group; T5's bounds are "
                       f"stated for inputs from the whole group and no construction here covers these layers")
    return Verdict(Decision.OPEN, "-", f"no theorem or construction in this toolkit's sources decides {alg.task} for "
                   f"{', '.join(i.spec for i in infos)}")


def quotient_ceiling(infos: list[LayerInfo], alg: TaskAlgebra) -> dict:
    """For a group task a stack cannot track: the largest quotient H / N it can still track and the
    accuracy that buys on uniformly distributed labels, 1 / |N| (the long-range and balanced draws'
    labels are uniform). The series is T5's greedy one: a complex layer takes the derived subgroup, a real
    one (or a Householder layer whose factors reach -1, at least a sign flip) the subgroup of squares;
    non-negative and time-invariant layers track no non-trivial group (T1, T4). For S3 with one complex or
    real layer: H / A3 = C2 (the sign), ceiling 1/3; for A5 (perfect) and parity: 1/|H|, chance."""
    if alg.group is None or alg.subgroup is None:
        return {}
    ops = ["d" if i.cls in (LayerClass.COMPLEX, LayerClass.DAMPED) else "s" for i in infos
           if i.cls in (LayerClass.COMPLEX, LayerClass.DAMPED, LayerClass.REAL)
           or (i.cls == LayerClass.HOUSEHOLDER and i.factor_domain == EigenvalueDomain.REAL)]
    n = alg.residual(ops)
    return {"quotient_tracked": alg.h_order // n, "accuracy_ceiling": 1.0 / n}


def oracle(layers: str, task: str) -> Verdict:
    """Verdict for a layer spec on a task string (see the module docstring). An impossible verdict on a
    group task carries ``quotient_tracked`` and ``accuracy_ceiling`` (:func:`quotient_ceiling`)."""
    infos = layer_infos(layers)
    alg = task_algebra(task)
    if alg.monoid is not None and alg.monoid.size == 1:
        v = Verdict(Decision.POSSIBLE, "-", f"the labels of {task} never change; a constant output solves it")
    else:
        v = _possible(infos, alg) or _impossible(infos, alg) or _open(infos, alg)
    extra = quotient_ceiling(infos, alg) if v.verdict == Decision.IMPOSSIBLE else {}
    return Verdict(v.verdict, v.basis, v.reason, {**alg.facts(), **v.facts, **extra})


# -- the table ---------------------------------------------------------------------------------------
DEFAULT_TABLE_LAYERS = ("rnn", "gru", "transformer", "s4d", "s4d*2", "mamba", "mamba*2", "mamba,s4d", "negmamba",
                        "negmamba*2", "negmamba,aussm", "aussm", "aussm*2", "aussm*3", "saussm", "dcd*2",
                        "deltanet", "deltanet(neg=true)", "deltaproduct(nh=2,neg=true)",
                        "deltaproduct(nh=3,neg=true)", "mamba2", "mamba2(neg=true)", "mamba3", "mamba3*2",
                        "gateddeltanet", "gateddeltanet(neg=true)", "gateddeltanet(neg=true)*2", "rwkv7", "rwkv7*2",
                        "mlstm", "slstm", "lru", "gla")
DEFAULT_TABLE_TASKS = ("parity", "modcount:3", "offset", "group:C6", "group:V4", "group:C2xC4", "group:Q8",
                       "group:S3", "group:A4", "group:S4", "group:A5", "tomita:3", "tomita:5", "tomita:6")


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


def check_spec(layers: str) -> None:
    if not layers or not layers.strip():
        raise UserError("empty layer spec; give mixer names separated by commas, e.g. 'mamba,s4d'")
