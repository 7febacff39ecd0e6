"""Offset prediction (P2: Khavari2025, Sec. 5 and App. C): ``offset``, and the probes ``offset:two-isis`` and
``offset:double-isi``.

Input: a binary on/off signal. Each sequence starts with an inter-trial interval (ITI) of 0s whose
length is uniform in [20, 40] (both ends included), followed by an inter-stimulus interval (ISI) of
exactly 10 1s, then another ITI with a fresh length, and so on. The paper uses sequences of 200 steps
(``default_length``); any length works (the process simply runs longer or shorter).

Target (App. C treats the task as next-token prediction): the target at position t is the input at
t+1, so the network must predict when the ISI ends (the offset) by counting its 10 steps; the input
process is continued one step past the end to give the last target. As App. C says, the first token
of a burst (the ISI onset) cannot be predicted from the past, so positions whose next token is an ISI
onset are not scored (mask False); every other position is.

Chance (``label_distribution``, derived from the process): per ITI/ISI cycle with ITI length L the
scored targets are L zeros (L - 1 inside the ITI, plus the offset) and 9 ones (the onset is not
scored), so by the renewal-reward theorem the long-run frequency of 0 is E[L] / (E[L] + ISI - 1) =
30/39 ~ 0.769. For a probe it is the exact frequency of its scored targets at ``default_length``.

Test draw: the training draw. Its final label (the one ``accuracy`` scores) is 0 in every sequence
up to length 20 (no ISI starts before step 21), then mostly 0: share of 0 in 10,000 draws 86.5% at
length 100, 77.4% at 500. The papers score this task by token accuracy, whose chance is the majority
share of ``label_distribution`` (30/39; evaluation also records ``token_majority``, the majority share
of the labels of the batch scored, which is not a chance level).

Probes (fixed inputs, the same in every row, the generator is not used; targets and mask defined
exactly as above, zeros after the last segment, truncated to the requested length):
  offset:two-isis   ITI 30, ISI 10, ITI 80 (longer than any trained ITI), ISI 10, then 0s:
                    does the model reset at each onset and predict both offsets?
  offset:double-isi ITI 30, then two ISIs back to back (20 1s), then 0s. The second onset is
                    masked like any onset, so a model that counts predicts 0 at step 10 of the run
                    (unscored), must predict 1 for steps 11..19 and the offset (0) at step 20:
                    it is scored on anticipating the second ISI, as in App. C.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from statetrack.tasks.algebraic import OffsetRule
from statetrack.tasks.arguments import ISI, PROBES
from statetrack.tasks.base import Scoring
from statetrack.tasks.streaming import Chunk, StreamingTask, uniform_ints

ITI_MIN, ITI_MAX = 20, 40


class OffsetPrediction(StreamingTask):
    vocab_size = 2
    num_classes = 2
    scoring = Scoring.EVERY
    default_length = 200
    symbols = ("0", "1")

    def __init__(self, probe: str | None = None):
        self.probe = probe
        self.name = "offset" + (f":{probe}" if probe else "")
        if probe:
            tokens: list[int] = []
            onsets: list[int] = []
            for tok, n in PROBES[probe]:
                if tok == 1:
                    onsets.append(len(tokens))
                tokens += [tok] * n
            self._tokens = np.array(tokens, dtype=np.int64)
            self._onset = np.zeros(len(tokens) + 1, dtype=bool)
            self._onset[onsets] = True

    # state: (in_isi, remaining steps of the current interval after this one)
    def _start(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        return np.ones(batch_size, dtype=bool), np.zeros(batch_size, dtype=np.int64)

    def _fixed(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(self._tokens)
        tok = np.where(t < n, self._tokens[np.minimum(t, n - 1)], 0)
        onset = np.where(t <= n, self._onset[np.minimum(t, n)], False)
        return tok, onset

    def _chunk(self, u: np.ndarray, t0: int, _length: int, state: tuple[np.ndarray, np.ndarray]) -> Chunk:
        b, steps = u.shape
        if self.probe:
            t = np.arange(t0, t0 + steps)
            x, _ = self._fixed(t)
            y, onset_next = self._fixed(t + 1)
            return (
                np.broadcast_to(x, (b, steps)).copy(),
                np.broadcast_to(y, (b, steps)).copy(),
                ~np.broadcast_to(onset_next, (b, steps)),
                state,
            )
        in_isi, left = state[0].copy(), state[1].copy()
        x = np.empty((b, steps), dtype=np.int64)
        y = np.empty((b, steps), dtype=np.int64)
        mask = np.empty((b, steps), dtype=bool)
        for k in range(steps):
            switch = left == 0
            iti = ITI_MIN + uniform_ints(u[:, k], ITI_MAX - ITI_MIN + 1)
            new_iti = switch & in_isi
            left = np.where(new_iti, iti, np.where(switch, ISI, left)) - 1
            in_isi = np.where(switch, ~in_isi, in_isi)
            x[:, k] = in_isi
            nxt = np.where(left > 0, in_isi, ~in_isi)
            y[:, k] = nxt
            mask[:, k] = ~((left == 0) & ~in_isi)  # the next token is an ISI onset
        return x, y, mask, (in_isi, left)

    def algebra(self) -> OffsetRule:
        return OffsetRule("offset prediction: count 10 steps after each onset (P2)")

    def label_distribution(self) -> np.ndarray:
        if self.probe:
            b = self.sample_batch(np.random.default_rng(0), 1, self.default_length)
            counts = np.bincount(b.targets[b.mask], minlength=2).astype(float)
            return counts / counts.sum()
        mean_iti = (ITI_MIN + ITI_MAX) / 2
        p0 = mean_iti / (mean_iti + ISI - 1)
        return np.array([p0, 1 - p0])

    def params(self) -> dict[str, Any]:
        return {
            "isi": ISI,
            "iti": [ITI_MIN, ITI_MAX],
            "probe": self.probe,
            "default_length": self.default_length,
        }
