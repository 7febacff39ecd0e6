"""The rules that give 'possible': a construction (or a cited proof) on some of the stack's layers; a stack can do
whatever any of its layers (in order) can do, the others switched off by zeroing their output projection. Each
verdict names the layers its construction uses and, where it holds eigenvalues of modulus 1, the length float32
holds it (:func:`statetrack.theory.rules.base.constructed`)."""

from __future__ import annotations

from statetrack.layers.properties import EigenvalueDomain
from statetrack.theory.actions import TaskAlgebra
from statetrack.theory.layer_classes import (
    COMPLEX,
    DIAGONAL,
    REAL_NEG,
    SELECTIVE_DIAGONAL,
    LayerClass,
    LayerInfo,
)
from statetrack.theory.precision import KEEPS, ONE_HOT, SIGNS, Hold, reflection_hold, rotation_hold
from statetrack.theory.representations import Representation, best_representation
from statetrack.theory.rules.base import (
    CASCADE_GROUPS,
    CASCADE_RANK,
    Decision,
    Verdict,
    constructed,
    exact_first,
    group_name,
    group_orders,
    n_of,
    rule,
    sign_hold,
)


@rule("constant", Decision.POSSIBLE, "-")
def _constant(_infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """The labels never change (a monoid of one element): a constant output solves the task."""
    if alg.monoid is None or alg.monoid.size != 1:
        return None
    return Verdict(
        Decision.POSSIBLE,
        "-",
        f"the labels of {alg.task} never change; a constant output solves it",
        {"layers": []},
    )


@rule("nonlinear", Decision.POSSIBLE, "NL")
def _nonlinear(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """NL: a non-linear recurrent layer simulates the task's finite automaton."""
    nl = next((i for i in infos if i.cls == LayerClass.NONLINEAR), None)
    if nl is None:
        return None
    return constructed(
        "NL",
        f"{nl.spec} is a non-linear recurrence, which the theorems do not cover; with enough "
        f"units it simulates the finite automaton of {alg.task} directly",
        [nl],
    )


@rule("one-hot", Decision.POSSIBLE, "P5")
def _one_hot(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """P5: one PD-SSM layer runs the task's minimal automaton on one-hot states (any finite automaton in the
    column form; a permutation automaton, i.e. a group word problem, in the row form)."""
    n = alg.n_states
    pd = next((i for i in infos if i.cls == LayerClass.PD), None)
    if pd is not None and n is not None:
        return constructed(
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
        return constructed(
            "P5",
            f"{rows.spec}'s transition is a diagonal times a row one-hot matrix, which reads "
            f"a map through its preimages; the inputs of {alg.task} permute the {alg.h_order} elements "
            f"of {group_name(alg)}, so the row one-hot matrix of x^-1's map moves e_y to e_(y x) and one "
            f"layer with a state of size >= {alg.h_order} tracks the group (P5 for a permutation "
            f"automaton, Terzic2025)",
            [rows],
            {"state_size_needed": alg.h_order, "permutation": True},
            ONE_HOT,
        )
    return None


@rule("offset", Decision.POSSIBLE, "P2")
def _offset(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """P2: a layer with a constant complex eigenvalue of modulus 1 predicts the offset."""
    if alg.kind != "offset":
        return None
    complex_any = exact_first(
        [i for i in infos if i.cls == LayerClass.COMPLEX or (i.cls == LayerClass.LTI and i.domain in COMPLEX)]
    )
    if not complex_any:
        return None
    return constructed(
        "P2",
        f"{complex_any[0].spec} can hold a constant complex eigenvalue exp(2 pi i/10) on "
        f"the unit circle, which counts the burst: h0 = 1, A = exp(2 pi i/n), B = 1 - A (P2, "
        f"Khavari2025 App. C)",
        [complex_any[0]],
        hold=rotation_hold([10], every_k=False),
    )


@rule("fixed-input", Decision.POSSIBLE, "T5", "T6", "P1")
def _fixed_input(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """On a fixed input: whatever tracks parity (T5, T6), or a constant eigenvalue exp(2 pi i/p) for labels of
    period p (P1)."""
    if alg.monoid is None or not alg.fixed_input:
        return None
    # parity on a fixed witness input: whatever solves parity solves it
    if alg.parity_on_fixed_input:
        sign = exact_first(
            [
                i
                for i in infos
                if i.cls in (LayerClass.REAL, LayerClass.COMPLEX)
                or (i.cls == LayerClass.HOUSEHOLDER and i.factor_domain == EigenvalueDomain.REAL)
            ]
        )
        if sign:
            return constructed(
                "T5" if sign[0].cls != LayerClass.HOUSEHOLDER else "T6",
                f"{sign[0].spec} tracks parity on every input (an input-dependent eigenvalue -1 for "
                f"bit 1, +1 for bit 0), so on this fixed input too",
                [sign[0]],
                hold=sign_hold(sign[0]),
            )
    p, pre = alg.period, alg.preperiod
    if p is None:  # no periodic labels known
        return None
    for i in exact_first(infos):
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
        return constructed(
            "P1",
            f"the input is fixed and the labels are periodic with period {p} after {pre} tokens: "
            f"in {i.spec} {count}{pre_s} (P1, Khavari2025 Prop. 4.2)",
            [i],
            {"label_period": p, "preperiod": pre},
            None if p == 1 else SIGNS if dom in REAL_NEG else rotation_hold([p], every_k=False),
        )
    return None


@rule("householder-group", Decision.POSSIBLE, "T6", "P4")
def _householder_group(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """T6 (one layer of enough reflections per token, per head) or P4 (a parity layer, then one reflection per
    token twisted by that parity) for a group word problem."""
    if alg.monoid is None or not alg.is_group:
        return None
    hname = group_name(alg)
    hh = [
        i
        for i in infos
        if i.cls == LayerClass.HOUSEHOLDER and i.factor_domain == EigenvalueDomain.REAL and i.props.n_h
    ]
    rep = best_representation(alg.group, alg.subgroup, alg.support) if hh else None
    if rep is not None:  # None: the trivial group
        facts = {"representation": rep.name, "dim": rep.dim, "n_h_needed": rep.n_h}
        for i in exact_first(hh):
            split = best_representation(alg.group, alg.subgroup, alg.support, i.heads) if i.heads > 1 else rep
            assert split is not None
            if (i.props.n_h or 0) >= split.n_h:
                return constructed(
                    "T6",
                    _t6_reason(hname, split, i),
                    [i],
                    _t6_facts(split),
                    reflection_hold(split, alg.support),
                )
        # P4: a parity layer, then one reflection per token twisted by that parity (2-D representations)
        for j, i in enumerate(infos):
            sign = exact_first(
                [
                    p
                    for p in infos[:j]
                    if p.cls in (LayerClass.REAL, LayerClass.COMPLEX)
                    or (p.cls == LayerClass.HOUSEHOLDER and p.factor_domain == EigenvalueDomain.REAL)
                ]
            )
            if i in hh and sign and rep.dim <= 2:
                return constructed(
                    "P4",
                    f"{hname} has a faithful 2-D orthogonal representation, {rep.name}; "
                    f"{sign[0].spec} tracks the parity s of the rotation letters read so far, and "
                    f"{i.spec} applies one reflection per token, F0^s rho(x) F0^s' with F0 a fixed "
                    f"reflection, so its state is F0^s rho(y) w0 (P4: two Householder layers track the "
                    f"cyclic and dihedral groups, Siems2025)",
                    [sign[0], i],
                    facts,
                    sign_hold(sign[0]) & reflection_hold(rep, alg.support),
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
            f"product of {n_of(rep.n_h, 'reflection')} (lemma CD); {i.spec} with n_h = "
            f"{i.props.n_h} and factor eigenvalues in [-1,1] applies rho(x) per token and tracks "
            f"it in one layer with a state of size >= {rep.dim} (T6; construction "
            f"orth-deltaproduct)"
        )
    return (
        f"{hname} has a faithful orthogonal representation, {rep.name}: block diagonal, with "
        f"rank(I - rho_j(x)) <= {rep.n_h} for every input letter x in every head's block rho_j, i.e. each "
        f"block of rho(x) is a product of {n_of(rep.n_h, 'reflection')} (lemma CD); {i.spec} runs "
        f"{i.heads} heads as independent recurrences in parallel, each with {n_of(i.props.n_h or 1, 'factor')} "
        f"with eigenvalues in [-1,1] per token, so head j applies rho_j(x) on a state of size >= its block's "
        f"dimension and the heads together track the direct sum, which is faithful (T6 per head)"
    )


@rule("diagonal-group", Decision.POSSIBLE, "T5", "P3")
def _diagonal_group(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """T5 (one diagonal layer per factor of a subnormal series; P3: S3 in two complex layers) for a group word
    problem."""
    if alg.monoid is None or not alg.is_group:
        return None
    st, hname = alg.h_structure(), group_name(alg)
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
                f"{st['elementary_2_series_length']}; {n_of(used, 'real [-1,1] input-dependent diagonal layer')} "
                f"suffice, one sign-flip layer per factor (T5 construction, DiagLimits2026)"
            )
        elif kinds == {LayerClass.COMPLEX}:
            p3 = st["order"] == 6 and dl == 2  # S3 in two complex layers: construction P3
            basis = "P3" if p3 else basis
            why = (
                f"{hname} has derived length {dl}; {n_of(used, 'input-dependent complex diagonal layer')} "
                f"suffice, one per abelian factor (T5" + (", construction P3)" if p3 else ")")
            )
        else:
            why = (
                f"{hname} has a subnormal series whose factors match the layers (abelian for each complex "
                f"layer, elementary abelian 2 for each real one), so the T5 construction applies layer by layer"
            )
        rotates = any(i.cls == LayerClass.COMPLEX for i in chosen)
        return constructed(basis, why, chosen, facts, rotation_hold(group_orders(alg)) if rotates else SIGNS)
    return None


def sf_depth(height: int) -> int:
    """Layers the holonomy cascade of height h needs (docs/science.md, SF-depth): 1 for h <= 1 (the
    one level reads the input letter itself), h + 1 otherwise (level i reads the states of the levels
    above it one step back: a first layer delays the input, then one layer per level)."""
    return 1 if height <= 1 else height + 1


def cascade(infos: list[LayerInfo], alg: TaskAlgebra) -> tuple[Verdict | None, str | None]:
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
        and CASCADE_RANK[CASCADE_GROUPS[i.domain]] >= CASCADE_RANK[need]
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
        return constructed(
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
    return rotation_hold([2] if need == "elementary abelian 2" else group_orders(alg))


@rule("cascade", Decision.POSSIBLE, "SF", "KR")
def _cascade_rule(infos: list[LayerInfo], alg: TaskAlgebra) -> Verdict | None:
    """SF / KR: the holonomy cascade of a monoid that is not a group, in SF-depth input-dependent diagonal layers."""
    return cascade(infos, alg)[0] if alg.monoid is not None else None


#: in the order the oracle tries them
RULES = (
    _constant,
    _nonlinear,
    _one_hot,
    _offset,
    _fixed_input,
    _householder_group,
    _diagonal_group,
    _cascade_rule,
)
