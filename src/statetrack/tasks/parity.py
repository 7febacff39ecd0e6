"""Parity: input bits, label = parity of the bits read so far.

``parity`` labels every position (prefix parity); ``parity:final`` scores the last position only.
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from statetrack.errors import UserError
from statetrack.tasks.base import Batch, Task, final_mask


class Parity(Task):
    vocab_size = 2
    num_classes = 2

    def __init__(self, scoring: str = "every"):
        if scoring not in ("every", "final"):
            raise UserError(f"unknown parity variant {scoring!r}; allowed: every, final")
        self.scoring = scoring
        self.name = "parity" if scoring == "every" else "parity:final"

    def _batch(self, bits: np.ndarray, start_parity: np.ndarray, last: bool) -> Batch:
        targets = (np.cumsum(bits, axis=1) + start_parity[:, None]) % 2
        if self.scoring == "every":
            mask = np.ones_like(bits, dtype=bool)
        elif last:
            mask = final_mask(*bits.shape)
        else:
            mask = np.zeros_like(bits, dtype=bool)
        return Batch(bits, targets.astype(np.int64), mask)

    def sample_batch(self, rng, batch_size, length):
        bits = rng.integers(0, 2, size=(batch_size, length), dtype=np.int64)
        return self._batch(bits, np.zeros(batch_size, dtype=np.int64), last=True)

    def stream_batch(self, rng, batch_size, length, chunk) -> Iterator[Batch]:
        # Bits are drawn chunk by chunk: the same distribution as sample_batch, not the same draws.
        parity = np.zeros(batch_size, dtype=np.int64)
        for start in range(0, length, chunk):
            stop = min(start + chunk, length)
            bits = rng.integers(0, 2, size=(batch_size, stop - start), dtype=np.int64)
            b = self._batch(bits, parity, last=stop == length)
            parity = b.targets[:, -1].copy()
            yield b

    def label_distribution(self):
        # the prefix sum mod 2 of uniform bits is uniform on {0, 1}
        return np.full(2, 0.5)

    def params(self):
        return {"scoring": self.scoring}
