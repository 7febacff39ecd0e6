"""The rules that give 'impossible': a theorem that covers every layer of the stack (T1, T3, T4 on converging
layers, T2 / T4 on aligned witnesses, PD and T1c on periods, T5's upper bounds); each applies to a linear stack
on a task with a monoid only (:func:`_decidable`)."""

from __future__ import annotations

from statetrack.layers.properties import EigenvalueDomain
from statetrack.theory.actions import TaskAlgebra
from statetrack.theory.layer_classes import (
    CONTRACTING,
    DIAGONAL,
    LINEAR,
    NONNEG,
    REAL_NEG,
    LayerClass,
    LayerInfo,
)
from statetrack.theory.rules.base import Decision, Verdict, group_name, n_of, rule


def _decidable(infos: list[LayerInfo], alg: TaskAlgebra) -> bool:
    """The impossibility rules read a task with a monoid (not the offset, not an unknown task) and a stack whose
    every layer has a transition matrix."""
    if alg.kind in ("offset", "unknown") or alg.monoid is None:
        return False
    return all(i.cls in LINEAR for i in infos)


@rule("converging", Decision.IMPOSSIBLE, "T1", "T3", "T4")
def _converging_rule(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """T1 / T3 / T4: every layer has eigenvalues in [0,1] (or is a product of positive semi-definite contractions,
    lemma PSC) and the task is not aperiodic."""
    if not _decidable(infos, alg) or not all(_converging(i) for i in infos) or alg.aperiodic is not False:
        return None
    diagonal = all(i.cls in DIAGONAL for i in infos)
    return _nonneg_impossible(alg, diagonal, [i for i in infos if i.domain not in NONNEG])


@rule("aligned", Decision.IMPOSSIBLE, "T2", "T4")
def _aligned(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """T2 / T4: every layer time-invariant diagonal or non-negative input-dependent diagonal, and an aligned witness."""
    if not _decidable(infos, alg):
        return None
    if all(i.cls == LayerClass.LTI or i.cls == LayerClass.NONNEG for i in infos) and alg.aligned_witness:
        return _aligned_impossible(infos, alg)
    return None


@rule("period", Decision.IMPOSSIBLE, "PD", "T1c")
def _period(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """PD / T1c: the output on u w^n has a period that an element of the task's monoid does not divide."""
    return _period_doubling(infos, alg) if _decidable(infos, alg) else None


@rule("derived-series", Decision.IMPOSSIBLE, "T5")
def _derived_series(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """T5's upper bounds: every layer diagonal and the inputs the whole group."""
    if _decidable(infos, alg) and all(i.cls in DIAGONAL for i in infos) and alg.is_group and alg.all_inputs:
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
    g = group_name(alg)  # all inputs: the group's name
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
            f"{n_of(k, 'diagonal layer')} track only groups with an abelian subnormal series of length "
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


#: in the order the oracle tries them
RULES = (_converging_rule, _aligned, _period, _derived_series)
