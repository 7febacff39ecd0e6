"""The oracle against every statement of SCIENCE.md section 3, and on groups beyond those."""

import pytest

from statetrack.layers import MIXERS
from statetrack.theory.verdicts import oracle

import statetrack.theory.verdicts as O

zoo = pytest.mark.skipif(not {"aussm", "saussm", "dcd", "deltanet", "deltaproduct", "transformer"} <= set(MIXERS),
                         reason="needs the zoo mixers (branch zoo)")


def v(layers, task):
    return oracle(layers, task)


# -- T1: non-negative eigenvalues in every layer: parity fails at any depth ---------------------------------
@pytest.mark.parametrize("layers", ["mamba", "mamba*2", "mamba*4", "mamba(conv=0),mamba", "s4d(init=real),mamba"])
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


# -- T2: time-invariant diagonal SSMs fail parity (also with negative eigenvalues) ------------------------------
@pytest.mark.parametrize("layers", ["s4d", "s4d*2", "s4d(init=inv)*3", "s4d(init=real)"])
def test_T2_s4d_fails_parity(layers):
    r = v(layers, "parity")
    assert r.verdict == "impossible" and r.basis in ("T2", "T1")


def test_T2_refutes_claim_s4_with_negative_eigenvalues_solves_parity():
    # "S4 with negative eigenvalues reaches 100% on parity" contradicts T2: the oracle says impossible for
    # every time-invariant diagonal stack, whatever its eigenvalues (S4D-Lin has complex ones)
    assert v("s4d*2", "parity").basis == "T2"


# -- T3: (0^k 1^m)^T witnesses --------------------------------------------------------------------------------
def test_T3_block_witness_defeats_nonnegative_stacks():
    r = v("mamba*2", "witness:block:3:5")
    assert (r.verdict, r.basis) == ("impossible", "T3")
    assert v("mamba", "witness:alt").basis == "T3"


# -- T4: S4D + Mamba stacks fail parity --------------------------------------------------------------------------
@pytest.mark.parametrize("layers", ["mamba,s4d", "s4d,mamba", "mamba,s4d,mamba,s4d", "mamba(conv=0)*2,s4d(init=inv)"])
def test_T4_mixed_s4d_mamba_stacks_fail_parity(layers):
    r = v(layers, "parity")
    assert (r.verdict, r.basis) == ("impossible", "T4")
    assert "(1 0^(W-1))^T" in r.reason


def test_T4_extends_to_groups_with_two_or_more_inputs_but_not_to_fixed_inputs():
    assert v("mamba,s4d", "group:C3").basis == "T4"
    assert v("mamba,s4d", "modcount:3").verdict == "possible"  # the S4D layer counts on the fixed input (P1)


# -- P1 / P2: one S4D layer counts on a fixed input and predicts the offset ----------------------------------------
@pytest.mark.parametrize("m", [2, 3, 7, 60])
def test_P1_s4d_counts_mod_m(m):
    assert (v("s4d", f"modcount:{m}").verdict, v("s4d", f"modcount:{m}").basis) == ("possible", "P1")


def test_P1_time_invariance_suffices_on_fixed_witness_inputs():
    assert v("mamba,s4d", "witness:pulse:5").basis == "P1"


def test_P2_s4d_predicts_the_offset():
    assert (v("s4d", "offset").verdict, v("s4d", "offset").basis) == ("possible", "P2")


# -- T5 and P3: input-dependent complex diagonal layers and derived length ---------------------------------------
@zoo
@pytest.mark.parametrize("layers,group,verdict", [
    ("aussm", "C2", "possible"), ("aussm", "C6", "possible"), ("aussm", "C60", "possible"),
    ("aussm", "C2xC4", "possible"), ("aussm", "V4", "possible"),
    ("aussm", "S3", "impossible"), ("aussm", "A4", "impossible"), ("aussm", "D4", "impossible"),
    ("aussm", "Q8", "impossible"),
    ("aussm*2", "S3", "possible"), ("aussm*2", "A4", "possible"), ("aussm*2", "D4", "possible"),
    ("aussm*2", "Q8", "possible"), ("aussm*2", "A4xC5", "possible"), ("aussm*2", "S4", "impossible"),
    ("aussm*3", "S4", "possible"), ("dcd*2", "S4", "impossible"), ("dcd*3", "S4", "possible"),
    ("aussm*5", "A5", "impossible"), ("aussm*6", "S5", "impossible"), ("saussm", "C24", "possible"),
])
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


# -- T6: Householder products with eigenvalues in [-1, 1] -----------------------------------------------------------
@zoo
def test_T6_deltaproduct_reaches_s_nh_plus_1_in_one_layer():
    for n in (2, 3, 4, 5):
        r = v(f"deltaproduct(nh={n - 1},neg=true)", f"group:S{n}")
        assert (r.verdict, r.basis) == ("possible", "T6"), r
    assert v("deltaproduct(nh=2,neg=true)", "group:S4").verdict == "open"  # finite depth: no bound
    assert v("deltanet(neg=true)", "parity").verdict == "possible"
    assert v("deltanet(neg=true)", "group:S5/transpositions").verdict == "possible"
    assert v("deltaproduct(nh=2,neg=true)", "group:C6").basis == "T6"  # a rotation = 2 reflections
    assert v("deltaproduct(nh=2)", "parity").verdict == "impossible"  # [0,1] factors: T1


# -- T7: expressivity is not learnability: the oracle answers expressivity ----------------------------------------------
@zoo
def test_T7_oracle_reports_expressivity_for_s3_and_a4():
    assert v("aussm*2", "group:S3").verdict == "possible"
    assert v("aussm*2", "group:A4").verdict == "possible"


# -- non-linear layers, attention, regular languages ------------------------------------------------------------------------
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
    assert v("mamba*2", "tomita:4").verdict == "open"  # star-free: Sarrof et al., depth not determined
    assert v("negmamba", "tomita:5").verdict == "possible"  # V4 = C2 x C2: one sign-flip layer
    assert v("negmamba*3", "tomita:6").verdict == "impossible"  # a letter of period 3
    assert v("s4d", "tomita:6").basis == "T4"


def test_monoid_facts():
    from statetrack.theory.algebra import task_algebra

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


def test_no_rule_contradicts_another():
    # possibility comes from constructions, impossibility from theorems: on a grid they never meet
    from statetrack.theory.algebra import task_algebra
    specs = [s for s in O.DEFAULT_TABLE_LAYERS if all(l.name in MIXERS for l in O.parse_layers(s))]
    for s in specs:
        infos = O.layer_infos(s)
        for t in O.DEFAULT_TABLE_TASKS:
            alg = task_algebra(t)
            assert not (O._possible(infos, alg) and O._impossible(infos, alg)), (s, t)


@pytest.mark.parametrize("task", ["parity:final", "group:S5/transpositions+3cycles", "group:C6/generators+identity",
                                  "modcount:2", "modarith", "modarith-brackets", "cycle:5/every", "evenpairs",
                                  "tomita:1", "tomita:2", "tomita:7", "offset:two-isis", "witness:ones",
                                  "witness:pulse:6", "group:C1"])
def test_every_task_family_gets_a_verdict(task):
    for layers in ("rnn", "mamba", "s4d,mamba", "negmamba*2"):
        r = oracle(layers, task)
        assert r.verdict in ("possible", "impossible", "open") and r.reason


def test_evenpairs_is_star_free_and_dfa_files_work(tmp_path):
    import json

    assert oracle("mamba", "evenpairs").verdict == "open"  # star-free
    spec = {"states": ["e", "o"], "alphabet": ["0", "1"], "start": "e", "accept": ["e"],
            "transitions": {"e": {"0": "e", "1": "o"}, "o": {"0": "o", "1": "e"}}}
    p = tmp_path / "par.json"
    p.write_text(json.dumps(spec))
    assert oracle("mamba,s4d", f"dfa:{p}").verdict == "impossible"
    assert oracle("negmamba", f"dfa:{p}").verdict == "possible"
