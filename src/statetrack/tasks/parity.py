"""Parity: input bits, label = parity of the bits read so far (the group C2).

``parity`` labels every position (prefix parity); ``parity:final`` scores the last position only.

Training draw: uniform bits, so the final label is uniform on {0, 1}. Test draw: the same with the
last bit chosen to give half the sequences parity 0 and half parity 1 (each sequence uniform among
those of its parity), so that the measured chance at every length is 1/2 exactly (an even batch).
"""
from __future__ import annotations

import numpy as np

from statetrack.errors import UserError
from statetrack.tasks.automaton import Automaton
from statetrack.tasks.streaming import StreamingTask, every_mask, final_mask_chunk


class Parity(StreamingTask):
    prefix_labels = True
    vocab_size = 2
    num_classes = 2
    label_names = ("even", "odd")

    def __init__(self, scoring: str = "every"):
        if scoring not in ("every", "final"):
            raise UserError(f"unknown parity variant {scoring!r}; allowed: every, final")
        self.scoring = scoring
        self.name = "parity" if scoring == "every" else "parity:final"

    def _start(self, batch_size):
        return np.zeros(batch_size, dtype=np.int64)

    def _chunk(self, u, t0, length, parity):
        bits = (u < 0.5).astype(np.int64)
        targets = (np.cumsum(bits, axis=1) + parity[:, None]) % 2
        B, n = bits.shape
        mask = every_mask(B, n) if self.scoring == "every" else final_mask_chunk(B, t0, n, length)
        return bits, targets, mask, targets[:, -1].copy()

    test_draw_kind = "balanced"

    def build_automaton(self):
        # states: parity 0, 1; the bit 1 flips it
        return Automaton([[0, 1], [1, 0]], 0, [0, 1], 2, symbols=("0", "1"), label_names=self.label_names)

    test_draw = "balanced final parity (the last bit set by the label); the rest uniform"

    def stream_test_batch(self, rng, batch_size, length, chunk):
        # _chunk reads bit 1 from u < 0.5: the bit that turns the parity so far into the label
        return self._stream_balanced_final(rng, batch_size, length, chunk, 2,
                                           lambda parity, label: np.where(parity != label, 0.25, 0.75))

    def label_distribution(self):
        # the prefix sum mod 2 of uniform bits is uniform on {0, 1}
        return np.full(2, 0.5)

    def params(self):
        return {"scoring": self.scoring}
