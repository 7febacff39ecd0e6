"""Faults: a diverging run is recorded as failed with its step and reason; the database keeps all."""

import contextlib

import torch

from statetrack import EvalConfig, ModelConfig, TrainConfig
from statetrack.layers import MIXERS
from statetrack.layers.mamba import Mamba
from statetrack.runs.runner import rerun, run
from statetrack.runs.store import Store


def _cfg(layers="mamba(conv=0)", **kw):
    return TrainConfig(
        model=ModelConfig(layers=layers, d_model=4, d_state=2),
        train_min_len=4,
        train_max_len=6,
        steps=kw.pop("steps", 20),
        eval_every=5,
        batch_size=8,
        val_sequences=16,
        **kw,
    )


class Tapped(Mamba):
    """Mamba, keeping its instances where the test can reach their weights."""

    name = "tapped"
    made: list[Mamba] = []

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        Tapped.made.append(self)


def test_nan_loss_fails_the_run_at_that_step(db, monkeypatch):
    """The weights turn NaN after step 6 (written in place, as a graph replay would read them), so the
    loss of step 7 is NaN: the eager step stops there, the device step reports step 7 at the next
    validation; either way the run is recorded failed at step 7."""
    monkeypatch.setitem(MIXERS, "tapped", Tapped)
    monkeypatch.setattr(Tapped, "made", [])

    def poison(step):
        if step == 6:
            with torch.no_grad():
                for p in Tapped.made[-1].parameters():
                    p.fill_(float("nan"))

    good = run(_cfg(seed=1), EvalConfig(lengths=[8], batch_size=4), db=db)
    bad = run(
        _cfg(seed=2, layers="tapped(conv=0)"),
        EvalConfig(lengths=[8], batch_size=4),
        db=db,
        on_train_step=poison,
    )
    assert bad.status == "failed" and bad.summary["failed_step"] == 7 and "nan" in bad.summary["reason"]
    store = Store(db)
    rows = {r.id: r for r in store.runs()}
    assert rows[bad.run_id].status == "failed" and "step 7" in rows[bad.run_id].error
    assert rows[good.run_id].status == "complete" and store.metrics(good.run_id)


def test_rerun_reproduces_stored_numbers(db):
    first = run(_cfg(seed=4), EvalConfig(lengths=[8, 40], batch_size=8), db=db)
    again, diffs = rerun(first.run_id, db)
    assert again.run_id != first.run_id and diffs == {}


def test_a_run_records_its_cpu_kernels_and_a_rerun_on_others_says_so(db, capsys):
    import json
    import sqlite3

    from statetrack.cli import main

    first = run(_cfg(seed=4), EvalConfig(lengths=[8], batch_size=8), db=db)
    v = Store(db).run(first.run_id).versions
    assert v["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert main(["rerun", str(first.run_id), "--db", str(db)]) == 0
    assert "warning" not in capsys.readouterr().err  # the same kernels: nothing to say
    with sqlite3.connect(db) as con:  # as if it had trained on another machine
        con.execute(
            "UPDATE runs SET versions = ? WHERE id = ?",
            (json.dumps({**v, "cpu_capability": "K9"}), first.run_id),
        )
    assert main(["rerun", str(first.run_id), "--db", str(db)]) == 0
    err = capsys.readouterr().err
    assert f"run {first.run_id} trained on K9 kernels and this machine's are {v['cpu_capability']}" in err


def test_interrupted_run_is_recorded_and_redone(db, monkeypatch):
    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr("statetrack.runs.runner.train", boom)
    with contextlib.suppress(KeyboardInterrupt):
        run(_cfg(seed=5), EvalConfig(lengths=[8], batch_size=4), db=db)
    [r] = Store(db).runs()
    assert r.status == "interrupted" and r.error == "interrupted by SIGINT"
    monkeypatch.undo()
    res = run(
        _cfg(seed=5), EvalConfig(lengths=[8], batch_size=4), db=db
    )  # not reused: only complete runs are
    assert res.status == "complete" and not res.reused


def test_a_failed_final_database_write_leaves_no_orphan_checkpoint(db, monkeypatch):
    import os
    import sqlite3

    import pytest

    from statetrack.errors import UserError

    real = Store.finish_run

    def on_a_full_disk(self, *a, **k):  # the disk fills up between the checkpoint and the results
        pages = sqlite3.connect(db).execute("PRAGMA page_count").fetchone()[0]
        monkeypatch.setattr(Store, "max_pages", pages)
        return real(self, *a, **k)

    monkeypatch.setattr(Store, "finish_run", on_a_full_disk)
    with pytest.raises(UserError, match="rolled back"):
        run(_cfg(seed=6), EvalConfig(lengths=list(range(8, 200)), batch_size=2), db=db)
    monkeypatch.undo()
    [r] = Store(db).runs()
    assert r.status == "failed" and "could not be recorded" in r.error
    assert os.listdir(Store(db).checkpoint_dir) == []  # the checkpoint written first was removed


def test_a_diverging_run_is_failed_not_complete(db):
    """lr 1e9: the loss stays finite but the validation loss reaches 1e16 (it used to end 'complete')."""
    import pytest

    from statetrack.training.loop import diverged_limit

    cfg = TrainConfig(
        model=ModelConfig(layers="rnn", d_model=8, d_state=16),
        lr=1e9,
        weight_decay=0.0,
        steps=50,
        eval_every=50,
    )  # the command line's defaults otherwise
    res = run(cfg, EvalConfig(lengths=[16], batch_size=8), db=db)
    assert res.status == "failed" and "training diverged" in res.summary["reason"]
    [r] = Store(db).runs()
    assert r.status == "failed" and "over 1000 times that of a uniform guess (0.693)" in r.error
    assert diverged_limit(2) == pytest.approx(693.147, abs=1e-3)
