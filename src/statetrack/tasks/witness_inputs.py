"""The proofs' witness inputs for parity, as fixed-input tasks (every row identical, the generator
unused). The label at every position is the parity of the 1s read so far; every position is scored.

  witness:ones          1^T                        (T1: Khavari2025 Thm 4.1, Grazzi2024 Thm 1; the state converges)
  witness:alt           (01)^T                     (T3: Khavari2025 Lemma 4.3 with k = m = 1)
  witness:block:K:M     (0^K 1^M)^T, K >= 1, M odd (T3: Khavari2025 Lemma 4.3)
  witness:pulse:W       (1 0^(W-1))^T, W >= 1      (T4: Khavari2025 Thm 4.4, W q_j integer)

The pattern is repeated and cut at the requested length. Chance: over two periods the parity spends
equally long at 0 and 1 (each period has an odd number of 1s), so ``label_distribution`` returns
(1/2, 1/2), exact on whole double periods. Note that a fixed input can be memorised; these are
evaluation probes for models trained on ``parity``, which shares their vocabulary (0, 1). Their test
draw is the training draw: every sequence is the same, so the final label is one class (chance 1,
scaled accuracy undefined); read token accuracy (chance 1/2 over double periods).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from statetrack.tasks.algebraic import FixedInputParity
from statetrack.tasks.base import Scoring
from statetrack.tasks.streaming import Chunk, StreamingTask, every_mask


class Witness(StreamingTask):
    vocab_size = 2
    num_classes = 2
    scoring = Scoring.EVERY
    symbols = ("0", "1")

    def __init__(self, pattern: str, period: list[int], args: tuple[int, ...] = ()):
        self.pattern = pattern
        self.args = tuple(args)
        self.period = np.asarray(period, dtype=np.int64)
        self.name = "witness:" + ":".join([pattern, *map(str, self.args)])

    def _start(self, batch_size: int) -> np.ndarray:
        return np.zeros(batch_size, dtype=np.int64)

    def _chunk(self, u: np.ndarray, t0: int, _length: int, state: np.ndarray) -> Chunk:
        b, steps = u.shape
        x = self.period[np.arange(t0, t0 + steps) % len(self.period)]
        x = np.broadcast_to(x, (b, steps)).copy()
        y = (state[:, None] + np.cumsum(x, axis=1)) % 2
        return x, y, every_mask(b, steps), y[:, -1].copy()

    def label_distribution(self) -> np.ndarray:
        return np.full(2, 0.5)

    def algebra(self) -> FixedInputParity:
        word = tuple(int(v) for v in self.period)
        return FixedInputParity(
            word,
            f"parity on the fixed input {self.name.split(':', 1)[1]} (labels periodic "
            f"with period {2 * len(word)})",
        )

    def params(self) -> dict[str, Any]:
        return {"kind": self.pattern, "args": list(self.args), "period": self.period.tolist()}
