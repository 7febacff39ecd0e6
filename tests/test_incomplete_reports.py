"""A report never replaces measured numbers with nothing: a study with no complete run in the database is
refused in one line (exit 2) and no file is written; a report with runs missing is written and says at
its top which runs are missing."""

from pathlib import Path

from conftest import TINY_TRAIN
from statetrack.cli import main


def _snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_report_with_no_complete_run_is_refused_and_writes_nothing(tmp_path, capsys, rnn_study):
    study, db = rnn_study(seeds=2), tmp_path / "r.db"
    # the database holds runs, but none of this study
    assert (
        main(
            [
                "train",
                *TINY_TRAIN,
                "--db",
                str(db),
            ]
        )
        == 0
    )
    out = tmp_path / "results"
    out.mkdir()
    for ext in ("md", "csv", "tex"):  # a report measured earlier
        (out / f"s.{ext}").write_text(f"measured {ext}\n")
    before = _snapshot(out)
    capsys.readouterr()
    for extra in (["--html"], ["--json"], ["--out", ""]):
        assert main(["report", study, "--db", str(db), "--out", str(out), *extra]) == 2
        o, err = capsys.readouterr()
        assert o == "" and "Traceback" not in err and len(err.splitlines()) == 1, err
        assert "no run of study 's' at scale 'quick' is complete" in err and "(0 of 2)" in err, err
        assert "no report written" in err and "statetrack sweep" in err
        assert _snapshot(out) == before  # nothing replaced, nothing added


def test_a_report_of_failed_runs_only_is_refused(tmp_path, capsys, rnn_study):
    db, bad = tmp_path / "r.db", rnn_study(seeds=2, lr=1e9)  # diverges: every run failed
    assert main(["sweep", bad, "--db", str(db), "--workers", "1"]) == 1
    capsys.readouterr()
    assert main(["report", bad, "--db", str(db), "--out", str(tmp_path / "rep")]) == 2
    assert "is complete" in capsys.readouterr().err and not (tmp_path / "rep").exists()


def test_a_partial_report_names_its_missing_runs_at_its_top(tmp_path, capsys, rnn_study):
    study, db = rnn_study(seeds=2), tmp_path / "r.db"
    assert main(["sweep", study, "--db", str(db), "--workers", "1"]) == 0  # seeds 0 and 1
    capsys.readouterr()
    out = tmp_path / "results"
    assert main(["report", study, "--db", str(db), "--seeds", "4", "--out", str(out), "--html"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert printed.startswith("This report is incomplete: 2 of the grid's 4 runs"), printed[:300]
    assert "RNN on parity, lr 0.01: seeds 2, 3" in printed
    md = (out / "s.md").read_text().splitlines()
    first = next(i for i, line in enumerate(md) if line.startswith("This report is incomplete"))
    assert first < next(i for i, line in enumerate(md) if line.startswith("## "))  # above every table
    assert "2 of the grid's 4 runs are not complete" in md[first] and "seeds 2, 3" in md[first]
    assert "seeds 2, 3" in (out / "s.html").read_text()


def test_a_failed_run_is_named_with_its_reason_as_plain_text(tmp_path, capsys, rnn_study):
    import sqlite3

    study, db = rnn_study(seeds=2), tmp_path / "r.db"
    assert main(["sweep", study, "--db", str(db), "--workers", "1"]) == 0
    with sqlite3.connect(db) as con:  # seed 1 failed, its error written by someone else's code
        con.execute(
            "UPDATE runs SET status = 'failed', error = ? WHERE seed = 1",
            ("loss diverged <img src=x> ![a](http://e.invalid/x)\nsecond line",),
        )
    capsys.readouterr()
    out = tmp_path / "results"
    assert main(["report", study, "--db", str(db), "--out", str(out), "--html"]) == 0
    md = (out / "s.md").read_text()
    line = next(x for x in md.splitlines() if x.startswith("This report is incomplete"))
    assert "missing: 1 (1 of them failed)" in line
    assert "seed 1 (failed: loss diverged  img src=x    a (http:  e.invalid x))" in line, line
    assert "<img" not in md and "](" not in md.split("## ")[0] and "second line" not in md
    assert "<img" not in (out / "s.html").read_text()
