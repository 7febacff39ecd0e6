"""Parity: input bits, label = parity of the bits read so far (the group C2).

``parity`` labels every position (prefix parity); ``parity:final`` scores the last position only.

Training draw: uniform bits, so the final label is uniform on {0, 1}. Test draw: the same with the
last bit chosen to give half the sequences parity 0 and half parity 1 (each sequence uniform among
those of its parity), so that the measured chance at every length is 1/2 exactly (an even batch).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from statetrack.algebra import get_group
from statetrack.errors import UserError
from statetrack.tasks.algebraic import WordProblem
from statetrack.tasks.automaton import Automaton
from statetrack.tasks.base import Batch, Scoring, TestDraw
from statetrack.tasks.streaming import Chunk, StreamingTask, UniformInputs


class Parity(StreamingTask):
    prefix_labels = True
    vocab_size = 2
    num_classes = 2
    label_names = ("even", "odd")
    #: the bit is 1 for a float below 1/2
    inputs = UniformInputs(2, letters=(1, 0))

    def __init__(self, scoring: Scoring | str = Scoring.EVERY):
        if scoring not in tuple(Scoring):
            raise UserError(f"unknown parity variant {scoring!r}; allowed: every, final")
        self.scoring = Scoring(scoring)
        self.name = "parity" if self.scoring == Scoring.EVERY else "parity:final"

    def _start(self, batch_size: int) -> np.ndarray:
        return np.zeros(batch_size, dtype=np.int64)

    def _chunk(self, u: np.ndarray, t0: int, length: int, parity: np.ndarray) -> Chunk:
        bits = self.inputs.read(u)
        targets = (np.cumsum(bits, axis=1) + parity[:, None]) % 2
        B, n = bits.shape
        return bits, targets, self._mask(B, t0, n, length), targets[:, -1].copy()

    test_draw_kind = TestDraw.BALANCED

    def build_automaton(self) -> Automaton:
        # states: parity 0, 1; the bit 1 flips it
        return Automaton([[0, 1], [1, 0]], 0, [0, 1], 2, symbols=("0", "1"), label_names=self.label_names)

    def algebra(self) -> WordProblem:
        return WordProblem(get_group("C2"), (0, 1), "parity = the word problem of C2 (bits e, g)")

    test_draw = "balanced final parity (the last bit set by the label); the rest uniform"

    def stream_test_batch(
        self, rng: np.random.Generator, batch_size: int, length: int, chunk: int
    ) -> Iterator[Batch]:
        # the last bit turns the parity so far into the label
        return self._stream_balanced_final(
            rng,
            batch_size,
            length,
            chunk,
            2,
            self.inputs,
            lambda parity, label: (parity != label).astype(np.int64),
        )

    def label_distribution(self) -> np.ndarray:
        # the prefix sum mod 2 of uniform bits is uniform on {0, 1}
        return np.full(2, 0.5)

    def params(self) -> dict[str, Any]:
        return {"scoring": self.scoring}
