"""One JSON schema for a run across train, eval, runs, runs show, rerun, sweep (statetrack.runs.records), as
docs/json.md documents it."""

import json
import re
from pathlib import Path

import pytest

from statetrack.cli import main
from statetrack.runs.records import DETAIL_KEYS, GRID_KEYS, LENGTH_KEYS, METRIC_KEYS, RUN_KEYS

TRAIN = [
    "train",
    "--layers",
    "rnn",
    "--d-model",
    "2",
    "--d-state",
    "4",
    "--steps",
    "20",
    "--eval-every",
    "10",
    "--test-lengths",
    "8,20",
    "--eval-batch",
    "16",
    "--label",
    "tiny rnn",
    "--json",
]


def _lines(capsys):
    return [json.loads(l) for l in capsys.readouterr().out.splitlines()]


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    return str(tmp_path_factory.mktemp("json") / "runs.db")


def test_train_eval_runs_show_rerun(db, capsys):
    assert main(TRAIN + ["--db", db]) == 0
    rows = _lines(capsys)
    assert [tuple(r) for r in rows] == [LENGTH_KEYS] * 2
    run_id, ckpt = rows[0]["run_id"], rows[0]["checkpoint"]
    assert rows[0]["label"] == "tiny rnn" and rows[0]["status"] == "complete"

    assert main(["runs", "--db", db, "--json"]) == 0
    runs = _lines(capsys)
    assert [tuple(r) for r in runs] == [RUN_KEYS] and runs[0] == {k: rows[0][k] for k in RUN_KEYS}

    assert main(["runs", "show", str(run_id), "--db", db, "--json"]) == 0
    (show,) = _lines(capsys)
    assert tuple(show) == DETAIL_KEYS and {k: show[k] for k in RUN_KEYS} == runs[0]
    assert show["config"]["model"]["layers"] == "rnn" and show["config"]["eval"]["lengths"] == [8, 20]
    assert [p["step"] for p in show["curve"]] == [0, 10, 20] and "val_accuracy" in show["curve"][0]
    assert [m["length"] for m in show["metrics"]] == [8, 20]
    assert all(tuple(m) == ("length",) + METRIC_KEYS for m in show["metrics"])
    assert show["metrics"][0] == {k: rows[0][k] for k in ("length",) + METRIC_KEYS}

    assert main(["eval", ckpt, "--lengths", "8,30", "--json"]) == 0
    ev = _lines(capsys)
    assert [tuple(r) for r in ev] == [LENGTH_KEYS] * 2 and ev[0]["run_id"] == run_id
    assert ev[0]["status"] is None and ev[0]["checkpoint"] == ckpt

    assert main(["rerun", str(run_id), "--db", db, "--json"]) == 0
    again = _lines(capsys)
    assert [tuple(r) for r in again] == [LENGTH_KEYS] * 2 and again[0]["run_id"] != run_id
    assert [r["accuracy"] for r in again] == [r["accuracy"] for r in rows]


def test_sweep_rows(db, rnn_study, capsys):
    assert main(["sweep", rnn_study(), "--db", db, "--workers", "1", "--json"]) == 0
    rows = _lines(capsys)
    assert [tuple(r) for r in rows] == [LENGTH_KEYS + GRID_KEYS]
    assert (rows[0]["study"], rows[0]["label"], rows[0]["table"], rows[0]["column"]) == (
        "s",
        "RNN",
        "main",
        "parity",
    )


def test_docs_json_md_names_every_key():
    doc = (Path(__file__).resolve().parents[1] / "docs" / "json.md").read_text()
    documented = set(re.findall(r"^\| `(\w+)` \|", doc, re.M))
    assert set(DETAIL_KEYS) | set(LENGTH_KEYS) <= documented, sorted(
        (set(DETAIL_KEYS) | set(LENGTH_KEYS)) - documented
    )
    for k in GRID_KEYS:
        assert f"`{k}`" in doc
