"""Modular counting ``modcount:m`` (P1, Khavari2025 Prop. 4.2): the input is 1^T, the label at position t is
t mod m, i.e. the number of ones read so far modulo m. Every position is scored.

The vocabulary has 2 tokens (0 and 1) of which only 1 occurs, so that a model built for binary
inputs (parity, the witness families) reads this task unchanged: ``modcount:2`` and ``witness:ones``
are the same sequences. m is an integer in 2..65536.

Chance: the labels run through 0, 1, ..., m-1 in turn, so over a long sequence each class has
frequency 1/m (exactly when m divides T); ``label_distribution`` returns that uniform limit. The test
draw is the training draw: a fixed input, so every sequence has the same final label (T mod m) and a
constant answer can match it; evaluation records chance 1 there and leaves scaled accuracy undefined.
Token accuracy (every position, chance about 1/m) is the meaningful score of this task.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from statetrack.algebra import get_group
from statetrack.tasks.algebraic import WordProblem
from statetrack.tasks.automaton import Automaton
from statetrack.tasks.base import Scoring
from statetrack.tasks.streaming import Chunk, StreamingTask, every_mask


class ModCount(StreamingTask):
    vocab_size = 2
    scoring = Scoring.EVERY
    symbols = ("0", "1")

    def __init__(self, modulus: int):
        self.modulus = int(modulus)
        self.num_classes = self.modulus
        self.name = f"modcount:{self.modulus}"

    def _start(self, batch_size: int) -> int:
        return batch_size

    def _chunk(self, u: np.ndarray, t0: int, _length: int, state: int) -> Chunk:
        b, steps = u.shape
        x = np.ones((b, steps), dtype=np.int64)
        y = np.broadcast_to((np.arange(t0 + 1, t0 + steps + 1) % self.modulus), (b, steps)).copy()
        return x, y, every_mask(b, steps), state

    def label_distribution(self) -> np.ndarray:
        return np.full(self.modulus, 1.0 / self.modulus)

    def build_automaton(self) -> Automaton:
        # one symbol, the token 1: position t has label t mod m
        m = self.modulus
        return Automaton(((np.arange(m) + 1) % m)[:, None], 0, np.arange(m), m, tokens=[1], symbols=("1",))

    def algebra(self) -> WordProblem:
        return WordProblem(
            get_group(f"C{self.modulus}"), (1,), f"counting mod {self.modulus} on the fixed input 1^T"
        )

    def params(self) -> dict[str, Any]:
        return {"modulus": self.modulus}
