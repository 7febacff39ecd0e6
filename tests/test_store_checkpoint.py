import sqlite3

import pytest
import torch

from statetrack import ModelConfig, TrainConfig, build_model, get_task
from statetrack.checkpoint import load_checkpoint, save_checkpoint
from statetrack.errors import UserError
from statetrack.evaluation import LengthMetrics
from statetrack.store import Store


def _cfg():
    return TrainConfig(model=ModelConfig(layers="mamba,s4d"), steps=1)


def test_run_lifecycle(db):
    s = Store(db)
    rid = s.start_run(_cfg().model_dump(), study="x", label="y", key="k")
    assert s.run(rid)["status"] == "running"
    s.finish_run(rid, [LengthMetrics(16, 1, 1, 1, 1, .5, 4)], "ck", 1.5, {"a": 1}, [{"step": 1, "v": 2}])
    r = s.run(rid)
    assert r["status"] == "complete" and r["config"]["model"]["layers"] == "mamba,s4d"
    assert r["versions"]["torch"] == torch.__version__
    assert s.metrics(rid)[0]["length"] == 16 and s.curve(rid) == [{"step": 1, "v": 2}]
    assert s.runs(key="k")[0]["id"] == rid


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
    s.finish_run(rid, [LengthMetrics(16, 1, 1, 1, 1, .5, 4)], "ck", 1.0, {})
    pages = sqlite3.connect(db).execute("PRAGMA page_count").fetchone()[0]
    monkeypatch.setattr(Store, "max_pages", pages)  # the disk is now full
    big = [{"step": i, "pad": "x" * 4000} for i in range(200)]
    with pytest.raises(UserError, match="rolled back"):
        s.finish_run(rid, [LengthMetrics(n, 1, 1, 1, 1, .5, 4) for n in range(20, 60)], "ck", 1.0, {}, big)
    monkeypatch.undo()
    assert [m["length"] for m in s.metrics(rid)] == [16] and s.curve(rid) == []
    assert s.run(rid)["status"] == "complete"


def test_mismatched_checkpoint_names_the_tensor(tmp_path):
    small = build_model(ModelConfig(layers="mamba,s4d", d_model=4), get_task("parity"))
    p = save_checkpoint(small, _cfg().model_dump(), tmp_path / "m.safetensors")  # config says d_model 8
    with pytest.raises(UserError, match="has shape"):
        load_checkpoint(p)


def _open_store(path):
    Store(path).start_run(_cfg().model_dump())


def test_concurrent_creation_is_safe(tmp_path):
    import multiprocessing as mp

    path = str(tmp_path / "race.db")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_open_store, args=(path,)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * 4
    assert len(Store(path).runs()) == 4
