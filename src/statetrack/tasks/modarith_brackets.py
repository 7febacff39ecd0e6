"""Modular arithmetic with brackets ``modarith-brackets:m`` (Deletang2023; context-free).

Random well-formed expressions of exactly the requested length, generated as in the reference code:
length 1: d; 2: -d; 3: (d); 4: (-d); length L >= 5: (E1 op E2) with len(E1) uniform in 1..L-4,
len(E2) = L - 3 - len(E1), both generated the same way, and op uniform. Digits are uniform in Z_m.
The label is the value mod m, scored at the final position only. By default the operators are + and -
(the reference default, mult=False); ``modarith-brackets:m/mult`` adds *.

Tokens: 0 .. m-1 the digits, m '+', m+1 '-', m+2 '*', m+3 '(', m+4 ')'. ``modarith-brackets`` alone is
``modarith-brackets:5``. The whole batch is generated and then sliced for streaming (a context-free
label has no bounded running state). Unscored positions carry the label of the whole expression.
The test draw is the training draw. Its final value for m = 5 is close to uniform with + and - (largest
share 20.4-21.4% at lengths 16, 100, 500; 10,000 draws, 2,000 at 500) and leans to 0 with * (27-31%).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from statetrack.tasks.base import Batch, Scoring, Task, final_mask
from statetrack.tasks.streaming import check_length


class ModularArithmeticBrackets(Task):
    scoring = Scoring.FINAL

    def __init__(self, modulus: int = 5, mult: bool = False):
        m = self.modulus = int(modulus)
        self.mult = bool(mult)
        self.num_classes = m
        self.vocab_size = m + 5
        self.PLUS, self.MINUS, self.TIMES, self.OPEN, self.CLOSE = range(m, m + 5)
        self.symbols = tuple(str(d) for d in range(m)) + ("+", "-", "*", "(", ")")
        self.name = f"modarith-brackets:{m}" + ("/mult" if self.mult else "")

    def generate(self, u: np.ndarray, length: int) -> list[int]:
        """One expression of ``length`` tokens, consuming the uniform floats ``u`` in order."""
        m, out, k = self.modulus, [], 0
        stack: list[tuple[bool, int]] = [(False, length)]  # (is_token, token or length)
        nops = 3 if self.mult else 2
        while stack:
            is_tok, v = stack.pop()
            if is_tok:
                out.append(v)
                continue
            if v <= 4:
                d = min(int(u[k] * m), m - 1)
                k += 1
                out.extend(
                    {
                        1: [d],
                        2: [self.MINUS, d],
                        3: [self.OPEN, d, self.CLOSE],
                        4: [self.OPEN, self.MINUS, d, self.CLOSE],
                    }[v]
                )
                continue
            left = 1 + min(int(u[k] * (v - 4)), v - 5)
            op = self.PLUS + min(int(u[k + 1] * nops), nops - 1)
            k += 2
            stack += [(True, self.CLOSE), (False, v - 3 - left), (True, op), (False, left), (True, self.OPEN)]
        return out

    def evaluate(self, tokens: Sequence[int]) -> int:
        """Value mod m of a token sequence (precedence * over + and -, unary minus)."""
        m = self.modulus
        prec = {self.PLUS: 1, self.MINUS: 1, self.TIMES: 2, "neg": 3}
        vals: list[int] = []
        ops: list[int | str] = []

        def apply() -> None:
            o = ops.pop()
            if o == "neg":
                vals.append(-vals.pop() % m)
                return
            b, a = vals.pop(), vals.pop()
            vals.append((a + b) % m if o == self.PLUS else (a - b) % m if o == self.MINUS else (a * b) % m)

        expect_operand = True
        for t in tokens:
            if t < m:
                vals.append(int(t))
                expect_operand = False
            elif t == self.OPEN:
                ops.append("(")
                expect_operand = True
            elif t == self.CLOSE:
                while ops[-1] != "(":
                    apply()
                ops.pop()
                expect_operand = False
            elif t == self.MINUS and expect_operand:
                ops.append("neg")
            else:
                while ops and ops[-1] != "(" and prec[ops[-1]] >= prec[t]:
                    apply()
                ops.append(t)
                expect_operand = True
        while ops:
            apply()
        assert len(vals) == 1, "malformed expression"
        return vals[0]

    def sample_batch(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
        length = check_length(length)
        # an expression of length L has i internal nodes (2 draws each) and i + 1 digits (1 draw
        # each), with 4i + 1 <= L tokens: L draws always suffice
        u = rng.random((batch_size, length))
        x = np.empty((batch_size, length), dtype=np.int64)
        y = np.empty((batch_size, length), dtype=np.int64)
        for b in range(batch_size):
            toks = self.generate(u[b], length)
            x[b] = toks
            y[b] = self.evaluate(toks)
        return Batch(x, y, final_mask(batch_size, length))

    def params(self) -> dict[str, Any]:
        return {"modulus": self.modulus, "mult": self.mult}
