"""The oracle against every statement of docs/science.md (T1-T6, P1-P3, SF, KR, PD), on groups and
languages beyond those the papers name."""

import pytest

import statetrack.theory.verdicts as O
from statetrack.layers import MIXERS
from statetrack.theory.verdicts import oracle

zoo = pytest.mark.skipif(
    not {"aussm", "saussm", "dcd", "deltanet", "deltaproduct", "transformer"} <= set(MIXERS),
    reason="needs the zoo mixers (branch zoo)",
)


def v(layers, task):
    return oracle(layers, task)


# -- T1: non-negative eigenvalues in every layer: parity fails at any depth ---------------------------------
@pytest.mark.parametrize(
    "layers", ["mamba", "mamba*2", "mamba*4", "mamba(conv=0),mamba", "s4d(init=real),mamba"]
)
def test_T1_nonnegative_stacks_fail_parity_at_any_depth(layers):
    r = v(layers, "parity")
    assert (r.verdict, r.basis) == ("impossible", "T1")
    assert "[0,1]" in r.reason


@zoo
def test_T1_deltanet_01_fails_parity():
    assert (v("deltanet*3", "parity").verdict, v("deltanet*3", "parity").basis) == ("impossible", "T1")


def test_T1_witness_generalises_to_every_nontrivial_group():
    for t in ("group:C3", "group:C2xC4", "group:S3", "modcount:5"):
        assert v("mamba*3", t).verdict == "impossible"


# -- T2: time-invariant diagonal SSMs fail parity (also with negative eigenvalues) ---------------------------
@pytest.mark.parametrize("layers", ["s4d", "s4d*2", "s4d(init=inv)*3", "s4d(init=real)"])
def test_T2_s4d_fails_parity(layers):
    r = v(layers, "parity")
    assert r.verdict == "impossible" and r.basis in ("T2", "T1")


def test_T2_refutes_claim_s4_with_negative_eigenvalues_solves_parity():
    # "S4 with negative eigenvalues reaches 100% on parity" contradicts T2: the oracle says impossible for
    # every time-invariant diagonal stack, whatever its eigenvalues (S4D-Lin has complex ones)
    assert v("s4d*2", "parity").basis == "T2"


# -- T3: (0^k 1^m)^T witnesses -------------------------------------------------------------------------------
def test_T3_block_witness_defeats_nonnegative_stacks():
    r = v("mamba*2", "witness:block:3:5")
    assert (r.verdict, r.basis) == ("impossible", "T3")
    assert v("mamba", "witness:alt").basis == "T3"


# -- T4: S4D + Mamba stacks fail parity ----------------------------------------------------------------------
@pytest.mark.parametrize(
    "layers", ["mamba,s4d", "s4d,mamba", "mamba,s4d,mamba,s4d", "mamba(conv=0)*2,s4d(init=inv)"]
)
def test_T4_mixed_s4d_mamba_stacks_fail_parity(layers):
    r = v(layers, "parity")
    assert (r.verdict, r.basis) == ("impossible", "T4")
    assert "(1 0^(W-1))^T" in r.reason


def test_T4_extends_to_groups_with_two_or_more_inputs_but_not_to_fixed_inputs():
    assert v("mamba,s4d", "group:C3").basis == "T4"
    assert v("mamba,s4d", "modcount:3").verdict == "possible"  # the S4D layer counts on the fixed input (P1)


# -- P1 / P2: one S4D layer counts on a fixed input and predicts the offset ----------------------------------
@pytest.mark.parametrize("m", [2, 3, 7, 60])
def test_P1_s4d_counts_mod_m(m):
    assert (v("s4d", f"modcount:{m}").verdict, v("s4d", f"modcount:{m}").basis) == ("possible", "P1")


def test_P1_time_invariance_suffices_on_fixed_witness_inputs():
    assert v("mamba,s4d", "witness:pulse:5").basis == "P1"


def test_P2_s4d_predicts_the_offset():
    assert (v("s4d", "offset").verdict, v("s4d", "offset").basis) == ("possible", "P2")


# -- T5 and P3: input-dependent complex diagonal layers and derived length -----------------------------------
@zoo
@pytest.mark.parametrize(
    "layers,group,verdict",
    [
        ("aussm", "C2", "possible"),
        ("aussm", "C6", "possible"),
        ("aussm", "C60", "possible"),
        ("aussm", "C2xC4", "possible"),
        ("aussm", "V4", "possible"),
        ("aussm", "S3", "impossible"),
        ("aussm", "A4", "impossible"),
        ("aussm", "D4", "impossible"),
        ("aussm", "Q8", "impossible"),
        ("aussm*2", "S3", "possible"),
        ("aussm*2", "A4", "possible"),
        ("aussm*2", "D4", "possible"),
        ("aussm*2", "Q8", "possible"),
        ("aussm*2", "A4xC5", "possible"),
        ("aussm*2", "S4", "impossible"),
        ("aussm*3", "S4", "possible"),
        ("dcd*2", "S4", "impossible"),
        ("dcd*3", "S4", "possible"),
        ("aussm*5", "A5", "impossible"),
        ("aussm*6", "S5", "impossible"),
        ("saussm", "C24", "possible"),
    ],
)
def test_T5_complex_diagonal_layers_track_groups_of_derived_length_at_most_k(layers, group, verdict):
    r = v(layers, f"group:{group}")
    assert r.verdict == verdict, r
    assert r.basis in ("T5", "P3")


@zoo
def test_P3_two_aussm_layers_track_s3():
    r = v("aussm*2", "group:S3")
    assert (r.verdict, r.basis) == ("possible", "P3")
    assert "derived length 2" in r.reason


def test_T5_negative_mamba_tracks_elementary_abelian_2_series():
    assert v("negmamba", "parity").verdict == "possible"
    assert v("negmamba", "group:C2").verdict == "possible"
    assert v("negmamba", "group:C2xC2xC2").verdict == "possible"
    assert v("negmamba", "group:C2xC4").verdict == "impossible"
    assert v("negmamba*2", "group:C2xC4").verdict == "possible"
    assert v("negmamba*2", "group:Q8").verdict == "possible"
    assert v("negmamba*2", "group:D4").verdict == "possible"
    assert v("negmamba", "group:D4").verdict == "impossible"  # D4 is not abelian
    for g in ("C3", "C6", "S3"):
        assert v("negmamba*4", f"group:{g}").verdict == "impossible"  # order not a power of 2
    assert v("negmamba*2", "group:C8").verdict == "impossible"
    assert v("negmamba*3", "group:C8").verdict == "possible"


def test_T5_real_layers_cannot_count_mod_3_but_can_count_mod_4_with_two():
    assert v("negmamba*3", "modcount:3").verdict == "impossible"
    assert v("negmamba", "modcount:4").verdict == "impossible"
    assert v("negmamba*2", "modcount:4").verdict == "possible"


def test_T5_mamba_tracks_no_nontrivial_group():
    for g in ("C2", "C3", "C6", "S3"):
        assert v("mamba*3", f"group:{g}").verdict == "impossible"


@zoo
def test_mixed_stacks_follow_the_layer_by_layer_series():
    assert v("negmamba,aussm", "group:S3").verdict == "possible"  # sign flips, then C3 (P3's shape)
    assert v("aussm,negmamba", "group:S3").verdict == "open"  # S3' = C3 has no elementary-2 quotient
    assert v("negmamba,aussm", "group:A4").verdict == "open"
    assert v("negmamba,aussm", "group:S4").verdict == "impossible"  # T5's upper bound: derived length 3 > 2


# -- T6: Householder products with eigenvalues in [-1, 1] ----------------------------------------------------
@zoo
def test_T6_deltaproduct_reaches_s_nh_plus_1_in_one_layer():
    for n in (2, 3, 4, 5):
        r = v(f"deltaproduct(nh={n - 1},neg=true)", f"group:S{n}")
        assert (r.verdict, r.basis) == ("possible", "T6"), r
    # S4 = the rotations of a cube: every rotation is 2 reflections (was "open" under the transposition count)
    r = v("deltaproduct(nh=2,neg=true)", "group:S4")
    assert (r.verdict, r.basis) == ("possible", "T6") and "cube" in r.reason
    assert v("deltanet(neg=true)", "parity").verdict == "possible"
    assert v("deltanet(neg=true)", "group:S5/transpositions").verdict == "possible"
    assert v("deltaproduct(nh=2,neg=true)", "group:C6").basis == "T6"  # a rotation = 2 reflections
    assert v("deltaproduct(nh=2)", "parity").verdict == "impossible"  # [0,1] factors: T1


# -- non-linear layers, attention, regular languages ---------------------------------------------------------
@pytest.mark.parametrize("layers", ["rnn", "lstm", "gru", "mamba,rnn"])
def test_nonlinear_recurrences_are_possible_for_finite_state_tasks(layers):
    for t in ("parity", "group:A5", "tomita:3", "offset"):
        assert (v(layers, t).verdict, v(layers, t).basis) == ("possible", "NL")


@zoo
def test_transformer_is_open_and_names_the_conjecture():
    r = v("transformer*2", "group:A5")
    assert r.verdict == "open" and "TC0" in r.reason


def test_tomita_languages_use_their_syntactic_monoid():
    assert v("mamba*2", "tomita:5").verdict == "impossible"  # group V4
    assert v("mamba*2", "tomita:4").verdict == "open"  # star-free, but below the SF depth 4 of its cascade
    assert v("negmamba", "tomita:5").verdict == "possible"  # V4 = C2 x C2: one sign-flip layer
    assert v("negmamba*3", "tomita:6").verdict == "impossible"  # a letter of period 3
    assert v("s4d", "tomita:6").basis == "T4"


def test_monoid_facts():
    from statetrack.theory.actions import task_algebra

    assert task_algebra("tomita:4").aperiodic is True
    assert task_algebra("tomita:3").aperiodic is False
    assert task_algebra("tomita:6").group.order == 3
    assert task_algebra("modcount:5").aligned_witness is False
    assert task_algebra("parity").aligned_witness is True


def test_table_rows_and_bad_input():
    rows = O.oracle_table(["mamba", "negmamba"], ["parity", "group:S3"])
    assert len(rows) == 4 and {r["verdict"] for r in rows} <= {"possible", "impossible", "open"}
    from statetrack.errors import UserError

    with pytest.raises(UserError):
        oracle("nosuchmixer", "parity")
    with pytest.raises(UserError):
        oracle("mamba", "nosuchtask")


def _answers(infos, alg, decision) -> list[str]:
    """The registered rules of this decision that answer for these layers and this task."""
    return [r.name for r in O.RULES if r.decision == decision and r.apply(infos, alg) is not None]


def test_no_rule_contradicts_another():
    # possibility comes from constructions, impossibility from theorems: on a grid they never meet
    from statetrack.theory.actions import task_algebra

    specs = [s for s in O.DEFAULT_TABLE_LAYERS if all(l.name in MIXERS for l in O.parse_layers(s))]
    for s in specs:
        infos = O.layer_infos(s)
        for t in O.DEFAULT_TABLE_TASKS:
            alg = task_algebra(t)
            assert not (
                _answers(infos, alg, O.Decision.POSSIBLE) and _answers(infos, alg, O.Decision.IMPOSSIBLE)
            ), (s, t)


@pytest.mark.parametrize(
    "task",
    [
        "parity:final",
        "group:S5/transpositions+3cycles",
        "group:C6/generators+identity",
        "modcount:2",
        "modarith",
        "modarith-brackets",
        "cycle:5/every",
        "evenpairs",
        "tomita:1",
        "tomita:2",
        "tomita:7",
        "offset:two-isis",
        "witness:ones",
        "witness:pulse:6",
        "group:C1",
    ],
)
def test_every_task_family_gets_a_verdict(task):
    """Each verdict meets its rule's hypotheses on the layers' declared properties, and the non-linear RNN
    tracks every one of these tasks (the rule NL; group:C1's labels never change)."""
    from statetrack.theory.verdicts import Decision, check_hypotheses

    for layers in ("rnn", "mamba", "s4d,mamba", "negmamba*2"):
        r = oracle(layers, task)
        assert isinstance(r.verdict, Decision) and r.reason, (layers, task)
        assert check_hypotheses(layers, r) == [], (layers, task, r)
    r = oracle("rnn", task)
    assert (r.verdict, r.basis) == (Decision.POSSIBLE, "-" if task == "group:C1" else "NL"), task


def test_evenpairs_is_star_free_and_dfa_files_work(tmp_path):
    import json

    assert oracle("mamba", "evenpairs").verdict == "open"  # star-free, SF depth 3
    spec = {
        "states": ["e", "o"],
        "alphabet": ["0", "1"],
        "start": "e",
        "accept": ["e"],
        "transitions": {"e": {"0": "e", "1": "o"}, "o": {"0": "o", "1": "e"}},
    }
    p = tmp_path / "par.json"
    p.write_text(json.dumps(spec))
    assert oracle("mamba,s4d", f"dfa:{p}").verdict == "impossible"
    assert oracle("negmamba", f"dfa:{p}").verdict == "possible"


# -- SF: star-free languages in non-negative stacks, with the depth of their holonomy cascade ----------------


@pytest.mark.parametrize(
    "task,depth", [("tomita:1", 1), ("tomita:2", 3), ("tomita:4", 4), ("tomita:7", 6), ("evenpairs", 3)]
)
def test_SF_star_free_languages_are_possible_from_their_depth_on(task, depth):
    r = v(f"mamba*{depth}", task)
    assert (r.verdict, r.basis) == ("possible", "SF"), r
    assert r.facts["aperiodic"] is True and r.facts["depth_needed"] == depth
    assert v(f"negmamba*{depth}", task).verdict == "possible"  # [0,1] is inside (-1,1]
    assert v(",".join(["s4d", "mamba"] * depth), task).verdict == "possible"  # other layers switched off
    if depth > 1:
        low = v(f"mamba*{depth - 1}", task)
        assert low.verdict == "open" and f">= {depth}" in low.reason  # below the bound: open, not impossible
    assert v(f"aussm*{depth + 2}", task).verdict == "open"  # unit-modulus layers cannot reset


@pytest.mark.parametrize("k", [3, 5, 6])
def test_non_star_free_tomita_languages_are_impossible_for_mamba(k):
    r = v("mamba*8", f"tomita:{k}")
    assert (r.verdict, r.basis) == ("impossible", "T1") and r.facts["aperiodic"] is False


# -- KR: abelian (or elementary abelian 2) maximal subgroups and resets --------------------------------------
def test_KR_counter_mod_3_with_reset(dfa_task):
    # a counts mod 3, b resets: monoid C3 plus constants, holonomy height 1
    task = dfa_task("reset3", ["0", "1", "2"], ["a", "b"], "0", ["0"], [["1", "0"], ["2", "0"], ["0", "0"]])
    r = v("dcd", task)
    assert (r.verdict, r.basis) == ("possible", "KR") and r.facts["depth_needed"] == 1
    assert v("aussm*3", task).verdict == "open"  # no reset on the unit circle, and not a group: T5 is silent
    assert (v("negmamba*4", task).verdict, v("negmamba*4", task).basis) == ("impossible", "PD")  # a period 3
    assert (v("mamba*4", task).verdict, v("mamba*4", task).basis) == ("impossible", "T1")


def test_KR_real_layers_on_tomita_3():
    # tomita 3: maximal subgroups C2 (elementary abelian 2), holonomy height 4
    assert (v("negmamba*5", "tomita:3").verdict, v("negmamba*5", "tomita:3").basis) == ("possible", "KR")
    assert v("negmamba*4", "tomita:3").verdict == "open"
    assert v("dcd*5", "tomita:3").verdict == "possible"


# -- one language, one verdict -------------------------------------------------------------------------------
_STACKS = [
    "rnn",
    "transformer",
    "s4d",
    "s4d(init=real)",
    "mamba",
    "mamba*3",
    "mamba,s4d",
    "negmamba",
    "negmamba*3",
    "aussm",
    "aussm*2",
    "dcd*2",
    "deltanet",
    "deltanet(neg=true)",
    "deltanet(neg=true)*2",
    "deltaproduct(nh=2,neg=true)",
    "aussm,negmamba",
]


@zoo
def test_a_dfa_and_a_named_task_for_the_same_language_get_the_same_verdict(dfa_task):
    aa = dfa_task("aa", ["e", "o"], ["a"], "e", ["e"], [["o"], ["e"]])  # (aa)*
    par = dfa_task("par", ["e", "o"], ["0", "1"], "e", ["e"], [["e", "o"], ["o", "e"]])
    c3 = dfa_task("c3", ["0", "1", "2"], ["x"], "0", ["0"], [["1"], ["2"], ["0"]])  # (xxx)*
    for dfa, named in ((aa, "modcount:2"), (par, "parity"), (c3, "modcount:3")):
        for s in _STACKS:
            a, b = v(s, dfa), v(s, named)
            assert (a.verdict, a.basis) == (b.verdict, b.basis), (s, named, a, b)


def test_one_letter_languages_with_a_pre_period(dfa_task):
    # a^n accepted iff n = 1 or n = 0 mod 3 (n >= 3): pre-period 1, period 3
    task = dfa_task(
        "pre",
        ["n0", "s1", "c2", "c0", "c1"],
        ["a"],
        "n0",
        ["s1", "c0"],
        [["s1"], ["c2"], ["c0"], ["c1"], ["c2"]],
    )
    assert (v("s4d", task).verdict, v("s4d", task).basis) == ("possible", "P1")
    assert v("mamba*3", task).verdict == "impossible"
    assert (v("negmamba*3", task).verdict, v("negmamba*3", task).basis) == ("impossible", "PD")
    # a^n with n >= 3 (star-free): a decaying channel counts to 3 in one layer
    late = dfa_task("late", ["0", "1", "2", "3"], ["a"], "0", ["3"], [["1"], ["2"], ["3"], ["3"]])
    assert (v("mamba", late).verdict, v("mamba", late).basis) == ("possible", "P1")


# -- T6 with lemma CD: the best orthogonal representation ----------------------------------------------------
@zoo
@pytest.mark.parametrize(
    "group,n_h,dim,what",
    [
        ("S4", 2, 3, "cube"),
        ("A5", 2, 3, "icosahedron"),
        ("A4", 2, 3, "tetrahedron"),
        ("D4", 2, 2, "4-gon"),
        ("C5", 2, 2, "rotations"),
        ("D5", 2, 2, "5-gon"),
        ("C2xC4", 3, 3, "direct sum"),
        ("Q8", 4, 4, "quaternion"),
        ("S5", 4, 4, "permutation"),
    ],
)
def test_T6_needs_the_reflections_of_the_best_representation(group, n_h, dim, what):
    r = v(f"deltaproduct(nh={n_h},neg=true)", f"group:{group}")
    assert (r.verdict, r.basis) == ("possible", "T6"), r
    assert (r.facts["n_h_needed"], r.facts["dim"]) == (n_h, dim) and what in r.facts["representation"]
    if n_h > 1:
        assert v(f"deltaproduct(nh={n_h - 1},neg=true)", f"group:{group}").verdict in ("open", "impossible")


@zoo
def test_T6_reflection_letters_need_one_factor(dfa_task):
    # S3 generated by two transpositions of 3 states: every letter is one reflection
    task = dfa_task("s3", ["0", "1", "2"], ["a", "b"], "0", ["0"], [["1", "0"], ["0", "2"], ["2", "1"]])
    r = v("deltanet(neg=true)", task)
    assert (r.verdict, r.basis) == ("possible", "T6") and r.facts["n_h_needed"] == 1
    # its words have period 3: real diagonal layers cannot (PD reads elements, not only letters)
    assert (v("negmamba*4", task).verdict, v("negmamba*4", task).basis) == ("impossible", "PD")


# -- PD: period doubling (real diagonal layers; one real Householder factor on a constant input) -------------
@zoo
@pytest.mark.parametrize(
    "task", ["group:C3", "group:S3", "group:A4", "modcount:3", "tomita:6", "cycle:3/every"]
)
def test_PD_one_householder_factor_cannot_count_mod_3(task):
    for layers in ("deltanet(neg=true)", "mamba,deltanet(neg=true)", "deltanet(neg=true),negmamba*2"):
        r = v(layers, task)
        assert (r.verdict, r.basis) == ("impossible", "PD"), (layers, task, r)
    # a second Householder layer sees a periodic input, where two reflections make a rotation: PD stops there,
    # and a parity layer before one reflection per token tracks every group with a 2-D representation (P4)
    r = v("deltanet(neg=true)*2", task)
    assert (r.verdict, r.basis) == (("open", "-") if task == "group:A4" else ("possible", "P4")), (task, r)


@zoo
def test_P4_parity_then_one_reflection_per_token():
    for layers in ("negmamba,deltanet(neg=true)", "aussm,deltanet(neg=true)", "deltanet(neg=true)*2"):
        for g in ("C5", "D4", "S3", "C60"):
            r = v(layers, f"group:{g}")
            assert (r.verdict, r.basis) == ("possible", "P4") and r.facts["dim"] == 2, (layers, g, r)
    assert (
        v("mamba,deltanet(neg=true)", "group:C3").basis == "PD"
    )  # a non-negative layer cannot hold a parity
    assert v("deltanet(neg=true)*2", "group:Q8").verdict == "open"  # Q8 has no faithful 2-D representation


@zoo
def test_PD_agrees_with_what_one_factor_can_do():
    assert v("deltanet(neg=true)", "parity").verdict == "possible"  # letters of period 2
    # tomita 5 = V4 with the two generators as letters: diag(-1, 1) and diag(1, -1), one reflection each; with
    # all of V4 as inputs, -I needs two in every faithful representation, and no theorem excludes it: open
    assert v("deltanet(neg=true)", "tomita:5").verdict == "possible"
    assert v("deltanet(neg=true)", "group:V4").verdict == "open"
    assert v("deltanet(neg=true)", "group:C4").verdict == "impossible"


# -- facts in the JSON ---------------------------------------------------------------------------------------
@zoo
def test_verdicts_carry_the_facts_they_used(capsys):
    import json

    from statetrack.cli import main

    f = v("deltaproduct(nh=2,neg=true)", "group:A5").as_dict()["facts"]
    assert f["monoid_size"] == 60 and f["aperiodic"] is False and f["holonomy_height"] == 1
    assert f["groups"] == [
        {"order": 60, "abelian": False, "solvable": False, "derived_length": None, "exponent": 30}
    ]
    assert (f["dim"], f["n_h_needed"]) == (3, 2) and "icosahedron" in f["representation"]
    assert v("mamba*3", "evenpairs").facts["depth_needed"] == 3
    assert main(["oracle", "--layers", "mamba*4", "--task", "tomita:4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (
        out["verdict"] == "possible"
        and out["facts"]["holonomy_height"] == 3
        and out["facts"]["monoid_size"] == 12
    )


# -- consistency on a wider grid -----------------------------------------------------------------------------
@zoo
def test_no_rule_contradicts_another_on_groups_and_languages(dfa_task):
    from statetrack.theory.actions import task_algebra

    tasks = [
        "parity",
        "modcount:4",
        "witness:pulse:3",
        "group:C8",
        "group:D4",
        "group:S4",
        "group:A5",
        "group:S5/transpositions",
        "tomita:2",
        "tomita:3",
        "tomita:6",
        "tomita:7",
        "evenpairs",
        dfa_task("r3", ["0", "1", "2"], ["a", "b"], "0", ["0"], [["1", "0"], ["2", "0"], ["0", "0"]]),
    ]
    for s in _STACKS + ["negmamba*5", "mamba*6", "dcd*5", "deltaproduct(nh=3,neg=true)"]:
        infos = O.layer_infos(s)
        for t in tasks:
            alg = task_algebra(t)
            assert not (
                _answers(infos, alg, O.Decision.POSSIBLE) and _answers(infos, alg, O.Decision.IMPOSSIBLE)
            ), (s, t)
