"""The oracle on the frontier mixers: one row per (layers), the verdict and its basis on parity, C3, S3
and A5, at one and two layers, each checked against the theorem it names (docs/science.md)."""

import pytest

from statetrack.theory.layer_classes import layer_infos
from statetrack.theory.verdicts import oracle

TASKS = ("parity", "group:C3", "group:S3", "group:A5")

# (layers, verdict:basis on parity, C3, S3, A5)
TABLE = [
    # non-negative scalar / diagonal gates: T1 at any depth (Mamba-2, mLSTM, GLA)
    ("mamba2", "impossible:T1", "impossible:T1", "impossible:T1", "impossible:T1"),
    ("mamba2*2", "impossible:T1", "impossible:T1", "impossible:T1", "impossible:T1"),
    ("mlstm", "impossible:T1", "impossible:T1", "impossible:T1", "impossible:T1"),
    ("mlstm*2", "impossible:T1", "impossible:T1", "impossible:T1", "impossible:T1"),
    ("gla", "impossible:T1", "impossible:T1", "impossible:T1", "impossible:T1"),
    ("gla*2", "impossible:T1", "impossible:T1", "impossible:T1", "impossible:T1"),
    # real sign flips: parity in one layer; C3, S3, A5 never (orders not powers of 2: PD / T5)
    ("mamba2(neg=true)", "possible:T5", "impossible:PD", "impossible:PD", "impossible:PD"),
    ("mamba2(neg=true)*2", "possible:T5", "impossible:PD", "impossible:PD", "impossible:PD"),
    # complex diagonal: abelian groups in one layer, S3 (derived length 2) in two, A5 never (T5)
    ("mamba3", "possible:T5", "possible:T5", "impossible:T5", "impossible:T5"),
    ("mamba3*2", "possible:T5", "possible:T5", "possible:P3", "impossible:T5"),
    # Householder with a decay gate: [0,1] as DeltaNet (T1); [-1,1] one reflection per token (T6), a
    # constant letter at most doubles the period (PD); two layers the dihedral groups (P4); A5 open
    ("gateddeltanet", "impossible:T1", "impossible:T1", "impossible:T1", "impossible:T1"),
    ("gateddeltanet*2", "impossible:T1", "impossible:T1", "impossible:T1", "impossible:T1"),
    ("gateddeltanet(neg=true)", "possible:T6", "impossible:PD", "impossible:PD", "impossible:PD"),
    ("gateddeltanet(neg=true)*2", "possible:T6", "possible:P4", "possible:P4", "open:-"),
    # RWKV-7 as parameterised (a in (0, 1), w in (0.545, 1)): eigenvalues in (-1/2, 1]; on a constant input the
    # cast state ends constant or alternating with period 2, so one layer fails periods 3 and 5 (T1c) and parity
    # (period 2) is open; a second layer may read an alternating input: open
    ("rwkv7", "open:-", "impossible:T1c", "impossible:T1c", "impossible:T1c"),
    ("rwkv7*2", "open:-", "open:-", "open:-", "open:-"),
    # Gated DeltaProduct: [0,1] as DeltaNet (T1); [-1,1] with n_h = 2 tracks S3 and A5 in one layer (T6: 2-D
    # and 3-D rotations, each 2 reflections), with n_h = 1 it is Gated DeltaNet (PD)
    ("gateddeltaproduct", "impossible:T1", "impossible:T1", "impossible:T1", "impossible:T1"),
    ("gateddeltaproduct(neg=true)", "possible:T6", "possible:T6", "possible:T6", "possible:T6"),
    ("gateddeltaproduct(neg=true,nh=1)", "possible:T6", "impossible:PD", "impossible:PD", "impossible:PD"),
    # KDA: Gated DeltaNet with a diagonal gate, the same verdicts
    ("kda", "impossible:T1", "impossible:T1", "impossible:T1", "impossible:T1"),
    ("kda(neg=true)", "possible:T6", "impossible:PD", "impossible:PD", "impossible:PD"),
    ("kda(neg=true)*2", "possible:T6", "possible:P4", "possible:P4", "open:-"),
    # PD-SSM: any finite automaton in one layer (P5); the row form any group
    ("pdssm", "possible:P5", "possible:P5", "possible:P5", "possible:P5"),
    ("pdssm(rows=true)", "possible:P5", "possible:P5", "possible:P5", "possible:P5"),
    # time invariant: T2 (parity), T4 (the groups' aligned witnesses)
    ("lru", "impossible:T2", "impossible:T4", "impossible:T4", "impossible:T4"),
    ("lru*2", "impossible:T2", "impossible:T4", "impossible:T4", "impossible:T4"),
    # non-linear: outside the theorems, a finite automaton in enough units
    ("slstm", "possible:NL", "possible:NL", "possible:NL", "possible:NL"),
    ("slstm*2", "possible:NL", "possible:NL", "possible:NL", "possible:NL"),
]


@pytest.mark.parametrize("row", TABLE, ids=[r[0] for r in TABLE])
def test_verdict_table(row):
    layers, *want = row
    got = [f"{oracle(layers, t).verdict}:{oracle(layers, t).basis}" for t in TASKS]
    assert got == want, layers


def test_layer_classes_of_the_frontier_mixers():
    cls = {
        spec: layer_infos(spec)[0].cls
        for spec in (
            "mamba2",
            "mamba2(neg=true)",
            "mamba3",
            "mamba3(rope=false)",
            "gateddeltanet",
            "rwkv7",
            "mlstm",
            "slstm",
            "lru",
            "gla",
        )
    }
    assert cls == {
        "mamba2": "nonneg",
        "mamba2(neg=true)": "real",
        "mamba3": "complex",
        "mamba3(rope=false)": "nonneg",
        "gateddeltanet": "householder",
        "rwkv7": "dplr",
        "mlstm": "nonneg",
        "slstm": "nonlinear",
        "lru": "lti",
        "gla": "nonneg",
    }
    (gdn,) = layer_infos("gateddeltanet(neg=true)")
    assert gdn.factor_domain == "[-1,1]" and gdn.props.n_h == 1


def test_mamba3_without_rotations_loses_parity():
    # the paper's ablation: with theta = 0 the transitions are real decays in (0, 1]
    assert (oracle("mamba3(rope=false)", "parity").verdict, oracle("mamba3(rope=false)", "parity").basis) == (
        "impossible",
        "T1",
    )


def test_rwkv7_reason_names_the_range_and_the_open_cases_say_what_would_decide():
    r = oracle("rwkv7", "parity")
    assert r.verdict == "open" and "(-1/2, 1]" in r.reason and "T1c" in r.reason
    assert "period 2" in r.reason and "would decide it" in r.reason
    c3 = oracle("rwkv7", "modcount:3")
    assert (c3.verdict, c3.basis) == ("impossible", "T1c") and c3.facts["period_bound"] == 2
    assert (
        oracle("mamba,rwkv7", "modcount:3").basis == "T1c"
    )  # a non-negative layer first: still a constant input
    two = oracle("rwkv7*2", "modcount:3")
    assert two.verdict == "open" and "complex eigenvalues" in two.reason
    # a star-free language (Tomita 2, (10)*): no letter of period > 1, so T1c says nothing
    o = oracle("rwkv7", "tomita:2")
    assert o.verdict == "open" and "would decide it" in o.reason and "Peng2025" in o.reason
    # a stack with one sign-flip layer does parity whatever RWKV-7 does
    assert oracle("rwkv7,negmamba", "parity").verdict == "possible"


def test_frontier_mixers_on_counting_and_star_free():
    assert oracle("mamba3", "modcount:3").basis == "P1"  # a constant rotation by 2 pi/3
    assert oracle("lru", "modcount:5").basis == "P1"  # time invariance suffices on a fixed input
    assert oracle("mamba2(neg=true)", "modcount:3").verdict == "impossible"
    assert oracle("gla", "tomita:1").verdict == "possible"  # star-free, cascade height 1 (SF)
    assert oracle("mamba3*3", "tomita:2").basis == "SF"


@pytest.mark.parametrize(
    "layers,task,quotient",
    [
        ("aussm", "group:S3", 2),
        ("mamba3", "group:S3", 2),
        ("negmamba", "group:S3", 2),
        ("deltanet(neg=true)", "group:S3", 2),
        ("gateddeltanet(neg=true)", "group:S3", 2),
        ("mamba", "group:S3", 1),
        ("lru", "group:S3", 1),
        ("rwkv7", "group:S3", 2),
        ("aussm*3", "group:A5", 1),
        ("negmamba", "group:C2xC4", 4),
        ("aussm", "group:S4", 2),
        ("aussm*2", "group:S4", 6),
        ("mamba", "parity", 1),
    ],
)
def test_impossible_verdicts_name_the_quotient_still_tracked(layers, task, quotient):
    """T5 applied to quotients: k complex layers track H / H^(k), real layers H / (squares)^k; non-negative
    and time-invariant layers none. The accuracy ceiling on uniform labels is 1 / |kernel|."""
    v = oracle(layers, task)
    assert v.verdict == "impossible"
    assert v.facts["quotient_tracked"] == quotient
    from statetrack.theory.actions import task_algebra

    assert v.facts["accuracy_ceiling"] == pytest.approx(quotient / task_algebra(task).h_order)
