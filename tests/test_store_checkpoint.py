import dataclasses
import json
import sqlite3

import pytest
import torch

from statetrack import ModelConfig, TrainConfig, build_model, get_task
from statetrack.errors import UserError
from statetrack.runs.store import MetricRow, RunRecord, RunStatus, Store
from statetrack.training.checkpoint import load_checkpoint, save_checkpoint
from statetrack.training.evaluation import LengthMetrics


def _cfg():
    return TrainConfig(model=ModelConfig(layers="mamba,s4d"), steps=1)


def test_run_lifecycle(db):
    s = Store(db)
    rid = s.start_run(_cfg().model_dump(), study="x", label="y", key="k")
    assert s.run(rid).status is RunStatus.RUNNING
    s.finish_run(rid, [LengthMetrics(16, 1, 1, 1, 1, 0.5, 4)], "ck", 1.5, {"a": 1}, [{"step": 1, "v": 2}])
    r = s.run(rid)
    assert r.status is RunStatus.COMPLETE and r.config["model"]["layers"] == "mamba,s4d"
    assert r.versions is not None and r.versions["torch"] == torch.__version__
    assert s.metrics(rid)[0].length == 16 and s.curve(rid) == [{"step": 1, "v": 2}]
    assert s.runs(key="k")[0].id == rid


def test_readers_return_typed_frozen_records(db):
    """The store's readers return records: each column a typed attribute, the status its enum, nothing
    writable; a metric row's numbers as stored, bit for bit."""
    s = Store(db)
    rid = s.start_run(_cfg().model_dump(), study="x", label="y", key="k")
    m = LengthMetrics(16, 0.1 + 0.2, 1, 1, 1, 0.5, 4, token_majority=0.625, decided=True)
    s.finish_run(rid, [m], None, 1.5, {"a": 1}, split_metrics={"long": [m]})
    r = s.run(rid)
    assert isinstance(r, RunRecord) and (r.id, r.study, r.label, r.key) == (rid, "x", "y", "k")
    assert (r.model, r.task, r.seed, r.summary, r.wall_time, r.checkpoint) == (
        "mamba,s4d",
        "parity",
        0,
        {"a": 1},
        1.5,
        None,
    )
    assert isinstance(r.created, float) and isinstance(r.uuid, str) and r.error is None
    assert json.loads(json.dumps(r.as_dict()))["status"] == "complete"
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.status = RunStatus.FAILED  # type: ignore[misc]
    (row,) = s.metrics(rid)
    assert isinstance(row, MetricRow) and row.run_id == rid and row.accuracy == 0.1 + 0.2
    assert (row.token_majority, row.decided, row.note) == (0.625, 1, None)
    assert s.split_metrics(rid) == {"long": [row]}
    assert LengthMetrics.from_row(row) == LengthMetrics.from_row(row.as_dict())
    assert LengthMetrics.from_row(row).accuracy == m.accuracy and LengthMetrics.from_row(row).decided is True
    # a row of a file that named the majority share token_chance, and lacks later columns
    old = MetricRow.of({"run_id": 1, "length": 8, "accuracy": 0.5, "token_chance": 0.75})
    assert old.token_majority == 0.75 and old.accuracy_low is None
    with pytest.raises(TypeError):
        r["summary"]  # type: ignore[index]  # a field is an attribute


def test_foreign_database_is_refused_and_untouched(tmp_path):
    p = tmp_path / "other.db"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    before = p.read_bytes()
    with pytest.raises(UserError, match="did not create"):
        Store(p)
    assert p.read_bytes() == before


def test_garbage_file_is_refused(tmp_path):
    p = tmp_path / "junk.db"
    p.write_bytes(b"not a database at all" * 100)
    with pytest.raises(UserError, match="not a readable SQLite"):
        Store(p)
    assert p.read_bytes() == b"not a database at all" * 100


def test_checkpoint_roundtrip_and_bad_files(tmp_path):
    cfg = _cfg()
    m = build_model(cfg.model, get_task("parity"))
    p = save_checkpoint(m, cfg.model_dump(), tmp_path / "a.safetensors")
    m2, cfg2, task, _ = load_checkpoint(p)
    assert cfg2 == cfg
    for k, v in m.state_dict().items():
        assert torch.equal(v, m2.state_dict()[k])
    trunc = tmp_path / "t.safetensors"
    trunc.write_bytes(p.read_bytes()[:200])
    with pytest.raises(UserError, match="not a readable"):
        load_checkpoint(trunc)
    with pytest.raises(UserError, match="not found"):
        load_checkpoint(tmp_path / "missing.safetensors")


def test_full_database_loses_one_transaction_only(db, monkeypatch):
    s = Store(db)
    rid = s.start_run(_cfg().model_dump())
    s.finish_run(rid, [LengthMetrics(16, 1, 1, 1, 1, 0.5, 4)], "ck", 1.0, {})
    other = s.start_run(_cfg().model_dump())
    pages = sqlite3.connect(db).execute("PRAGMA page_count").fetchone()[0]
    monkeypatch.setattr(Store, "max_pages", pages)  # the disk is now full
    big = [{"step": i, "pad": "x" * 4000} for i in range(200)]
    with pytest.raises(UserError, match="rolled back"):
        s.finish_run(other, [LengthMetrics(n, 1, 1, 1, 1, 0.5, 4) for n in range(20, 60)], "ck", 1.0, {}, big)
    monkeypatch.undo()
    assert [m.length for m in s.metrics(rid)] == [16] and s.curve(rid) == []
    assert s.run(rid).status == "complete"
    assert s.metrics(other) == [] and s.curve(other) == [] and s.run(other).status == "running"


def test_mismatched_checkpoint_names_the_tensor(tmp_path):
    small = build_model(ModelConfig(layers="mamba,s4d", d_model=4), get_task("parity"))
    p = save_checkpoint(small, _cfg().model_dump(), tmp_path / "m.safetensors")  # config says d_model 8
    with pytest.raises(UserError, match="has shape"):
        load_checkpoint(p)


# a light process: the store module and what it imports (sqlite3), without the package's __init__ (torch)
_CREATE_AND_WRITE = """
import os, sys, types
package = types.ModuleType("statetrack")
package.__path__ = [sys.argv[1]]
sys.modules["statetrack"] = package
from statetrack.runs.store import MetricRow, RunRecord, RunStatus, Store
with Store(sys.argv[2]).transaction() as c:
    c.execute("INSERT INTO claims VALUES (?, 'race', NULL, 0, 0)", (str(os.getpid()),))
"""


def test_concurrent_creation_is_safe(tmp_path):
    """Eight processes create the same database at once: each opens it whole and writes to it."""
    import subprocess
    import sys
    from pathlib import Path

    import statetrack

    path = tmp_path / "race.db"
    package = str(Path(statetrack.__file__).parent)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CREATE_AND_WRITE, package, str(path)], stderr=subprocess.PIPE
        )
        for _ in range(8)
    ]
    errors = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0] * 8, errors
    with Store(path).transaction() as c:
        assert c.execute("SELECT COUNT(*) FROM claims WHERE owner='race'").fetchone()[0] == 8


# -- a checkpoint belongs to one run -----------------------------------------------------------------
TRAIN = [
    "train",
    "--d-model",
    "2",
    "--d-state",
    "4",
    "--steps",
    "10",
    "--eval-every",
    "5",
    "--test-lengths",
    "8",
    "--eval-batch",
    "8",
    "--json",
]


def test_two_databases_in_one_folder_keep_their_own_checkpoints(tmp_path):
    from statetrack.cli import main
    from statetrack.files import sha256_file

    a, b = tmp_path / "x" / "a.db", tmp_path / "x" / "b.db"
    a.parent.mkdir()  # the command line makes no folder but runs/
    assert main(TRAIN + ["--layers", "rnn", "--db", str(a)]) == 0
    assert main(TRAIN + ["--layers", "lstm", "--db", str(b)]) == 0
    ra, rb = Store(a).run(1), Store(b).run(1)  # both databases have a run 1
    assert ra.checkpoint != rb.checkpoint
    assert str(load_checkpoint(ra.checkpoint)[1].model.layers) == "rnn"
    assert str(load_checkpoint(rb.checkpoint)[1].model.layers) == "lstm"
    for store, r in ((Store(a), ra), (Store(b), rb)):
        assert sha256_file(r.checkpoint) == r.checkpoint_sha256 and store.checkpoint_problem(r) is None
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == [
        "a.checkpoints",
        "a.db",
        "b.checkpoints",
        "b.db",
    ]


def test_a_run_checkpoint_never_replaces_a_file(tmp_path):
    from statetrack.training.checkpoint import save_run_checkpoint

    m = build_model(_cfg().model, get_task("parity"))
    p = tmp_path / "run1-0000.safetensors"
    p.write_bytes(b"another run's weights")
    with pytest.raises(UserError, match="exists and is not replaced"):
        save_run_checkpoint(m, _cfg().model_dump(), p, {})
    assert p.read_bytes() == b"another run's weights" and [x.name for x in tmp_path.iterdir()] == [p.name]


def test_a_checkpoint_that_is_not_the_runs_is_named(tmp_path, capsys):
    import os

    from statetrack.cli import main
    from statetrack.training.checkpoint import read_checkpoint

    db = str(tmp_path / "r.db")
    assert main(TRAIN + ["--layers", "rnn", "--db", db]) == 0
    ck = Store(db).run(1).checkpoint
    _, config, extra = read_checkpoint(ck)
    other = build_model(ModelConfig(layers="rnn", d_model=2, d_state=4), get_task("parity"))
    save_checkpoint(other, config, ck, extra=extra)  # other weights, under the run's name and metadata
    capsys.readouterr()

    def warnings():  # stderr also carries the progress lines
        return [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]

    for argv in (["runs", "show", "1", "--db", db], ["eval", ck, "--lengths", "8"]):
        assert main(argv) == 0
        [w] = warnings()
        assert "sha256" in w and "run 1" in w, w
    assert (
        main(["rerun", "1", "--db", db]) == 0
    )  # trains from the stored config; says the file is not the run's
    [w] = warnings()
    assert "sha256" in w
    os.unlink(ck)
    assert main(["runs", "show", "1", "--db", db]) == 0
    [w] = warnings()
    assert "missing" in w


def test_a_database_folder_moves_with_its_checkpoints(tmp_path, capsys):
    import shutil

    from statetrack.cli import main

    (tmp_path / "x").mkdir()  # the command line makes no folder but runs/
    assert main(TRAIN + ["--layers", "rnn", "--db", str(tmp_path / "x" / "a.db")]) == 0
    shutil.move(tmp_path / "x", tmp_path / "y")
    store = Store(tmp_path / "y" / "a.db")
    r = store.run(1)
    assert r.checkpoint.startswith(str(tmp_path / "y")) and store.checkpoint_problem(r) is None
    capsys.readouterr()
    assert main(["eval", r.checkpoint, "--lengths", "8"]) == 0
    assert "warning" not in capsys.readouterr().err


def test_a_version_1_database_gains_the_new_columns_in_place(tmp_path):
    from statetrack.runs import store as store_mod

    p = tmp_path / "old.db"
    con = sqlite3.connect(p)
    con.executescript(
        store_mod.SCHEMA.replace(",\n  uuid TEXT,\n  owner TEXT,\n  checkpoint_sha256 TEXT", "").split(
            "CREATE TABLE IF NOT EXISTS claims"
        )[0]
        + "INSERT INTO meta VALUES ('application', 'statetrack'), ('schema_version', '1');"
        "INSERT INTO runs (model, task, seed, config, versions, status, checkpoint, created) VALUES "
        "('rnn', 'parity', 0, '{}', '{}', 'complete', 'runs/checkpoints/run1.safetensors', 1.0);"
    )
    con.commit()
    con.close()
    s = Store(p)
    old = s.run(1)
    assert old.checkpoint == "runs/checkpoints/run1.safetensors" and old.uuid is None
    assert s.checkpoint_problem(old) is None  # recorded before hashes: not checked
    rid = s.start_run(_cfg().model_dump(), key="k")
    assert (
        s.run(rid).uuid
        and sqlite3.connect(p).execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0]
        == "2"
    )


def test_a_transaction_is_all_or_nothing_and_an_immediate_one_holds_the_write_lock(db):
    store = Store(db)
    with pytest.raises(RuntimeError), store.transaction() as c:
        c.execute("INSERT INTO claims VALUES ('k', 'me', NULL, 0, 0)")
        raise RuntimeError("stop")
    with store.transaction() as c:
        assert c.execute("SELECT COUNT(*) FROM claims").fetchone()[0] == 0
    with store.transaction(immediate=True) as c:
        other = sqlite3.connect(db, timeout=0)
        try:
            with pytest.raises(sqlite3.OperationalError, match="locked"):
                other.execute("INSERT INTO claims VALUES ('k', 'other', NULL, 0, 0)")
        finally:
            other.close()
        c.execute("INSERT INTO claims VALUES ('k', 'me', NULL, 0, 0)")
    with store.transaction() as c:
        assert [r["owner"] for r in c.execute("SELECT owner FROM claims")] == ["me"]
