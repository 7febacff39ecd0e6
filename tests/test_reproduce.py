import textwrap

import pytest

from statetrack.errors import UserError
from statetrack.experiments import builtin_studies, load_study
from statetrack.reproduce import reproduce
from statetrack.runs.store import Store

TINY = textwrap.dedent("""
    name: tiny
    title: tiny study
    source: test
    task: parity
    published_columns: {extrapolation: "extrap."}
    train: {batch_size: 16, eval_every: 10, val_sequences: 32, lr: 0.01}
    models:
      - label: RNN
        model: {layers: rnn, d_model: 2, d_state: 4}
        train_lengths: [4, 6]
        published: {extrapolation: 1.0}
      - label: Mamba
        model: {layers: "mamba(conv=0)", d_model: 4, d_state: 4}
        train_lengths: [4, 4]
    scales:
      quick: {seeds: 2, steps: 20, eval_batch: 8, test_lengths: [8, 30]}
""")


@pytest.fixture
def tiny(tmp_path):
    p = tmp_path / "tiny.yaml"
    p.write_text(TINY)
    return str(p)


def test_builtin_studies_validate():
    for name in builtin_studies():
        study = load_study(name)
        for scale in study.scales:
            assert study.cells(scale)


def test_reproduce_runs_grid_then_reuses(tiny, db):
    r = reproduce(tiny, db=db, workers=2)
    results, table = r.results, r.table
    assert r.study.name == "tiny" and r.written == ()
    assert len(results) == 4 and all(r.status == "complete" for _, r in results)
    assert [row["label"] for row in table.rows] == ["RNN", "Mamba"]
    assert all(row["seeds"] == 2 for row in table.rows)
    md = table.markdown()
    assert "| RNN |" in md and "100.0" in md  # the published column
    n = Store(db).counts()["runs"]
    again = reproduce(tiny, db=db, workers=1).results
    assert all(r.reused for _, r in again)
    assert Store(db).counts()["runs"] == n
    assert [r.metrics for _, r in again] == [r.metrics for _, r in results]


def test_reproduce_writes_the_report_it_read_back_and_keeps_a_fuller_one(tiny, db, tmp_path):
    from statetrack.report.folder import ReportExists

    out = tmp_path / "reports"
    r = reproduce(tiny, db=db, out=out, figures=(), meta={"Command": "a notebook"})
    md = out / "tiny.md"
    assert r.written == (md,) and md.is_file()
    text = md.read_text()
    assert "a notebook" in text and "Wall time of the sweep" in text
    assert r.table.markdown() in text  # the table printed is the one written: one route
    before = md.read_text()
    with pytest.raises(ReportExists):  # one seed would replace the report of two: refused before it runs
        reproduce(tiny, db=db, seeds=1, out=out, figures=())
    assert md.read_text() == before


def test_bad_study_file(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("name: x\ntitle: t\nsource: s\ntask: parity\nmodels: []\nscales: {}\nextra_key: 1\n")
    with pytest.raises(UserError, match="extra_key"):
        load_study(str(p))
    p.write_text("name: [unclosed\n")
    with pytest.raises(UserError, match="not valid YAML"):
        load_study(str(p))
