"""A results database is checked when it is opened: a damaged one (a table or column the schema needs is
missing, a page is corrupt), one written by a newer statetrack, or a foreign one is refused in one line and
left byte for byte as it was; read-only commands never write to a database; a database the user cannot
write (a read-only file or folder) is opened read-only, so that ``runs`` and ``report`` work and leave no
file behind."""

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TINY_TRAIN, Cli, rnn_study_text
from statetrack.cli import main
from statetrack.runs.store import SCHEMA_VERSION, Store


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """A database with the three complete runs of a tiny study, and the study file."""
    d = tmp_path_factory.mktemp("made")
    study = d / "s.yaml"
    study.write_text(rnn_study_text(seeds=3, steps=4))
    db = d / "r.db"
    assert main(["sweep", str(study), "--db", str(db), "--workers", "1"]) == 0
    return db, study


@pytest.fixture
def copy(made, tmp_path):
    """A fresh copy of the made database (its checkpoint folder too) in a folder of its own."""
    db, study = made
    folder = tmp_path / "copy"
    folder.mkdir()
    shutil.copy(db, folder / db.name)
    shutil.copytree(db.parent / f"{db.stem}.checkpoints", folder / f"{db.stem}.checkpoints")
    return folder / db.name, study


def _files(folder):
    return sorted(p.name for p in Path(folder).iterdir())


def _one_line(capsys, argv, *needles) -> str:
    assert main(argv) == 2, argv
    out = capsys.readouterr().err
    assert "Traceback" not in out, out
    err = out.splitlines()[-1]
    assert err.startswith("error: ") and sum(x.startswith("error") for x in out.splitlines()) == 1, out
    for n in needles:
        assert n in err, err
    return err


def _alter(db, sql):
    con = sqlite3.connect(db)
    con.executescript(sql)
    con.commit()
    con.close()


def _commands(db, study):
    return [
        ["runs", "--db", str(db)],
        ["runs", "show", "1", "--db", str(db)],
        ["report", str(study), "--db", str(db), "--out", ""],
        ["sweep", str(study), "--db", str(db), "--workers", "1"],
    ]


# -- damaged databases ----------------------------------------------------------------------------------
def test_a_database_whose_metrics_table_was_dropped_is_refused(copy, capsys):
    db, study = copy
    _alter(db, "DROP TABLE metrics")
    before, files = db.read_bytes(), _files(db.parent)
    for argv in _commands(db, study):
        _one_line(capsys, argv, str(db), "damaged", "table 'metrics' is missing")
    assert db.read_bytes() == before and _files(db.parent) == files  # no table recreated, no -wal left


def test_a_database_that_lost_a_column_is_refused(copy, capsys):
    db, study = copy
    _alter(db, "ALTER TABLE runs DROP COLUMN seed")
    before = db.read_bytes()
    for argv in _commands(db, study):
        _one_line(capsys, argv, "damaged", "table 'runs' lacks column 'seed'")
    assert db.read_bytes() == before


def test_a_corrupt_page_is_named(copy, capsys):
    db, study = copy
    con = sqlite3.connect(db)
    root = con.execute("SELECT rootpage FROM sqlite_master WHERE name='curves'").fetchone()[0]
    page = con.execute("PRAGMA page_size").fetchone()[0]
    con.close()
    data = bytearray(db.read_bytes())
    data[(root - 1) * page : (root - 1) * page + 64] = b"\xff" * 64  # the curves table's root page
    db.write_bytes(bytes(data))
    for argv in _commands(db, study):
        _one_line(capsys, argv, str(db), "damaged")
    assert db.read_bytes() == bytes(data)


def test_a_database_of_a_newer_schema_is_refused_with_both_versions(copy, capsys):
    db, study = copy
    _alter(db, "UPDATE meta SET value='999' WHERE key='schema_version'")
    before = db.read_bytes()
    for argv in _commands(db, study) + [["train", "--layers", "rnn", "--steps", "2", "--db", str(db)]]:
        _one_line(
            capsys,
            argv,
            str(db),
            "schema version 999",
            f"versions up to {SCHEMA_VERSION}",
            "newer statetrack",
        )
    assert db.read_bytes() == before


def test_a_version_1_database_is_read_by_read_only_commands_without_a_write(copy, capsys):
    """An older database is migrated by the first command that writes, never by one that only reads."""
    db, study = copy
    _alter(
        db,
        "DROP TABLE claims; DROP TABLE lm_metrics; DROP TABLE split_metrics; DROP TABLE curves;"
        "ALTER TABLE metrics DROP COLUMN note;"
        "UPDATE meta SET value='1' WHERE key='schema_version'",
    )
    before = db.read_bytes()
    assert main(["runs", "--db", str(db)]) == 0
    assert main(["report", str(study), "--db", str(db), "--out", ""]) == 0
    assert "3 of 3 runs" in " ".join(capsys.readouterr().out.split())
    assert db.read_bytes() == before
    assert main(["sweep", str(study), "--db", str(db), "--workers", "1"]) == 0  # writes: migrates in place
    assert Store(db).schema_version() == SCHEMA_VERSION


# -- read-only commands never write -------------------------------------------------------------------------
def test_read_only_commands_leave_the_file_as_it_was(copy):
    db, study = copy
    before, files = db.read_bytes(), _files(db.parent)
    for argv in _commands(db, study)[:3]:
        assert main(argv) == 0, argv
        assert db.read_bytes() == before and _files(db.parent) == files


# -- a database the user cannot write ---------------------------------------------------------------------
CHILD = """
import contextlib, io, json, os, sys
from statetrack.cli import main
db, study = sys.argv[1], sys.argv[2]
out = []
for argv in (["runs", "--db", db], ["runs", "show", "2", "--db", db], ["report", study, "--db", db, "--out", ""],
             ["sweep", study, "--db", db, "--workers", "1", "--fresh"]):
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        code = main(argv)
    out.append({"argv": argv, "code": code, "out": o.getvalue(), "err": e.getvalue(),
                "files": sorted(os.listdir(os.path.dirname(db)))})
print(json.dumps(out))
"""


def _as_user_without_write_access(db, study):
    """``runs``, ``runs show``, ``report`` and ``sweep`` on ``db`` in a child process to which file
    permissions apply: as root, with the capabilities that bypass them dropped (setpriv); as another user,
    as it is. Returns what each command did and the files beside the database after it."""
    import json

    prefix = []
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("root without setpriv: file permissions cannot be made to apply")
        prefix = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner"]
    r = subprocess.run(
        prefix + [sys.executable, "-c", CHILD, str(db), str(study)],
        cwd=db.parent.parent,
        env={**Cli.env, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


@pytest.mark.parametrize(
    "file_mode, folder_mode",
    [(0o444, 0o755), (0o444, 0o555), (0o644, 0o555)],
    ids=["read-only-file", "read-only-file-and-folder", "read-only-folder"],
)
def test_a_database_that_cannot_be_written_is_read(copy, file_mode, folder_mode):
    db, study = copy
    before, files = db.read_bytes(), _files(db.parent)
    os.chmod(db, file_mode)
    os.chmod(db.parent, folder_mode)
    try:
        *reads, write = _as_user_without_write_access(db, study)
    finally:
        os.chmod(db.parent, stat.S_IRWXU)
        os.chmod(db, 0o644)
    for r in reads:
        assert r["code"] == 0 and "Traceback" not in r["err"], r
        assert r["files"] == files, r  # no -wal, no -shm, no journal
    assert "3 of 3 runs of the grid complete" in " ".join(reads[-1]["out"].split())
    # a command that writes says why it cannot, in one line, and leaves nothing either
    err = write["err"].splitlines()[-1]
    assert write["code"] == 2 and "Traceback" not in write["err"], write
    assert "cannot be written" in err and "read-only" in err and write["files"] == files, write
    assert db.read_bytes() == before and _files(db.parent) == files


@pytest.mark.parametrize(
    "column, value, problem",
    [
        ("config", "not json", "its config is not valid JSON"),
        ("config", "[1, 2]", "its config is list '[1, 2]', not a JSON object"),
        ("summary", "{", "its summary is not valid JSON"),
        ("versions", "7", "its versions is int '7', not a JSON object"),
        ("status", "bogus", "its status is 'bogus'; allowed: running, complete, failed, interrupted"),
        ("seed", "x", "its seed is str 'x'"),
    ],
)
def test_a_damaged_row_leaves_every_other_row_usable(copy, capsys, column, value, problem):
    """`runs.config = 'not json'` in one row used to end runs, report, sweep and rerun in a JSONDecodeError
    traceback (runs show in an AttributeError). Now the row is named and left out; the others work."""
    db, study = copy
    _alter(db, f"UPDATE runs SET {column}='{value}' WHERE id=2")
    said = f"run 2 of {str(db)!r} is damaged: {problem}"
    capsys.readouterr()
    assert main(["runs", "--db", str(db), "--json"]) == 0
    out, err = capsys.readouterr()
    assert [r["run_id"] for r in map(json.loads, out.splitlines())] == [1, 3]
    assert said in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert main(["runs", "show", "1", "--db", str(db)]) == 0
    _one_line(capsys, ["runs", "show", "2", "--db", str(db)], said)
    _one_line(capsys, ["rerun", "2", "--db", str(db)], said)
    capsys.readouterr()
    assert main(["report", str(study), "--db", str(db), "--out", "", "--json"]) == 0  # two of the three seeds
    assert said in capsys.readouterr().err
    assert main(["runs", "--check", "--db", str(db)]) == 1
    out = capsys.readouterr().out
    assert "runs" in out and problem.split(" (")[0][:30] in " ".join(out.split())
    # the sweep redoes the run it cannot read, and reuses the two others
    assert main(["sweep", str(study), "--db", str(db), "--workers", "1", "--json"]) == 0
    assert sorted({r["run_id"] for r in map(json.loads, capsys.readouterr().out.splitlines())}) == [1, 3, 4]


def test_a_damaged_metrics_row_or_curve_is_listed_by_check(copy, capsys):
    db, study = copy
    _alter(db, "UPDATE metrics SET accuracy='high' WHERE run_id=1; UPDATE curves SET data='{' WHERE run_id=3")
    assert main(["runs", "--check", "--db", str(db), "--json"]) == 1
    rows = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert {(r["run_id"], r["table"]) for r in rows} == {(1, "metrics"), (3, "curves")}, rows
    assert main(["report", str(study), "--db", str(db), "--out", "", "--json"]) == 0
    assert "run 1 of" in capsys.readouterr().err  # left out of the report, which the others make


def test_check_on_a_sound_database(copy, capsys):
    db, _ = copy
    assert main(["runs", "--check", "--db", str(db)]) == 0
    assert " ".join(capsys.readouterr().out.split()) == f"no damaged row and no foreign SQL in {db} (3 runs)"


def test_labels_of_any_bytes_are_read(copy, capsys):
    """Another program may store text that is not UTF-8 in a label: it reads with U+FFFD, not an error."""
    db, _ = copy
    con = sqlite3.connect(db)
    con.execute("UPDATE runs SET label=CAST(X'626164FF' AS TEXT) WHERE id=1")
    con.commit()
    con.close()
    assert main(["runs", "--db", str(db)]) == 0
    assert "bad\ufffd" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["/dev/null", "zero-byte file", "folder", "fifo"])
@pytest.mark.parametrize("command", [["runs"], ["train", "--layers", "rnn", "--steps", "1"]])
def test_db_must_be_a_regular_file_or_a_new_path(tmp_path, capsys, kind, command):
    """`--db /dev/null` said 'disk I/O error' and left /dev/null-journal; a zero-byte file read 'You can only
    execute one statement at a time' and train adopted it."""
    path = {
        "/dev/null": Path("/dev/null"),
        "zero-byte file": tmp_path / "empty.db",
        "folder": tmp_path / "dir.db",
        "fifo": tmp_path / "pipe.db",
    }[kind]
    if kind == "zero-byte file":
        path.write_bytes(b"")
    elif kind == "folder":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    before = sorted(os.listdir(path.parent))
    what = {
        "/dev/null": "is a character device, not a database file",
        "zero-byte file": "is an empty file (0 bytes)",
        "folder": "is a folder, not a database file",
        "fifo": "is a FIFO (named pipe), not a database file",
    }[kind]
    _one_line(capsys, [*command, "--db", str(path)], f"results database {str(path)!r} {what}")
    assert sorted(os.listdir(path.parent)) == before
    if kind == "zero-byte file":
        assert path.read_bytes() == b""


def test_a_database_reached_through_a_link_is_known_by_its_real_path(tmp_path, capsys):
    """`--db other/link.db` (a link to real/st.db) put checkpoints in other/link.checkpoints/, and through the
    real path `eval run:LABEL` said 'not found'."""
    (tmp_path / "real").mkdir()
    (tmp_path / "other").mkdir()
    real, link = tmp_path / "real" / "st.db", tmp_path / "other" / "link.db"
    link.symlink_to(real)
    assert (
        main(
            [
                "train",
                *TINY_TRAIN,
                "--label",
                "mine",
                "--db",
                str(link),
            ]
        )
        == 0
    )
    assert os.listdir(tmp_path / "other") == ["link.db"] and real.is_file()
    assert [p.name for p in (tmp_path / "real" / "st.checkpoints").iterdir()][0].startswith("run1-")
    for db in (real, link):
        capsys.readouterr()
        assert main(["eval", "run:mine", "--db", str(db), "--lengths", "8"]) == 0, capsys.readouterr().err
        assert "warning" not in capsys.readouterr().err
