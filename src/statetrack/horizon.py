"""The failure horizon: where a model starts to confuse the two strings of a witness family.

A witness family (:mod:`statetrack.tasks.families`) is a pair u1 W^n v / u2 W^n v whose labels differ
and do not depend on n. ``failure_horizons(model, task, max_len)`` runs the model on both strings for
every n with both strings at most ``max_len`` symbols long and reads its answer after the last symbol.
Per family it reports

- ``horizon_n``: the smallest n at which the model is wrong on either string (None: right at every n
  tested), and ``horizon``: the length of the shorter wrong string at that n;
- ``wrong_after``: the share of the n >= horizon_n at which it is wrong (1.0: it errs from there on);
- ``accuracy``: the share of the (string, n) pairs it answers right.

``horizon_summary`` reduces the families to one number per model: the shortest horizon over the
families (None: no family breaks it up to ``max_len``). A model that remembers only a window of w
symbols errs from n of about w / |W| on; a model that tracks the state has no horizon.

The strings of one family member are run in one pass when v is empty (the answer after u W^n is the
output at that position); otherwise the state after u W^n is kept and v is run from it, n after n.
"""
from __future__ import annotations

import numpy as np
import torch

from statetrack.errors import UserError
from statetrack.tasks.base import Task
from statetrack.tasks.families import Family, witness_families


def _run(model, tokens: np.ndarray, states, chunk: int, device) -> tuple[np.ndarray, list]:
    """Predictions at every position of one sequence (1, T), carrying the state; (preds (T,), state)."""
    preds = []
    for start in range(0, tokens.shape[1], chunk):
        x = torch.as_tensor(tokens[:, start:start + chunk], device=device)
        logits, states = model(x, states)
        preds.append(logits.argmax(-1)[0].cpu().numpy())
    return (np.concatenate(preds) if preds else np.zeros(0, dtype=np.int64)), states


@torch.no_grad()
def member_answers(model, fam: Family, member: int, n_max: int, tokens: np.ndarray,
                   chunk: int = 1024, device=None) -> np.ndarray:
    """The model's answer after u W^n v for n = 0 .. n_max (-1 where the string is empty)."""
    device = torch.device(device or next(model.parameters()).device)
    u = tokens[list(fam.prefixes[member])]
    pump = tokens[list(fam.pump)]
    end = tokens[list(fam.end)]
    out = np.full(n_max + 1, -1, dtype=np.int64)
    if len(end) == 0:
        seq = np.concatenate([u, np.tile(pump, n_max)])[None, :]
        preds, _ = _run(model, seq, model.init_state(1), chunk, device)
        pos = len(u) + np.arange(n_max + 1) * len(pump) - 1
        ok = pos >= 0
        out[ok] = preds[pos[ok]]
        return out
    states = model.init_state(1)
    if len(u):
        _, states = _run(model, u[None, :], states, chunk, device)
    v = torch.as_tensor(end[None, :], device=device)
    w = torch.as_tensor(pump[None, :], device=device)
    for n in range(n_max + 1):
        logits, _ = model(v, states)
        out[n] = int(logits[0, -1].argmax())
        if n < n_max:
            _, states = model(w, states)
    return out


def failure_horizons(model, task: Task, max_len: int, families: list[Family] | None = None, limit: int = 4,
                     device=None) -> list[dict]:
    """Per witness family of ``task``: the failure horizon of ``model`` (see the module docstring)."""
    auto = task.automaton()
    if auto is None:
        raise UserError(f"{task.name} has no witness families: its labels are not computed by a finite automaton "
                        "here (allowed: the regular tasks of 'statetrack tasks')")
    if model.vocab_size != task.vocab_size or model.num_classes != task.num_classes:
        raise UserError(f"the model reads {model.vocab_size} tokens and predicts {model.num_classes} classes; "
                        f"{task.name} has {task.vocab_size} tokens and {task.num_classes} classes")
    fams = witness_families(auto, limit) if families is None else families
    model.eval()
    rows = []
    for fam in fams:
        fixed = max(len(fam.prefixes[0]), len(fam.prefixes[1])) + len(fam.end)
        n_max = (max_len - fixed) // len(fam.pump)
        if n_max < 0:
            continue
        answers = [member_answers(model, fam, i, n_max, auto.tokens, device=device) for i in (0, 1)]
        right = np.ones((2, n_max + 1), dtype=bool)
        for i in (0, 1):
            scored = answers[i] >= 0
            right[i, scored] = answers[i][scored] == fam.labels[i]
        wrong = ~right.all(axis=0)
        first = int(np.argmax(wrong)) if wrong.any() else None
        horizon = None if first is None else min(fam.length(i, first) for i in (0, 1) if not right[i, first])
        rows.append({**fam.as_dict(auto.symbols, auto.tokens), "tested_n": n_max,
                     "tested_length": fam.length(0, n_max), "horizon_n": first, "horizon": horizon,
                     "wrong_after": None if first is None else float(wrong[first:].mean()),
                     "accuracy": float(right.mean())})
    return rows


def horizon_summary(rows: list[dict], max_len: int) -> dict:
    """{horizon: the shortest horizon over the families or None, horizon_max: the longest length tested}."""
    hs = [r["horizon"] for r in rows if r["horizon"] is not None]
    return {"horizon": min(hs) if hs else None, "horizon_max": max_len}
