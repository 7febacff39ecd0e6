"""Probes: a trained model's output over time on fixed probe inputs, stored as traces (the offset
study's figures).

A study task may name ``probes`` (task strings such as ``offset:two-isis``). After a run completes, the
sweep runs its checkpoint once on one seeded sequence of each probe and stores, per time step, the
input, the target, whether the step is scored, the predicted class and the class probabilities, plus
summary numbers over scored steps: ``token_accuracy`` (all), ``accuracy_input1`` (input 1, e.g. inside
an ISI), ``offset_accuracy`` (input 1 and target 0: the end of an ISI must be predicted) and
``hold_accuracy`` (input 1 and target 1: the ISI goes on). A model that copies its input scores 0 on
offsets and 100% on holds; a counter that saturates after one ISI fails the holds of a second ISI that
follows it directly (the double-ISI probe). They live in the table ``traces`` of the results database,
so the report draws them without loading a model.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray

from statetrack.runs.store import Store
from statetrack.tasks import get_task
from statetrack.training.checkpoint import load_checkpoint

PROBE_SEED = 0
VERSION = 2  # traces of an older version are recomputed by the next sweep


@torch.no_grad()
def compute_traces(
    model: torch.nn.Module, probes: Iterable[str], length: int | None = None
) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    model = model.eval()
    for probe in probes:
        task = get_task(probe)
        n = length or task.default_length or 200
        b = task.sample_batch(np.random.default_rng(PROBE_SEED), 1, n)
        logits, _ = model(torch.as_tensor(b.inputs))
        p = torch.softmax(logits.float(), -1)[0].numpy()
        pred = p.argmax(-1)
        x, y, m = b.inputs[0], b.targets[0], b.mask[0]
        hit = (pred == y) & m

        def acc(
            sel: NDArray[np.bool_], m: NDArray[np.bool_] = m, hit: NDArray[np.bool_] = hit
        ) -> float | None:
            sel = sel & m
            return float(hit[sel].sum() / sel.sum()) if sel.any() else None

        out[probe] = {
            "version": VERSION,
            "inputs": x.tolist(),
            "targets": y.tolist(),
            "mask": m.astype(int).tolist(),
            "pred": pred.tolist(),
            "probs": np.round(p, 5).tolist() if p.shape[-1] <= 4 else None,
            "token_accuracy": float(hit.sum() / max(m.sum(), 1)),
            "accuracy_input1": acc(x == 1),
            "offset_accuracy": acc((x == 1) & (y == 0)),
            "hold_accuracy": acc((x == 1) & (y == 1)),
        }
    return out


def traces_from_checkpoint(path: str, probes: Iterable[str]) -> dict[str, dict[str, Any]]:
    model, _, _, _ = load_checkpoint(path)
    return compute_traces(model, probes)


def write_traces(db: str | os.PathLike[str], run_id: int, traces: dict[str, dict[str, Any]]) -> None:
    Store(db).write_traces(run_id, traces)


def read_traces(db: str | os.PathLike[str], run_id: int) -> dict[str, dict[str, Any]]:
    """The run's stored traces of the current format (older formats are recomputed by the sweep)."""
    rows = Store(db, readonly=True).traces(run_id)
    return {k: v for k, v in rows.items() if v.get("version") == VERSION}
