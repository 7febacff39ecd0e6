"""Counterexamples built from a model's weights: T1 (1^T), T2/T4 (W from the S4D phases), and the search."""

import math

import pytest
import torch

from statetrack.analysis.counterexamples import choose_w, counterexample, s4d_phases
from statetrack.config import ModelConfig
from statetrack.model import build_model
from statetrack.tasks import get_task


def _model(layers, seed=0, **kw):
    torch.manual_seed(seed)
    return build_model(ModelConfig(layers=layers, **kw), get_task("parity")).eval()


def test_T1_ones_witness_for_a_mamba_stack():
    r = counterexample(_model("mamba(conv=0)*2"), max_len=2000)
    assert r["theorem"] == "T1" and r["witness"] == "1^T" and r["found"]
    assert r["tail_accuracy"] == 0.5  # the output is constant, the parity alternates
    assert r["output_periodic_from"] < 2000


def test_T4_chooses_w_from_the_s4d_phases():
    m = _model("mamba(conv=0),s4d", d_model=4, d_state=4)
    s4d = m.blocks[1].mixer
    with torch.no_grad():  # one undamped mode with phase 2/5 (period 5), the others decay fast
        s4d.log_A_real.fill_(3.0)
        s4d.log_A_real[0, 0] = -60.0
        s4d.log_dt.fill_(0.0)
        s4d.A_imag[0, 0] = 2 * math.pi * 2 / 5
    ph = [p for p in s4d_phases(m, horizon=2000) if p["relevant"]]
    assert len(ph) == 1 and abs(ph[0]["phase"] - 0.4) < 1e-6
    assert choose_w(ph, tol=1e-3)["W"] == 5
    r = counterexample(m, max_len=2000, tol=1e-3)
    assert r["theorem"] == "T4" and r["W"] == 5 and r["witness"] == "(1 0^4)^T" and r["found"]
    assert abs(r["tail_accuracy"] - 0.5) < 0.05
    # the output repeats with period W; the undamped aligned mode still grows linearly per period (U2 of
    # Khavari2025 App. B), which float32 stops only far beyond this length, so the state gap is reported, not zero
    assert r["output_periodic_from"] < 2000
    assert r["state_gap"] < 0.01 * r["state_norm"]


def test_T2_s4d_with_a_negative_eigenvalue_still_fails():
    # the claim "S4 with negative eigenvalues reaches 100% on parity" (contradicts T2): give S4D an
    # eigenvalue at -1 and the witness still defeats it
    m = _model("s4d", d_model=4, d_state=2)
    with torch.no_grad():
        m.blocks[0].mixer.log_A_real.fill_(-60.0)
        m.blocks[0].mixer.log_dt.fill_(0.0)
        m.blocks[0].mixer.A_imag.fill_(math.pi)
    r = counterexample(m, max_len=2000)
    assert r["theorem"] == "T2" and r["W"] == 2 and r["found"]


def test_no_theorem_covers_negative_mamba_and_the_search_finds_nothing_on_the_construction():
    from statetrack.constructions import build

    r = counterexample(build("parity-negmamba").model, max_len=1500)
    assert r["theorem"] is None and r["found"] is False
    assert "no theorem" in r["message"] and "1500" in r["message"]


def test_search_finds_a_failure_for_an_untrained_rnn():
    r = counterexample(_model("rnn", d_model=4, d_state=4), max_len=300)
    assert r["theorem"] is None and r["found"] is True


def test_parity_or_a_regular_task():
    from statetrack.errors import UserError

    with pytest.raises(UserError):  # a parity model does not read S3's six tokens
        counterexample(_model("mamba"), task="group:S3")
    with pytest.raises(UserError, match="not regular"):
        counterexample(_model("mamba"), task="modarith-brackets:5")


def test_witness_families_of_a_regular_task():
    """Tomita 1 (1*) for a model that answers 'accept' after any string: wrong on the family's rejected
    member from its first string on; the parity construction on Tomita 5's families: found or not, named."""
    from statetrack.config import ModelConfig
    from statetrack.model import build_model
    from statetrack.tasks import get_task

    model = build_model(ModelConfig(layers="rnn", d_model=2, d_state=2), get_task("tomita:1"))
    with torch.no_grad():
        model.head.bias.copy_(torch.tensor([-100.0, 100.0]))  # always 'accepted'
        model.head.weight.zero_()
    r = counterexample(model, task="tomita:1", max_len=50)
    assert r["found"] and r["witness"] == "(1)^n vs 0 (1)^n" and r["first_error"] == 1
    assert "first wrong at n = 0" in r["message"]
