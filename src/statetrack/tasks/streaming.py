"""Shared machinery for tasks whose labels are a running state.

Such a task draws exactly one uniform float per (time step, sequence), time-major, and carries a
small state from one step to the next. Because numpy's ``Generator.random`` consumes one 64-bit word
per float, drawing ``(chunk, batch)`` floats chunk after chunk reads the same stream as drawing
``(length, batch)`` at once: ``stream_batch`` yields exactly the batch that ``sample_batch`` returns,
sliced in time, with memory flat in the length. Fixed-input tasks simply ignore the floats.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from statetrack.errors import UserError
from statetrack.tasks.base import Batch, Scoring, Task


def check_length(length: int) -> int:
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
        raise UserError(f"sequence length must be a positive integer, got {length!r}")
    return int(length)


def uniform_ints(u: np.ndarray, k: int) -> np.ndarray:
    """Map uniform floats in [0, 1) to integers 0 .. k-1."""
    return np.minimum((u * k).astype(np.int64), k - 1)


class UniformInputs:
    """How a streaming task reads an input from a step's uniform float, and the inverse: the float that
    gives a chosen input (the balanced test draws set the last input so). The float u gives the
    ``floor(k u)``-th of the ``letters`` (default 0 .. k-1, k their number)."""

    def __init__(self, k: int, letters: Sequence[int] | None = None):
        self.k = k
        self.letters = None if letters is None else np.asarray(letters, dtype=np.int64)
        if self.letters is not None:  # letter -> its place among the letters
            self.index = np.zeros(int(self.letters.max()) + 1, dtype=np.int64)
            self.index[self.letters] = np.arange(k)

    def read(self, u: np.ndarray) -> np.ndarray:
        """The inputs of the uniform floats ``u``."""
        i = uniform_ints(u, self.k)
        return i if self.letters is None else self.letters[i]

    def float_of(self, inputs: np.ndarray) -> np.ndarray:
        """A float that ``read`` maps to each of ``inputs``: the middle of its interval."""
        i = np.asarray(inputs) if self.letters is None else self.index[inputs]
        return (i + 0.5) / self.k


#: the state a streaming task carries from one chunk to the next (each task its own)
State = Any
#: what a streaming task's step function returns: (inputs, targets, mask, state)
Chunk = tuple[np.ndarray, np.ndarray, np.ndarray, State]


class StreamingTask(Task):
    """A task defined by a per-step update; subclasses implement ``_start`` and ``_chunk``."""

    @abstractmethod
    def _start(self, batch_size: int) -> State:
        """The state before the first step."""

    @abstractmethod
    def _chunk(self, u: np.ndarray, t0: int, length: int, state: State) -> Chunk:
        """Steps ``t0 .. t0 + u.shape[1] - 1`` of sequences of total ``length``.

        ``u`` is (batch, steps) uniform floats, one per step. Returns (inputs, targets, mask, state).
        """

    def _mask(self, batch_size: int, t0: int, steps: int, length: int) -> np.ndarray:
        """The scored positions of a chunk: all of them, or under ``Scoring.FINAL`` the sequence's last."""
        if self.scoring == Scoring.EVERY:
            return every_mask(batch_size, steps)
        return final_mask_chunk(batch_size, t0, steps, length)

    def stream_batch(
        self, rng: np.random.Generator, batch_size: int, length: int, chunk: int
    ) -> Iterator[Batch]:
        length = check_length(length)
        if chunk < 1:
            raise UserError(f"chunk must be a positive integer, got {chunk!r}")
        state = self._start(batch_size)
        for start in range(0, length, chunk):
            stop = min(start + chunk, length)
            u = rng.random((stop - start, batch_size)).T
            x, y, m, state = self._chunk(u, start, length, state)
            yield Batch(x.astype(np.int64), y.astype(np.int64), m.astype(bool))

    def sample_batch(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
        length = check_length(length)
        return next(iter(self.stream_batch(rng, batch_size, length, length)))

    def _stream_balanced_final(
        self,
        rng: np.random.Generator,
        batch_size: int,
        length: int,
        chunk: int,
        k: int,
        inputs: UniformInputs,
        last_input: Callable[[State, np.ndarray], np.ndarray],
    ) -> Iterator[Batch]:
        """A test draw with balanced final labels, for tasks whose last input fixes the final label.

        The final labels are drawn first (``balanced_labels``: each of the k classes equally often),
        then the sequences as in the training draw except the last input, which is the one that gives
        the sequence its label: ``last_input(state, labels)`` returns it per row, and ``inputs`` (how
        ``_chunk`` reads its inputs) the float that gives it. Where, in the training draw, every prefix
        leaves each label equally likely (uniform inputs of a group), every sequence is uniform among
        those with its label.
        """
        length = check_length(length)
        if chunk < 1:
            raise UserError(f"chunk must be a positive integer, got {chunk!r}")
        labels = balanced_labels(rng, batch_size, k)
        state = self._start(batch_size)
        for start in range(0, length, chunk):
            stop = min(start + chunk, length)
            u = rng.random((stop - start, batch_size)).T
            if stop < length:
                x, y, m, state = self._chunk(u, start, length, state)
            else:
                parts = []
                if stop - 1 > start:
                    *part, state = self._chunk(u[:, :-1], start, length, state)
                    parts.append(part)
                last_u = inputs.float_of(last_input(state, labels))
                *part, state = self._chunk(last_u[:, None], length - 1, length, state)
                parts.append(part)
                x, y, m = (np.concatenate(a, axis=1) for a in zip(*parts, strict=True))
            yield Batch(x.astype(np.int64), y.astype(np.int64), m.astype(bool))


def balanced_labels(rng: np.random.Generator, batch_size: int, k: int) -> np.ndarray:
    """``batch_size`` labels in 0..k-1, each floor(batch_size / k) or one more times, in random order.

    Classes 0 .. (batch_size mod k) - 1 take the extra ones, so the majority rate is
    ceil(batch_size / k) / batch_size."""
    labels = np.arange(batch_size, dtype=np.int64) % k
    rng.shuffle(labels)
    return labels


def every_mask(batch_size: int, steps: int) -> np.ndarray:
    return np.ones((batch_size, steps), dtype=bool)


def final_mask_chunk(batch_size: int, t0: int, steps: int, length: int) -> np.ndarray:
    """Mask of a chunk that scores only the last position of the whole sequence."""
    m = np.zeros((batch_size, steps), dtype=bool)
    if t0 + steps == length:
        m[:, -1] = True
    return m
