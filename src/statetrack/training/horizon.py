"""The failure horizon: where a model starts to confuse two states of its task's automaton.

A witness family (:mod:`statetrack.tasks.families`) is a pair u1 W^n v / u2 W^n v whose labels differ
and do not depend on n; it belongs to a pair of states of the task's minimal automaton (the states
the two strings are in before their loop). ``failure_horizons(model, task, max_len)`` runs the model
on both strings of every family for every n with both strings at most ``max_len`` symbols long and
reads its answer after the last symbol. Per family it reports

- ``horizon_n``: the smallest n at which the model is wrong on either string (None: right at every n
  tested), and ``horizon``: the length of the shorter wrong string at that n;
- ``wrong_after``: the share of the n >= horizon_n at which it is wrong (1.0: it errs from there on);
- ``accuracy``: the share of the (string, n) pairs it answers right.

``pair_horizons`` reduces the families to one row per pair of states (which states the model confuses,
and from which length: the shortest horizon over the pair's families), and ``horizon_summary`` to one
number per model: the shortest horizon over every pair (None: no family breaks it up to ``max_len``).
``measure_horizons`` does all three with every pair of the task's automaton (``witness_pairs``),
including the pairs that have no family and why. A model that remembers only a window of w symbols
errs from n of about w / |W| on; a model that tracks the state has no horizon.

How the strings are run: every family member is one row of a batch. The members whose v is empty are
run once each, u W^n_max in chunks, and read at the end of every u W^n. The others advance together one
symbol at a time; where a row reaches the end of some u W^n, its state is copied and v is run from the
copy (the rows of one length of v in one call). A model's state must have the batch as its first
dimension (every mixer of the package does).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch

from statetrack.errors import UserError
from statetrack.tasks.base import Task
from statetrack.tasks.families import MAX_FAMILIES, Family, witness_pairs

#: rows of one batch when the strings are run
ROWS = 1024
#: memory of one chunk's activations (bytes) when the members without v are run
CHUNK_BYTES = 256 << 20


def _take(states, idx: torch.Tensor):
    """The rows ``idx`` of a model's state (nested lists and tuples of tensors, batch first)."""
    if states is None:
        return None
    if isinstance(states, torch.Tensor):
        return states.index_select(0, idx)
    return type(states)(_take(s, idx) for s in states)


def _n_max(fam: Family, max_len: int) -> int:
    """The largest n with both strings of the family at most ``max_len`` long (-1: none)."""
    fixed = max(len(fam.prefixes[0]), len(fam.prefixes[1])) + len(fam.end)
    return (max_len - fixed) // len(fam.pump)


@torch.no_grad()
def family_answers(
    model, fams: list[Family], max_len: int, tokens: np.ndarray, device=None
) -> list[np.ndarray]:
    """Per family, the model's answers (2, n_max + 1) after u_i W^n v for n = 0 .. n_max (-1 where the
    string is empty); families with n_max < 0 get an empty array."""
    device = torch.device(device or next(model.parameters()).device)
    out = [np.full((2, max(_n_max(f, max_len), -1) + 1), -1, dtype=np.int64) for f in fams]
    rows = [(k, i) for k, f in enumerate(fams) if _n_max(f, max_len) >= 0 for i in (0, 1)]
    plain = [r for r in rows if not fams[r[0]].end]
    tailed = [r for r in rows if fams[r[0]].end]
    for start in range(0, len(plain), ROWS):
        _run_plain(model, fams, plain[start : start + ROWS], max_len, tokens, device, out)
    for start in range(0, len(tailed), ROWS):
        _run_tailed(model, fams, tailed[start : start + ROWS], max_len, tokens, device, out)
    return out


def _strings(fams, rows, max_len, tokens):
    """The rows' strings u W^n_max as one padded (rows, T) array, and their lengths."""
    seqs = []
    for k, i in rows:
        f = fams[k]
        seqs.append(
            np.concatenate([tokens[list(f.prefixes[i])], np.tile(tokens[list(f.pump)], _n_max(f, max_len))])
        )
    T = max(1, max(len(s) for s in seqs))
    x = np.full((len(rows), T), tokens[0], dtype=np.int64)
    for r, s in enumerate(seqs):
        x[r, : len(s)] = s
    return x


def _run_plain(model, fams, rows, max_len, tokens, device, out) -> None:
    """Members with v empty: the answer after u W^n is the prediction at its last symbol."""
    x = _strings(fams, rows, max_len, tokens)
    per_step = len(rows) * model.activation_bytes() if hasattr(model, "activation_bytes") else 0
    chunk = 1024 if per_step <= 0 else max(1, min(1024, CHUNK_BYTES // per_step))
    states = model.init_state(len(rows))
    preds = []
    for start in range(0, x.shape[1], chunk):
        logits, states = model(torch.as_tensor(x[:, start : start + chunk], device=device), states)
        preds.append(logits.argmax(-1).cpu().numpy())
    pred = np.concatenate(preds, axis=1)
    for r, (k, i) in enumerate(rows):
        f = fams[k]
        pos = len(f.prefixes[i]) + np.arange(_n_max(f, max_len) + 1) * len(f.pump) - 1
        ok = pos >= 0
        out[k][i, ok] = pred[r, pos[ok]]


def _run_tailed(model, fams, rows, max_len, tokens, device, out) -> None:
    """Members with a suffix v: all rows advance one symbol at a time; at the end of each u W^n a row's
    state is copied and v run from it."""
    x = _strings(fams, rows, max_len, tokens)
    ends = [np.asarray(tokens[list(fams[k].end)]) for k, _ in rows]
    # the step count at which each row's u W^n ends, and that n
    due: dict[int, list[tuple[int, int]]] = {}
    for r, (k, i) in enumerate(rows):
        f = fams[k]
        for n in range(_n_max(f, max_len) + 1):
            due.setdefault(len(f.prefixes[i]) + n * len(f.pump), []).append((r, n))
    last = max(due)
    states = model.init_state(len(rows))
    for t in range(last + 1):
        if t in due:
            by_len: dict[int, list[tuple[int, int]]] = {}
            for r, n in due[t]:
                by_len.setdefault(len(ends[r]), []).append((r, n))
            for group in by_len.values():
                idx = torch.as_tensor([r for r, _ in group], device=device)
                v = torch.as_tensor(np.stack([ends[r] for r, _ in group]), device=device)
                logits, _ = model(v, _take(states, idx))
                ans = logits[:, -1].argmax(-1).cpu().numpy()
                for (r, n), a in zip(group, ans, strict=True):
                    k, i = rows[r]
                    out[k][i, n] = a
        if t < last:
            _, states = model(torch.as_tensor(x[:, t : t + 1], device=device), states)


def failure_horizons(
    model,
    task: Task,
    max_len: int,
    families: list[Family] | None = None,
    max_families: int = MAX_FAMILIES,
    device=None,
) -> list[dict]:
    """Per witness family of ``task`` (every pair of states of its automaton; ``families`` to give
    them): the failure horizon of ``model`` (see the module docstring)."""
    auto = _automaton(model, task)
    if families is None:
        w = witness_pairs(auto, max_families)
        families, names = w.families, {p.states: p.names for p in w.pairs}
    else:
        names = {}
    return _rows(model, auto, families, names, max_len, device)


def _automaton(model, task: Task):
    auto = task.automaton()
    if auto is None:
        raise UserError(
            f"{task.name} has no witness families: its labels are not computed by a finite automaton "
            "here (allowed: the regular tasks of 'statetrack tasks')"
        )
    if model.vocab_size != task.vocab_size or model.num_classes != task.num_classes:
        raise UserError(
            f"the model reads {model.vocab_size} tokens and predicts {model.num_classes} classes; "
            f"{task.name} has {task.vocab_size} tokens and {task.num_classes} classes"
        )
    return auto


def _rows(model, auto, fams: list[Family], names: dict, max_len: int, device) -> list[dict]:
    model.eval()
    answers = family_answers(model, fams, max_len, auto.tokens, device)
    rows = []
    for k, (fam, ans) in enumerate(zip(fams, answers, strict=True)):
        n_max = ans.shape[1] - 1
        if n_max < 0:
            continue
        right = np.ones((2, n_max + 1), dtype=bool)
        for i in (0, 1):
            scored = ans[i] >= 0
            right[i, scored] = ans[i][scored] == fam.labels[i]
        wrong = ~np.asarray(right.all(axis=0))
        first = int(np.argmax(wrong)) if wrong.any() else None
        horizon = None if first is None else min(fam.length(i, first) for i in (0, 1) if not right[i, first])
        rows.append(
            {
                **fam.as_dict(auto.symbols, auto.tokens, auto.label_name),
                "pair": list(names.get(fam.pair, fam.pair)),
                "index": k,
                "tested_n": n_max,
                "tested_length": fam.length(0, n_max),
                "horizon_n": first,
                "horizon": horizon,
                "wrong_after": None if first is None else float(wrong[first:].mean()),
                "accuracy": float(right.mean()),
            }
        )
    return rows


def pair_horizons(rows: list[dict]) -> list[dict]:
    """One row per pair of states (in the order of the families): {pair, families (tested), horizon (the
    shortest over its families, None: none broke), horizon_n, family (the one that broke first, else the
    first tested), tested_length (the longest string tested), accuracy (mean over its families)}."""
    by: dict[tuple, list[dict]] = {}
    for r in rows:
        by.setdefault(tuple(r["pair"]), []).append(r)
    out = []
    for pair, rs in by.items():
        broke = [r for r in rs if r["horizon"] is not None]
        first = min(broke, key=lambda r: (r["horizon"], r["horizon_n"])) if broke else rs[0]
        out.append(
            {
                "pair": list(pair),
                "families": len(rs),
                "horizon": first["horizon"],
                "horizon_n": first["horizon_n"],
                "family": first["family"],
                "tested_length": max(r["tested_length"] for r in rs),
                "accuracy": float(np.mean([r["accuracy"] for r in rs])),
            }
        )
    return out


def horizon_summary(rows: list[dict], max_len: int) -> dict:
    """{horizon: the shortest horizon over the families or None, horizon_max: the longest length tested,
    pair: the pair of states of the family that broke first (None)}."""
    broke = [r for r in rows if r["horizon"] is not None]
    first = min(broke, key=lambda r: r["horizon"]) if broke else None
    return {
        "horizon": None if first is None else first["horizon"],
        "horizon_max": max_len,
        "pair": None if first is None else first["pair"],
        "family": None if first is None else first["family"],
    }


def measure_horizons(
    model,
    task: Task,
    max_len: int,
    max_families: int = MAX_FAMILIES,
    device=None,
    keep_families: bool = False,
    witnesses=None,
) -> dict:
    """Every pair of states of the task's automaton: its horizon, or why it has no family (``witnesses``:
    the automaton's ``witness_pairs`` where the caller has them already). {horizon,
    horizon_max, pair, family (the first to break), pairs: pair_horizons' rows, families_tested,
    pairs_total, pairs_skipped (beyond the cap), no_family: {reason: number of pairs}, max_loop (the
    longest loop word tried); with ``keep_families``: families, a row per family}."""
    auto = _automaton(model, task)
    w = witnesses or witness_pairs(auto, max_families)
    rows = _rows(model, auto, w.families, {p.states: p.names for p in w.pairs}, max_len, device)
    out = {
        **horizon_summary(rows, max_len),
        "pairs": pair_horizons(rows),
        "families_tested": len(rows),
        "pairs_total": w.pairs_total,
        "pairs_skipped": w.pairs_skipped,
        "no_family": dict(Counter(p.reason.split(":")[0] for p in w.pairs if p.reason)),
        "max_loop": w.max_word,
    }
    if keep_families:
        out["families"] = rows
    return out
