"""What a task declares about its algebra (``Task.algebra()``), for the oracle (:mod:`statetrack.theory.actions`).

A task is one of:

* :class:`WordProblem`: the word problem of a finite group, its input letters given as elements of the
  group (parity: C2 with letters e and g; ``group:G/SUBSET``: G with the subset; ``cycle:m``: C_m with
  e, g, g^-1; ``modcount:m``: C_m with the single letter g, a clock);
* :class:`RegularLanguage`: the acceptance of a DFA (tomita, dfa, even pairs), read through its minimal
  automaton's transition monoid;
* :class:`FixedInputParity`: parity on one fixed periodic word (``witness:*``);
* :class:`OffsetRule`: offset prediction, which has its own rule (P2).

A task without a declaration (modular arithmetic, a corpus) has no algebraic reading here. The oracle reads
these types, never a task's name or its attributes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from statetrack.algebra import Group


@dataclass(frozen=True)
class WordProblem:
    """Labels = the product so far in ``group`` of the letters read; ``letters``: the element ids of the
    letters the inputs can be."""

    group: Group
    letters: tuple[int, ...]
    description: str


@dataclass(frozen=True)
class RegularLanguage:
    """Labels = acceptance by the DFA (``delta`` states x symbols, ``start``, ``accepting`` per state)."""

    delta: np.ndarray
    start: int
    accepting: np.ndarray
    description: str


@dataclass(frozen=True)
class FixedInputParity:
    """Parity of the 1s read, on the single input ``word`` repeated (a probe of the proofs)."""

    word: tuple[int, ...]
    description: str


@dataclass(frozen=True)
class OffsetRule:
    """Offset prediction: count a fixed number of steps after each onset (the oracle's rule P2)."""

    description: str


Algebra = WordProblem | RegularLanguage | FixedInputParity | OffsetRule
