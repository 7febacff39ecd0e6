"""The CLI: each command works end to end; bad input is one line, exit code 2, database untouched."""

import hashlib
import json
import os
import subprocess
import sys

import pytest

from statetrack.cli import main
from statetrack.runs.records import LENGTH_KEYS

TRAIN = [
    "train",
    "--layers",
    "rnn",
    "--d-model",
    "2",
    "--d-state",
    "8",
    "--steps",
    "30",
    "--eval-every",
    "10",
    "--test-lengths",
    "8,20",
    "--eval-batch",
    "16",
]


def _digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture
def trained(db, capsys):
    assert main(TRAIN + ["--db", db, "--json"]) == 0
    rows = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    return db, rows


def test_train_json_rows(trained):
    db, rows = trained
    assert [r["length"] for r in rows] == [8, 20]
    for r in rows:
        assert tuple(r) == LENGTH_KEYS
        assert r["model"] == "rnn" and (r["train_min_len"], r["train_max_len"]) == (8, 8)


def test_train_runs_at_one_thread_unless_told_and_records_it(db, capsys):
    """`train` sets one torch thread by default (--threads 0: torch's default) and the run records the count
    it ran at; a bad count is one line and exit status 2."""
    import torch

    from statetrack.runs.store import Store

    short = [a if a != "30" else "2" for a in TRAIN]
    try:
        torch.set_num_threads(2)
        assert main(short + ["--db", db]) == 0
        assert main(short + ["--db", db, "--threads", "0"]) == 0  # torch's setting left as it was
        assert main(short + ["--db", db, "--threads", "3"]) == 0
        got = [Store(db).run(i).versions["threads"] for i in (1, 2, 3)]
        assert got == [1, 1, 3]
    finally:
        torch.set_num_threads(1)  # the test session's setting (conftest)
    capsys.readouterr()
    assert main(short + ["--db", db, "--threads", "-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad thread count '-1'" in err[0] and "0 for torch's default" in err[0]


def test_runs_and_eval(trained, capsys):
    db, rows = trained
    assert main(["runs", "--db", db, "--json"]) == 0
    runs = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert runs[0]["status"] == "complete"
    assert main(["runs", "show", str(runs[0]["run_id"]), "--db", db]) == 0
    assert "config" in capsys.readouterr().out
    assert main(["eval", runs[0]["checkpoint"], "--lengths", "8,30", "--json"]) == 0
    ev = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert [r["length"] for r in ev] == [8, 30]


BAD = [
    (["train", "--layers", "foo"], "unknown mixer 'foo'"),
    (["train", "--layers", "mamba,,s4d"], "malformed layer spec"),
    (["train", "--layers", "rnn", "--train-lengths", "-3"], "bad training lengths"),
    (["train", "--layers", "rnn", "--train-lengths", "0-5"], "bad training lengths"),
    (["train", "--layers", "rnn", "--train-lengths", "9-4"], "bad training lengths"),
    (["train", "--layers", "rnn", "--test-lengths", ""], "empty test lengths"),
    (["train", "--layers", "rnn", "--test-lengths", "0,5"], "bad test length 0"),
    (
        ["train", "--layers", "rnn", "--train-lengths", "8", "--test-lengths", "4,100"],
        "shorter than the training range",
    ),
    (["train", "--layers", "mamba(cov=1)"], "unknown option 'cov'"),
    (["train", "--layers", "rnn", "--task", "nope"], "unknown task family 'nope'"),
    (["train", "--layers", "rnn", "--steps", "0"], "bad steps"),
    (["eval", "missing.safetensors"], "not found"),
    (["runs", "show", "999"], "no run with id 999"),
    (["reproduce", "no-such-study"], "unknown study"),
    (["reproduce", "khavari2025-parity", "--scale", "huge"], "unknown scale 'huge'"),
    (["nosuchcommand"], "invalid choice"),
]


@pytest.mark.parametrize("argv,needle", BAD)
def test_bad_input_one_line_exit_2_db_untouched(trained, capsys, argv, needle):
    db, _ = trained
    before = _digest(db)
    extra = ["--db", db] if argv[0] in ("train", "runs", "reproduce") else []
    assert main(argv + extra) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
    assert _digest(db) == before


def test_console_script_exit_code(tmp_path):
    env = dict(os.environ)
    p = subprocess.run(
        [sys.executable, "-m", "statetrack.cli", "train", "--layers", "bogus"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
    )
    assert p.returncode == 2 and p.stderr.startswith("error: unknown mixer") and p.stderr.count("\n") == 1
    assert not (tmp_path / "runs").exists()
