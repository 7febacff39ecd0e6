"""The scorecard of a plugin's mixer written as docs/extending.md writes it, and the transition protocol:
``spectrum`` and ``counterexample`` on modules of one's own (a state that grows with the length, a
diagonal declared by ``transition(x)``, a module declared linear that provides no transition)."""

import importlib
import subprocess
import sys

import pytest
import torch
from torch import nn

from statetrack.analysis.counterexamples import GROWING_STATE, counterexample
from statetrack.analysis.spectra import spectrum
from statetrack.config import ModelConfig
from statetrack.layers import Properties
from statetrack.layers.adapters import register_module
from statetrack.model import build_model
from statetrack.tasks import get_task
from test_extending import base_env, doc_blocks


@pytest.fixture(scope="module")
def mystuff(tmp_path_factory):
    """The plugin module of docs/extending.md, written from the page and imported (it registers flipflop,
    signeddiag and stackedgru)."""
    d = tmp_path_factory.mktemp("plugin")
    files, _, _ = doc_blocks()
    for name, text in files.items():
        (d / name).write_text(text)
    sys.path.insert(0, str(d))
    try:
        yield importlib.import_module("mystuff")
    finally:
        sys.path.remove(str(d))


class PlainDiag(nn.Module):
    """A causal module of one's own: h_t = sigmoid(W x_t) h_{t-1} + x_t. Declared linear, it provides no
    transition to read."""

    def __init__(self, d_model, _d_state):
        super().__init__()
        self.a = nn.Linear(d_model, d_model)

    def gates(self, x):
        return torch.sigmoid(self.a(x))

    def forward(self, x):
        a, h, ys = self.gates(x), torch.zeros_like(x[:, 0]), []
        for t in range(x.shape[1]):
            h = a[:, t] * h + x[:, t]
            ys.append(h)
        return torch.stack(ys, 1)


class GatedDiag(PlainDiag):
    """The same module, declaring its diagonal transition."""

    def transition(self, x):
        return self.gates(x)


DIAG = Properties(input_dependent=True, eigenvalues="[0,1]", structure="diagonal")
register_module("test-gateddiag", GatedDiag, DIAG, "a gated diagonal module of the tests")
register_module("test-plaindiag", PlainDiag, DIAG, "a gated diagonal module without transition(x)")
register_module(
    "test-plainlti",
    PlainDiag,
    Properties(input_dependent=False, eigenvalues="complex", structure="diagonal"),
    "declared time-invariant, without transition(x)",
)


def _parity_model(layers):
    torch.manual_seed(0)
    return build_model(ModelConfig(layers=layers, d_model=4, d_state=4), get_task("parity")).eval()


def test_a_module_whose_state_grows_gets_its_counterexample_and_its_spectrum():
    m = _parity_model("test-gateddiag")
    r = counterexample(m, max_len=300)  # T1 from its declaration; its state is the inputs seen so far
    assert r["theorem"] == "T1" and r["found"] and r["state_gap"] is None
    assert GROWING_STATE in r["message"]
    layer = spectrum((m, get_task("parity")), length=16)["layers"][0]
    assert "no_transition" not in layer
    assert 0 <= layer["min_modulus"] <= layer["max_modulus"] <= 1  # sigmoid gates: eigenvalues in (0, 1)
    # the eigenvalues are the module's own transition's values
    x = m.block(0).norm(m.embed(torch.tensor([[1, 0, 1]])))
    torch.testing.assert_close(m.block(0).mixer.eigenvalues(x).real, m.block(0).mixer.body.transition(x))


def test_a_module_declared_linear_without_a_transition_is_told_what_to_provide():
    layer = spectrum((_parity_model("test-plaindiag"), get_task("parity")), length=8)["layers"][0]
    assert "min_real" not in layer
    assert "non-linear" not in layer["no_transition"]
    assert "transition(x)" in layer["no_transition"] and "eigenvalues(x)" in layer["no_transition"]
    # declared time-invariant (T2): the witness's W reads the phases it does not give, and says so
    r = counterexample(_parity_model("test-plainlti"), max_len=200)
    assert r["theorem"] == "T2" and r["found"]
    assert "layer 1 (test-plainlti)" in r["message"] and "must provide transition(x)" in r["message"]


@pytest.mark.usefixtures("mystuff")
def test_a_plugin_mixer_from_the_docs_gets_its_scorecard(tmp_path):
    from statetrack.scorecard import PUBLISHED, scorecard, write_card

    db = tmp_path / "runs.db"
    card = scorecard("signeddiag", seeds=1, steps=10, test_lengths="24..25", db=db, workers=1, progress=False)
    columns = ["parity", "count mod 3", "S3", "A5", "Tomita 1"]
    # verdicts from its declared properties: real diagonal input-dependent eigenvalues in [-1, 1]
    assert "declared input-dependent, linear, eigenvalues [-1,1], structure diagonal" in card.declared[0]
    verdicts = {v["task"]: v for v in card.verdicts}
    assert list(verdicts) == columns
    assert verdicts["parity"]["verdict"] == "possible" and verdicts["A5"]["verdict"] == "impossible"
    # learnability: every task's cell scored, one seed each, beside its chance
    own = card.own()
    assert [c.column for c in own] == columns and all(len(c.scored) == 1 for c in own)
    assert own[0].median().chance == pytest.approx(0.5)
    # horizons on the witness families of each task, up to the longest test length
    assert set(card.horizons) == set(columns)
    assert all(h["horizon_max"] == 25 and h["families_tested"] > 0 for h in card.horizons.values())
    # the learned spectrum through its declared transition (tanh gates: real, in (-1, 1))
    layer = card.spectra["parity"]["layers"][0]
    assert layer["max_modulus"] < 1 and set(card.figures) == set(columns)
    # its row on the leaderboard, beside the built-in rows where the published table is at hand
    labels = [r[0] for r in card.table.leaderboard()]
    assert "signeddiag" in labels
    if PUBLISHED.is_file():
        assert "Mamba [0,1]" in labels and len(labels) >= 28
    paths = write_card(card, tmp_path / "cards")
    names = {p.name for p in paths}
    assert {
        "scorecard-signeddiag.md",
        "scorecard-signeddiag.html",
        "scorecard-signeddiag-leaderboard.html",
    } <= names
    md = (tmp_path / "cards" / "scorecard-signeddiag.md").read_text()
    for heading in (
        "What the oracle says",
        "Learnability",
        "Failure horizons",
        "Learned spectrum",
        "Leaderboard",
    ):
        assert f"## {heading}" in md
    assert "| **signeddiag** |" in md
    board = (tmp_path / "cards" / "scorecard-signeddiag-leaderboard.html").read_text()
    assert ">signeddiag</td>" in board


def test_an_undeclared_module_is_said_undeclared_with_how_to_declare():
    from statetrack.scorecard import declarations

    register_module("test-undeclared", PlainDiag)
    (line,) = declarations("test-undeclared")
    assert "undeclared" in line and "register_module" in line and "properties" in line
    layer = spectrum((_parity_model("test-undeclared"), get_task("parity")), length=8)["layers"][0]
    assert "declares no properties" in layer["no_transition"] and "transition(x)" in layer["no_transition"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["mambaa"], "did you mean 'mamba'"),
        (["mamba(negg=true)"], "negg"),
        (["mamba", "--scale", "quik"], "did you mean 'quick'"),
        (["mamba", "--test-lengths", "5..2"], "--test-lengths"),
        (["mamba", "--steps", "0"], "--steps"),
    ],
)
def test_bad_scorecard_input_is_one_line(args, says, tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "statetrack.cli", "scorecard", *args, "--db", str(tmp_path / "x.db")],
        capture_output=True,
        text=True,
        env=base_env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and says in p.stderr
    assert not (tmp_path / "x.db").exists()  # nothing ran


@pytest.mark.slow
def test_a_built_in_mixers_card_at_the_quick_scale_is_its_published_row(tmp_path):
    """The card runs the zoo's protocol itself: one Mamba layer's card at the quick scale (15 runs, about
    4 minutes on 2 cores) scores every cell as the published quick-scale row 'Mamba [0,1]' does."""
    from statetrack.scorecard import PUBLISHED, scorecard

    if not PUBLISHED.is_file():
        pytest.skip(f"no published table at {PUBLISHED}")
    card = scorecard("mamba(conv=0)", db=tmp_path / "runs.db", workers=2, progress=False)
    rows = dict(card.table.rows)
    for mine, published in zip(rows["mamba(conv=0)"], rows["Mamba [0,1]"], strict=True):
        assert mine.verdict == published.verdict and mine.outcome == published.outcome
        assert mine.median().accuracy == pytest.approx(published.median().accuracy, abs=0.02)
