"""The traces corpus: permutation composition written as Python REPL sessions.

A state-tracking word problem (compose a sequence of permutations) put in the form a language model is
trained on: code and what the interpreter prints (after Siems2026, who turn permutation composition
into REPL traces). Every document is one interactive session over a list ``s`` holding a permutation
of 0 .. N-1 (N = 3), revealed when it is set:

    >>> def swap(s, i, j):
    ...     s = list(s)
    ...     s[i], s[j] = s[j], s[i]
    ...     return s
    >>> s = [2, 0, 1]
    >>> s = swap(s, 0, 2)        compose s with a transposition
    >>> s = swap(s, 1, 2)
    >>> s
    [0, 1, 2]                    <- what the interpreter prints: the state, revealed

then 16-64 statements. Each is a print (``>>> s``) with probability 0.5, if the last reveal of ``s``
(its assignment or the last print) ended at least ``FAR`` bytes before the printed list (so at least
one composition lies between two reveals), else a composition with a transposition (i, j) drawn
uniformly. The printed digits are **answers**: the state fixes them, the last ``FAR`` bytes do not.
For a reader that does not know the state the permutation is uniform over S_3 (the first one is, and
every statement is a bijection drawn independently of it), so its first digit has 3 equally likely
values, the second 2, and the third is decided by the other two (not an answer): log2(6) = 2.58 bits per
print, exactly (``statetrack.lm.answers``). The number of compositions between two reveals is
geometric (half the prints follow one composition, a quarter two, ...): the short ones let a model
learn what one composition does, the long ones ask it to carry that over many.

What the answers need: the product of the transpositions since the last reveal, an element of S_3, a
group that is solvable but not abelian. A diagonal layer carries only an abelian image of it, the sign:
with a negative eigenvalue on every transposition (Mamba [-1,1]) a model knows whether the
permutation is even, which with the first printed digit decides the second (1 of the 2.58 bits). A
transposition of slots i and j is a reflection, I - 2 v v^T with v = (e_i - e_j) / sqrt 2, so one
DeltaNet [-1,1] layer can carry the whole permutation; eigenvalues in [0,1] carry neither.

Every session runs: a test executes each document with ``doctest`` (every printed list is right).
Sessions are drawn with ``random.Random`` seeded from a string, using only ``random()``.
"""

from __future__ import annotations

import random

from statetrack.lm.answers import Answer

N = 3
N_SESSIONS = 4500
MIN_STATEMENTS, MAX_STATEMENTS = 16, 64
#: a print is made only when the last reveal ended at least this many bytes before the printed digits
FAR = 24
PRINT = 0.5
HEADER = ">>> def swap(s, i, j):\n...     s = list(s)\n...     s[i], s[j] = s[j], s[i]\n...     return s\n"


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
            for j in range(N - 1):  # the last digit is decided by the others
                answers.append(Answer(out + 1 + 3 * j, N - j, revealed))
            text += f">>> s\n{s!r}\n"
            revealed = len(text) - 2
            continue
        i = _int(r, N)
        j = (i + 1 + _int(r, N - 1)) % N
        i, j = min(i, j), max(i, j)
        s[i], s[j] = s[j], s[i]
        text += f">>> s = swap(s, {i}, {j})\n"
    return text.encode("ascii"), answers


def sessions(seed: int, n: int = N_SESSIONS):
    """Yield (name, bytes, answers) for ``n`` sessions drawn from ``seed``."""
    r = random.Random(f"statetrack-traces-{seed}")
    for i in range(n):
        data, answers = session(r)
        yield f"session-{i:05d}", data, answers
