"""The long-range test draw: strings whose label the recent past cannot decide.

For a length L and a suffix length k (default ceil(L/2)), with m = L - k symbols before the suffix:

1. the last k symbols s are drawn uniformly among the suffixes that leave every label possible (for a
   language: some prefix of m symbols gives "accept" with s, some gives "reject");
2. the label c is drawn uniformly among the labels that strings of length L have, independently of s
   (balanced in a batch: each label floor(B / C) or one more times, in random order);
3. the prefix p is drawn uniformly among the strings of m symbols for which p s has label c.

So the label and the suffix are independent: any predictor that reads only the last k symbols scores
1/C (50% for a language) in expectation, while each string is uniform among those with its suffix and
label.

Exact, by counting through the automaton (:mod:`statetrack.tasks.automaton`). R is the set of states
that strings of m symbols reach. Whether s qualifies depends only on delta(R, s), the set of states R
goes to on s; those sets are the states of the subset automaton started at R, found by search (at most
``MAX_SETS``). Counting, for every set and every number r of symbols left, the suffixes that end in a
set covering every label (log space, rows recomputed in blocks: memory O(sqrt(k)) rows), s is drawn
symbol by symbol, carrying the state each state of R reaches. The prefix is drawn backwards: its last
state among those that give label c with s, with probability proportional to the number of strings of
m symbols that reach it, then each predecessor (state, symbol) in proportion to the strings that reach
that state (the forward counts, again recomputed in blocks).

Cost: the subset search takes O(sets x symbols x states); the counts O(L x (sets x symbols + states x
in-degree)); the draw O(L x batch x (|R| + in-degree)). The Tomita DFAs have 1-6 sets, a group's word
problem 1-2 (cosets), modular arithmetic mod 5 a few hundred. Above ``MAX_SETS`` sets the suffix is
drawn by rejection instead: uniform symbol strings, kept when they qualify (exact too); if fewer than
one in ``MAX_TRIES`` qualifies the draw is refused with one line naming the task, length and rate.

Where the suffix is the whole string (k >= L), or every prefix of L - k symbols reaches one state,
nothing is left before the suffix to decide the label, and ``plan`` says so. Where fewer than
``FEW_SUFFIXES`` suffixes qualify (e.g. "every c is eventually followed by an a" at L = 200: only
b^100), the draw exists but every string ends with one of them; ``LongPlan.note`` says so (the one
suffix, or how many), and so do ``sample``, evaluation's note for that length and the reports.

Otherwise, where no suffix of length k qualifies, the task is a window language at L: the label of every string of
length L is decided by its last k symbols. ``plan`` then names the window: the smallest w such that no
suffix of w symbols leaves every label possible (a suffix that decides the label keeps deciding it
when longer, so w is found by bisection).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from statetrack.tasks.automaton import NEG, Automaton, choose, reverse_rows
from statetrack.tasks.streaming import balanced_labels

#: subset-automaton states searched before the draw falls back on rejection
MAX_SETS = 4096
#: rejection: candidates drawn per wanted suffix before the draw is refused
MAX_TRIES = 1000
#: a draw with fewer qualifying suffixes than this says how many (``LongPlan.note``)
FEW_SUFFIXES = 100


def default_suffix(length: int) -> int:
    """k = ceil(L / 2)."""
    return (length + 1) // 2


@dataclass
class LongPlan:
    """What the long-range draw at one (length, suffix) needs, and why it may not exist."""

    length: int
    suffix: int
    labels: np.ndarray  # the labels strings of this length have
    reach: np.ndarray  # states reachable after length - suffix symbols (bool)
    set_states: np.ndarray | None = None  # (sets, states) bool: the subset automaton's sets
    set_delta: np.ndarray | None = None  # (sets, symbols) int
    good: np.ndarray | None = None  # (sets,) bool: covers every label
    log_suffixes: float = NEG  # log of the number of qualifying suffixes (exact path)
    reason: str | None = None  # why there is no draw
    window: int | None = None  # a window language: its window at this length
    note: str | None = None  # a draw with few distinct suffixes says so (``FEW_SUFFIXES``)

    @property
    def rejection(self) -> bool:
        return self.set_delta is None


def _subsets(auto: Automaton, start: np.ndarray, max_sets: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The subset automaton from the set ``start``: (sets (n, states) bool, delta (n, symbols)), or None
    when it has more than ``max_sets`` sets."""
    index = {np.packbits(start).tobytes(): 0}
    sets, rows = [start], []
    i = 0
    while i < len(sets):
        nxt = auto.delta[np.flatnonzero(sets[i])]  # (|S|, symbols)
        row = []
        for a in range(auto.n_symbols):
            t = np.zeros(auto.n_states, dtype=bool)
            t[nxt[:, a]] = True
            key = np.packbits(t).tobytes()
            j = index.get(key)
            if j is None:
                if len(sets) >= max_sets:
                    return None
                j = index[key] = len(sets)
                sets.append(t)
            row.append(j)
        rows.append(row)
        i += 1
    return np.array(sets), np.array(rows, dtype=np.int64).reshape(len(sets), auto.n_symbols)


def _label_onehot(auto: Automaton) -> np.ndarray:
    """(states, classes) bool: the label of each state (none for -1)."""
    onehot = np.zeros((auto.n_states, auto.num_classes), dtype=bool)
    has = auto.labels >= 0
    onehot[np.flatnonzero(has), auto.labels[has]] = True
    return onehot


def _covers(auto: Automaton, sets: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """For each set of states (rows of ``sets``, bool), whether its states' labels include every one of
    ``labels``."""
    present = (sets.astype(np.int64) @ _label_onehot(auto).astype(np.int64)) > 0
    return np.asarray(present[:, labels].all(axis=1))


def _count_step(set_delta: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    return lambda row: np.logaddexp.reduce(row[set_delta], axis=1)


def _qualifying(
    auto: Automaton, length: int, suffix: int, labels: np.ndarray, max_sets: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float] | None:
    """(sets, set_delta, good, log count of qualifying suffixes) for suffixes of ``suffix`` symbols after
    prefixes of length - suffix symbols; None when the subset automaton is too large."""
    reach = auto.reachable(length - suffix)
    found = _subsets(auto, reach, max_sets)
    if found is None:
        return None
    sets, set_delta = found
    good = _covers(auto, sets, labels)
    row = np.where(good, 0.0, NEG)
    step = _count_step(set_delta)
    for _ in range(suffix):
        row = step(row)
    return sets, set_delta, good, float(row[0])


def plan(auto: Automaton, length: int, suffix: int | None = None, max_sets: int = MAX_SETS) -> LongPlan:
    """The plan of the long-range draw at ``length`` with a suffix of ``suffix`` symbols (default
    ceil(length / 2)); ``reason`` says why there is none. Cached on the automaton."""
    k = default_suffix(length) if suffix is None else int(suffix)
    cache = auto.__dict__.setdefault("_long_plans", {})
    if (length, k, max_sets) in cache:
        return cache[(length, k, max_sets)]
    labels = auto.labels_at(length)
    p = LongPlan(length, k, labels, auto.reachable(length - k))
    what = "both labels" if len(labels) == 2 else "every label"
    if len(labels) == 0:
        p.reason = f"no string of length {length}"
    elif len(labels) == 1:
        p.reason = f"every string of length {length} has the same label ({auto.label_name(labels[0])})"
    elif k >= length:
        p.reason = (
            f"the suffix is the whole string (k = {k} >= L = {length}): nothing is left before it to decide "
            "the label"
        )
    elif p.reach.sum() == 1:
        p.reason = (
            f"every prefix of {length - k} symbols reaches the same state: the last {k} symbols decide the "
            "label, nothing is left before them to decide"
        )
    else:
        found = _qualifying(auto, length, k, labels, max_sets)
        if found is not None:
            p.set_states, p.set_delta, p.good, p.log_suffixes = found
            if p.log_suffixes == NEG:
                p.window = _window(auto, length, k, labels, max_sets)
                within = (
                    f"its last {p.window} symbol{'s' if p.window != 1 else ''}"
                    if p.window
                    else f"its last {k} symbols"
                )
                p.reason = (
                    f"a window language at length {length}: the label of every string is decided by "
                    f"{within} (no suffix of {k} symbols leaves {what} possible)"
                )
            elif p.log_suffixes < math.log(FEW_SUFFIXES - 0.5):
                count = round(math.exp(p.log_suffixes))
                if count == 1:
                    one = draw(auto, p, np.random.default_rng(0), 1)[0, length - k :]
                    p.note = ONE_SUFFIX.format(
                        word=runs_text(one, auto.symbols), what=what, k=k, length=length
                    )
                else:
                    p.note = (
                        f"few suffixes: only {count} suffixes of {k} symbols leave {what} possible at length "
                        f"{length}; every string of the long-range test ends with one of them"
                    )
    cache[(length, k, max_sets)] = p
    return p


#: the note of a long-range test whose strings all end with one suffix (``one_suffix`` reads it back)
ONE_SUFFIX = (
    "one suffix: only {word} leaves {what} possible among the suffixes of {k} symbols, so every string of "
    "the long-range test at length {length} ends with it"
)
_ONE_SUFFIX_RE = re.compile(
    re.escape(ONE_SUFFIX)
    .replace(re.escape("{word}"), "(?P<word>.+?)")
    .replace(re.escape("{what}"), "(?P<what>.+?)")
    .replace(re.escape("{k}"), r"(?P<k>\d+)")
    .replace(re.escape("{length}"), r"(?P<length>\d+)")
)


def one_suffix(note: str) -> tuple[str, str, int] | None:
    """(the suffix written with powers, what it leaves possible, the test length) of a one-suffix note
    (notes stored before powers were written come back with them), or None for another note."""
    m = _ONE_SUFFIX_RE.fullmatch(note)
    if m is None:
        return None
    return power_text(m["word"].split(" ")), m["what"], int(m["length"])


def runs_text(word: Sequence[int] | np.ndarray, symbols: Sequence[str]) -> str:
    """A word with its repetitions written as powers: 'b^100', 'c a^3 b', '(1 0)^125'."""
    return power_text([symbols[a] for a in word])


def power_text(tokens: Sequence[str]) -> str:
    """Tokens with their repetitions written as powers: a run 'b b b' as 'b^3', a repeated block
    '1 0 1 0 1 0 1' as '(1 0)^3 1' (the shortest block that repeats at least twice)."""
    tokens = list(tokens)
    n = len(tokens)
    border = [0] * n  # prefix function: the longest proper prefix of tokens[: i + 1] that is also its suffix
    for i in range(1, n):
        b = border[i - 1]
        while b and tokens[i] != tokens[b]:
            b = border[b - 1]
        border[i] = b + (tokens[i] == tokens[b])
    p = n - border[-1] if n else 0  # the smallest period: tokens[p:] == tokens[:-p]
    if 0 < p <= n // 2:
        reps, rest = divmod(n, p)
        head = f"{tokens[0]}^{reps}" if p == 1 else f"({power_text(tokens[:p])})^{reps}"
        return head + (" " + power_text(tokens[reps * p :]) if rest else "")
    parts = []
    i = 0
    while i < n:
        j = i
        while j < n and tokens[j] == tokens[i]:
            j += 1
        parts.append(tokens[i] + (f"^{j - i}" if j - i > 1 else ""))
        i = j
    return " ".join(parts)


def _window(auto: Automaton, length: int, k: int, labels: np.ndarray, max_sets: int) -> int | None:
    """Smallest w <= k such that no suffix of w symbols qualifies (None if a subset search is too large)."""
    lo, hi = 0, k  # a suffix of 0 symbols qualifies (every label of the length is reachable); k does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        found = _qualifying(auto, length, mid, labels, max_sets)
        if found is None:
            return None
        if found[3] == NEG:
            hi = mid
        else:
            lo = mid
    return hi


def draw(auto: Automaton, p: LongPlan, rng: np.random.Generator, batch_size: int) -> np.ndarray:
    """``batch_size`` strings of the long-range draw (symbol indices, (B, L)); ``p`` must have no reason."""
    if p.reason:
        raise ValueError(p.reason)
    B, L, k = batch_size, p.length, p.suffix
    m = L - k
    R = np.flatnonzero(p.reach)
    out = np.empty((B, L), dtype=np.int64)
    # 1. the suffix, carrying the state each state of R reaches on it
    if p.rejection:
        suf, ends = _suffix_by_rejection(auto, p, rng, B)
    else:
        assert p.set_delta is not None and p.good is not None
        suf = np.empty((B, k), dtype=np.int64)
        ends = np.tile(R, (B, 1))
        sets = np.zeros(B, dtype=np.int64)
        rows = reverse_rows(np.where(p.good, 0.0, NEG), _count_step(p.set_delta), k)
        next(rows)  # k symbols left: the count of the whole suffix
        for i, (_, row) in enumerate(rows):  # k - 1 - i symbols left after this one
            a = choose(rng, row[p.set_delta[sets]])
            suf[:, i] = a
            sets = p.set_delta[sets, a]
            ends = auto.delta[ends, a[:, None]]
    out[:, m:] = suf
    # 2. the label, independent of the suffix
    label = p.labels[balanced_labels(rng, B, len(p.labels))]
    # 3. the prefix's last state: among R, those that end with this label, by their number of strings
    counts = auto.forward_log_counts(m)[R]
    w = np.where(auto.labels[ends] == label[:, None], counts[None, :], NEG)
    q = R[choose(rng, w)]
    # 4. the prefix, backwards: each predecessor by the number of strings that reach it
    out[:, :m] = auto.draw_ending_in(q, m, rng)
    return out


def _suffix_by_rejection(
    auto: Automaton, p: LongPlan, rng: np.random.Generator, B: int
) -> tuple[np.ndarray, np.ndarray]:
    """Uniform symbol strings of k symbols, kept when the states R reaches on them cover every label."""
    R = np.flatnonzero(p.reach)
    onehot = _label_onehot(auto)
    kept_s, kept_e, tried = [], [], 0
    need = B
    while need > 0:
        n = max(64, 4 * need)
        cand = rng.integers(0, auto.n_symbols, size=(n, p.suffix))
        ends = np.tile(R, (n, 1))
        for i in range(p.suffix):
            ends = auto.delta[ends, cand[:, i : i + 1]]
        ok = np.asarray(onehot[ends].any(axis=1))[:, p.labels].all(axis=1)
        kept_s.append(cand[ok][:need])
        kept_e.append(ends[ok][:need])
        need -= len(kept_s[-1])
        tried += n
        if need > 0 and tried > MAX_TRIES * B:
            got = B - need
            raise ValueError(
                f"the long-range draw at length {p.length} found {got} qualifying suffixes in {tried:,} "
                f"uniform tries (rate {got / tried:.2g}); too rare to draw by rejection"
            )
    return np.concatenate(kept_s), np.concatenate(kept_e)
