"""The synthetic corpus: small Python programs whose answers need state that a short window cannot see.

Every document is a straight-line program over three digit variables ``a``, ``b``, ``c`` (values 0-9)
and a boolean ``p``. It starts by setting all four, then runs 24-72 random statements:

    a, b = b, a            swap two variables           (the values permuted: the group S3)
    a = (a + 7) % 10       add a constant mod 10        (a counter mod 10: the cyclic group Z10)
    b = 4                  set a variable               (a reset: a new value, revealed)
    p = not p              flip the boolean             (parity: Z2)
    assert c == 3          check a variable's value     <- the digit after '== ' is an ANSWER
    assert p is False      check the boolean            <- the first letter, T or F, is an ANSWER

drawn with probabilities 0.30, 0.10, 0.05, 0.20 and 0.35. A check is only made of a value whose
**decisive statement** (the last statement that revealed it: its assignment, or an earlier check of it,
followed through the swaps) ended at least ``FAR`` bytes before; when no value is that far, another
statement is drawn instead. So every answer is fixed by the program so far -- the revealed value and
every swap, addition and flip since -- and none is fixed by the last ``FAR`` bytes: a model that does
not carry state over that distance can only guess among the digits (log2 10 = 3.32 bits) or between
True and False (1 bit), exactly (``statetrack.lm.answers``), while one that tracks it pays nothing.
Which value is checked depends on where values were revealed, never on the values.

What each answer needs: a truth value, the parity of the flips since it was revealed (a layer with a
negative eigenvalue suffices: Mamba or DeltaNet with [-1,1]); a digit with only swaps since its
reveal, a permutation of three slots (a reflection per swap: DeltaNet [-1,1]); a digit with additions
since, a count mod 10 (a rotation: no real diagonal layer). Everything else (names, operators, layout)
is locally predictable syntax.

Programs are drawn with Python's ``random.Random`` seeded from a string, using only ``random()``,
whose sequence Python keeps across versions, so a seed gives the same corpus everywhere.
"""

from __future__ import annotations

import random

from statetrack.lm.answers import Answer

VARS = ("a", "b", "c")
N_PROGRAMS = 8000
MIN_STATEMENTS, MAX_STATEMENTS = 24, 72
#: a value is checked only when its decisive statement ended at least this many bytes before the answer
FAR = 32
#: statement kinds and their cumulative probabilities
KINDS = (("swap", 0.30), ("add", 0.40), ("set", 0.45), ("flip", 0.65), ("check", 1.0))
DIGITS, TRUTH = 10, 2


def _int(r: random.Random, k: int) -> int:
    return min(int(r.random() * k), k - 1)


class _Program:
    """The text so far and, per variable, its value and where its value was last revealed."""

    def __init__(self):
        self.lines: list[str] = []
        self.size = 0  # bytes so far
        self.answers: list[Answer] = []
        self.revealed: dict[str, int] = {}  # variable -> offset of the last byte of its decisive statement

    def add(self, line: str, reveals: str | None = None) -> int:
        start = self.size
        self.lines.append(line)
        self.size += len(line) + 1
        if reveals:
            self.revealed[reveals] = start + len(line) - 1
        return start

    def far(self, answer_at: int) -> list[str]:
        """Variables whose decisive statement ends at least FAR bytes before offset ``answer_at``."""
        return [v for v in (*VARS, "p") if answer_at - self.revealed[v] >= FAR]


def program(r: random.Random) -> tuple[bytes, list[Answer]]:
    """One program: (its bytes, its answers)."""
    vals = {v: _int(r, DIGITS) for v in VARS}
    flag = r.random() < 0.5
    prog = _Program()
    for v in VARS:
        prog.add(f"{v} = {vals[v]}", reveals=v)
    prog.add(f"p = {flag}", reveals="p")
    for _ in range(MIN_STATEMENTS + _int(r, MAX_STATEMENTS - MIN_STATEMENTS + 1)):
        while True:
            u = r.random()
            kind = next(k for k, cum in KINDS if u < cum)
            # the longest check prefix is 'assert p is ' (12 bytes): every answer lies at most 12 bytes
            # after the line's start, the shortest 'assert a == ' 12 too
            far = prog.far(prog.size + 12) if kind == "check" else None
            if kind != "check" or far:
                break
        if kind == "swap":
            i = _int(r, 3)
            j = (i + 1 + _int(r, 2)) % 3
            x, y = sorted((VARS[i], VARS[j]))
            vals[x], vals[y] = vals[y], vals[x]
            prog.revealed[x], prog.revealed[y] = prog.revealed[y], prog.revealed[x]
            prog.add(f"{x}, {y} = {y}, {x}")
        elif kind == "add":
            v, k = VARS[_int(r, 3)], 1 + _int(r, 9)
            vals[v] = (vals[v] + k) % 10
            prog.add(f"{v} = ({v} + {k}) % 10")
        elif kind == "set":
            v, k = VARS[_int(r, 3)], _int(r, 10)
            vals[v] = k
            prog.add(f"{v} = {k}", reveals=v)
        elif kind == "flip":
            flag = not flag
            prog.add("p = not p")
        else:
            assert far  # a check is drawn only with a value far enough back
            v = far[_int(r, len(far))]
            line = f"assert p is {flag}" if v == "p" else f"assert {v} == {vals[v]}"
            at = prog.size + 12
            prog.answers.append(Answer(at, TRUTH if v == "p" else DIGITS, prog.revealed[v]))
            prog.add(line, reveals=v)
    return ("\n".join(prog.lines) + "\n").encode("ascii"), prog.answers


def programs(seed: int, n: int = N_PROGRAMS):
    """Yield (name, bytes, answers) for ``n`` programs drawn from ``seed``."""
    r = random.Random(f"statetrack-synthetic-{seed}")
    for i in range(n):
        data, answers = program(r)
        yield f"program-{i:05d}", data, answers
