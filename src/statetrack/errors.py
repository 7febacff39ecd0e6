"""The one exception type for bad user input: the CLI turns it into one line and exit code 2; and
:class:`Interrupted`, a signal received (raised by ``statetrack.runs.signals``), which every layer lets pass.

A name that is not one of the allowed ones gets the closest allowed names ("did you mean"), as git and
cargo do: by edit distance (insertions, deletions, substitutions and swaps of two neighbours, case
ignored), within a third of the name's length.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable


class UserError(ValueError):
    """Input the user can fix: an unknown name, a malformed spec, a missing file, a bad number."""


class Interrupted(KeyboardInterrupt):
    """A SIGINT, SIGTERM or SIGHUP received by this process."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)

    def __reduce__(self):  # from a worker process to its parent
        return (type(self), (self.signum,))


def edit_distance(a: str, b: str) -> int:
    """Optimal string alignment distance: insertions, deletions, substitutions and transpositions of
    adjacent characters each cost 1 (``mamab`` -> ``mamba`` is 1)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[-1]


def closest(value: str, choices: Iterable[str]) -> list[str]:
    """The allowed names nearest to ``value`` (all of them at the smallest distance), or none when even the
    nearest differs in more than a third of its characters (at least one). Failing that, the names that
    begin with ``value`` (give or take as many edits) when it has 4 characters or more: a study named
    without its year ('diag-limits' for 'diag-limits-2026')."""
    value, names = str(value), [str(c) for c in dict.fromkeys(choices)]
    near = _nearest(value, [(c, c) for c in names])
    if not near and len(value) >= 4:
        near = _nearest(value, [(c[: len(value)], c) for c in names if len(c) > len(value)])
    return near


def _nearest(value: str, keyed: list[tuple[str, str]]) -> list[str]:
    """The names whose key is nearest to ``value``, within a third of its characters (at least one)."""
    scored = [(edit_distance(value.lower(), key.lower()), name) for key, name in keyed]
    if not scored:
        return []
    best = min(d for d, _ in scored)
    if best > max(1, len(value) // 3):
        return []
    return [c for d, c in scored if d == best]


def did_you_mean(value: str, choices: Iterable[str]) -> str:
    """``" (did you mean 'mamba'?)"`` for the closest names, or ``""``."""
    near = closest(value, choices)
    if not near:
        return ""
    return " (did you mean " + " or ".join(repr(c) for c in near[:3]) + "?)"


def allowed(name: str, value: object, choices: Iterable[object]) -> UserError:
    """A UserError naming the bad value, the closest allowed ones and all the allowed ones."""
    names = sorted(map(str, choices))
    return UserError(
        f"unknown {name} {value!r}{did_you_mean(str(value), names)}; allowed: {', '.join(names)}"
    )
