"""Modular arithmetic without brackets ``modarith:m`` (Deletang2023, regular).

An expression d_0 o_1 d_1 o_2 ... d_k alternates digits in Z_m and operators in {+, -, *}, all drawn
uniformly; the label is its value mod m with the usual precedence (* before + and -, left to right),
e.g. mod 5: 1 + 2 * 3 = 2, 1 - 1 - 1 = 4. Only the final position is scored.

Tokens: 0 .. m-1 the digits, m '+', m+1 '-', m+2 '*', m+3 '_' (blank). The reference code makes every
expression odd-length (an even length is cut by one); here the length is exactly the one asked for:
an even-length sequence is an odd-length expression followed by one blank, which in the reference
encoding stands for '+' at an operator position with a missing (zero) digit after it, so the value is
unchanged and the label is read at the blank. ``modarith`` alone is ``modarith:5``; m is in 2..1000.

``modarith:m/equals`` is the layout of Grazzi2024's code: every string ends with the token '=' (m+4),
where the answer is read, after an odd-length expression (a blank before the '=' where the expression
would end with an operator). Its training loss reads the '=' alone under the default supervision.

Unscored positions carry the value of the expression read so far. The test draw is the training draw;
its final value is close to uniform, though not exactly (a product with a 0 digit is 0): counted
through the task's automaton (``build_automaton``), the largest share for m = 5 is 23.2% at length 5,
20.1% at 16 and 20.0% from 40 on.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from statetrack.tasks.automaton import Automaton
from statetrack.tasks.base import Scoring
from statetrack.tasks.streaming import Chunk, StreamingTask, final_mask_chunk, uniform_ints

#: the largest modulus whose automaton (4 m^2 + m + 1 states) is built
MAX_AUTOMATON_MODULUS = 32


class ModularArithmetic(StreamingTask):
    prefix_labels = True
    scoring = Scoring.FINAL

    def __init__(self, modulus: int = 5, equals: bool = False):
        m = self.modulus = int(modulus)
        self.equals = bool(equals)
        self.num_classes = m
        self.vocab_size = m + 5 if self.equals else m + 4
        self.PLUS, self.MINUS, self.TIMES, self.BLANK, self.EQUALS = m, m + 1, m + 2, m + 3, m + 4
        self.symbols = (
            tuple(str(d) for d in range(m)) + ("+", "-", "*", "_") + (("=",) if self.equals else ())
        )
        self.name = f"modarith:{m}" + ("/equals" if self.equals else "")

    def _start(self, batch_size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        z = np.zeros(batch_size, dtype=np.int64)
        return z, z.copy(), np.full(batch_size, self.modulus)  # acc, term, pending operator

    def _chunk(
        self, u: np.ndarray, t0: int, length: int, state: tuple[np.ndarray, np.ndarray, np.ndarray]
    ) -> Chunk:
        m = self.modulus
        acc, term, op = (s.copy() for s in state)
        b, steps = u.shape
        x = np.empty((b, steps), dtype=np.int64)
        y = np.empty((b, steps), dtype=np.int64)
        # with '=': the expression ends one token earlier, and a blank stands at an operator position there
        end = length - 1 if self.equals else length
        for k in range(steps):
            t = t0 + k
            if t == end:
                x[:, k] = self.EQUALS
            elif t % 2 == 0:
                d = uniform_ints(u[:, k], m)
                x[:, k] = d
                if t == 0:
                    term = d
                else:
                    add = op != self.TIMES
                    acc = np.where(add, (acc + term) % m, acc)
                    term = np.where(op == self.PLUS, d, np.where(op == self.MINUS, (-d) % m, (term * d) % m))
            elif t == end - 1:
                x[:, k] = self.BLANK
            else:
                op = self.PLUS + uniform_ints(u[:, k], 3)
                x[:, k] = op
            y[:, k] = (acc + term) % m
        return x, y, final_mask_chunk(b, t0, steps, length), (acc, term, op)

    def build_automaton(self) -> Automaton | None:
        """States: expecting a digit (acc, term, pending operator), expecting an operator (acc, term),
        ended by the blank (value), and a dead state for anything else. A string of the task ends after
        a digit or after the final blank; the target of every position is the value read so far. With
        '=' (``/equals``) a string ends only after its '=' (a state per value), reached from a digit, the
        blank or the start."""
        m = self.modulus
        if m > MAX_AUTOMATON_MODULUS:
            return None
        ops = (self.PLUS, self.MINUS, self.TIMES)
        d_id = lambda acc, term, o: (acc * m + term) * 3 + o  # noqa: E731
        o_id = lambda acc, term: 3 * m * m + acc * m + term  # noqa: E731
        e_id = lambda v: 4 * m * m + v  # noqa: E731
        f_id = lambda v: 4 * m * m + m + v  # noqa: E731  (after '=')
        dead = 4 * m * m + (2 * m if self.equals else m)
        n = dead + 1
        delta = np.full((n, self.vocab_size), dead, dtype=np.int64)
        labels = np.full(n, -1, dtype=np.int64)
        outputs = np.zeros(n, dtype=np.int64)
        for acc in range(m):
            for term in range(m):
                value = (acc + term) % m
                for o, op in enumerate(ops):
                    q = d_id(acc, term, o)
                    outputs[q] = value
                    for d in range(m):
                        acc2 = acc if op == self.TIMES else value
                        term2 = d if op == self.PLUS else (-d) % m if op == self.MINUS else (term * d) % m
                        delta[q, d] = o_id(acc2, term2)
                q = o_id(acc, term)
                labels[q] = outputs[q] = value
                for o, op in enumerate(ops):
                    delta[q, op] = d_id(acc, term, o)
                delta[q, self.BLANK] = e_id(value)
        for v in range(m):
            labels[e_id(v)] = outputs[e_id(v)] = v
        if self.equals:  # the answer is read at '=' alone
            labels[:] = -1
            for acc in range(m):
                for term in range(m):
                    delta[o_id(acc, term), self.EQUALS] = f_id((acc + term) % m)
            for v in range(m):
                delta[e_id(v), self.EQUALS] = f_id(v)
                labels[f_id(v)] = outputs[f_id(v)] = v
            delta[d_id(0, 0, 0), self.EQUALS] = f_id(0)
        # the start: acc 0, term 0, operator +, so the first digit d gives term d
        return Automaton(delta, d_id(0, 0, 0), labels, m, outputs=outputs, symbols=self.symbols)

    def params(self) -> dict[str, Any]:
        return {"modulus": self.modulus, "equals": self.equals} if self.equals else {"modulus": self.modulus}
