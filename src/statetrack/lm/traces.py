"""The traces corpus: permutation composition written as Python REPL sessions.

A state-tracking word problem (compose a sequence of permutations) put in a form a language model is
trained on: code and what the interpreter prints (after Siems2026, who turn permutation composition
into REPL traces). Every document is one interactive session over a list ``s`` holding
a permutation of 0 .. N-1 (N = 4), revealed when it is set:

    >>> def swap(s, i, j):
    ...     s = list(s)
    ...     s[i], s[j] = s[j], s[i]
    ...     return s
    >>> s = [2, 0, 3, 1]
    >>> s = swap(s, 0, 3)        compose with a transposition          p = 0.70
    >>> s = s[1:] + s[:1]        compose with the rotation (a 4-cycle)  p = 0.15
    >>> s = s[::-1]              compose with the reversal              p = 0.15
    >>> s
    [1, 3, 0, 2]                 <- the interpreter's answer: the state, revealed

then 16-64 such statements. A print (``>>> s``) is drawn with probability 0.25 per statement, and only
when the last reveal of ``s`` (its assignment or the last print) ended at least ``FAR`` bytes before
the printed list; otherwise a composition is drawn. The printed digits are **answers**: the state
fixes them, the last ``FAR`` bytes do not. For a reader that does not know the state the permutation
is uniform over S_4 (the first one is, and every statement is a bijection drawn independently of it),
so its first digit has 4 equally likely values, the second 3, the third 2, and the fourth is decided by
the other three (not an answer): log2(24) = 4.58 bits per print, exactly (``statetrack.lm.answers``).

What the answers need: the product of the statements since the last reveal, an element of S_4, a
group that is solvable but not abelian. A diagonal layer can carry only an abelian image of it, the
sign: with a negative eigenvalue on each odd statement (Mamba [-1,1]) a model knows whether the
permutation is even, 1 of the 4.58 bits. A transposition is a reflection, I - 2 v v^T with v = (e_i -
e_j) / sqrt 2, and the rotation and reversal are products of three and two of them, so a DeltaNet
[-1,1] layer can carry the whole permutation over the bytes of a statement; eigenvalues in [0,1]
carry neither.

Every session runs: a test executes each document with ``doctest`` (every printed list is right).
Sessions are drawn with ``random.Random`` seeded from a string, using only ``random()``.
"""
from __future__ import annotations

import random

from statetrack.lm.answers import Answer

N = 4
N_SESSIONS = 4500
MIN_STATEMENTS, MAX_STATEMENTS = 16, 64
#: a print is made only when the last reveal ended at least this many bytes before the printed digits
FAR = 32
PRINT = 0.25
#: composition kinds and their cumulative probabilities
KINDS = (("swap", 0.70), ("rotate", 0.85), ("reverse", 1.0))
HEADER = (">>> def swap(s, i, j):\n"
          "...     s = list(s)\n"
          "...     s[i], s[j] = s[j], s[i]\n"
          "...     return s\n")


def _int(r: random.Random, k: int) -> int:
    return min(int(r.random() * k), k - 1)


def _shuffled(r: random.Random, n: int) -> list[int]:
    s = list(range(n))
    for i in range(n - 1, 0, -1):  # Fisher-Yates
        j = _int(r, i + 1)
        s[i], s[j] = s[j], s[i]
    return s


def session(r: random.Random) -> tuple[bytes, list[Answer]]:
    """One REPL session: (its bytes, its answers)."""
    s = _shuffled(r, N)
    text = HEADER + f">>> s = {s}\n"
    revealed = len(text) - 2  # the closing bracket of the list
    answers: list[Answer] = []
    for _ in range(MIN_STATEMENTS + _int(r, MAX_STATEMENTS - MIN_STATEMENTS + 1)):
        out = len(text) + len(">>> s\n")  # where a printed list would start
        if r.random() < PRINT and out + 1 - revealed >= FAR:
            shown = repr(s)
            for j in range(N - 1):  # the last digit is decided by the others
                answers.append(Answer(out + 1 + 3 * j, N - j, revealed))
            text += f">>> s\n{shown}\n"
            revealed = len(text) - 2
            continue
        u = r.random()
        kind = next(k for k, cum in KINDS if u < cum)
        if kind == "swap":
            i = _int(r, N)
            j = (i + 1 + _int(r, N - 1)) % N
            i, j = min(i, j), max(i, j)
            s[i], s[j] = s[j], s[i]
            text += f">>> s = swap(s, {i}, {j})\n"
        elif kind == "rotate":
            s = s[1:] + s[:1]
            text += ">>> s = s[1:] + s[:1]\n"
        else:
            s = s[::-1]
            text += ">>> s = s[::-1]\n"
    return text.encode("ascii"), answers


def sessions(seed: int, n: int = N_SESSIONS):
    """Yield (name, bytes, answers) for ``n`` sessions drawn from ``seed``."""
    r = random.Random(f"statetrack-traces-{seed}")
    for i in range(n):
        data, answers = session(r)
        yield f"session-{i:05d}", data, answers
