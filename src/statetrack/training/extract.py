"""The automaton a network computes, on strings up to a length, beside its task's minimal automaton.

L* (Angluin1987, docs/science.md) learns a DFA from an observation table: rows are prefixes u, columns
suffixes v, the cell the answer on u v; prefixes with equal rows are one state. Weiss2018 run it with a
recurrent network as the membership oracle. Here the table is complete and bounded: the
network's answer on EVERY string of up to ``depth`` symbols, from one walk of the prefix tree
(:func:`statetrack.training.verify.walk`); rows are the prefixes of up to ``prefix_len`` symbols,
columns every suffix of up to ``depth - prefix_len``. Two prefixes are one state of the extracted
automaton when the network answers alike after them on every such suffix (its Nerode classes, as far
as the table sees). A state's transition on a symbol is the class of its shortest prefix extended by
the symbol; a state whose prefixes are all ``prefix_len`` long reads the class of the extension on the
shorter suffixes (one symbol less), and the transition is unresolved where that matches no class or
several.

Beside the task's minimal automaton (:meth:`Automaton.minimized`): a task state SPLIT over several
extracted states (which prefixes lead to each part), an extracted state that MERGES several task
states, and the shortest word on which the two automata disagree (a product search; a wrong answer of
the network on a string of up to ``depth`` symbols is one). A network that computes its task exactly on
the table gives the task's minimal automaton: one extracted state per task state, no split, no merge.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from statetrack.tasks.automaton import Automaton
from statetrack.tasks.base import Task
from statetrack.tasks.families import state_names, word_text
from statetrack.training.verify import live_states, task_automaton, walk

#: prefix-tree nodes of the table (2^19: every binary string up to 18 symbols)
BUDGET = 1 << 19
#: the deepest table (a one-letter alphabet would otherwise reach the budget's length)
MAX_DEPTH = 64
#: the share of the table's depth that its rows (prefixes) take
PREFIX_SHARE = 0.4
#: answer in the table for a string through a dead end of the task (not walked)
DEAD = -2


@dataclass
class Extracted:
    """The extracted automaton and how it compares with the task's minimal one."""

    depth: int  # every string of up to this many symbols answered
    prefix_len: int  # the rows: prefixes of up to this many symbols
    delta: np.ndarray  # (states, symbols) next state, -1 unresolved
    answers: np.ndarray  # (states,) the network's answer after a prefix of the state (-1: unlabelled)
    members: list[list[tuple[int, ...]]]  # per state, its prefixes (shortest first)
    task_states: list[dict[int, int]]  # per state, task state -> number of its prefixes there
    symbols: tuple[str, ...]
    task_names: list[str]
    class_names: list[str]
    splits: list[dict] = field(default_factory=list)
    merges: list[dict] = field(default_factory=list)
    disagreement: tuple[int, ...] | None = None  # a shortest word where the two automata disagree
    unresolved: int = 0

    @property
    def n_states(self) -> int:
        return len(self.members)

    def name(self, s: int) -> str:
        """An extracted state by its shortest prefix ('start' for the empty one)."""
        w = self.members[s][0]
        return "start" if not w else word_text(w, self.symbols)

    def equals_task(self) -> bool:
        """One extracted state per task state, every transition resolved, no merge, no split and no
        disagreement: the task's minimal automaton, renamed."""
        return not (self.splits or self.merges or self.unresolved) and self.disagreement is None

    def as_dict(self) -> dict:
        return {
            "depth": self.depth,
            "prefix_len": self.prefix_len,
            "states": [
                {
                    "name": self.name(s),
                    "answer": "-" if self.answers[s] < 0 else self.class_names[int(self.answers[s])],
                    "task_states": {self.task_names[q]: n for q, n in sorted(self.task_states[s].items())},
                    "next": [None if d < 0 else self.name(int(d)) for d in self.delta[s]],
                    "prefixes": len(self.members[s]),
                }
                for s in range(self.n_states)
            ],
            "splits": self.splits,
            "merges": self.merges,
            "unresolved": self.unresolved,
            "disagreement": None if self.disagreement is None else word_text(self.disagreement, self.symbols),
            "equals_task": self.equals_task(),
        }


def _offsets(A: int, depth: int) -> np.ndarray:
    """Index of the first string of each length in the complete tree (length 0 at 0)."""
    return np.concatenate([[0], np.cumsum([A**t for t in range(depth + 1)])]).astype(np.int64)


@torch.no_grad()
def table(model, auto: Automaton, depth: int, device=None) -> tuple[np.ndarray, tuple[int, ...] | None]:
    """The network's answer on every string of up to ``depth`` symbols, indexed by length then symbols
    (``_offsets``): its class where the task labels the string, -1 where it does not (the answer is not
    read), ``DEAD`` for strings through a dead end; and the shortest wrong string (the least of its
    length), None where every answer is right."""
    A = auto.n_symbols
    off = _offsets(A, depth)
    out = np.full(int(off[-1]), DEAD, dtype=np.int64)
    out[0] = auto.labels[auto.start]  # the empty string: nothing to answer, read as the task's label
    powers = A ** np.arange(depth, -1, -1, dtype=np.int64)
    first: tuple[int, ...] | None = None
    for lv in walk(model, auto, depth, device):
        d = lv.words.shape[1]
        value = (lv.words.astype(np.int64) * powers[-d:]).sum(axis=1)
        lab = auto.labels[lv.q]
        ans = np.where(lab >= 0, lv.logits.argmax(-1).cpu().numpy(), -1)
        out[off[d] + value] = ans
        bad = np.flatnonzero(ans != lab)
        if len(bad) and (first is None or d <= len(first)):
            w = tuple(int(a) for a in lv.words[bad[np.argmin(value[bad])]])
            first = w if first is None or (len(w), w) < (len(first), first) else first
    return out, first


def _signature(tab: np.ndarray, off: np.ndarray, A: int, word: tuple[int, ...], suffix_len: int) -> bytes:
    """The row of ``word``: the answers after it on every suffix of 0 .. ``suffix_len`` symbols."""
    v = 0
    for a in word:
        v = v * A + a
    l = len(word)
    parts = [tab[off[l + k] + v * A**k : off[l + k] + (v + 1) * A**k] for k in range(suffix_len + 1)]
    return np.concatenate(parts).tobytes()


def _depth(auto: Automaton, budget: int) -> int:
    """The deepest complete tree (every string, dead ends included) within ``budget`` nodes, at least 2
    and at most ``MAX_DEPTH``."""
    A, total, depth = auto.n_symbols, 1, 0
    while total + A ** (depth + 1) <= budget and depth < MAX_DEPTH:
        total += A ** (depth + 1)
        depth += 1
    return max(depth, 2)


def _rows(auto: Automaton, prefix_len: int) -> list[tuple[tuple[int, ...], int]]:
    """Every live prefix of up to ``prefix_len`` symbols with its task state, shortest first."""
    live = live_states(auto)
    rows: list[tuple[tuple[int, ...], int]] = [((), auto.start)]
    level = rows[:]
    for _ in range(prefix_len):
        level = [
            (w + (a,), int(auto.delta[q, a]))
            for w, q in level
            for a in range(auto.n_symbols)
            if live[auto.delta[q, a]]
        ]
        rows += level
    return rows


@torch.no_grad()
def extract(
    model,
    task: Task,
    budget: int = BUDGET,
    depth: int | None = None,
    prefix_len: int | None = None,
    device=None,
) -> Extracted:
    """The automaton ``model`` computes on ``task``'s strings up to ``depth`` symbols (default: the
    longest whose complete prefix tree fits ``budget`` nodes), with rows of up to ``prefix_len`` symbols
    (default: ``PREFIX_SHARE`` of the depth, at least 1); see the module docstring."""
    model.eval()
    auto = task_automaton(model, task)
    A = auto.n_symbols
    depth = _depth(auto, budget) if depth is None else depth
    prefix_len = max(1, round(depth * PREFIX_SHARE)) if prefix_len is None else prefix_len
    prefix_len = min(prefix_len, depth - 1)
    suffix_len = depth - prefix_len
    tab, first_wrong = table(model, auto, depth, device)
    off = _offsets(A, depth)
    cls: dict[bytes, int] = {}
    members: list[list[tuple[int, ...]]] = []
    task_states: list[dict[int, int]] = []
    of: dict[tuple[int, ...], int] = {}
    for w, q in _rows(auto, prefix_len):
        s = cls.setdefault(_signature(tab, off, A, w, suffix_len), len(cls))
        if s == len(members):
            members.append([])
            task_states.append({})
        members[s].append(w)
        task_states[s][q] = task_states[s].get(q, 0) + 1
        of[w] = s
    answers = np.array([tab[off[len(m[0])] + _value(m[0], A)] for m in members])
    delta, unresolved = _transitions(auto, tab, off, members, of, cls, prefix_len, suffix_len)
    names = state_names(auto, auto.access_words())
    classes = [auto.label_name(c) for c in range(auto.num_classes)]
    ex = Extracted(
        depth,
        prefix_len,
        delta,
        answers,
        members,
        task_states,
        auto.symbols,
        names,
        classes,
        unresolved=unresolved,
    )
    _compare(ex, auto, live_states(auto), first_wrong)
    return ex


def _transitions(
    auto, tab, off, members, of, cls, prefix_len: int, suffix_len: int
) -> tuple[np.ndarray, int]:
    """Each extracted state's next state per symbol (-1: a dead end of the task, or unresolved), and the
    number unresolved."""
    A = auto.n_symbols
    live = live_states(auto)
    delta = np.full((len(members), A), -1, dtype=np.int64)
    cut = _row_len(A, suffix_len - 1)
    short = [(sig[:cut], t) for sig, t in cls.items()]  # each class's row on the shorter suffixes
    unresolved = 0
    for s, m in enumerate(members):
        u = m[0]
        for a in range(A):
            if not live[auto.apply(u + (a,), [auto.start])[0]]:
                continue
            if len(u) < prefix_len:
                delta[s, a] = of[u + (a,)]
                continue
            sig = _signature(tab, off, A, u + (a,), suffix_len - 1)
            hits = {t for head, t in short if head == sig}
            if len(hits) == 1:
                delta[s, a] = hits.pop()
            else:
                unresolved += 1
    return delta, unresolved


def _value(word: tuple[int, ...], A: int) -> int:
    v = 0
    for a in word:
        v = v * A + a
    return v


def _row_len(A: int, suffix_len: int) -> int:
    """Entries of a row with suffixes of 0 .. ``suffix_len`` symbols, in bytes of int64."""
    return 8 * int(sum(A**k for k in range(suffix_len + 1)))


def _compare(ex: Extracted, mini: Automaton, live: np.ndarray, first_wrong: tuple[int, ...] | None) -> None:
    """Splits, merges and a shortest disagreeing word: the network's shortest wrong string in the table,
    or a shorter word of the extracted automaton (breadth first over pairs of states)."""
    ex.disagreement = first_wrong
    by_task: dict[int, list[int]] = {}
    for s, ts in enumerate(ex.task_states):
        for q in ts:
            by_task.setdefault(q, []).append(s)
        if len(ts) > 1:
            ex.merges.append({"state": ex.name(s), "task_states": [ex.task_names[q] for q in sorted(ts)]})
    for q, parts in sorted(by_task.items()):
        if len(parts) > 1:
            ex.splits.append(
                {
                    "task_state": ex.task_names[q],
                    "parts": [
                        {
                            "state": ex.name(s),
                            "prefixes": [
                                word_text(w, ex.symbols) or "(empty)"
                                for w in ex.members[s]
                                if mini.apply(w, [mini.start])[0] == q
                            ][:4],
                        }
                        for s in parts
                    ],
                }
            )
    # the shortest word where the extracted automaton's answer and the task's label differ
    start = (0, mini.start)
    seen: dict[tuple[int, int], tuple[int, ...]] = {start: ()}
    todo = [start]
    for s, q in todo:
        w = seen[(s, q)]
        lab = int(mini.labels[q])
        if ex.disagreement is not None and len(w) >= len(ex.disagreement):
            return
        if w and lab >= 0 and ex.answers[s] != lab:
            ex.disagreement = w
            return
        for a in range(mini.n_symbols):
            q2 = int(mini.delta[q, a])
            s2 = int(ex.delta[s, a])
            if s2 < 0 or not live[q2] or (s2, q2) in seen:
                continue
            seen[(s2, q2)] = w + (a,)
            todo.append((s2, q2))
