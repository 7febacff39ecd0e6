"""Witness families of a regular task: pairs of pumped strings u1 W^n v and u2 W^n v whose labels
differ, depend on the prefixes u1 and u2, and do not depend on n.

They are the inputs a model with a bounded window cannot get right for long: the two strings of a
family share their last n |W| + |v| symbols, so a predictor that reads fewer symbols gives them the
same answer, and one of the two is wrong. A model that tracks state keeps them apart at every n.
For parity the families include 0^n against 1 0^n and (11)^n against 1 (11)^n (the proofs' 1^T
witness, read per pair); for "contains aba", b^n against aba b^n and (aabb)^n against aba (aabb)^n.

How they are found, from the task's automaton (``Task.automaton``):

1. every reachable state q and a shortest string ``access[q]`` reaching it (breadth-first search);
2. for every pair of states a shortest string v after which both are labelled and the labels differ
   (a distinguishing suffix: the pair has different futures); automata with more than
   ``MAX_PAIR_STATES`` states (large groups) consider only v = empty, i.e. states with different
   labels;
3. for every short word w (all words of 1 .. 4 symbols while there are at most ``MAX_WORDS``) and every
   pair of reachable states (p, q): w moves each state into a cycle after a few steps; after
   pre = max of the two tails, the pair (p', q') is fixed by W = w^period (period = the lcm of the two
   cycle lengths). Where p' != q' and a distinguishing v exists, u1 = access[p] w^pre,
   u2 = access[q] w^pre, and the family is (u1, u2, W, v): u_i W^n ends in p' (q') for every n, so
   the labels after v are fixed;
4. the shortest family per pumped word W, shortest W first, up to ``limit`` families.

A window language (its label decided by its last w symbols) has no family: a long enough W^n
synchronises every pair. ``witness_families`` then returns an empty list.
"""
from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from statetrack.tasks.automaton import Automaton

#: automata above this many states look for families with v = empty only
MAX_PAIR_STATES = 400
#: pumped words tried (all words of 1, 2, ... symbols while the count stays within this)
MAX_WORDS = 100
#: the longest pumped word kept (|w| x period)
MAX_PUMP = 12
#: pairs are formed among this many states (those with the shortest access strings)
MAX_FAMILY_STATES = 40


@dataclass(frozen=True)
class Family:
    """u1 W^n v (label ``labels[0]``) against u2 W^n v (label ``labels[1]``), in symbol indices."""

    prefixes: tuple[tuple[int, ...], tuple[int, ...]]
    pump: tuple[int, ...]
    end: tuple[int, ...]
    labels: tuple[int, int]

    def word(self, member: int, n: int) -> list[int]:
        return [*self.prefixes[member], *self.pump * n, *self.end]

    def length(self, member: int, n: int) -> int:
        return len(self.prefixes[member]) + n * len(self.pump) + len(self.end)

    def text(self, symbols, member: int | None = None) -> str:
        """'aba (aabb)^n' (one member) or both joined by ' vs '."""
        if member is None:
            return f"{self.text(symbols, 0)} vs {self.text(symbols, 1)}"
        sep = "" if all(len(s) == 1 for s in symbols) else " "

        def show(w):
            return sep.join(symbols[a] for a in w)
        parts = [show(self.prefixes[member]), f"({show(self.pump)})^n", show(self.end)]
        return " ".join(p for p in parts if p)

    def as_dict(self, symbols, tokens) -> dict:
        return {"family": self.text(symbols),
                "members": [self.text(symbols, 0), self.text(symbols, 1)],
                "prefixes": [[int(tokens[a]) for a in u] for u in self.prefixes],
                "pump": [int(tokens[a]) for a in self.pump], "end": [int(tokens[a]) for a in self.end],
                "labels": list(self.labels)}


def _access(auto: Automaton) -> dict[int, tuple[int, ...]]:
    """A shortest string reaching each reachable state (the first in symbol order)."""
    access = {auto.start: ()}
    todo = deque([auto.start])
    while todo:
        q = todo.popleft()
        for a in range(auto.n_symbols):
            r = int(auto.delta[q, a])
            if r not in access:
                access[r] = access[q] + (a,)
                todo.append(r)
    return access


def distinguishing(auto: Automaton) -> dict[tuple[int, int], tuple[int, ...]]:
    """For pairs of states (p, q), a shortest string v after which both are labelled (>= 0) with
    different labels; pairs without one are absent. Large automata: only pairs whose labels differ."""
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
    dist = np.full((n, n), -1, dtype=np.int64)       # length of the shortest v
    first = np.full((n, n), -1, dtype=np.int64)      # its first symbol
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


def _words(n_symbols: int) -> list[tuple[int, ...]]:
    out: list[tuple[int, ...]] = []
    for k in range(1, 5):
        if k > 1 and len(out) + n_symbols ** k > MAX_WORDS:
            break
        out += list(itertools.product(range(n_symbols), repeat=k))
    return out


def witness_families(auto: Automaton, limit: int = 4) -> list[Family]:
    """Up to ``limit`` witness families of the automaton (see the module docstring); [] for a window
    language."""
    access = _access(auto)
    # the states with the shortest access strings (all of them in small automata)
    states = sorted(access, key=lambda q: (len(access[q]), access[q]))[:MAX_FAMILY_STATES]
    dist = distinguishing(auto)
    best: dict[tuple[int, ...], tuple[int, Family]] = {}
    for w in _words(auto.n_symbols):
        f = auto.apply(w)
        tail, cycle = _tails(f)
        powers = [np.arange(auto.n_states)]
        for _ in range(int(tail.max())):
            powers.append(f[powers[-1]])
        for i, p in enumerate(states):
            for q in states[i + 1:]:
                pre = int(max(tail[p], tail[q]))
                period = math.lcm(int(cycle[p]), int(cycle[q]))
                if len(w) * period > MAX_PUMP:
                    continue
                p2, q2 = int(powers[pre][p]), int(powers[pre][q])
                v = dist.get((p2, q2))
                if p2 == q2 or v is None:
                    continue
                pump = w * period
                u = (access[p] + w * pre, access[q] + w * pre)
                labels = (int(auto.labels[auto.apply(v, [p2])[0]]), int(auto.labels[auto.apply(v, [q2])[0]]))
                fam = Family(u, pump, v, labels)
                cost = len(u[0]) + len(u[1]) + len(v)
                if pump not in best or cost < best[pump][0]:
                    best[pump] = (cost, fam)
    ranked = sorted(best.values(), key=lambda cf: (len(cf[1].pump), cf[0], cf[1].pump))
    out: list[Family] = []
    for _, fam in ranked:
        # a pump that is a power of a kept one adds nothing new
        if any(_is_power(fam.pump, g.pump) for g in out):
            continue
        out.append(fam)
        if len(out) == limit:
            break
    return out


def _is_power(w: tuple[int, ...], base: tuple[int, ...]) -> bool:
    return len(w) % len(base) == 0 and w == base * (len(w) // len(base))
