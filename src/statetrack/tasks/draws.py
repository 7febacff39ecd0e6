"""The draws a task's sequences come from, by split, and the distribution of their final label.

Splits (``Split``, a str enum: its value is the text configs, the command line and the database hold;
``SPLITS`` lists them in order):

- ``train``: the training draw (``Task.sample_batch``);
- ``test``: the task's test draw (``Task.stream_test_batch``; balanced final labels where the training
  draw would let a constant answer score well, e.g. half accepted strings for a regular language);
- ``long``: the long-range draw of a regular task (:mod:`statetrack.tasks.long_range`): the last k
  symbols (default ceil(L/2)) leave every label possible, the label is drawn independently of them, so
  a predictor that reads only the recent past scores chance. A task without an automaton has none; a
  window language (its label decided by a short suffix) has none at lengths where no suffix of k
  symbols leaves both labels possible, and the reason names the window.

Seeds. ``test_rng(seed, split, L)`` is the generator of a split's sequences at length L: its seed
combines the evaluation seed, the split and the length (``numpy.random.SeedSequence([seed, split,
L])``), so the test sets of two lengths, or of the two draws at one length, are independent streams:
the long-range suffixes at length 61 are not the first symbols of those at 200. Evaluation and
``statetrack sample --seed S`` use it alike, so ``sample --seed 12345 --n 128`` shows the first strings
that the default evaluation scores at that length.

Chance. ``label_distribution(task, split, L)`` is the distribution of the final scored label in the
split's draw at length L: exact where the task can compute it (a balanced draw: uniform over the
classes; the long-range draw: uniform over the labels of length L; a draw that is the training draw of
a regular task: counted through its automaton), else the shares over ``CHANCE_DRAWS`` sequences of the
same draw (seeded, so every run sees the same chance; cached per process). Evaluation stores the
majority share as the chance of a length, never the majority of the few sequences it scores.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from statetrack.config import Split
from statetrack.errors import UserError, did_you_mean
from statetrack.tasks.automaton import Automaton
from statetrack.tasks.base import Batch, Scoring, Task, TestDraw
from statetrack.tasks.long_range import LongPlan, draw, plan
from statetrack.tasks.streaming import check_length, every_mask, final_mask_chunk

SPLITS: tuple[Split, ...] = tuple(Split)
#: sequences behind a label distribution that the task cannot compute exactly
CHANCE_DRAWS = 10_000
#: the seed of those sequences
CHANCE_SEED = 20_240_917

REGULAR = "dfa:, tomita:, parity, evenpairs, cycle, group (up to |G| x |support| = 2^21), modcount, modarith (m <= 32)"


def check_split(split: str | Split) -> Split:
    """The ``Split`` that ``split`` (a Split or its text) names; a UserError naming the allowed ones."""
    try:
        return Split(split)
    except ValueError:
        raise UserError(
            f"unknown split {split!r}; allowed: {', '.join(SPLITS)}{did_you_mean(str(split), SPLITS)}"
        ) from None


def test_rng(seed: int, split: str | Split, length: int) -> np.random.Generator:
    """The generator of the ``split`` draw's sequences at ``length`` (module docstring: independent
    streams per seed, split and length)."""
    return np.random.default_rng([int(seed), SPLITS.index(check_split(split)), int(length)])


def check_suffix(suffix: object, length: int) -> int | None:
    if suffix is None:
        return None
    if isinstance(suffix, bool) or not isinstance(suffix, (int, np.integer)) or not 0 <= suffix <= length:
        raise UserError(
            f"bad suffix length {suffix!r} for length {length}; allowed: an integer 0..{length} "
            f"(default ceil(L/2) = {(length + 1) // 2})"
        )
    return int(suffix)


NOT_REGULAR = "no long-range draw: the task's labels are not computed by a finite automaton here"


def long_plan(task: Task, length: int, suffix: int | None = None) -> LongPlan:
    """The long-range draw's plan (``plan.reason`` says why there is none); a UserError for a task that
    has no automaton."""
    auto = task.automaton()
    if auto is None:
        raise UserError(f"{task.name} has {NOT_REGULAR}; allowed: the regular tasks ({REGULAR})")
    return plan(auto, check_length(length), check_suffix(suffix, length))


def unavailable(task: Task, split: Split, length: int, suffix: int | None = None) -> str | None:
    """Why the split's draw has no sequences of this length, or None."""
    split = check_split(split)
    if split is Split.TEST:
        return task.test_unavailable(length)
    if split is Split.LONG:
        if task.automaton() is None:
            return NOT_REGULAR
        return long_plan(task, length, suffix).reason
    return None


def stream(
    task: Task,
    split: Split,
    rng: np.random.Generator,
    batch_size: int,
    length: int,
    chunk: int,
    suffix: int | None = None,
) -> Iterator[Batch]:
    """The split's sequences in time chunks (call ``unavailable`` first: a reason is a UserError here)."""
    split = check_split(split)
    if split is Split.TRAIN:
        return task.stream_batch(rng, batch_size, length, chunk)
    if split is Split.TEST:
        return task.stream_test_batch(rng, batch_size, length, chunk)
    return stream_long(task, rng, batch_size, length, chunk, suffix)


def batch(
    task: Task,
    split: Split,
    rng: np.random.Generator,
    batch_size: int,
    length: int,
    suffix: int | None = None,
) -> Batch:
    """The whole batch of ``stream`` at once."""
    return next(iter(stream(task, split, rng, batch_size, length, length, suffix)))


def training_batch(task: Task, split: Split, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
    """A batch of training (or validation) strings from ``split``'s draw (``TrainConfig.train_split``),
    or from the training draw at a length where that draw has none (e.g. length 1 of the long-range
    draw, whose suffix would be the whole string)."""
    split = check_split(split)
    if split is not Split.TRAIN and unavailable(task, split, length) is None:
        return batch(task, split, rng, batch_size, length)
    return task.sample_batch(rng, batch_size, length)


def stream_long(
    task: Task, rng: np.random.Generator, batch_size: int, length: int, chunk: int, suffix: int | None = None
) -> Iterator[Batch]:
    """The long-range draw of a regular task, in time chunks: inputs, the task's targets at every
    position (from its automaton) and its mask (every position, or the last)."""
    length = check_length(length)
    if chunk < 1:
        raise UserError(f"chunk must be a positive integer, got {chunk!r}")
    p = long_plan(task, length, suffix)
    if p.reason:
        raise UserError(f"{task.name} has no long-range test set of length {length}: {p.reason}")
    auto = task.automaton()
    assert auto is not None
    try:
        symbols = draw(auto, p, rng, batch_size)
    except ValueError as e:
        raise UserError(f"{task.name}: {e}") from None
    return _chunks(task, auto, symbols, length, chunk)


def _chunks(task: Task, auto: Automaton, symbols: np.ndarray, length: int, chunk: int) -> Iterator[Batch]:
    state = None
    for start in range(0, length, chunk):
        stop = min(start + chunk, length)
        x = auto.tokens[symbols[:, start:stop]]
        states = auto.run(x, state)
        state = states[:, -1]
        b, n = x.shape
        mask = every_mask(b, n) if task.scoring == Scoring.EVERY else final_mask_chunk(b, start, n, length)
        yield Batch(x, auto.outputs[states], mask)


# -- the final label's distribution -----------------------------------------------------------------
def exact_label_distribution(
    task: Task, split: Split, length: int, suffix: int | None = None
) -> np.ndarray | None:
    """The final label's distribution in the split's draw at ``length`` where the task can compute it,
    else None (also where the draw has no sequences of that length)."""
    split = check_split(split)
    if unavailable(task, split, length, suffix):
        return None
    if split is Split.LONG:
        p = long_plan(task, length, suffix)
        dist = np.zeros(task.num_classes)
        dist[p.labels] = 1.0 / len(p.labels)
        return dist
    if split is Split.TEST and task.test_draw_kind == TestDraw.BALANCED:
        return np.full(task.num_classes, 1.0 / task.num_classes)
    if split is Split.TRAIN or task.test_draw_kind == TestDraw.TRAINING:
        auto = task.automaton()
        if auto is not None:
            return auto.label_distribution(length)
    return None


_ESTIMATES: dict[tuple, np.ndarray] = {}


def estimated_label_distribution(
    task: Task,
    split: Split,
    length: int,
    n: int = CHANCE_DRAWS,
    seed: int = CHANCE_SEED,
    suffix: int | None = None,
) -> np.ndarray:
    """Shares of the final scored label over ``n`` sequences of the split's draw (streamed in batches of
    1,000, so memory does not grow with ``n`` or ``length``); cached per process."""
    key = (task.name, split, length, n, seed, suffix)
    if key in _ESTIMATES:
        return _ESTIMATES[key]
    counts = final_label_counts(task, split, length, n, np.random.default_rng(seed), suffix)
    dist = counts / max(1, counts.sum())
    if len(_ESTIMATES) > 4096:
        _ESTIMATES.clear()
    _ESTIMATES[key] = dist
    return dist


def final_label_counts(
    task: Task, split: Split, length: int, n: int, rng: np.random.Generator, suffix: int | None = None
) -> np.ndarray:
    """How often each class is the last scored label over ``n`` sequences of the split's draw."""
    counts = np.zeros(task.num_classes, dtype=np.int64)
    for start in range(0, int(n), 1000):
        b_n = min(1000, int(n) - start)
        last = np.full(b_n, -1)
        for b in stream(task, split, rng, b_n, length, 512, suffix):
            scored = b.mask.any(axis=1)
            pos = b.mask.shape[1] - 1 - np.argmax(b.mask[:, ::-1], axis=1)
            last = np.where(scored, b.targets[np.arange(b_n), pos], last)
        counts += np.bincount(last[last >= 0], minlength=task.num_classes)[: task.num_classes]
    return counts


def label_distribution(
    task: Task, split: Split, length: int, suffix: int | None = None
) -> tuple[np.ndarray, bool]:
    """(distribution of the final label, exact?) in the split's draw at ``length``: exact where the task
    can compute it, else over ``CHANCE_DRAWS`` sequences of the same draw."""
    dist = exact_label_distribution(task, split, length, suffix)
    if dist is not None:
        return dist, True
    return estimated_label_distribution(task, split, length, suffix=suffix), False
