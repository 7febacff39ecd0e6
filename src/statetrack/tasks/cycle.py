"""Cycle navigation ``cycle:m`` (Deletang2023, regular): actions move an agent on a cycle of
m positions starting at 0. Tokens: 0 = step left (-1), 1 = stay, 2 = step right (+1), drawn
uniformly (as in the reference code: action a moves by a - 1). The label is the position mod m.

``cycle:m`` scores only the final position (as in the paper); ``cycle:m/every`` labels and scores
every position (the position after each action). ``cycle`` alone is ``cycle:5``, the paper's
default. The test draw is the training draw: the final position tends to uniform, 1/m, as T grows
(the walk's second eigenvalue is (1 + 2 cos(2 pi/m)) / 3, 0.54 for m = 5), but is not exactly
uniform at a finite length; for cycle:5 the largest share in 10,000 draws is 20.6% at lengths 16 and
100 and 20.9% at 500.
"""
from __future__ import annotations

import numpy as np

from statetrack.tasks.automaton import Automaton
from statetrack.tasks.streaming import StreamingTask, every_mask, final_mask_chunk, uniform_ints


class CycleNavigation(StreamingTask):
    prefix_labels = True
    vocab_size = 3
    symbols = ("-1", "0", "+1")

    def __init__(self, modulus: int = 5, scoring: str = "final"):
        self.modulus = int(modulus)
        self.num_classes = self.modulus
        self.scoring = scoring
        self.name = f"cycle:{self.modulus}" + ("/every" if scoring == "every" else "")

    def _start(self, batch_size):
        return np.zeros(batch_size, dtype=np.int64)

    def _chunk(self, u, t0, length, state):
        x = uniform_ints(u, 3)
        y = (state[:, None] + np.cumsum(x - 1, axis=1)) % self.modulus
        b, steps = x.shape
        mask = every_mask(b, steps) if self.scoring == "every" else final_mask_chunk(b, t0, steps, length)
        return x, y, mask, y[:, -1].copy()

    def build_automaton(self):
        m = self.modulus
        delta = (np.arange(m)[:, None] + np.arange(3)[None, :] - 1) % m  # action a moves by a - 1
        return Automaton(delta, 0, np.arange(m), m, symbols=self.symbols)

    def params(self):
        return {"modulus": self.modulus, "scoring": self.scoring}
