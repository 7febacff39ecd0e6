"""Data from others, tried as an auditor would (round 5 of the threat model, docs/reliability.md): a
database carrying SQL of its own, a report folder holding links, labels that are formulas, markup, terminal
escapes or maths, files that are not UTF-8, seeds out of range, names that break file names, a Ray address
that accepts connections but is not Ray. Each ends in one line (exit 2, or the documented code), writes
nothing outside the folder the user chose and loses nothing."""

import json
import sqlite3
from pathlib import Path

import pytest

from statetrack.cli import main
from test_database_checks import copy, made  # noqa: F401 (fixtures: a database of three runs)


def _one_line(capsys, argv, *needles, code=2) -> str:
    assert main(argv) == code, argv
    out = capsys.readouterr().err
    assert "Traceback" not in out, out
    lines = [l for l in out.splitlines() if l.startswith("error")]
    assert len(lines) == 1, out
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# -- a database is data: no SQL from it runs ---------------------------------------------------------------
TRIGGERS = (
    "CREATE TRIGGER t1 AFTER INSERT ON runs BEGIN DELETE FROM metrics; END;"
    "CREATE TRIGGER t2 AFTER UPDATE ON runs BEGIN UPDATE runs SET label='HIJACKED' WHERE id=1; END;"
    "CREATE VIEW v AS SELECT * FROM runs;"
)


def test_a_database_carrying_triggers_runs_none_of_them(copy, capsys):  # noqa: F811
    db, study = copy
    con = sqlite3.connect(db)
    con.executescript(TRIGGERS)
    con.close()
    before = db.read_bytes()
    for argv in (
        ["train", "--layers", "rnn", "--steps", "2", "--test-lengths", "8", "--db", str(db)],
        ["sweep", str(study), "--db", str(db), "--workers", "1", "--seeds", "3"],
    ):
        _one_line(capsys, argv, "carries SQL", "trigger 't1'", "view 'v'")
        assert db.read_bytes() == before
    # readers read it (a trigger never fires on a read), and --check names every foreign object
    assert main(["runs", "--db", str(db), "--json"]) == 0
    rows = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert [r["label"] for r in rows] == ["RNN"] * 3
    assert main(["runs", "--check", "--db", str(db), "--json"]) == 1
    found = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert {(r["run_id"], r["table"]) for r in found} == {(None, "t1"), (None, "t2"), (None, "v")}
    assert main(["runs", "--check", "--db", str(db)]) == 1
    assert "foreign SQL" in capsys.readouterr().out
    con = sqlite3.connect(db)
    assert con.execute("SELECT count(*) FROM metrics").fetchone()[0] == 3
    con.close()
    assert db.read_bytes() == before


# -- files are written only inside the chosen folder, never through a link --------------------------------
def _tree(folder: Path) -> dict:
    return {
        str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))
    }


@pytest.mark.parametrize("link", ["s", "s.md", "index.json", "s.html"])
def test_no_report_file_is_written_through_a_link_in_the_folder(made, tmp_path, capsys, link):  # noqa: F811
    db, study = made
    victim = tmp_path / "victim"
    victim.mkdir()
    for name in ("thumbnail.png", "length-main-parity.png", "curves-main-parity.png", "x"):
        (victim / name).write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / link).symlink_to(victim if link == "s" else victim / "x")
    before = _tree(victim)
    _one_line(
        capsys,
        ["report", str(study), "--db", str(db), "--out", str(out), "--html", "--force"],
        "is a symbolic link",
        repr(str(out / link)),
    )
    assert _tree(victim) == before
    assert (out / link).is_symlink()
    # the chosen folder itself may be a link (the user chose it)
    chosen = tmp_path / "chosen"
    chosen.symlink_to(tmp_path / "real", target_is_directory=True)
    (tmp_path / "real").mkdir()
    assert main(["report", str(study), "--db", str(db), "--out", str(chosen), "--html"]) == 0
    assert (tmp_path / "real" / "s.md").is_file() and (tmp_path / "real" / "s" / "thumbnail.png").is_file()
    assert _tree(victim) == before
