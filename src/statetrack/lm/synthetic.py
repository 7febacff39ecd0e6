"""The synthetic corpus: tiny Python programs whose next tokens depend on tracked state.

Every document is a straight-line program over three digit variables ``a``, ``b``, ``c`` (values 0-9)
and a boolean ``p``. It starts by setting all four, then runs 16-64 random statements:

    a, b = b, a            swap two variables           (permutations of the values: the group S3)
    a = (a + 7) % 10       add a constant mod 10        (a counter mod 10: the cyclic group Z10)
    b = 4                  set a variable               (a reset: the state forgets)
    p = not p              flip the boolean             (parity: Z2)
    assert c == 3          check a variable's value     <- the next byte after '== ' is an ANSWER
    assert p is False      check the boolean            <- the first letter, T or F, is an ANSWER

with probabilities 0.25, 0.20, 0.10, 0.10 and 0.35 (checks: 3/4 on a digit variable, 1/4 on ``p``).
Every program runs in Python and every assertion holds (tests execute them). An answer is determined
by the program so far -- the last assignment of each value, and every swap, addition and flip since --
but not by its local context: a model that does not track the state can do no better than guess
among the digits (log2 10 = 3.3 bits) or between True and False (1 bit), while one that tracks it
pays nothing. So the corpus's bits per byte on the answer bytes (about 2.5% of the bytes; the token
files carry a mask of them) measures state tracking inside text, and the rest of the text (names,
operators, layout) is ordinary, locally predictable syntax.

Programs are drawn with Python's ``random.Random(seed)``, using only ``random()``, whose sequence
Python guarantees across versions, so a seed gives the same corpus everywhere.
"""
from __future__ import annotations

import math
import random

VARS = ("a", "b", "c")
N_PROGRAMS = 8000
MIN_STATEMENTS, MAX_STATEMENTS = 16, 64
#: statement kinds and their cumulative probabilities
KINDS = (("swap", 0.25), ("add", 0.45), ("set", 0.55), ("flip", 0.65), ("check", 1.0))


def _int(r: random.Random, k: int) -> int:
    return min(int(r.random() * k), k - 1)


def program(r: random.Random) -> tuple[bytes, list[int]]:
    """One program: (its bytes, the byte offsets of its answers)."""
    vals = {v: _int(r, 10) for v in VARS}
    flag = r.random() < 0.5
    lines = [f"{v} = {vals[v]}" for v in VARS] + [f"p = {flag}"]
    text_len = sum(len(x) + 1 for x in lines)
    answers = []
    for _ in range(MIN_STATEMENTS + _int(r, MAX_STATEMENTS - MIN_STATEMENTS + 1)):
        u = r.random()
        kind = next(k for k, cum in KINDS if u < cum)
        if kind == "swap":
            i = _int(r, 3)
            j = (i + 1 + _int(r, 2)) % 3
            x, y = sorted((VARS[i], VARS[j]))
            vals[x], vals[y] = vals[y], vals[x]
            line = f"{x}, {y} = {y}, {x}"
        elif kind == "add":
            v, k = VARS[_int(r, 3)], 1 + _int(r, 9)
            vals[v] = (vals[v] + k) % 10
            line = f"{v} = ({v} + {k}) % 10"
        elif kind == "set":
            v, k = VARS[_int(r, 3)], _int(r, 10)
            vals[v] = k
            line = f"{v} = {k}"
        elif kind == "flip":
            flag = not flag
            line = "p = not p"
        elif r.random() < 0.75:
            v = VARS[_int(r, 3)]
            line = f"assert {v} == {vals[v]}"
            answers.append(text_len + len(line) - 1)
        else:
            line = f"assert p is {flag}"
            answers.append(text_len + len("assert p is "))
        lines.append(line)
        text_len += len(line) + 1
    return ("\n".join(lines) + "\n").encode("ascii"), answers


def blind_answer_bits(answers: bytes) -> float:
    """Bits per answer byte of a predictor that knows each answer's kind but not the state: log2(10) for
    a digit (uniform over 0-9), 1 for a truth value (T or F). The level a model that does not track the
    programs' state is held to on the answers; a tracking model goes below it, towards 0."""
    digits = sum(chr(b).isdigit() for b in answers)
    return (digits * math.log2(10) + (len(answers) - digits)) / max(len(answers), 1)


def programs(seed: int, n: int = N_PROGRAMS):
    """Yield (name, bytes, answer offsets) for ``n`` programs drawn from ``seed``."""
    r = random.Random(f"statetrack-synthetic-{seed}")
    for i in range(n):
        data, answers = program(r)
        yield f"program-{i:05d}", data, answers
