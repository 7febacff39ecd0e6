"""Even pairs ``evenpairs`` (Deletang2023, regular): a uniform binary string; the label is 0
when the number of unequal adjacent pairs ('01' and '10') is even, 1 when odd. That number is even
exactly when the first and the last symbols agree, so the task only needs the first symbol.

``evenpairs`` scores only the final position (as in the paper); ``evenpairs:every`` labels every
prefix. Training draw: uniform bits; for length >= 2 the final label is exactly uniform (the last
bit is independent of the first), so ``label_distribution`` is (1/2, 1/2); a length-1 string has no
pairs (label 0). Test draw: the same with the last bit chosen to give half the sequences each label;
length 1 has no test set (no string of length 1 has an odd number of pairs).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from statetrack.errors import UserError
from statetrack.tasks.algebraic import RegularLanguage
from statetrack.tasks.automaton import Automaton
from statetrack.tasks.base import Batch, Scoring, TestDraw
from statetrack.tasks.streaming import Chunk, StreamingTask, UniformInputs


class EvenPairs(StreamingTask):
    prefix_labels = True
    vocab_size = 2
    num_classes = 2
    symbols = ("0", "1")
    inputs = UniformInputs(2)

    def __init__(self, scoring: Scoring | str = Scoring.FINAL):
        self.scoring = Scoring(scoring)
        self.name = "evenpairs" + (":every" if self.scoring == Scoring.EVERY else "")

    def _start(self, _batch_size: int) -> None:
        return None  # the first symbol, once read

    def _chunk(self, u: np.ndarray, t0: int, length: int, state: np.ndarray | None) -> Chunk:
        x = self.inputs.read(u)
        first = x[:, 0].copy() if state is None else state
        y = (x != first[:, None]).astype(np.int64)
        b, steps = x.shape
        return x, y, self._mask(b, t0, steps, length), first

    test_draw_kind = TestDraw.BALANCED

    def build_automaton(self) -> Automaton:
        # states: 0 nothing read (no string); (first, last) = (0, 0), (0, 1), (1, 1), (1, 0): label first != last
        delta = [[1, 3], [1, 2], [1, 2], [4, 3], [4, 3]]
        return Automaton(delta, 0, [-1, 0, 1, 0, 1], 2, symbols=self.symbols)

    def algebra(self) -> RegularLanguage:
        # states: start, (first, last) = 1: (0,0), 2: (0,1), 3: (1,0), 4: (1,1); accepted iff first == last
        # (and the empty string): the complement of the labels, with the same transition monoid
        delta = np.array([[1, 4], [1, 2], [1, 2], [3, 4], [3, 4]])
        return RegularLanguage(
            delta, 0, np.array([True, True, False, False, True]), "even pairs (first symbol == last symbol)"
        )

    test_draw = "balanced final label (the last bit set by the label); the rest uniform"

    def test_unavailable(self, length: int) -> str | None:
        return "no string of length 1 has an odd number of unequal pairs" if length == 1 else None

    def stream_test_batch(
        self, rng: np.random.Generator, batch_size: int, length: int, chunk: int
    ) -> Iterator[Batch]:
        if length == 1:
            raise UserError(
                f"{self.name}: {self.test_unavailable(1)}, so no balanced test set of length 1 exists"
            )
        # the last bit equals the first for label 0 and differs for label 1
        return self._stream_balanced_final(
            rng, batch_size, length, chunk, 2, self.inputs, lambda first, label: first ^ label
        )

    def label_distribution(self) -> np.ndarray:
        return np.full(2, 0.5)

    def params(self) -> dict[str, Any]:
        return {"scoring": self.scoring}
