"""Witness families of a regular task, for every pair of its states: pairs of pumped strings
u_p W^n v and u_q W^n v whose labels differ, depend on the prefixes, and do not depend on n.

They are the inputs a model with a bounded window cannot get right for long: the two strings of a
family share their last n |W| + |v| symbols, so a predictor that reads fewer symbols gives them the
same answer, and one of the two is wrong. A model that tracks state keeps them apart at every n. Each
family belongs to a pair of states (p, q): the states its two strings are in before the loop, the ones
a model that errs on it confuses.

How they are found, from the task's automaton (``Task.automaton``), by ``witness_pairs``:

1. the minimal automaton of the reachable states (``Automaton.minimized``: states no suffix tells apart
   are one state), and for each of its states q a shortest string ``access[q]`` reaching it (the least
   in symbol order);
2. every pair of distinct states p, q (N(N-1)/2 of them for N states), in the order of their access
   strings (the longer of the two, then their sum, then symbol order); a pair is *separable* when some
   suffix v gives both a label and the labels differ (``distinguishing``: a shortest such v, the least
   in symbol order). Every pair of the minimal automaton is separable unless a state has no label
   after some suffixes (a dead state, the middle of an expression);
3. every loop word w: all words of 1, 2, ... symbols while their number stays within ``MAX_WORDS``
   (binary alphabets: up to 5 symbols, 62 words; three letters: up to 3, 39 words; a group of 60
   elements: its 60 elements). Repeating w moves p and q each into a cycle after a few steps; after
   pre = the longer of the two tails, p' = p.w^pre and q' = q.w^pre are both fixed by
   W = w^period (period = the lcm of the two cycles). w keeps the pair apart when p' != q' (then
   p.w^n != q.w^n for every n) and p', q' are separable; its family is
   u_p = access[p] w^pre, u_q = access[q] w^pre, the pump W and v = the separating suffix of (p', q'),
   so u W^n ends in p' (q') for every n and the labels after v are fixed. Pumps longer than
   ``MAX_PUMP`` symbols are skipped; identical families of two words are kept once;
4. within a pair, families by the length of W, then of their strings, then W in symbol order.

The cap. A pair gets every family of its loops while the total stays within ``MAX_FAMILIES``;
above it the families are taken round robin (the first family of every pair, then the second of
every pair, ...), so every pair keeps at least one as long as there are at most ``MAX_FAMILIES``
pairs; beyond that the pairs with the shortest access strings are kept and ``pairs_skipped`` counts
the rest. The Tomita DFAs have 1-10 pairs and up to 62 loops each (a few hundred families); parity 1
pair; modular arithmetic mod 5 a minimal automaton of 56 states (1,540 pairs, a few of them
inseparable); a group of order g has g(g-1)/2 pairs (S3: 15, A5: 1,770, S5: 7,140: the cap applies).

A pair with no family says why: no word keeps it apart (every path of the pair through the
automaton merges: a bounded window decides it; a window language has only such pairs), or no loop
within the words tried does (the pair has paths that never merge, through longer loops).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from statetrack.errors import UserError
from statetrack.tasks.automaton import Automaton

#: automata above this many states look for families with v = empty only
MAX_PAIR_STATES = 400
#: loop words tried (all words of 1, 2, ... symbols while the count stays within this)
MAX_WORDS = 100
#: the longest pumped word kept (|w| x period)
MAX_PUMP = 12
#: families per task: above it, round robin over the pairs
MAX_FAMILIES = 2000
#: the pair-merge analysis (why a pair has no family) runs up to this many states
MAX_MERGE_STATES = 150
#: the most states a minimal automaton may have for its pairs of states to be analysed (families,
#: horizons): the pairs grow as the square (2,048 states: 2.1 million pairs, about 10 s and 0.8 GB here)
MAX_STATES = 2048


def check_pair_states(mini: Automaton, task: str) -> None:
    """A UserError, before the work, when the minimal automaton ``mini`` has more than ``MAX_STATES``
    states: its pairs of states are too many to analyse (a DFA file of 100,000 states took 7 GB and did
    not end within two minutes)."""
    if mini.n_states > MAX_STATES:
        raise UserError(
            f"{task}: its minimal automaton has {mini.n_states:,} states "
            f"({mini.n_states * (mini.n_states - 1) // 2:,} pairs of states), too many for the witness families "
            f"and horizons; allowed: tasks of at most {MAX_STATES:,} states"
        )


@dataclass(frozen=True)
class Family:
    """u1 W^n v (label ``labels[0]``) against u2 W^n v (label ``labels[1]``), in symbol indices; ``pair``:
    the states of the minimal automaton after u1 and u2's access strings, ``loop`` the word w (W = w^k)."""

    prefixes: tuple[tuple[int, ...], tuple[int, ...]]
    pump: tuple[int, ...]
    end: tuple[int, ...]
    labels: tuple[int, int]
    pair: tuple[int, int] = (-1, -1)
    loop: tuple[int, ...] = ()

    def word(self, member: int, n: int) -> list[int]:
        return [*self.prefixes[member], *self.pump * n, *self.end]

    def length(self, member: int, n: int) -> int:
        return len(self.prefixes[member]) + n * len(self.pump) + len(self.end)

    def text(self, symbols: Sequence[str], member: int | None = None) -> str:
        """'aba (aabb)^n' (one member) or both joined by ' vs '."""
        if member is None:
            return f"{self.text(symbols, 0)} vs {self.text(symbols, 1)}"
        parts = [
            word_text(self.prefixes[member], symbols),
            f"({word_text(self.pump, symbols)})^n",
            word_text(self.end, symbols),
        ]
        return " ".join(p for p in parts if p)

    def as_dict(
        self, symbols: Sequence[str], tokens: np.ndarray, label_name: Callable[[int], str] = str
    ) -> dict[str, Any]:
        return {
            "family": self.text(symbols),
            "members": [self.text(symbols, 0), self.text(symbols, 1)],
            "prefixes": [[int(tokens[a]) for a in u] for u in self.prefixes],
            "pump": [int(tokens[a]) for a in self.pump],
            "end": [int(tokens[a]) for a in self.end],
            "labels": list(self.labels),
            "label_names": [label_name(c) for c in self.labels],
        }


def word_text(word: Sequence[int], symbols: Sequence[str]) -> str:
    """Symbols joined, with spaces where a symbol is longer than one character."""
    sep = "" if all(len(s) == 1 for s in symbols) else " "
    return sep.join(symbols[a] for a in word)


@dataclass
class PairWitness:
    """A pair of states of the minimal automaton and its families (or why it has none)."""

    states: tuple[int, int]
    names: tuple[str, str]
    access: tuple[tuple[int, ...], tuple[int, ...]]
    separator: tuple[int, ...] | None  # a shortest suffix giving both a label, different ones
    families: list[Family] = field(default_factory=list)
    loops: int = 0  # families found before the cap
    reason: str | None = None  # why there is no family

    def as_dict(self, auto: Automaton) -> dict:
        sep = None if self.separator is None else word_text(self.separator, auto.symbols)
        return {
            "pair": list(self.names),
            "states": list(self.states),
            "access": [word_text(u, auto.symbols) for u in self.access],
            "separator": sep,
            "separable": self.separator is not None,
            "loops": self.loops,
            "tested": len(self.families),
            "families": [f.as_dict(auto.symbols, auto.tokens, auto.label_name) for f in self.families],
            "reason": self.reason,
        }


@dataclass
class Witnesses:
    """Every pair of states of a task's minimal automaton, and the cap's count."""

    auto: Automaton  # the minimal automaton
    pairs: list[PairWitness]
    pairs_total: int  # pairs of distinct states (N (N - 1) / 2)
    pairs_skipped: int  # pairs beyond MAX_FAMILIES, not tried
    max_word: int  # the longest loop word tried

    @property
    def families(self) -> list[Family]:
        """Every family tested, round robin over the pairs (their first families first)."""
        lists = [p.families for p in self.pairs]
        return [f for group in itertools.zip_longest(*lists) for f in group if f is not None]


def state_names(auto: Automaton, access: dict[int, tuple[int, ...]]) -> list[str]:
    """How each state prints: its name in the DFA file, its label where every state has its own (a group
    element), else the access string that reaches it ('after cb'; 'start')."""
    if auto.state_names is not None:
        return [str(x) for x in auto.state_names]
    labels = auto.labels
    if auto.label_names is not None and len(set(labels.tolist())) == auto.n_states and (labels >= 0).all():
        return [auto.label_name(c) for c in labels]
    return [
        "start" if not access[q] else f"after {word_text(access[q], auto.symbols)}"
        for q in range(auto.n_states)
    ]


def distinguishing(auto: Automaton) -> dict[tuple[int, int], tuple[int, ...]]:
    """For pairs of states (p, q), a shortest string v after which both are labelled (>= 0) with
    different labels, the least in symbol order; pairs without one are absent. Large automata: only
    pairs whose labels differ."""
    lab = auto.labels
    n = auto.n_states
    out: dict[tuple[int, int], tuple[int, ...]] = {}
    if n > MAX_PAIR_STATES:
        idx = np.flatnonzero(lab >= 0)
        for p in idx:
            for q in idx:
                if lab[p] != lab[q]:
                    out[(int(p), int(q))] = ()
        return out
    dist = np.full((n, n), -1, dtype=np.int64)  # length of the shortest v
    first = np.full((n, n), -1, dtype=np.int64)  # its first symbol
    base = (lab[:, None] >= 0) & (lab[None, :] >= 0) & (lab[:, None] != lab[None, :])
    dist[base] = 0
    r = 0
    while True:
        r += 1
        new = False
        for a in range(auto.n_symbols):
            d = auto.delta[:, a]
            hit = (dist == -1) & (dist[d[:, None], d[None, :]] == r - 1)
            if hit.any():
                dist[hit], first[hit] = r, a
                new = True
        if not new:
            break
    for p, q in zip(*np.nonzero(dist >= 0), strict=True):
        v, (x, y) = [], (int(p), int(q))
        while dist[x, y] > 0:
            a = int(first[x, y])
            v.append(a)
            x, y = int(auto.delta[x, a]), int(auto.delta[y, a])
        out[(int(p), int(q))] = tuple(v)
    return out


def _tails(f: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For a map f on states: each state's tail length (steps before its cycle) and cycle length."""
    n = len(f)
    tail = np.zeros(n, dtype=np.int64)
    cycle = np.zeros(n, dtype=np.int64)
    for s in range(n):
        seen: dict[int, int] = {}
        x, t = s, 0
        while x not in seen:
            seen[x] = t
            x, t = int(f[x]), t + 1
        tail[s], cycle[s] = seen[x], t - seen[x]
    return tail, cycle


def loop_words(n_symbols: int) -> list[tuple[int, ...]]:
    """The loop words tried: every word of 1, 2, ... symbols (in symbol order) while their number stays
    within ``MAX_WORDS`` (all the single symbols whatever their number), at most ``MAX_PUMP`` long."""
    out: list[tuple[int, ...]] = []
    for k in range(1, MAX_PUMP + 1):
        if k > 1 and len(out) + n_symbols**k > MAX_WORDS:
            break
        out += list(itertools.product(range(n_symbols), repeat=k))
    return out


def _never_merge(auto: Automaton) -> np.ndarray | None:
    """(states, states) bool: whether some infinite path of the pair never merges (the pair graph has a
    cycle off the diagonal that the pair reaches off it); None above ``MAX_MERGE_STATES`` states. A pair
    without one is merged by every word after a bounded number of symbols."""
    n = auto.n_states
    if n > MAX_MERGE_STATES:
        return None
    alive = ~np.eye(n, dtype=bool)  # may still have an infinite path off the diagonal
    while True:
        nxt = np.zeros((n, n), dtype=bool)
        for a in range(auto.n_symbols):
            d = auto.delta[:, a]
            nxt |= alive[d[:, None], d[None, :]]
        nxt &= alive
        if (nxt == alive).all():
            return alive
        alive = nxt


def _pumps(
    mini: Automaton,
    words: list[tuple[int, ...]],
    order: list[tuple[int, int]],
    access: dict[int, tuple[int, ...]],
    dist: dict[tuple[int, int], tuple[int, ...]],
) -> list[list[tuple]]:
    """For each pair of ``order``, every loop word that pumps it apart: after the longer of the two
    states' tails under the word, they sit on distinct, separable states of cycles short enough to pump
    (``MAX_PUMP``). Each as (pump length, family size, pump, word index, tail, state a, state b)."""
    n = mini.n_states
    P = np.array([p for p, _ in order], dtype=np.int64)
    Q = np.array([q for _, q in order], dtype=np.int64)
    found: list[list[tuple]] = [[] for _ in order]
    separable = np.zeros((n, n), dtype=bool)
    for p, q in dist:
        separable[p, q] = True
    for wi, w in enumerate(words):
        f = mini.apply(w)
        tail, cycle = _tails(f)
        powers = [np.arange(n)]
        for _ in range(int(tail.max())):
            powers.append(f[powers[-1]])
        pw = np.stack(powers)  # (max tail + 1, states)
        pre = np.maximum(tail[P], tail[Q])
        period = np.lcm(cycle[P], cycle[Q])
        p2, q2 = pw[pre, P], pw[pre, Q]
        ok = (len(w) * period <= MAX_PUMP) & (p2 != q2) & separable[p2, q2]
        size = 2 * len(w) * pre + np.array([len(access[p]) + len(access[q]) for p, q in order])
        for i in np.flatnonzero(ok).tolist():
            a, b = int(p2[i]), int(q2[i])
            pump = w * int(period[i])
            found[i].append((len(pump), int(size[i]) + len(dist[(a, b)]), pump, wi, int(pre[i]), a, b))
    return found


def witness_pairs(auto: Automaton, max_families: int = MAX_FAMILIES) -> Witnesses:
    """Every pair of states of the minimal automaton of ``auto``, with its witness families or the reason
    it has none (see the module docstring)."""
    mini, _ = auto.minimized()
    check_pair_states(mini, "this task")
    n = mini.n_states
    access = mini.access_words()
    names = state_names(mini, access)
    dist = distinguishing(mini)
    order = sorted(
        ((p, q) for p in range(n) for q in range(p + 1, n)),
        key=lambda pq: (
            max(len(access[pq[0]]), len(access[pq[1]])),
            len(access[pq[0]]) + len(access[pq[1]]),
            access[pq[0]],
            access[pq[1]],
        ),
    )
    total = len(order)
    order, skipped = order[:max_families], max(0, total - max_families)
    words = loop_words(mini.n_symbols)
    found = _pumps(mini, words, order, access, dist)
    # every pair keeps what a round robin over the pairs can give it (the rest are counted, not built)
    share = max(1, -(-max_families // max(1, len(order))))
    merge = _never_merge(mini)
    pairs = []
    for i, (p, q) in enumerate(order):
        fams: list[Family] = []
        for _, _, pump, wi, k, a, b in sorted(found[i])[:share]:
            w, v = words[wi], dist[(a, b)]
            fam = Family(
                (access[p] + w * k, access[q] + w * k),
                pump,
                v,
                (int(mini.labels[mini.apply(v, [a])[0]]), int(mini.labels[mini.apply(v, [b])[0]])),
                (p, q),
                w,
            )
            if all((fam.prefixes, fam.pump, fam.end) != (g.prefixes, g.pump, g.end) for g in fams):
                fams.append(fam)
        pw_ = PairWitness(
            (p, q), (names[p], names[q]), (access[p], access[q]), dist.get((p, q)), fams, len(found[i])
        )
        if not fams:
            pw_.reason = _why_none(pw_, merge, max(len(w) for w in words))
        pairs.append(pw_)
    _cap(pairs, max_families)
    return Witnesses(mini, pairs, total, skipped, max(len(w) for w in words))


def _why_none(pair: PairWitness, merge: np.ndarray | None, longest: int) -> str:
    p, q = pair.states
    if pair.separator is None:
        return (
            "not separable: no suffix gives both states a label and different labels (one never "
            "reaches a labelled state, or only where the other is unlabelled)"
        )
    if merge is not None and not merge[p, q]:
        return (
            "no loop keeps them apart: every word merges the two states after a bounded number of symbols, "
            "so a bounded window decides which one the model is in"
        )
    return (
        f"no loop of up to {longest} symbols (pumped to at most {MAX_PUMP}) keeps them apart and separable; "
        "longer loops may"
    )


def _cap(pairs: list[PairWitness], max_families: int) -> None:
    """Keep at most ``max_families`` families, round robin over the pairs."""
    if sum(len(p.families) for p in pairs) <= max_families:
        return
    keep = [0] * len(pairs)
    left = max_families
    depth = 0
    while left > 0:
        grew = False
        for i, p in enumerate(pairs):
            if left and len(p.families) > depth:
                keep[i] += 1
                left -= 1
                grew = True
        if not grew:
            break
        depth += 1
    for p, k in zip(pairs, keep, strict=True):
        p.families = p.families[:k]


def witness_families(auto: Automaton, limit: int | None = None) -> list[Family]:
    """The witness families of the automaton, round robin over its pairs of states (the first family of
    every pair, then the second, ...), at most ``limit``; [] for a window language."""
    fams = witness_pairs(auto).families
    return fams if limit is None else fams[:limit]
