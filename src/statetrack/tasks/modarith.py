"""Modular arithmetic without brackets ``modarith:m`` (Deletang2023, regular).

An expression d_0 o_1 d_1 o_2 ... d_k alternates digits in Z_m and operators in {+, -, *}, all drawn
uniformly; the label is its value mod m with the usual precedence (* before + and -, left to right),
e.g. mod 5: 1 + 2 * 3 = 2, 1 - 1 - 1 = 4. Only the final position is scored.

Tokens: 0 .. m-1 the digits, m '+', m+1 '-', m+2 '*', m+3 '_' (blank). The reference code makes every
expression odd-length (an even length is cut by one); here the length is exactly the one asked for:
an even-length sequence is an odd-length expression followed by one blank, which in the reference
encoding stands for '+' at an operator position with a missing (zero) digit after it, so the value is
unchanged and the label is read at the blank. ``modarith`` alone is ``modarith:5``; m is in 2..1000.

Unscored positions carry the value of the expression read so far. The test draw is the training draw;
its final value is close to uniform (for m = 5 the largest share in 10,000 draws is 20.2-20.4% at
lengths 16, 100 and 500), though not exactly (a product with a 0 digit is 0).
"""
from __future__ import annotations

import numpy as np

from statetrack.tasks.streaming import StreamingTask, final_mask_chunk, uniform_ints


class ModularArithmetic(StreamingTask):
    scoring = "final"

    def __init__(self, modulus: int = 5):
        m = self.modulus = int(modulus)
        self.num_classes = m
        self.vocab_size = m + 4
        self.PLUS, self.MINUS, self.TIMES, self.BLANK = m, m + 1, m + 2, m + 3
        self.symbols = tuple(str(d) for d in range(m)) + ("+", "-", "*", "_")
        self.name = f"modarith:{m}"

    def _start(self, batch_size):
        z = np.zeros(batch_size, dtype=np.int64)
        return z, z.copy(), np.full(batch_size, self.modulus)  # acc, term, pending operator

    def _chunk(self, u, t0, length, state):
        m = self.modulus
        acc, term, op = (s.copy() for s in state)
        b, steps = u.shape
        x = np.empty((b, steps), dtype=np.int64)
        y = np.empty((b, steps), dtype=np.int64)
        for k in range(steps):
            t = t0 + k
            if t % 2 == 0:
                d = uniform_ints(u[:, k], m)
                x[:, k] = d
                if t == 0:
                    term = d
                else:
                    add = op != self.TIMES
                    acc = np.where(add, (acc + term) % m, acc)
                    term = np.where(op == self.PLUS, d,
                                    np.where(op == self.MINUS, (-d) % m, (term * d) % m))
            elif t == length - 1:
                x[:, k] = self.BLANK
            else:
                op = self.PLUS + uniform_ints(u[:, k], 3)
                x[:, k] = op
            y[:, k] = (acc + term) % m
        return x, y, final_mask_chunk(b, t0, steps, length), (acc, term, op)

    def params(self):
        return {"modulus": self.modulus}
