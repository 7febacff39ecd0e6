"""Regular languages from a DFA: ``dfa:PATH`` (a JSON file) and the built-in ``tomita:1`` .. ``tomita:7``.

The JSON format (every key required, no others allowed)::

    {"states": ["even", "odd"],            # distinct non-empty strings
     "alphabet": ["0", "1"],               # distinct non-empty strings; token id = index here
     "start": "even",
     "accept": ["even"],                   # a subset of states (may be empty)
     "transitions": {"even": {"0": "even", "1": "odd"},
                     "odd":  {"0": "odd",  "1": "even"}}}

Validation is strict: every (state, symbol) pair must have exactly one transition to a known state;
a missing or extra entry is a UserError naming it. The label at every position is 1 if the prefix read
so far is accepted, else 0, and every position is scored.

Training draw: symbols uniform over the alphabet. Its final label is nearly always "reject" at long
lengths (accepted share at length >= 100 in 20,000 draws: 0 for Tomita 1, 2, 3 and 7, 0.0003 for
Tomita 4), so it is not a test set. Test draw (``stream_test_batch``): half the sequences accepted and
half rejected (a random order; an odd batch has one more rejected), each uniform among the strings of
that length with that label. It is exact, with no rejection loop: ``DFA.log_counts`` counts, for every
state q and number r of symbols left, the strings that end accepted / rejected (in log space: exact to
float64 rounding, no overflow at any length), and each symbol is drawn with probability
count(delta(q, a), r - 1) / count(q, r) for the sequence's label. A length with no accepted (or no
rejected) string, e.g. an odd length for Tomita 2 and 5, has no test set: ``test_unavailable`` names it
and evaluation reports it as not scored. Balance holds for the final label (the one ``accuracy``
scores); the prefix labels scored by token accuracy are not balanced (mostly "reject" at long lengths).

``tomita:k/balanced`` trains on the test draw too (at lengths where it exists; elsewhere, e.g. odd
lengths of Tomita 2, the uniform draw): the uniform draw almost never shows a long accepted string (the
only one of Tomita 1 or 2 at length L has probability 2^-L), so a model trained on it at lengths 1-50
has in effect seen accepted strings only up to about length 10.

Tomita grammars (binary alphabet {0, 1}; Tomita1982 in docs/science.md, as usually stated):
  1: 1*                      2: (10)*
  3: no odd-length block of 1s immediately followed by an odd-length block of 0s (blocks maximal)
  4: no 000 substring        5: even number of 0s and even number of 1s
  6: (#0 - #1) = 0 mod 3     7: 0*1*0*1*
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from statetrack.errors import UserError
from statetrack.tasks.algebraic import RegularLanguage
from statetrack.tasks.automaton import Automaton
from statetrack.tasks.base import Batch, Scoring, TestDraw
from statetrack.tasks.streaming import (
    Chunk,
    StreamingTask,
    UniformInputs,
    balanced_labels,
    check_length,
    every_mask,
)
from statetrack.untrusted import MAX_JSON_BYTES, load_json, read_text

KEYS = ("states", "alphabet", "start", "accept", "transitions")
#: the names of the labels 0 and 1
LABEL_NAMES = ("rejected", "accepted")


def _names(spec: dict, key: str, where: str) -> list[str]:
    v = spec[key]
    if not isinstance(v, list) or not all(isinstance(s, str) and s for s in v):
        raise UserError(f"{where}: {key!r} must be a list of non-empty strings, got {v!r}")
    dup = sorted(s for s, n in Counter(v).items() if n > 1)
    if dup:
        raise UserError(f"{where}: {key!r} lists {dup[0]!r} twice; allowed: distinct names")
    return v


def _check_keys(spec: object, where: str) -> dict:
    """``spec`` as a mapping with exactly the keys KEYS."""
    if not isinstance(spec, dict):
        raise UserError(f"{where}: expected a JSON object with keys {', '.join(KEYS)}")
    missing = [k for k in KEYS if k not in spec]
    extra = sorted(set(spec) - set(KEYS))
    if missing:
        raise UserError(f"{where}: missing key {missing[0]!r}; required keys: {', '.join(KEYS)}")
    if extra:
        raise UserError(f"{where}: unknown key {extra[0]!r}; allowed keys: {', '.join(KEYS)}")
    return spec


class DFA:
    """A validated DFA: ``delta`` (states x symbols) int array, ``start``, ``accepting`` bool array."""

    def __init__(self, spec: object, where: str = "DFA"):
        spec = _check_keys(spec, where)
        self.states = _names(spec, "states", where)
        self.alphabet = _names(spec, "alphabet", where)
        if not self.states or not self.alphabet:
            raise UserError(f"{where}: 'states' and 'alphabet' must be non-empty")
        sid = {s: i for i, s in enumerate(self.states)}
        if spec["start"] not in sid:
            raise UserError(
                f"{where}: start state {spec['start']!r} is not a state; allowed: {', '.join(self.states)}"
            )
        self.start = sid[spec["start"]]
        self.accepting = np.zeros(len(self.states), dtype=bool)
        for s in _names(spec, "accept", where):
            if s not in sid:
                raise UserError(
                    f"{where}: accept state {s!r} is not a state; allowed: {', '.join(self.states)}"
                )
            self.accepting[sid[s]] = True
        self.delta = self._transitions(spec["transitions"], sid, where)

    def _transitions(self, tr: object, sid: dict[str, int], where: str) -> np.ndarray:
        """The (states, symbols) table of next states, every transition checked."""
        if not isinstance(tr, dict):
            raise UserError(f"{where}: 'transitions' must be an object state -> {{symbol: state}}")
        for s in tr:
            if s not in sid:
                raise UserError(
                    f"{where}: transitions from unknown state {s!r}; allowed: {', '.join(self.states)}"
                )
        delta = np.empty((len(self.states), len(self.alphabet)), dtype=np.int64)
        for s in self.states:
            row = tr.get(s, {})
            if not isinstance(row, dict):
                raise UserError(f"{where}: transitions of state {s!r} must be an object symbol -> state")
            for a in row:
                if a not in self.alphabet:
                    raise UserError(
                        f"{where}: transition from state {s!r} on unknown symbol {a!r}; "
                        f"allowed: {', '.join(self.alphabet)}"
                    )
            for j, a in enumerate(self.alphabet):
                if a not in row:
                    raise UserError(f"{where}: undefined transition from state {s!r} on symbol {a!r}")
                if row[a] not in sid:
                    raise UserError(
                        f"{where}: transition from state {s!r} on symbol {a!r} goes to "
                        f"unknown state {row[a]!r}; allowed: {', '.join(self.states)}"
                    )
                delta[sid[s], j] = sid[row[a]]
        return delta

    def log_counts(self, length: int) -> np.ndarray:
        """(length + 1, 2, states) float64: ``[r, label, q]`` is the log of the number of strings of r
        symbols that lead from state q to a rejecting (label 0) / accepting (label 1) state; -inf where
        there is none. Computed once per DFA and extended on demand: 16 * states bytes per length
        (8 MB for 5 states at length 100,000)."""
        have = getattr(self, "_log_counts", None)
        if have is None:
            acc = self.accepting.astype(float)
            with np.errstate(divide="ignore"):
                have = np.log(np.stack([1.0 - acc, acc]))[None]  # r = 0: the state's own label
        if len(have) <= length:
            grown = np.empty((max(length + 1, 2 * len(have)), 2, len(self.states)))
            grown[: len(have)] = have
            for r in range(len(have), len(grown)):
                # a string of r symbols from q is a symbol a, then r - 1 symbols from delta(q, a)
                grown[r] = np.logaddexp.reduce(grown[r - 1][:, self.delta], axis=-1)
            have = grown
        self._log_counts = have
        return have[: length + 1]

    def automaton(self) -> Automaton:
        """The DFA as a labelled automaton: label 1 in accepting states, 0 elsewhere."""
        return Automaton(
            self.delta,
            self.start,
            self.accepting.astype(np.int64),
            2,
            symbols=self.alphabet,
            label_names=LABEL_NAMES,
            state_names=self.states,
        )

    def accepts(self, word: Sequence[str | int]) -> bool:
        q = self.start
        for a in word:
            q = self.delta[q, self.alphabet.index(a) if isinstance(a, str) else int(a)]
        return bool(self.accepting[q])


def load_dfa(path: str) -> DFA:
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(f"DFA file {path!r} not found; allowed: a path to a JSON file")
    try:
        spec = load_json(read_text(p, f"DFA file {path!r}", MAX_JSON_BYTES), f"DFA file {path!r}")
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"DFA file {path!r} is not valid JSON: {str(e).splitlines()[0]}") from None
    return DFA(spec, where=f"DFA file {path!r}")


def _tomita_spec(k: int) -> dict:
    def mk(states: list[str], start: str, accept: list[str], rows: list[tuple[str, str]]) -> dict[str, Any]:
        return {
            "states": states,
            "alphabet": ["0", "1"],
            "start": start,
            "accept": accept,
            "transitions": {s: {"0": r[0], "1": r[1]} for s, r in zip(states, rows, strict=True)},
        }

    if k == 1:  # 1*
        return mk(["ok", "dead"], "ok", ["ok"], [("dead", "ok"), ("dead", "dead")])
    if k == 2:  # (10)*
        return mk(
            ["even", "one", "dead"], "even", ["even"], [("dead", "one"), ("even", "dead"), ("dead", "dead")]
        )
    if k == 3:
        # free: no pending odd 1-block; odd1: inside an odd block of 1s; even1 is free;
        # odd1odd0: odd 1s then an odd run of 0s (rejects: the run may end odd);
        # odd1even0: odd 1s then an even run of 0s
        return mk(
            ["free", "odd1", "odd1odd0", "odd1even0", "dead"],
            "free",
            ["free", "odd1", "odd1even0"],
            [
                ("free", "odd1"),
                ("odd1odd0", "free"),
                ("odd1even0", "dead"),
                ("odd1odd0", "odd1"),
                ("dead", "dead"),
            ],
        )
    if k == 4:  # no 000
        return mk(
            ["z0", "z1", "z2", "dead"],
            "z0",
            ["z0", "z1", "z2"],
            [("z1", "z0"), ("z2", "z0"), ("dead", "z0"), ("dead", "dead")],
        )
    if k == 5:  # even #0 and even #1
        return mk(
            ["ee", "eo", "oe", "oo"], "ee", ["ee"], [("oe", "eo"), ("oo", "ee"), ("ee", "oo"), ("eo", "oe")]
        )
    if k == 6:  # #0 - #1 = 0 mod 3
        return mk(["r0", "r1", "r2"], "r0", ["r0"], [("r1", "r2"), ("r2", "r0"), ("r0", "r1")])
    if k == 7:  # 0*1*0*1*
        return mk(
            ["a", "b", "c", "d", "dead"],
            "a",
            ["a", "b", "c", "d"],
            [("a", "b"), ("c", "b"), ("c", "d"), ("dead", "d"), ("dead", "dead")],
        )
    raise UserError(f"unknown Tomita grammar {k!r}; allowed: 1, 2, 3, 4, 5, 6, 7")


def tomita_dfa(k: int) -> DFA:
    return DFA(_tomita_spec(k), where=f"tomita:{k}")


class DFATask(StreamingTask):
    scoring = Scoring.EVERY
    num_classes = 2
    label_names = LABEL_NAMES

    def __init__(self, dfa: DFA, name: str, balanced_training: bool = False):
        self.dfa = dfa
        self.name = name
        self.vocab_size = len(dfa.alphabet)
        self.symbols = tuple(dfa.alphabet)
        self.inputs = UniformInputs(self.vocab_size)
        self.balanced_training = balanced_training

    def stream_batch(
        self, rng: np.random.Generator, batch_size: int, length: int, chunk: int
    ) -> Iterator[Batch]:
        # the /balanced variant trains (and validates) on the test draw wherever it exists
        if self.balanced_training and self.test_unavailable(check_length(length)) is None:
            return self.stream_test_batch(rng, batch_size, length, chunk)
        return super().stream_batch(rng, batch_size, length, chunk)

    test_draw_kind = TestDraw.BALANCED

    def build_automaton(self) -> Automaton:
        return self.dfa.automaton()

    def algebra(self) -> RegularLanguage:
        return RegularLanguage(
            self.dfa.delta, self.dfa.start, self.dfa.accepting, f"regular language {self.name}"
        )

    def _start(self, batch_size: int) -> np.ndarray:
        return np.full(batch_size, self.dfa.start, dtype=np.int64)

    def _chunk(self, u: np.ndarray, _t0: int, _length: int, state: np.ndarray) -> Chunk:
        x = self.inputs.read(u)
        y = np.empty_like(x)
        for t in range(x.shape[1]):
            state = self.dfa.delta[state, x[:, t]]
            y[:, t] = self.dfa.accepting[state]
        return x, y, every_mask(*x.shape), state

    test_draw = (
        "half accepted, half rejected: each string uniform among those of its length and label "
        "(exact, by counting paths through the DFA)"
    )

    def test_unavailable(self, length: int) -> str | None:
        counts = self.dfa.log_counts(check_length(length))[length, :, self.dfa.start]
        for label, what in ((1, "accepted"), (0, "rejected")):
            if counts[label] == -np.inf:
                return f"no {what} string of length {length}"
        return None

    def stream_test_batch(
        self, rng: np.random.Generator, batch_size: int, length: int, chunk: int
    ) -> Iterator[Batch]:
        length = check_length(length)
        if chunk < 1:
            raise UserError(f"chunk must be a positive integer, got {chunk!r}")
        reason = self.test_unavailable(length)
        if reason:
            raise UserError(f"{self.name}: {reason}, so no balanced test set of that length exists")
        return self._balanced(rng, batch_size, length, chunk)

    def _balanced(
        self, rng: np.random.Generator, batch_size: int, length: int, chunk: int
    ) -> Iterator[Batch]:
        counts = self.dfa.log_counts(length)
        delta, accepting = self.dfa.delta, self.dfa.accepting
        label = balanced_labels(rng, batch_size, 2)[:, None]
        state = np.full(batch_size, self.dfa.start, dtype=np.int64)
        rows = np.arange(batch_size)
        for start in range(0, length, chunk):
            u = rng.random((min(chunk, length - start), batch_size)).T  # the training draw's layout
            x = np.empty(u.shape, dtype=np.int64)
            y = np.empty(u.shape, dtype=np.int64)
            for k in range(u.shape[1]):
                nxt = delta[state]  # (batch, symbols)
                # log count of each symbol's completions with the sequence's label; the state's own
                # count is positive by construction, so each row has a finite maximum
                w = counts[length - start - k - 1][label, nxt]
                w = np.exp(w - w.max(axis=1, keepdims=True))
                cum = np.cumsum(w, axis=1)
                a = (cum <= u[:, k : k + 1] * cum[:, -1:]).sum(axis=1)
                # u * total can round up to total: fall back on the last symbol with a completion
                a = np.minimum(a, w.shape[1] - 1 - np.argmax(w[:, ::-1] > 0, axis=1))
                state = nxt[rows, a]
                x[:, k], y[:, k] = a, accepting[state]
            yield Batch(x, y, every_mask(batch_size, u.shape[1]))

    def params(self) -> dict[str, Any]:
        return {
            "states": len(self.dfa.states),
            "alphabet": list(self.dfa.alphabet),
            "balanced_training": self.balanced_training,
        }
