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

from typing import Any

import numpy as np

from statetrack.algebra import get_group
from statetrack.tasks.algebraic import WordProblem
from statetrack.tasks.automaton import Automaton
from statetrack.tasks.base import Scoring
from statetrack.tasks.streaming import Chunk, StreamingTask, UniformInputs


class CycleNavigation(StreamingTask):
    prefix_labels = True
    vocab_size = 3
    symbols = ("-1", "0", "+1")
    inputs = UniformInputs(3)

    def __init__(self, modulus: int = 5, scoring: Scoring | str = Scoring.FINAL):
        self.modulus = int(modulus)
        self.num_classes = self.modulus
        self.scoring = Scoring(scoring)
        self.name = f"cycle:{self.modulus}" + ("/every" if self.scoring == Scoring.EVERY else "")

    def _start(self, batch_size: int) -> np.ndarray:
        return np.zeros(batch_size, dtype=np.int64)

    def _chunk(self, u: np.ndarray, t0: int, length: int, state: np.ndarray) -> Chunk:
        x = self.inputs.read(u)
        y = (state[:, None] + np.cumsum(x - 1, axis=1)) % self.modulus
        b, steps = x.shape
        return x, y, self._mask(b, t0, steps, length), y[:, -1].copy()

    def build_automaton(self) -> Automaton:
        m = self.modulus
        delta = (np.arange(m)[:, None] + np.arange(3)[None, :] - 1) % m  # action a moves by a - 1
        return Automaton(delta, 0, np.arange(m), m, symbols=self.symbols)

    def algebra(self) -> WordProblem:
        g = get_group(f"C{self.modulus}")
        return WordProblem(
            g,
            tuple(sorted({0, 1, g.order - 1})),
            f"cycle navigation = word problem of {g.name} with inputs e, g, g^-1",
        )

    def params(self) -> dict[str, Any]:
        return {"modulus": self.modulus, "scoring": self.scoring}
