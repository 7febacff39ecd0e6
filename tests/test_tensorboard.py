"""--tensorboard DIR: a run's curves and test metrics as TensorBoard event files; without the package,
one error line before anything runs."""

import sys

import pytest

from statetrack.cli import main

TRAIN = [
    "train",
    "--layers",
    "rnn",
    "--d-model",
    "2",
    "--steps",
    "20",
    "--eval-every",
    "10",
    "--test-lengths",
    "8,16",
    "--eval-batch",
    "4",
]


def test_train_writes_event_files(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert main(TRAIN + ["--db", str(tmp_path / "r.db"), "--tensorboard", str(tmp_path / "tb")]) == 0
    (run,) = (tmp_path / "tb").iterdir()
    assert run.name == "run1-rnn-parity-seed0"
    ev = EventAccumulator(str(run))
    ev.Reload()
    assert [s.step for s in ev.Scalars("train/val_accuracy")] == [0, 10, 20]  # step 0: the starting weights
    assert [s.step for s in ev.Scalars("test/accuracy")] == [8, 16]
    assert "config" in "".join(ev.Tags()["tensors"])


def test_missing_tensorboard_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if tensorboard were not installed
    assert main(TRAIN + ["--db", str(tmp_path / "r.db"), "--tensorboard", str(tmp_path / "tb")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --tensorboard needs the tensorboard package") and err.count("\n") == 1
    assert "pip install tensorboard" in err
    assert not (tmp_path / "r.db").exists() and not (tmp_path / "tb").exists()
