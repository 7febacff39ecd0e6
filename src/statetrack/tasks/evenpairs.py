"""Even pairs ``evenpairs`` (Deletang2023, regular): a uniform binary string; the label is 0
when the number of unequal adjacent pairs ('01' and '10') is even, 1 when odd. That number is even
exactly when the first and the last symbols agree, so the task only needs the first symbol.

``evenpairs`` scores only the final position (as in the paper); ``evenpairs:every`` labels every
prefix. Chance: for length >= 2 the label is exactly uniform (the last bit is independent of the
first), so ``label_distribution`` is (1/2, 1/2); a length-1 string has no pairs (label 0).
"""
from __future__ import annotations

import numpy as np

from statetrack.tasks.streaming import StreamingTask, every_mask, final_mask_chunk, uniform_ints


class EvenPairs(StreamingTask):
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

    def label_distribution(self):
        return np.full(2, 0.5)

    def params(self):
        return {"scoring": self.scoring}
