"""Data is not code, and names no path: study files, report folders and labels may come from others.

A study's name is an identifier (no command writes outside --out, whatever the name), a key given twice
in a YAML mapping is an error naming it, labels are printable text of bounded length, a '|' in a label
stays inside its markdown cell, and the links of an HTML index are built from study names alone, never
copied from an index.json found in the output folder."""

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import rnn_study_text
from statetrack.cli import main


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _one_line(capsys, argv, needle) -> str:
    assert main(argv) == 2, argv
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    "name", ["/ABS/pwned", "../../escaped", "a/b", "..", ".hidden", "-rf", "x y", "", "a" * 101, "caf\u00e9"]
)
@pytest.mark.parametrize("command", ["report", "sweep", "reproduce"])
def test_no_study_name_writes_outside_out(tmp_path, capsys, monkeypatch, name, command):
    """A study file named '/elsewhere/target/pwned' or '../../escaped' used to make `report --out abs/out
    --html` write its .md/.csv/.tex/.html and figures there (an existing pwned.md replaced). Now the name is
    refused in one line, before a database is opened or a file written."""
    work = tmp_path / "work"
    (work / "abs" / "out").mkdir(parents=True)
    monkeypatch.chdir(work)
    target = tmp_path / "elsewhere" / "target"
    target.mkdir(parents=True)
    (target / "pwned.md").write_text("keep me")
    name = name.replace("/ABS", str(target))
    study = work / "study.yaml"
    study.write_text(rnn_study_text().replace("name: s\n", f"name: {json.dumps(name)}\n"))
    before = _tree(tmp_path)
    argv = [command, str(study), "--db", str(work / "r.db")]
    argv += ["--out", "abs/out", "--html"] if command != "sweep" else []
    _one_line(capsys, argv, "name: ")
    assert _tree(tmp_path) == before and (target / "pwned.md").read_text() == "keep me"


def test_a_study_name_error_says_what_a_name_is(tmp_path, capsys):
    study = tmp_path / "s.yaml"
    study.write_text(rnn_study_text().replace("name: s\n", 'name: "../../escaped"\n'))
    err = _one_line(capsys, ["sweep", str(study)], "")
    assert err == (
        f"error: study file {str(study)!r}: name: '../../escaped' is not a name: use a letter or digit, "
        "then up to 99 letters, digits, '.', '_' or '-' (it names the report's files)\n"
    )


@pytest.mark.parametrize(
    "old, new, key, where",
    [
        (
            "models:",
            "models: []\nmodels:",
            "models",
            "lines 6 and 7",
        ),  # a second `models:` (the first is lost)
        ("lr: 0.01}", "lr: 0.01, lr: 0.2}", "lr", "line 5"),  # twice in one flow mapping
    ],
)
def test_a_key_given_twice_in_a_study_file(tmp_path, capsys, old, new, key, where):
    """YAML parsers keep the last of two equal keys silently: two `models:` dropped a model from the grid."""
    study = tmp_path / "dup.yaml"
    study.write_text(rnn_study_text().replace(old, new))
    _one_line(
        capsys,
        ["sweep", str(study), "--db", str(tmp_path / "r.db")],
        f"study file {str(study)!r}: key {key!r} is given twice ({where}); keep one",
    )
    assert not (tmp_path / "r.db").exists()


def test_a_key_given_twice_in_a_config_file(tmp_path, capsys):
    config = tmp_path / "run.yaml"
    config.write_text("task: parity\nmodel:\n  layers: rnn\n  layers: lstm\n")
    _one_line(
        capsys,
        ["train", "--config", str(config), "--db", str(tmp_path / "r.db")],
        "key 'layers' is given twice (lines 3 and 4)",
    )


def test_yaml_merge_keys_are_not_duplicates():
    from statetrack.untrusted import load_yaml

    assert load_yaml("base: &b {lr: 1}\nrun:\n  <<: *b\n  steps: 2\n", "x") == {
        "base": {"lr": 1},
        "run": {"lr": 1, "steps": 2},
    }


@pytest.mark.parametrize(
    "label, needle",
    [
        (
            "bad\udcff",
            "'bad\\udcff' is not a label: it holds '\\udcff', which is not printable",
        ),  # --label $'bad\xff'
        ("two\nlines", "is not a label: it holds '\\n'"),
        ("\x1b[31mred", "is not a label: it holds '\\x1b'"),
        ("x" * 201, "a label of 201 characters is over the limit of 200"),
        ("   ", "is not a label"),
    ],
)
def test_labels_are_printable_and_bounded(tmp_path, capsys, label, needle):
    db = tmp_path / "r.db"
    err = _one_line(
        capsys,
        ["train", "--layers", "rnn", "--steps", "1", "--label", label, "--db", str(db)],
        "error: bad --label: ",
    )
    assert needle in err
    assert not db.exists()
    study = tmp_path / "s.yaml"
    study.write_text(rnn_study_text().replace("label: RNN", f"label: {json.dumps(label)}"))
    _one_line(capsys, ["sweep", str(study), "--db", str(db)], "models.0.label: ")
    assert not db.exists()


@pytest.fixture(scope="module")
def odd_labels(tmp_path_factory):
    """A report of a study whose model label holds '|' and markup, in a folder whose index.json another
    program wrote with hostile links and values."""
    d = tmp_path_factory.mktemp("labels")
    study = d / "odd.yaml"
    study.write_text(
        rnn_study_text().replace("name: s", "name: odd").replace("label: RNN", 'label: "RNN | <b>x</b>"')
    )
    out = d / "out"
    out.mkdir()
    hostile = {
        "page": "javascript:alert(2)",
        "thumbnail": "javascript:alert(3)",
        "leaderboard": "javascript:alert(4)",
        "title": "<script>alert(5)</script>",
        "scale": "<i>",
        "complete": "<script>",
        "runs": "x",
        "missing": "<b>",
        "cells_compared": "<b>",
        "cells_agree": [],
        "run_time_s": "soon",
        "devices": "<x>",
        "date": "<y>",
    }
    (out / "index.json").write_text(
        json.dumps({"evil": hostile, "../up": hostile, "a b": hostile, "javascript:x": {}})
    )
    db = str(d / "r.db")
    assert main(["sweep", str(study), "--db", db, "--workers", "1"]) == 0
    assert main(["report", str(study), "--db", db, "--out", str(out), "--html", "--figures", ""]) == 0
    return out


def test_a_pipe_in_a_label_stays_in_its_markdown_cell(odd_labels):
    md = (odd_labels / "odd.md").read_text()
    tables = [b for b in md.split("\n\n") if b.startswith("|")]
    assert len(tables) >= 2
    for t in tables:
        counts = {len(line.replace("\\|", "").split("|")) for line in t.splitlines()}
        assert len(counts) == 1, t  # every row has the header's columns
    assert "RNN \\| &lt;b>x&lt;/b>" in md and "<b>" not in md  # markup in a label is shown, never rendered


def test_index_links_are_built_from_study_names(odd_labels):
    index = (odd_labels / "index.html").read_text()
    assert "javascript:" not in index and "<script" not in index and "<i>" not in index and "<b>" not in index
    hrefs = set(re.findall(r'(?:href|src)="([^"]*)"', index))
    ours = {
        f"{n}{suffix}"
        for n in ("odd", "evil")
        for suffix in (".html", ".md", "-leaderboard.html", "/thumbnail.png")
    }
    # links built from the names, and only to files the folder holds: evil's record keeps its card, no link
    assert "odd.html" in hrefs and hrefs <= ours and not any(h.startswith("evil") for h in hrefs), hrefs
    assert "<h2>evil</h2>" in index
    assert "../up" not in index and "a b" not in index
    page = (odd_labels / "odd.html").read_text()
    assert "RNN | &lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page


def test_tensorboard_folders_stay_under_their_folder():
    from statetrack.report.tensorboard import run_dir

    row = SimpleNamespace(id=3, model="../../m", task="/etc/t", seed="../../../x")  # a record's fields
    assert run_dir("logs", row).parent == Path("logs") and ".." not in str(run_dir("logs", row))
