"""Terminal output a person reads: markers stay with their cell, long samples are abbreviated with their
length, runs show prints plain values, a --db in a missing folder is named, and the mark of a difference
from the paper is explained only where a table has published numbers."""

import json
import os
import re
import sqlite3
import subprocess
import sys

import pytest

from conftest import TINY_TRAIN, Cli
from statetrack.cli import main
from statetrack.cli.catalog import abbreviate
from statetrack.cli.output import Col, print_table, wrap


def test_a_marker_stays_with_its_cell(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    rows = [["Negative Mamba (trained on lengths 1-40)", "95.3 [50.1-100.0] ?", "12.5 *"]] * 2
    print_table(
        "t",
        [
            Col("model", lambda r: r[0]),
            Col("8", lambda r: r[1], "right"),
            Col("paper", lambda r: r[2], "right"),
        ],
        rows,
    )
    out = capsys.readouterr().out
    assert not [line for line in out.splitlines() if line.strip() in ("?", "*")], out
    assert "[50.1-100.0] ?" in out and "12.5 *" in out
    assert wrap("95.3 [50.1-100.0] ?", 14) == ["95.3", "[50.1-100.0] ?"]


def test_long_samples_are_abbreviated(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["sample", "tomita:3", "--split", "test", "--length", "500", "--n", "1"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert " ... " in out and "(500 symbols, the middle left out; --json prints them all)" in out
    assert abbreviate(["1"] * 5, 80) == "1 1 1 1 1"
    assert abbreviate([str(i % 10) for i in range(100)], 20) == "0 1 2 3 ... 7 8 9"


def test_runs_show_prints_plain_values(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    db = str(tmp_path / "r.db")
    assert (
        main(
            [
                "train",
                *TINY_TRAIN,
                "--steps",
                "4",
                "--db",
                db,
                "--label",
                "tiny",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["runs", "show", "tiny", "--db", db]) == 0
    out = capsys.readouterr().out
    for bad in ("None", "False", "True"):
        assert bad not in out, out
    values = [line.split(":", 1)[1].strip() for line in out.splitlines() if ":" in line]
    # at most 4 significant digits (0.5059, 1.082, 0.03261), not a float's full repr
    assert not [
        v
        for v in values
        if "." in v and v.replace(".", "").isdigit() and len(v.replace(".", "").lstrip("0")) > 4
    ], out
    assert main(["runs", "show", "last", "--db", db, "--json"]) == 0
    assert re.search(r'"best_val_loss": \d\.\d{6,}', capsys.readouterr().out)  # --json: full precision


def test_db_in_a_missing_folder(tmp_path, capsys):
    db = tmp_path / "nope" / "r.db"
    assert main(["train", "--layers", "rnn", "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"its folder '{tmp_path / 'nope'}' does not exist" in err and err.count("\n") == 1
    assert not (tmp_path / "nope").exists()


@pytest.mark.parametrize("published", [True, False])
def test_differs_legend_only_with_published_numbers(published):
    from statetrack.report.table import caption

    class Score:
        kind, lengths, threshold, fail_below = "per_length", None, 0.9, None

    class Select:
        seeds, lrs, using = "median", "max", "validation"

    class Study:
        select, score, metric, tolerance, length_factor = Select(), Score(), "accuracy", 0.1, 2.0

    assert ("* = differs from the paper" in caption(Study(), "per_length", published)) is published


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """A database with one run labelled 'café | Ω' (text an ASCII terminal lacks, a markdown pipe)."""
    db = str(tmp_path_factory.mktemp("labelled") / "r.db")
    assert (
        main(
            [
                "train",
                *TINY_TRAIN,
                "--label",
                "caf\u00e9 | \u03a9",
                "--db",
                db,
            ]
        )
        == 0
    )
    return db


def _statetrack(*args, env=None, **kw):
    kw.setdefault("encoding", "utf-8")
    return subprocess.run(
        [sys.executable, "-m", "statetrack.cli", *args],
        env={**Cli.env, **(env or {})},
        stderr=subprocess.PIPE,
        timeout=300,
        **kw,
    )


@pytest.mark.parametrize("stdout", ["closed", "/dev/full"])
def test_a_closed_or_full_stdout_is_one_line(labelled, tmp_path, stdout):
    """`runs >&-` and `runs >/dev/full` ended in tracebacks; `train >/dev/full` too, its run recorded.
    Now: the work is done, one line says the output could not be written, exit 2."""

    def run(*args):
        if stdout == "closed":
            return _statetrack(*args, preexec_fn=lambda: os.close(1))
        with open("/dev/full", "w") as full:
            return _statetrack(*args, stdout=full)

    why = "it is closed" if stdout == "closed" else "No space left on device"
    for args in (["runs", "--db", labelled], ["runs", "show", "1", "--db", labelled]):
        p = run(*args)
        assert p.returncode == 2 and "Traceback" not in p.stderr and "Exception ignored" not in p.stderr, (
            p.stderr
        )
        assert p.stderr == (
            f"error: cannot write to standard output: {why}; the command's work is done, its output lost\n"
        )
    db = str(tmp_path / "t.db")
    p = run(
        "train",
        *TINY_TRAIN,
        "--db",
        db,
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr and p.stderr.endswith("its output lost\n"), (
        p.stderr
    )
    assert sqlite3.connect(db).execute("SELECT status FROM runs").fetchall() == [("complete",)]


@pytest.mark.parametrize("encoding", ["ascii", "latin-1"])
def test_any_output_encoding(labelled, encoding):
    """An ASCII-only terminal (or any encoding without the label's letters) used to crash `runs`."""

    for args in (["runs", "--db", labelled], ["runs", "show", "1", "--db", labelled], ["models"]):
        p = _statetrack(
            *args,
            env={"PYTHONIOENCODING": encoding, "COLUMNS": "200"},
            stdout=subprocess.PIPE,
            encoding=encoding,
        )
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
        if args[0] == "runs":
            assert ("caf\u00e9" if encoding == "latin-1" else "caf\\xe9") in p.stdout
            assert "\\u03a9" in p.stdout


@pytest.mark.parametrize("columns", ["5", "1", "12"])
def test_a_very_narrow_terminal_never_cuts_a_value(labelled, capsys, monkeypatch, columns):
    """COLUMNS=5 folded every value mid-word ('statu' / 's: c' / 'o' ...): a word wider than the terminal
    is printed whole, on a line of its own."""

    monkeypatch.setenv("COLUMNS", columns)
    for args in (["runs", "--db", labelled], ["runs", "show", "1", "--db", labelled]):
        capsys.readouterr()
        assert main(args) == 0
        out = capsys.readouterr().out
        words = set(out.split())
        assert main(args + ["--json"]) == 0
        row = json.loads(capsys.readouterr().out.splitlines()[0])
        for key in ("status", "model", "task"):
            assert str(row[key]) in words, (key, row[key], out[:500])
        if "show" in args:  # a path wider than the terminal wraps after its slashes, nothing of it lost
            assert row["checkpoint"] in "".join(out.split()), out[:500]
    assert wrap("complete", 3) == ["complete"] and wrap("a complete run", 5) == ["a", "complete", "run"]
