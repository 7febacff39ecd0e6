"""Examples of a task and the shares of its final labels (the ``sample`` command's API).

    sample_json(task, length, n, seed, split, suffix) -> one JSON-ready dict per example: inputs, targets,
                                              mask (+ input_symbols where the task names its tokens,
                                               + input_perms / target_perms for group tasks)
    label_shares(task, length, split, n, seed, suffix) -> the share of each final scored label over n
                                              sequences, and the exact distribution where known

``split`` (a ``Split`` or its text) is "train" (the training draw, ``Task.sample_batch``), "test" (the test draw that
``evaluate`` scores, ``Task.test_batch``) or "long" (the long-range draw of a regular task, with a
suffix of ``suffix`` symbols, default ceil(L/2): ``statetrack.tasks.draws``). The examples of a seed are
the first sequences of the stream that evaluation with that seed scores at that split and length
(``draws.test_rng``).
"""

from __future__ import annotations

import numpy as np

from statetrack.config import Split
from statetrack.errors import UserError
from statetrack.tasks import draws
from statetrack.tasks.base import CorpusTask, Task
from statetrack.tasks.registry import get_task
from statetrack.tasks.streaming import check_length
from statetrack.tasks.word_problem import GroupWordProblem

SPLITS = draws.SPLITS


def _draw_args(
    task_name: str, length: int, n: int, seed: int, split: str | Split, suffix: int | None = None
) -> tuple[Task, int, Split, np.random.Generator]:
    """Checked arguments of a draw: (task, length, split, rng); a UserError names a bad one, or a length
    at which the split's draw has no sequences."""
    task = get_task(task_name)
    length = check_length(length)
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise UserError(f"number of examples must be a positive integer, got {n!r}")
    split = draws.check_split(split)
    if split is Split.LONG:
        draws.long_plan(task, length, suffix)  # a task that is not regular: one line naming the regular ones
    elif suffix is not None:
        raise UserError(
            f"a suffix length is an option of the long-range draw; give --split long with it "
            f"(got split {split.value!r})"
        )
    try:
        rng = draws.test_rng(
            seed, split, length
        )  # the stream evaluation scores at this seed, split and length
    except (TypeError, ValueError):
        raise UserError(f"seed must be a non-negative integer, got {seed!r}") from None
    reason = draws.unavailable(task, split, length, suffix)
    if reason:
        what = "test set" if split is Split.TEST else "long-range test set"
        raise UserError(
            f"{task.name} has no {what} of length {length}: {reason}; evaluation reports "
            "this length as not scored (n/a)"
        )
    return task, length, split, rng


def sample_json(
    task_name: str,
    length: int,
    n: int = 1,
    seed: int = 0,
    split: str | Split = Split.TRAIN,
    suffix: int | None = None,
) -> list[dict]:
    """``n`` examples of ``task_name`` at ``length`` from the ``split`` draw, as JSON-ready dicts (same
    seed, same examples). The long-range draw's examples also say where their suffix starts
    (``suffix_start``, a position counted from 0)."""
    task, length, split, rng = _draw_args(task_name, length, n, seed, split, suffix)
    b = draws.batch(task, split, rng, int(n), length, suffix)
    start = length - draws.long_plan(task, length, suffix).suffix if split is Split.LONG else None
    symbols = task.symbols
    out = []
    for i in range(int(n)):
        ex = {"inputs": b.inputs[i].tolist(), "targets": b.targets[i].tolist(), "mask": b.mask[i].tolist()}
        if symbols is not None:
            ex["input_symbols"] = [symbols[v] for v in ex["inputs"]]
        if isinstance(task, CorpusTask):  # a corpus: the text of the tokens
            ex["text"] = task.tokenizer.decode(b.inputs[i])
        if isinstance(task, GroupWordProblem):
            ex["input_perms"] = [task.group.perm(v) for v in ex["inputs"]]
            ex["target_perms"] = [task.group.perm(v) for v in ex["targets"]]
        if start is not None:
            ex["suffix_start"] = start
        out.append(ex)
    return out


def label_shares(
    task_name: str,
    length: int,
    split: str | Split = Split.TEST,
    n: int = 10_000,
    seed: int = 0,
    suffix: int | None = None,
) -> dict:
    """The share of each final scored label (the one ``accuracy`` scores) over ``n`` sequences of the
    ``split`` draw at ``length``: {task, split, length, n, draw, shares: {label: share}, majority,
    exact, note}, where ``note`` names a long-range draw with few distinct suffixes (one suffix: every
    string ends with it), and ``exact`` is the majority share of the exact distribution where the task can compute
    it (the chance evaluation stores), else None. Labels are class ids, or names where the task has them
    (``label_names``). Drawn in streamed batches of 1,000, so memory does not grow with ``n`` or
    ``length``."""
    task, length, split, rng = _draw_args(task_name, length, n, seed, split, suffix)
    counts = draws.final_label_counts(task, split, length, int(n), rng, suffix)
    names = task.label_names or [str(c) for c in range(task.num_classes)]
    total = max(int(counts.sum()), 1)
    shares = {names[c]: float(counts[c] / total) for c in range(task.num_classes) if counts[c]}
    exact = draws.exact_label_distribution(task, split, length, suffix)
    draw = {Split.TRAIN: "the training draw", Split.TEST: task.test_draw, Split.LONG: LONG_DRAW}[split]
    note = draws.long_plan(task, length, suffix).note if split is Split.LONG else None
    return {
        "task": task.name,
        "split": split.value,
        "length": length,
        "n": int(counts.sum()),
        "draw": draw,
        "shares": shares,
        "majority": float(counts.max() / total),
        "exact": None if exact is None else float(exact.max()),
        "note": note,
    }


LONG_DRAW = (
    "the long-range draw: the last k symbols (k = ceil(L/2) unless given) leave every label possible, "
    "the label is drawn independently of them, the prefix uniform among those giving that label"
)
