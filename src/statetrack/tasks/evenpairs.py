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

import numpy as np

from statetrack.errors import UserError
from statetrack.tasks.automaton import Automaton
from statetrack.tasks.streaming import StreamingTask, every_mask, final_mask_chunk, uniform_ints


class EvenPairs(StreamingTask):
    prefix_labels = True
    vocab_size = 2
    num_classes = 2
    symbols = ("0", "1")

    def __init__(self, scoring: str = "final"):
        self.scoring = scoring
        self.name = "evenpairs" + (":every" if scoring == "every" else "")

    def _start(self, batch_size):
        return None  # the first symbol, once read

    def _chunk(self, u, t0, length, state):
        x = uniform_ints(u, 2)
        first = x[:, 0].copy() if state is None else state
        y = (x != first[:, None]).astype(np.int64)
        b, steps = x.shape
        mask = every_mask(b, steps) if self.scoring == "every" else final_mask_chunk(b, t0, steps, length)
        return x, y, mask, first

    test_draw_kind = "balanced"

    def build_automaton(self):
        # states: 0 nothing read (no string); (first, last) = (0, 0), (0, 1), (1, 1), (1, 0): label first != last
        delta = [[1, 3], [1, 2], [1, 2], [4, 3], [4, 3]]
        return Automaton(delta, 0, [-1, 0, 1, 0, 1], 2, symbols=self.symbols)

    test_draw = "balanced final label (the last bit set by the label); the rest uniform"

    def test_unavailable(self, length):
        return "no string of length 1 has an odd number of unequal pairs" if length == 1 else None

    def stream_test_batch(self, rng, batch_size, length, chunk):
        if length == 1:
            raise UserError(f"{self.name}: {self.test_unavailable(1)}, so no balanced test set of length 1 exists")
        # the last bit equals the first for label 0 and differs for label 1 (_chunk: bit = u >= 0.5)
        return self._stream_balanced_final(rng, batch_size, length, chunk, 2,
                                           lambda first, label: ((first ^ label) + 0.5) / 2)

    def label_distribution(self):
        return np.full(2, 0.5)

    def params(self):
        return {"scoring": self.scoring}
