"""Every JSON or YAML document read from a file has a size and a depth limit (``statetrack.untrusted``):
a checkpoint whose metadata nests 200,000 brackets, a DFA file, a study or run config, a database row,
each over a limit, is one line naming the document, exit 2, never a RecursionError or a wait."""

import json
import sqlite3
import time

import pytest
import torch
from safetensors.torch import save_file

from conftest import TINY_TRAIN
from statetrack.cli import main
from statetrack.training.checkpoint import FORMAT
from statetrack.untrusted import MAX_DEPTH, MAX_JSON_BYTES, MAX_YAML_BYTES

DEEP = "[" * 200_000 + "]" * 200_000


def _craft(path, config, extra="{}"):
    save_file(
        {"embed.weight": torch.zeros(2, 2)},
        str(path),
        metadata={"format": FORMAT, "config": config, "extra": extra},
    )
    return str(path)


def _one_line(capsys, argv, *needles, within: float = 5.0):
    t0 = time.time()
    assert main(argv) == 2, argv
    assert time.time() - t0 < within
    err = capsys.readouterr().err
    assert "Traceback" not in err and "RecursionError" not in err, err
    line = err.splitlines()[-1]
    assert line.startswith("error: ") and sum(x.startswith("error") for x in err.splitlines()) == 1, err
    for n in needles:
        assert n in line, line
    return line


@pytest.mark.parametrize("cmd", [["eval"], ["counterexample"], ["spectrum"]])
@pytest.mark.parametrize("where", ["config", "extra"])
def test_a_checkpoint_whose_metadata_nests_200000_brackets(tmp_path, capsys, cmd, where):
    ok = json.dumps({"task": "parity"})
    p = _craft(
        tmp_path / "deep.safetensors", DEEP if where == "config" else ok, DEEP if where == "extra" else "{}"
    )
    _one_line(capsys, cmd + [p], p, f"more than {MAX_DEPTH} levels deep")


def test_a_checkpoint_whose_config_is_too_big(tmp_path, capsys):
    big = json.dumps({"task": "parity", "pad": "x" * (MAX_JSON_BYTES + 1)})
    p = _craft(tmp_path / "big.safetensors", big)
    _one_line(capsys, ["eval", p], p, f"over the limit of {MAX_JSON_BYTES:,} bytes")


def test_nesting_up_to_the_limit_is_read(tmp_path, capsys):
    from statetrack.untrusted import load_json

    assert load_json("[" * MAX_DEPTH + "]" * MAX_DEPTH, "x") is not None
    # a checkpoint whose metadata nests within the limit goes on to the next check (here: its config)
    p = _craft(tmp_path / "ok.safetensors", json.dumps({"task": "parity", "x": [[[[1]]]]}))
    _one_line(capsys, ["eval", p], "declares a bad config")


def test_a_dfa_file_that_nests_too_deep_or_is_too_big(tmp_path, capsys):
    deep = tmp_path / "deep.json"
    deep.write_text('{"states": ' + DEEP + "}")
    _one_line(
        capsys,
        ["train", "--layers", "rnn", "--task", f"dfa:{deep}", "--steps", "1", "--db", str(tmp_path / "r.db")],
        str(deep),
        "levels deep",
    )
    big = tmp_path / "big.json"
    big.write_text(json.dumps({"states": ["q"] * (MAX_JSON_BYTES // 5)}))
    _one_line(capsys, ["sample", f"dfa:{big}"], str(big), "over the limit")
    assert not (tmp_path / "r.db").exists()


def test_a_study_or_config_file_that_nests_too_deep_or_is_too_big(tmp_path, capsys):
    deep = tmp_path / "deep.yaml"
    deep.write_text(
        "name: x\ntitle: x\nsource: x\ntask: parity\ntrain: " + "[" * 20_000 + "]" * 20_000 + "\n"
    )
    _one_line(capsys, ["sweep", str(deep), "--db", str(tmp_path / "r.db")], str(deep), "levels deep")
    _one_line(
        capsys, ["train", "--config", str(deep), "--db", str(tmp_path / "r.db")], str(deep), "levels deep"
    )
    big = tmp_path / "lrs.yaml"
    big.write_text(
        "name: x\ntitle: x\nsource: x\ntask: parity\nlrs: ["
        + ", ".join(f"{1e-3 * (1 + i / 1e6):.9f}" for i in range(MAX_YAML_BYTES // 10))
        + "]\n"
    )
    _one_line(
        capsys, ["sweep", str(big), "--db", str(tmp_path / "r.db")], str(big), "over the limit", within=2
    )
    assert not (tmp_path / "r.db").exists()


def test_a_database_row_that_nests_too_deep(tmp_path, capsys):
    db = str(tmp_path / "r.db")
    assert (
        main(
            [
                "train",
                *TINY_TRAIN,
                "--db",
                db,
            ]
        )
        == 0
    )
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET summary=? WHERE id=1", ('{"a": ' + DEEP + "}",))
    con.commit()
    con.close()
    capsys.readouterr()
    # a damaged row: the listing goes on without it and names it; reading that run alone is one line
    assert main(["runs", "--db", db]) == 0
    err = capsys.readouterr().err
    assert (
        "Traceback" not in err and "run 1 of " in err and "summary is nested" in err and "levels deep" in err
    )
    _one_line(capsys, ["runs", "show", "1", "--db", db], db, "levels deep")
