"""Any stored runs side by side (runs compare), in one figure (plot), as one table (runs export); a rerun's
label of its own, and a label that names several runs said so."""

import csv
import io
import json

import pytest

from statetrack.cli import main
from statetrack.config import EvalConfig, ModelConfig, TrainConfig
from statetrack.runs.runner import rerun, rerun_label, run
from statetrack.runs.store import Store


def _cfg(layers: str, steps: int, lr: float = 0.03):
    return TrainConfig(
        task="parity",
        model=ModelConfig(layers=layers, d_model=2, d_state=8, norm="none"),
        steps=steps,
        lr=lr,
        batch_size=32,
        eval_every=20,
        val_sequences=64,
        device="cpu",
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs: an RNN that learns parity (300 steps), one that has not (2 steps), a Mamba."""
    db = str(tmp_path_factory.mktemp("compare") / "runs.db")
    ev = EvalConfig(lengths=[16, 64], batch_size=128, device="cpu")
    a = run(_cfg("rnn", 300), ev, db=db, label="good")
    b = run(_cfg("rnn", 2), ev, db=db, label="early")
    c = run(_cfg("mamba(conv=0)", 20), ev, db=db, label="mamba")
    return db, a, b, c


def test_compare_api_and_command(runs, capsys, monkeypatch):
    from statetrack.report.compare import compare_runs

    monkeypatch.setenv("COLUMNS", "200")
    db, a, b, c = runs
    assert a.metrics[-1].accuracy > 0.9 and b.metrics[-1].accuracy < 0.75  # the fixture does what it says
    cmp = compare_runs(db, ["good", "early"])
    assert "steps" in cmp.differs and "model.layers" not in cmp.differs
    assert cmp.config["steps"] == [300, 2] and cmp.lengths == [16, 64]
    # the learnt run is above the other beyond both intervals; a run against itself is never
    assert cmp.verdict(64) == "yes" and cmp.beyond[64] == [(0, 1)]
    with pytest.raises(Exception, match="named twice"):
        compare_runs(db, ["good", str(a.run_id)])
    assert main(["runs", "compare", "good", "early", str(c.run_id), "--db", db]) == 0
    out = capsys.readouterr().out
    assert "config: " in out and "steps *" in out and "model.layers *" in out  # the differing keys, marked
    assert "beyond the intervals?" in out and f"{a.run_id} > {b.run_id}" in out
    # the caption follows the intervals: it names the lengths beyond them, never a fixed sentence
    assert "beyond the intervals: at 2 of 2 lengths scored (16, 64)" in " ".join(out.split())
    assert main(["runs", "compare", "good", "early", "--db", db, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [r["label"] for r in d["runs"]] == ["good", "early"]
    assert {c["key"] for c in d["config"] if c["differs"]} == {"steps"}
    assert d["lengths"][1]["beyond_intervals"] == [[a.run_id, b.run_id]]
    assert main(["runs", "compare", "good", "--db", db]) == 2
    assert "two runs or more" in capsys.readouterr().err


@pytest.mark.parametrize("suffix", ["png", "svg", "pdf"])
def test_plot(runs, tmp_path, capsys, suffix):
    from statetrack.report.compare import load_runs, runs_figure
    from statetrack.report.plots import close

    db = runs[0]
    out = tmp_path / f"runs.{suffix}"
    assert main(["plot", "good", "early", "mamba", "--db", db, "--out", str(out)]) == 0
    assert out.stat().st_size > 1000 and "wrote" in capsys.readouterr().out
    fig = runs_figure(load_runs(db, ["good", "early", "mamba"]))
    try:  # the key names every line drawn: the three runs, chance, and the bands
        labels = [t.get_text() for leg in fig.legends for t in leg.get_texts()]
        assert sum(lab.startswith("run ") for lab in labels) == 3 and "chance (per length)" in labels
        assert "band: 95% interval" in labels
        drawn = {
            ln.get_label() for ax in fig.axes for ln in ax.get_lines() if not ln.get_label().startswith("_")
        }
        assert drawn <= set(labels)
    finally:
        close(fig)
    assert main(["plot", "good", "--db", db, "--out", str(tmp_path / "x.jpg")]) == 2
    assert "allowed: .png, .svg, .pdf" in capsys.readouterr().err


def test_plot_writes_a_default_file_it_names(runs, capsys):
    """Without --out, plot writes plots/ beside the database, named by the runs, and says where."""
    from pathlib import Path

    db = runs[0]
    assert main(["plot", "good", "mamba", "--db", db]) == 0
    path = Path(db).parent / "plots" / "good_mamba.png"
    assert path.stat().st_size > 1000 and f"wrote {path}" in capsys.readouterr().out


def test_export_csv_and_parquet(runs, tmp_path, capsys, monkeypatch):
    from statetrack.report.export import export_runs

    db, a, b, c = runs
    assert main(["runs", "export", "--db", db]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(rows) == 6 and {r["label"] for r in rows} == {"good", "early", "mamba"}  # 3 runs x 2 lengths
    good = [r for r in rows if r["label"] == "good"]
    assert [r["length"] for r in good] == ["16", "64"] and good[0]["config.steps"] == "300"
    assert float(good[1]["accuracy"]) == pytest.approx(a.metrics[1].accuracy)
    assert good[0]["config.model.layers"] == "rnn" and "summary.best_val_accuracy" in good[0]
    path = export_runs(db, "csv", tmp_path / "all.csv")
    assert path.read_text().count("\n") == 7
    try:
        import pyarrow.parquet as pq
    except ImportError:
        # one clear line, nothing written
        assert (
            main(["runs", "export", "--format", "parquet", "--out", str(tmp_path / "r.parquet"), "--db", db])
            == 2
        )
        err = capsys.readouterr().err
        assert "needs pyarrow" in err and err.count("\n") == 1 and not (tmp_path / "r.parquet").exists()
    else:
        assert (
            main(["runs", "export", "--format", "parquet", "--out", str(tmp_path / "r.parquet"), "--db", db])
            == 0
        )
        assert pq.read_table(tmp_path / "r.parquet").num_rows == 6
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)  # as where it is not installed
    assert (
        main(["runs", "export", "--format", "parquet", "--out", str(tmp_path / "n.parquet"), "--db", db]) == 2
    )
    assert "needs pyarrow" in capsys.readouterr().err and not (tmp_path / "n.parquet").exists()


def test_rerun_labels_are_unique_and_a_shared_label_is_said(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    ev = EvalConfig(lengths=[16], batch_size=32, device="cpu")
    first = run(_cfg("rnn", 10), ev, db=db, label="s3")
    new, diffs = rerun(first.run_id, db)
    assert diffs == {} and Store(db).run(new.run_id).label == "s3-rerun-2"
    # identical reruns: identical intervals, and the caption says that sampling can explain any difference
    from statetrack.report.compare import compare_runs

    assert (
        compare_runs(db, ["s3", "s3-rerun-2"]).caption().startswith("beyond the intervals: at none of the 1")
    )
    assert main(["runs", "compare", "s3", "s3-rerun-2", "--db", db]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "do not overlap" not in out and "overlap at each" in out
    assert main(["rerun", "s3", "--db", db]) == 0
    assert "(label s3-rerun-3)" in capsys.readouterr().out
    assert rerun_label(Store(db), "s3-rerun-3") == "s3-rerun-4" and rerun_label(Store(db), None) is None
    assert main(["runs", "show", "s3", "--db", db, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["run_id"] == first.run_id and err == ""  # one run has the label: nothing to say
    # two runs given one label by hand: the latest is shown, and the other is named
    second = run(_cfg("rnn", 12), ev, db=db, label="s3")
    assert main(["runs", "show", "s3", "--db", db, "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["run_id"] == second.run_id
    assert "2 complete runs are labelled 's3'" in err and f"ids {first.run_id}, {second.run_id}" in err
