"""A run's curves as TensorBoard event files (``statetrack train/sweep --tensorboard DIR``).

One folder per run, ``DIR/run<ID>-<model>-<task>-seed<S>``: the validation curve (``train/...`` scalars
by step: train loss and accuracy, validation loss and accuracy, learning rate), the test metrics
(``test/...`` scalars with the test length as the step) and the config as text. Written from the
results database after the run, so every executor gives the same files. Needs the ``tensorboard``
package (``pip install 'statetrack[tensorboard]'``).
"""

from __future__ import annotations

import json
from pathlib import Path

from statetrack.errors import UserError
from statetrack.files import check_inside, inside
from statetrack.report.plots import slug
from statetrack.runs.store import RunRecord, Store

CURVE_KEYS = ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "lr")
TEST_KEYS = ("accuracy", "token_accuracy", "sequence_accuracy", "scaled_accuracy")


def summary_writer():
    """``torch.utils.tensorboard.SummaryWriter``, or a UserError saying how to install TensorBoard."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # optional (the tensorboard extra)
    except ImportError as e:
        raise UserError(
            f"--tensorboard needs the tensorboard package ({e}); install it with "
            "pip install tensorboard (or pip install 'statetrack[tensorboard]')"
        ) from None
    return SummaryWriter


def run_dir(log_dir, row: RunRecord) -> Path:
    """The run's folder under ``log_dir``: every part of its name read from the row is slugged, so that no
    value of a database (which may come from others) makes a path outside ``log_dir``."""
    return Path(log_dir) / (
        f"run{slug(str(row.id))}-{slug(str(row.model))}-{slug(str(row.task))}-seed{slug(str(row.seed))}"
    )


def write_run(log_dir, db, run_id: int) -> Path:
    """Write run ``run_id`` of database ``db`` under ``log_dir``; returns its folder."""
    writer_cls = summary_writer()
    store = Store(db, readonly=True)
    row = store.run(run_id)
    path = run_dir(log_dir, row)
    with inside(log_dir):  # TensorBoard's writer follows links: a link in the folder is refused first
        check_inside(path, f"cannot write the TensorBoard logs {str(path)!r}")
    w = writer_cls(log_dir=str(path))
    try:
        for p in store.curve(run_id):
            for k in CURVE_KEYS:
                if p.get(k) is not None:
                    w.add_scalar(f"train/{k}", p[k], p["step"])
        for m in store.metrics(run_id):
            values = m.as_dict()
            for k in TEST_KEYS:
                if values.get(k) is not None:
                    w.add_scalar(f"test/{k}", values[k], m.length)
        w.add_text("config", "    " + json.dumps(row.config, indent=2).replace("\n", "\n    "))
    finally:
        w.close()
    return path
