"""Examples of a task and the shares of its final labels (the ``sample`` command's API).

    sample_json(task, length, n, seed, split) -> one JSON-ready dict per example: inputs, targets, mask
                                              (+ input_symbols where the task names its tokens,
                                               + input_perms / target_perms for group tasks)
    label_shares(task, length, split, n, seed) -> the share of each final scored label over n sequences

``split`` is "train" (the training draw, ``Task.sample_batch``) or "test" (the test draw that
``evaluate`` scores, ``Task.test_batch``).
"""
from __future__ import annotations

import numpy as np

from statetrack.errors import UserError
from statetrack.tasks.group import GroupWordProblem
from statetrack.tasks.registry import get_task
from statetrack.tasks.streaming import check_length

SPLITS = ("train", "test")


def _draw_args(task_name: str, length: int, n: int, seed, split: str):
    """Checked arguments of a draw: (task, length, rng); a UserError names a bad one, or a length at
    which the test draw has no sequences."""
    task = get_task(task_name)
    length = check_length(length)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise UserError(f"number of examples must be a positive integer, got {n!r}")
    if split not in SPLITS:
        raise UserError(f"unknown split {split!r}; allowed: {', '.join(SPLITS)}")
    try:
        rng = np.random.default_rng(seed)
    except (TypeError, ValueError):
        raise UserError(f"seed must be a non-negative integer, got {seed!r}") from None
    reason = task.test_unavailable(length) if split == "test" else None
    if reason:
        raise UserError(f"{task.name} has no test set of length {length}: {reason}; evaluation reports "
                        "this length as not scored")
    return task, length, rng


def sample_json(task_name: str, length: int, n: int = 1, seed: int = 0, split: str = "train") -> list[dict]:
    """``n`` examples of ``task_name`` at ``length`` from the ``split`` draw, as JSON-ready dicts (same
    seed, same examples)."""
    task, length, rng = _draw_args(task_name, length, n, seed, split)
    b = (task.sample_batch if split == "train" else task.test_batch)(rng, int(n), length)
    symbols = getattr(task, "symbols", None)
    out = []
    for i in range(int(n)):
        ex = {"inputs": b.inputs[i].tolist(), "targets": b.targets[i].tolist(),
              "mask": b.mask[i].tolist()}
        if symbols is not None:
            ex["input_symbols"] = [symbols[v] for v in ex["inputs"]]
        if task.kind == "lm":  # a corpus: the text of the tokens
            ex["text"] = task.tokenizer.decode(b.inputs[i])
        if isinstance(task, GroupWordProblem):
            ex["input_perms"] = [task.group.perm(v) for v in ex["inputs"]]
            ex["target_perms"] = [task.group.perm(v) for v in ex["targets"]]
        out.append(ex)
    return out


def label_shares(task_name: str, length: int, split: str = "test", n: int = 10_000, seed: int = 0) -> dict:
    """The share of each final scored label (the one ``accuracy`` scores) over ``n`` sequences of the
    ``split`` draw at ``length``: {task, split, length, n, draw, shares: {label: share}, majority}.
    Labels are class ids, or names where the task has them (``label_names``). Drawn in streamed
    batches of 1,000, so memory does not grow with ``n`` or ``length``."""
    task, length, rng = _draw_args(task_name, length, n, seed, split)
    counts = np.zeros(task.num_classes, dtype=np.int64)
    for start in range(0, int(n), 1000):
        b_n = min(1000, int(n) - start)
        stream = (task.stream_batch if split == "train" else task.stream_test_batch)(rng, b_n, length, 512)
        last = np.full(b_n, -1)
        for b in stream:
            scored = b.mask.any(axis=1)
            pos = b.mask.shape[1] - 1 - np.argmax(b.mask[:, ::-1], axis=1)
            last = np.where(scored, b.targets[np.arange(b_n), pos], last)
        counts += np.bincount(last[last >= 0], minlength=task.num_classes)[:task.num_classes]
    names = getattr(task, "label_names", None) or [str(c) for c in range(task.num_classes)]
    total = max(int(counts.sum()), 1)
    shares = {names[c]: float(counts[c] / total) for c in range(task.num_classes) if counts[c]}
    return {"task": task.name, "split": split, "length": length, "n": int(counts.sum()),
            "draw": "the training draw" if split == "train" else task.test_draw,
            "shares": shares, "majority": float(counts.max() / total)}
