# long: every search a verified horizon runs (exhaustive walk, margin search, families) and the record that joins them
"""Verified horizons: the shortest string a model gets wrong, looked for by every search the package has.

A length claim ("holds to N") is only as good as the strings it was checked on. A random test draw puts
few strings of each kind at each length, and a witness family (:mod:`statetrack.training.horizon`)
reaches each state by one access word, so a model that has not learnt a state as one state (which word
led there matters) passes both. Four searches, each for the task's minimal automaton:

- **exhaustive** (``exhaustive_check``): EVERY string of 1 .. L_ex symbols, by a walk of the prefix tree
  that steps the model once per tree node (batched, the state carried from parent to child), so the
  cost is the number of prefixes, not strings x length. L_ex is the longest length whose prefix tree
  fits ``budget`` nodes (default ``BUDGET``: 20 for two letters, 13 for three). Strings that pass
  through a dead end of the automaton (a state from which no labelled state is reachable, a string the
  task never draws) are not walked; strings that end in an unlabelled state are walked, not scored.
- **margin-guided** (``margin_search``): from the walk's deepest level, per state of the automaton the
  ``beam`` prefixes on which the model's answer margin (the logit of the right class minus the best
  other) is lowest, each extended by every symbol, step after step up to the test lengths; a prefix
  in an unlabelled state carries its parent's margin.
- **families** with many access words (``family_search``): the witness families of every pair of
  states, and copies of them whose prefix is replaced by other words that reach the same state (every
  access word up to ``ACCESS_LEN`` symbols, and strings of the long-range draw that end in the state).
- **test draws**: the test lengths at which the draw's accuracy is below 100% (``draw_failures``: the
  shortest such length; the runner passes the run's metrics).

``verify(model, task, max_len)`` runs the first three, ``combine`` reduces them (and the draws) to one
horizon, the length of the shortest wrong string found (None: none found), and ``Verified.rests_on``
says in words what the claim rests on ("no error up to 20 in all 2,097,150 strings; none found by
search to 400; ..."). A wrong string is reported with the state of the automaton it ends in and the
state the model's representation is nearest (the centroid, over the walk, of the flattened states of
the strings it answers right, among states whose label the model gave): the pair it confuses.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum

import numpy as np
import torch
from torch import Tensor

from statetrack.errors import UserError
from statetrack.tasks.automaton import Automaton
from statetrack.tasks.base import Task
from statetrack.tasks.families import MAX_FAMILIES, Family, Witnesses, state_names, witness_pairs, word_text
from statetrack.training.horizon import _take, family_answers, measure_horizons

#: prefix-tree nodes the exhaustive walk may step: every string up to 20 symbols of two letters
#: (2,097,150 nodes) or 13 of three (2,391,483)
BUDGET = 2_400_000
#: rows stepped in one call of the model during the walk
WALK_ROWS = 1 << 14
#: bytes of state the walk's batches may hold at once
WALK_BYTES = 512 << 20
#: rows of each batch whose states enter the centres of the automaton's states
CENTRE_ROWS = 1024
#: wrong strings kept per search (the shortest)
KEEP = 20
#: prefixes kept per state of the automaton by the margin-guided search
BEAM = 32
#: rows the margin-guided search steps at each length (at most)
SEARCH_ROWS = 4096
#: access words per state in the families' copies: every word up to this length ...
ACCESS_LEN = 6
#: ... at most this many per state (the shortest first), plus as many drawn at random
ACCESS_WORDS = 8
#: families tested at most (the task's own first, then the copies with other access words)
FAMILY_CAP = 4000
#: copies of families with other access words, at most (512: one batch of the family runner)
COPIES = 512


class Source(StrEnum):
    """Which search found a wrong string."""

    EXHAUSTIVE = "exhaustive"
    SEARCH = "margin search"
    FAMILIES = "families"
    DRAWS = "test draws"


@dataclass(frozen=True)
class WrongString:
    """A string the model answers wrong: its symbols, the right and the given class, the state of the
    minimal automaton it ends in and the state the model's representation is nearest (None: unknown)."""

    word: tuple[int, ...]
    text: str
    label: str
    answer: str
    state: str
    confused_with: str | None
    source: Source

    @property
    def length(self) -> int:
        return len(self.word)

    def as_dict(self) -> dict:
        d = asdict(self)
        d["word"], d["source"], d["length"] = list(self.word), self.source.value, self.length
        return d


@dataclass
class Exhaustive:
    """Every string of 1 .. ``max_len`` symbols: per length the strings scored and the wrong ones, and
    the shortest wrong strings."""

    max_len: int
    scored: list[int]
    errors: list[int]
    wrong: list[WrongString]
    nodes: int
    seconds: float

    @property
    def shortest(self) -> int | None:
        return min((w.length for w in self.wrong), default=None)

    @property
    def strings(self) -> int:
        return int(sum(self.scored))


@dataclass
class Search:
    """A search beyond the exhaustive lengths: how far it went, how many strings it scored and the
    shortest wrong strings it found (it stops at the first length with one)."""

    source: Source
    max_len: int
    strings: int
    wrong: list[WrongString]
    seconds: float
    detail: str = ""
    known: int | None = None  # the shortest wrong string of this kind found before (the plain families)
    access: list[tuple[str, str, str]] = field(default_factory=list)  # (state, prefix, family) that fail

    @property
    def shortest(self) -> int | None:
        found = [w.length for w in self.wrong] + ([] if self.known is None else [self.known])
        return min(found, default=None)


@dataclass
class Verified:
    """The verified horizon: the length of the shortest wrong string any search found (None: none), the
    searches, and what the claim rests on."""

    horizon: int | None
    exhaustive: Exhaustive
    searches: list[Search]
    draws: int | None = None
    draw_lengths: list[int] = field(default_factory=list)
    max_len: int = 0

    @property
    def wrong(self) -> list[WrongString]:
        ws = list(self.exhaustive.wrong) + [w for s in self.searches for w in s.wrong]
        seen: set[tuple[int, ...]] = set()
        out = []
        for w in sorted(ws, key=lambda w: (w.length, w.word)):  # stable: the exhaustive walk's first
            if w.word not in seen:
                seen.add(w.word)
                out.append(w)
        return out

    @property
    def holds_to(self) -> int:
        """The longest length up to which no search found a wrong string (every string checked only up
        to the exhaustive length; beyond it, what the searches tried)."""
        return self.max_len if self.horizon is None else self.horizon - 1

    def rests_on(self) -> str:
        """What the claim rests on, in words."""
        ex = self.exhaustive
        parts = []
        first = ex.shortest
        if first is None:
            parts.append(f"no error up to {ex.max_len} in all {ex.strings:,} strings")
        else:
            parts.append(
                f"exhaustive: first wrong at {first} ({ex.errors[first - 1]:,} of {ex.scored[first - 1]:,} "
                f"strings of that length)"
            )
        for s in self.searches:
            if s.shortest is None:
                parts.append(f"none found by {s.source.value} to {s.max_len} ({s.strings:,} strings)")
            else:
                parts.append(f"{s.source.value}: first wrong at {s.shortest}")
        if self.draw_lengths:
            parts.append(
                f"test draws: none wrong to {max(self.draw_lengths):,}"
                if self.draws is None
                else f"test draws: a wrong answer at or before {self.draws}"
            )
        return "; ".join(parts)

    def as_dict(self) -> dict:
        """A JSON-ready summary (what a run's record keeps)."""
        ex = self.exhaustive
        return {
            "horizon": self.horizon,
            "holds_to": self.holds_to,
            "max_len": self.max_len,
            "rests_on": self.rests_on(),
            "exhaustive": {
                "max_len": ex.max_len,
                "strings": ex.strings,
                "nodes": ex.nodes,
                "seconds": round(ex.seconds, 3),
                "shortest": ex.shortest,
                "errors": ex.errors,
                "scored": ex.scored,
            },
            "searches": [
                {
                    "source": s.source.value,
                    "max_len": s.max_len,
                    "strings": s.strings,
                    "shortest": s.shortest,
                    "seconds": round(s.seconds, 3),
                    "detail": s.detail,
                    "failing_prefixes": [{"state": a, "prefix": u, "family": f} for a, u, f in s.access],
                }
                for s in self.searches
            ],
            "draws": self.draws,
            "wrong": [w.as_dict() for w in self.wrong[:KEEP]],
        }


# ----------------------------------------------------------------------------------------------------
# the automaton and the model's state as rows


def task_automaton(model, task: Task) -> Automaton:
    """The minimal automaton of ``task``, checked against the model's vocabulary and classes."""
    auto = task.automaton()
    if auto is None:
        raise UserError(
            f"{task.name} has no finite automaton here, so its strings cannot be searched "
            "(allowed: the regular tasks of 'statetrack tasks')"
        )
    if getattr(model, "num_classes", task.num_classes) != task.num_classes:
        raise UserError(f"the model predicts {model.num_classes} classes; {task.name} has {task.num_classes}")
    return auto.minimized()[0]


def live_states(auto: Automaton) -> np.ndarray:
    """Per state: whether some labelled state can be reached from it (a dead end is not live)."""
    live = auto.labels >= 0
    while True:
        new = live | live[auto.delta].any(axis=1)
        if (new == live).all():
            return live
        live = new


def prefix_counts(auto: Automaton, max_len: int, stop: float = float("inf")) -> list[int]:
    """Per length 1 .. max_len, the number of strings the walk steps (those that stay in live states);
    it ends early once the running total passes ``stop``."""
    live = live_states(auto)
    row = np.zeros(auto.n_states)
    row[auto.start] = 1.0
    out: list[int] = []
    total = 0
    for _ in range(max_len):
        nxt = np.zeros(auto.n_states)
        for a in range(auto.n_symbols):
            np.add.at(nxt, auto.delta[:, a], row)
        nxt[~live] = 0
        row = nxt
        out.append(int(row.sum()))
        total += out[-1]
        if total > stop or out[-1] == 0:
            break
    return out


def exhaustive_length(auto: Automaton, budget: int = BUDGET, cap: int = 512) -> int:
    """The longest L (at most ``cap``) whose prefix tree, every live string of 1 .. L symbols, has at most
    ``budget`` nodes."""
    total, length = 0, 0
    for n in prefix_counts(auto, cap, stop=budget):
        if n == 0 or total + n > budget:
            break
        total += n
        length += 1
    return length


def _flat(states, rows: np.ndarray) -> Tensor | None:
    """The floating-point tensors of a model's state at ``rows`` as one (rows, F) float64 matrix (complex
    parts as two reals; None where the state holds none, e.g. a token history)."""
    parts: list[Tensor] = []

    def add(s):
        if s is None:
            return
        if isinstance(s, Tensor):
            if s.is_complex():
                s = torch.view_as_real(s)
            if s.is_floating_point():
                s = s.index_select(0, torch.as_tensor(rows, device=s.device))
                parts.append(s.reshape(s.shape[0], -1).double())
            return
        for x in s:
            add(x)

    add(states)
    return torch.cat(parts, dim=1) if parts else None


def _row_feats(states, rows: np.ndarray) -> Callable[[int], Tensor | None]:
    """A function of r: the flattened state of row ``rows[r]`` (computed when asked)."""

    def one(r: int) -> Tensor | None:
        f = _flat(states, rows[r : r + 1])
        return None if f is None else f[0]

    return one


def _state_bytes(states) -> int:
    """Bytes of state per row."""
    if states is None:
        return 0
    if isinstance(states, Tensor):
        return states[0].numel() * states.element_size() if states.shape[0] else 0
    return sum(_state_bytes(s) for s in states)


def _step(model, tokens: np.ndarray, states, device) -> tuple[Tensor, object]:
    """One symbol per row: the logits after it and the new state (a forward call of one symbol, which
    every model has)."""
    logits, states = model(torch.as_tensor(tokens, device=device)[:, None], states)
    return logits[:, -1], states


def _margins(logits: Tensor, labels: np.ndarray) -> np.ndarray:
    """logit of the label minus the best other (inf where the label is -1)."""
    lg = logits.double().cpu().numpy()
    out = np.full(len(labels), np.inf)
    ok = labels >= 0
    if ok.any():
        rows = np.flatnonzero(ok)
        right = lg[rows, labels[ok]]
        other = lg[rows].copy()
        other[np.arange(len(rows)), labels[ok]] = -np.inf
        out[ok] = right - other.max(axis=1)
    return out


class _Centres:
    """Running sums of the flattened state per automaton state, over the strings answered right: where
    the model puts each state; a wrong string's state is matched to the nearest centre. A state whose size
    grows with the length (a Transformer's cache) has centres per size: a state is compared with the
    centres of states of its own size."""

    def __init__(self, n_states: int):
        self.n = n_states
        self.sums: dict[int, Tensor] = {}
        self.counts: dict[int, np.ndarray] = {}

    def add(self, states, q: np.ndarray, right: np.ndarray, most: int = CENTRE_ROWS) -> None:
        """Add the rows ``right`` of ``states`` (at most ``most`` of them, the first) to their states' sums."""
        rows = np.flatnonzero(right)[:most]
        if not len(rows):
            return
        feats = _flat(states, rows)
        if feats is None:
            return
        f = feats.shape[1]
        if f not in self.sums:
            self.sums[f] = torch.zeros(self.n, f, dtype=torch.float64)
            self.counts[f] = np.zeros(self.n)
        self.sums[f].index_add_(0, torch.as_tensor(q[rows]), feats.cpu())
        np.add.at(self.counts[f], q[rows], 1)

    def _centres(self, f: int) -> tuple[Tensor, np.ndarray] | None:
        """The centres of states of ``f`` features (zeros where none) and which states have one."""
        if f not in self.sums:
            return None
        has = self.counts[f] > 0
        centres = torch.zeros_like(self.sums[f])
        idx = torch.as_tensor(has)
        centres[idx] = self.sums[f][idx] / torch.as_tensor(self.counts[f][has])[:, None]
        return centres, has

    def ratio(self, states, q: np.ndarray) -> np.ndarray:
        """Per row, the distance of its state from the centre of its automaton state over the distance to
        the nearest other centre (above 1: nearer another state's strings than its own; 0 where unknown)."""
        feats = _flat(states, np.arange(len(q)))
        got = None if feats is None else self._centres(feats.shape[1])
        if feats is None or got is None or got[1].sum() < 2:
            return np.zeros(len(q))
        centres, has = got
        d = torch.cdist(feats.cpu(), centres).numpy()
        d[:, ~has] = np.inf
        own = d[np.arange(len(q)), q]
        d[np.arange(len(q)), q] = np.inf
        other = d.min(axis=1)
        return np.where(np.isfinite(own) & (other > 0), own / np.maximum(other, 1e-30), 0.0)

    def nearest(self, feat: Tensor | None, allowed: np.ndarray) -> int | None:
        """The state with a centre nearest ``feat`` among the ``allowed`` ones (None: no centre)."""
        got = None if feat is None else self._centres(feat.shape[0])
        if feat is None or got is None:
            return None
        centres, has = got
        ok = allowed & has
        if not ok.any():
            return None
        d = ((centres[torch.as_tensor(np.flatnonzero(ok))] - feat.cpu()[None]) ** 2).sum(1)
        return int(np.flatnonzero(ok)[int(d.argmin())])


class _Wrong:
    """The shortest wrong strings seen (a bounded heap by length, then symbols)."""

    def __init__(self, keep: int = KEEP):
        self.keep = keep
        self.heap: list[
            tuple[tuple[int, tuple[int, ...]], tuple[int, ...], int, int, int, Tensor | None]
        ] = []

    def add(self, words: np.ndarray, q: np.ndarray, labels: np.ndarray, answers: np.ndarray, feats) -> None:
        """Offer rows (words of one length); only the ``keep`` least of them can enter."""
        if not len(q):
            return
        if len(self.heap) >= self.keep and words.shape[1] > len(self.heap[0][1]):
            return
        order = (
            np.lexsort(words.T[::-1])[: self.keep] if words.shape[1] else np.arange(min(len(q), self.keep))
        )
        for r in order.tolist():
            word = tuple(int(s) for s in words[r])
            if any(it[1] == word for it in self.heap):
                continue
            key = (-len(word), tuple(-s for s in word))
            item = (
                key,
                word,
                int(q[r]),
                int(labels[r]),
                int(answers[r]),
                None if feats is None else feats(r),
            )
            if len(self.heap) < self.keep:
                heapq.heappush(self.heap, item)
            elif key > self.heap[0][0]:  # keyed by (-length, -symbols): heap[0] is the longest kept
                heapq.heapreplace(self.heap, item)

    def strings(self, auto: Automaton, names: Sequence[str], centres: _Centres, source: Source):
        out = []
        for _, word, q, lab, ans, feat in sorted(self.heap, key=lambda it: (len(it[1]), it[1])):
            near = centres.nearest(feat, auto.labels == ans)
            out.append(
                WrongString(
                    word,
                    word_text(word, auto.symbols),
                    auto.label_name(lab),
                    auto.label_name(ans),
                    names[q],
                    None if near is None else names[near],
                    source,
                )
            )
        return out


# ----------------------------------------------------------------------------------------------------
# the exhaustive walk


@dataclass
class Level:
    """One batch of prefix-tree nodes at one depth: their symbols (rows, depth), automaton states, the
    model's state after them, its logits and its flattened state."""

    words: np.ndarray
    q: np.ndarray
    states: object
    logits: Tensor


def walk(model, auto: Automaton, max_len: int, device=None, rows: int = WALK_ROWS) -> Iterator[Level]:
    """Every live string of 1 .. ``max_len`` symbols, in batches of at most ``rows`` nodes (depth first
    over batches, breadth first inside one): the model is stepped once per node, from its parent's state."""
    device = torch.device(device or next(model.parameters()).device)
    live = live_states(auto)
    tokens = auto.tokens
    A = auto.n_symbols
    stack: list[tuple[object, np.ndarray, np.ndarray]] = [
        (model.init_state(1), np.zeros((1, 0), dtype=np.int16), np.array([auto.start]))
    ]
    cap = rows
    while stack:
        states, words, q = stack.pop()
        if words.shape[1] >= max_len:
            continue
        parent = np.repeat(np.arange(len(q)), A)
        sym = np.tile(np.arange(A), len(q))
        child = auto.delta[q[parent], sym]
        keep = live[child]
        parent, sym, child = parent[keep], sym[keep], child[keep]
        if not len(child):
            continue
        st = _take(states, torch.as_tensor(parent, device=device))
        logits, st = _step(model, tokens[sym], st, device)
        cw = np.concatenate([words[parent], sym[:, None].astype(np.int16)], axis=1)
        yield Level(cw, child, st, logits)
        if cw.shape[1] < max_len:
            if cap == rows:  # bound the rows of a batch by the state's size
                per = max(1, _state_bytes(st))
                cap = max(1, min(rows, WALK_BYTES // (per * max(1, 2 * (max_len - cw.shape[1]) + 1))))
            for start in reversed(range(0, len(child), cap)):
                sl = slice(start, start + cap)
                stack.append((_rows(st, sl), cw[sl], child[sl]))


@torch.no_grad()
def exhaustive_check(
    model, task: Task, max_len: int | None = None, budget: int = BUDGET, device=None, keep: int = KEEP
) -> tuple[Exhaustive, _Centres, dict]:
    """Score EVERY string of 1 .. L symbols (L = ``max_len``, or the longest the ``budget`` of prefix-tree
    nodes allows). Returns the result, the model's state centres per automaton state and, per state, the
    deepest level's ``beam`` rows with the lowest margins (the seeds of ``margin_search``)."""
    model.eval()
    auto = task_automaton(model, task)
    L = exhaustive_length(auto, budget) if max_len is None else max_len
    names = state_names(auto, auto.access_words())
    scored = np.zeros(L, dtype=np.int64)
    errors = np.zeros(L, dtype=np.int64)
    centres = _Centres(auto.n_states)
    wrong = _Wrong(keep)
    seeds = _Seeds(auto.n_states, BEAM)
    nodes = 0
    t0 = time.perf_counter()
    for lv in walk(model, auto, L, device):
        d = lv.words.shape[1]
        nodes += len(lv.q)
        labels = auto.labels[lv.q]
        answers = lv.logits.argmax(-1).cpu().numpy()
        ok = labels >= 0
        bad = ok & (answers != labels)
        scored[d - 1] += int(ok.sum())
        errors[d - 1] += int(bad.sum())
        centres.add(lv.states, lv.q, ok & ~bad)
        if bad.any():
            i = np.flatnonzero(bad)
            wrong.add(lv.words[i], lv.q[i], labels[i], answers[i], _row_feats(lv.states, i))
        if d == L:
            seeds.add(lv, _margins(lv.logits, labels))
    res = Exhaustive(
        L,
        scored.tolist(),
        errors.tolist(),
        wrong.strings(auto, names, centres, Source.EXHAUSTIVE),
        nodes,
        time.perf_counter() - t0,
    )
    return res, centres, seeds.rows()


class _Seeds:
    """Per automaton state, the ``beam`` rows with the lowest margin seen (their words, states, margins)."""

    def __init__(self, n_states: int, beam: int):
        self.n, self.beam = n_states, beam
        self.parts: list[tuple[np.ndarray, np.ndarray, object, np.ndarray]] = []

    def add(self, lv: Level, margins: np.ndarray) -> None:
        keep = _select(lv.q, margins, self.beam)
        idx = torch.as_tensor(keep, device=lv.logits.device)
        self.parts.append((lv.words[keep], lv.q[keep], _take(lv.states, idx), margins[keep]))
        if len(self.parts) > 8:
            self.parts = [self._merge()]

    def _merge(self):
        words = np.concatenate([p[0] for p in self.parts])
        q = np.concatenate([p[1] for p in self.parts])
        m = np.concatenate([p[3] for p in self.parts])
        states = _cat([p[2] for p in self.parts])
        keep = _select(q, m, self.beam)
        return words[keep], q[keep], _take(states, torch.as_tensor(keep)), m[keep]

    def rows(self) -> dict:
        if not self.parts:
            return {}
        words, q, states, m = self._merge()
        return {"words": words, "q": q, "states": states, "margins": m}


def _rows(states, sl: slice):
    """Rows ``sl`` of a model's state (views, no copy)."""
    if states is None:
        return None
    if isinstance(states, Tensor):
        return states[sl]
    return type(states)(_rows(s, sl) for s in states)


def _cat(parts: list):
    """Concatenate a list of model states along the batch."""
    first = parts[0]
    if first is None:
        return None
    if isinstance(first, Tensor):
        return torch.cat(parts, dim=0)
    return type(first)(_cat([p[i] for p in parts]) for i in range(len(first)))


def _select(q: np.ndarray, scores: np.ndarray | list[np.ndarray], beam: int, rng=None) -> np.ndarray:
    """Per state, the indices of the ``beam`` lowest scores (several score arrays: taken in turn from
    each one's ranking); with ``rng``, a quarter of each state's beam drawn at random from the rest."""
    ranks = [scores] if isinstance(scores, np.ndarray) else scores
    out = []
    for s in np.unique(q):
        idx = np.flatnonzero(q == s)
        if len(idx) <= beam:
            out.append(idx)
            continue
        k = max(1, beam // 4) if rng is not None else 0
        orders = [idx[np.argsort(r[idx], kind="stable")] for r in ranks]
        chosen: dict[int, None] = {}
        pos = 0
        while len(chosen) < beam - k:
            for o in orders:
                if len(chosen) < beam - k:
                    chosen[int(o[pos])] = None
            pos += 1
        if k:
            rest = np.setdiff1d(idx, np.fromiter(chosen, dtype=np.int64))
            chosen.update(dict.fromkeys(rng.choice(rest, size=min(k, len(rest)), replace=False).tolist()))
        out.append(np.fromiter(chosen, dtype=np.int64))
    return np.sort(np.concatenate(out)) if out else np.zeros(0, dtype=np.int64)


# ----------------------------------------------------------------------------------------------------
# the margin-guided search


def _extend(model, auto: Automaton, live, words, q, states, m, rows: int, rng, device):
    """Every kept prefix extended by every live symbol (a random ``rows`` of them where there are more):
    (words, automaton states, model states, margins, labels, answers), None where nothing is left; an
    unlabelled prefix carries its parent's margin."""
    A = auto.n_symbols
    parent = np.repeat(np.arange(len(q)), A)
    sym = np.tile(np.arange(A), len(q))
    child = auto.delta[q[parent], sym]
    ok = live[child]
    parent, sym, child = parent[ok], sym[ok], child[ok]
    if len(parent) > rows:  # a large alphabet: a random share of the children
        pick = np.sort(rng.choice(len(parent), size=rows, replace=False))
        parent, sym, child = parent[pick], sym[pick], child[pick]
    if not len(child):
        return None
    st = _take(states, torch.as_tensor(parent, device=device))
    logits, st = _step(model, auto.tokens[sym], st, device)
    labels = auto.labels[child]
    answers = logits.argmax(-1).cpu().numpy()
    cm = np.where(labels >= 0, _margins(logits, labels), m[parent])
    words = np.concatenate([words[parent], sym[:, None].astype(np.int16)], axis=1)
    return words, child, st, cm, labels, answers


@torch.no_grad()
def margin_search(
    model,
    task: Task,
    max_len: int,
    seeds: dict,
    centres: _Centres | None = None,
    beam: int = BEAM,
    rows: int = SEARCH_ROWS,
    seed: int = 0,
    device=None,
    keep: int = KEEP,
) -> Search:
    """From the seeds (``exhaustive_check``'s deepest rows), extend every kept prefix by every symbol,
    keep per automaton state the ``beam`` with the lowest margins and, in turn, those whose state lies
    farthest from its automaton state's centre relative to the nearest other centre (a quarter of the
    beam at random), and go on to ``max_len``; stop at the first length with a wrong string."""
    model.eval()
    auto = task_automaton(model, task)
    names = state_names(auto, auto.access_words())
    live = live_states(auto)
    rng = np.random.default_rng(seed)
    device = torch.device(device or next(model.parameters()).device)
    centres = centres or _Centres(auto.n_states)
    t0 = time.perf_counter()
    wrong = _Wrong(keep)
    if not seeds:
        return Search(Source.SEARCH, 0, 0, [], 0.0, "no seeds")
    words, q, states, m = seeds["words"], seeds["q"], seeds["states"], seeds["margins"]
    A = auto.n_symbols
    per_state = max(1, min(beam, rows // max(1, A * auto.n_states)))
    strings = 0
    depth = words.shape[1]
    while depth < max_len:
        step = _extend(model, auto, live, words, q, states, m, rows, rng, device)
        if step is None:
            break
        words, child, st, cm, labels, answers = step
        depth += 1
        scoredm = labels >= 0
        strings += int(scoredm.sum())
        bad = scoredm & (answers != labels)
        if bad.any():
            i = np.flatnonzero(bad)
            wrong.add(words[i], child[i], labels[i], answers[i], _row_feats(st, i))
            break
        keep_idx = _select(child, [cm, -centres.ratio(st, child)], per_state, rng)
        idx = torch.as_tensor(keep_idx, device=device)
        words, q, states, m = words[keep_idx], child[keep_idx], _take(st, idx), cm[keep_idx]
    return Search(
        Source.SEARCH,
        depth,
        strings,
        wrong.strings(auto, names, centres, Source.SEARCH),
        time.perf_counter() - t0,
        f"{per_state} prefixes per state, from length {seeds['words'].shape[1]}",
    )


# ----------------------------------------------------------------------------------------------------
# witness families with many access words


def access_words(
    auto: Automaton,
    max_len: int = ACCESS_LEN,
    per_state: int = ACCESS_WORDS,
    drawn: int = ACCESS_WORDS,
    draw_len: int = 40,
    seed: int = 0,
) -> dict[int, list[tuple[int, ...]]]:
    """Per state, words that reach it: every word of up to ``max_len`` symbols (the ``per_state``
    shortest, in symbol order) and ``drawn`` strings of up to ``draw_len`` symbols drawn uniformly among
    those of their length that end in it (the long-range draw's sampler)."""
    live = live_states(auto)
    out: dict[int, list[tuple[int, ...]]] = {q: [] for q in range(auto.n_states)}
    level: list[tuple[tuple[int, ...], int]] = [((), auto.start)]
    for _ in range(max_len):
        nxt = []
        for w, s in level:
            for a in range(auto.n_symbols):
                d = int(auto.delta[s, a])
                if live[d]:
                    nxt.append((w + (a,), d))
                    if len(out[d]) < per_state:
                        out[d].append(w + (a,))
        level = nxt
        if len(level) > 1 << 16:
            break
    rng = np.random.default_rng(seed)
    for q in range(auto.n_states):
        if not live[q]:
            continue
        for _ in range(drawn):
            length = int(rng.integers(max_len + 1, draw_len + 1))
            if not auto.reachable(length)[q]:
                continue
            ends = np.array([q])
            word = auto.draw_ending_in(ends, length, rng)
            out[q].append(tuple(int(s) for s in np.asarray(word).reshape(-1)))
    return out


def _families_with_access(
    auto: Automaton, cap: int = FAMILY_CAP, plain: bool = True, w: Witnesses | None = None
) -> list[Family]:
    """The witness families (``plain``), then copies of each pair's first family with other access words
    for either state (round robin over the pairs), at most ``cap``."""
    w = w or witness_pairs(auto)
    fams = list(w.families)[:cap] if plain else []
    cap = len(fams) + COPIES
    words = access_words(auto)
    extra: list[list[Family]] = []
    for p in w.pairs:
        if not p.families:
            continue
        f = p.families[0]
        a, b = p.states
        tail_a, tail_b = f.prefixes[0][len(p.access[0]) :], f.prefixes[1][len(p.access[1]) :]
        mine = []
        for alt in words.get(a, []):
            if alt != p.access[0]:
                mine.append(Family((alt + tail_a, f.prefixes[1]), f.pump, f.end, f.labels, f.pair, f.loop))
        for alt in words.get(b, []):
            if alt != p.access[1]:
                mine.append(Family((f.prefixes[0], alt + tail_b), f.pump, f.end, f.labels, f.pair, f.loop))
        extra.append(mine)
    i = 0
    while len(fams) < cap and any(i < len(e) for e in extra):
        for e in extra:
            if i < len(e) and len(fams) < cap:
                fams.append(e[i])
        i += 1
    return fams


@torch.no_grad()
def family_search(
    model,
    task: Task,
    max_len: int,
    centres: _Centres | None = None,
    cap: int = FAMILY_CAP,
    device=None,
    keep: int = KEEP,
    plain: bool = True,
    witnesses: Witnesses | None = None,
    also: Sequence[int] = (),
) -> Search:
    """Every witness family (``plain``: else only the copies) and its copies with other access words
    (``_families_with_access``), each run up to ``max_len``: the shortest wrong strings. ``witnesses``:
    the task's ``witness_pairs`` where the caller has them already; ``also``: indices of plain families
    to run even without ``plain`` (the one that broke first, so that its string is named)."""
    model.eval()
    auto = task_automaton(model, task)
    names = state_names(auto, auto.access_words())
    centres = centres or _Centres(auto.n_states)
    t0 = time.perf_counter()
    w = witnesses or witness_pairs(auto)
    fams = _families_with_access(auto, cap, plain, w)
    if not plain:
        fams = [w.families[i] for i in also if 0 <= i < len(w.families)] + fams
    answers = family_answers(model, fams, max_len, auto.tokens, device)
    wrong = _Wrong(keep)
    strings = 0
    access: list[tuple[str, str, str]] = []
    for fam, ans in zip(fams, answers, strict=True):
        for i in (0, 1):
            for n in range(ans.shape[1]):
                if ans[i, n] < 0:
                    continue
                strings += 1
                if ans[i, n] != fam.labels[i]:
                    u = fam.prefixes[i]
                    if len(access) < keep:
                        access.append(
                            (
                                names[int(auto.apply(u, [auto.start])[0])],
                                word_text(u, auto.symbols),
                                fam.text(auto.symbols, i),
                            )
                        )
                    word = np.asarray(fam.word(i, n))[None]
                    q = auto.apply(fam.word(i, n), [auto.start])
                    wrong.add(
                        word, np.asarray(q).reshape(-1), np.array([fam.labels[i]]), ans[i, n : n + 1], _none
                    )
                    break
    return Search(
        Source.FAMILIES,
        max_len,
        strings,
        wrong.strings(auto, names, centres, Source.FAMILIES),
        time.perf_counter() - t0,
        f"{len(fams)} families, access words of up to {ACCESS_LEN} symbols and drawn ones",
        access=access,
    )


def _none(_r: int) -> None:
    return None


# ----------------------------------------------------------------------------------------------------
# one horizon


def draw_failures(metrics: Sequence) -> tuple[int | None, list[int]]:
    """The shortest test length whose draw has a wrong answer (None: none), and the lengths scored, from
    a run's ``LengthMetrics`` (or dicts with their fields): a final answer wrong (accuracy below 1) or
    one at an earlier position (sequence accuracy below 1: a wrong string at or before that length)."""

    def get(m, k):
        return m.get(k) if isinstance(m, dict) else getattr(m, k, None)

    lengths = sorted({int(get(m, "length")) for m in metrics if get(m, "accuracy") is not None})
    bad = [
        int(get(m, "length"))
        for m in metrics
        if get(m, "accuracy") is not None
        and (get(m, "accuracy") < 1.0 or (get(m, "sequence_accuracy") or 1.0) < 1.0)
    ]
    return (min(bad) if bad else None), lengths


def combine(
    ex: Exhaustive, searches: list[Search], max_len: int, draws: tuple[int | None, list[int]] | None = None
) -> Verified:
    """The minimum over every search (and the test draws)."""
    found = [x for x in [ex.shortest, *(s.shortest for s in searches)] if x is not None]
    d, lengths = draws if draws is not None else (None, [])
    if d is not None:
        found.append(d)
    return Verified(min(found) if found else None, ex, searches, d, lengths, max_len)


def verify(
    model,
    task: Task,
    max_len: int,
    budget: int = BUDGET,
    beam: int = BEAM,
    family_cap: int = FAMILY_CAP,
    draws: tuple[int | None, list[int]] | None = None,
    plain_families: int | None | bool = False,
    device=None,
    on_stage: Callable[[str], None] | None = None,
    broke_first: int | None = None,
    witnesses: Witnesses | None = None,
) -> Verified:
    """The verified horizon of ``model`` on ``task`` up to ``max_len`` (see the module docstring).
    ``plain_families``: the shortest wrong family string where the task's own witness families were run
    already (``horizon.measure_horizons``; None: none wrong); then only their copies with other access
    words are run here, and the plain family ``broke_first`` (its index in ``witness_pairs``' families) to
    name its wrong string. ``draws``: ``draw_failures`` of the run's test draws."""
    say = on_stage or (lambda _s: None)
    say("exhaustive")
    ex, centres, seeds = exhaustive_check(model, task, budget=budget, device=device)
    searches = []
    if max_len > ex.max_len:
        say("margin search")
        searches.append(margin_search(model, task, max_len, seeds, centres, beam=beam, device=device))
        w = witnesses or witness_pairs(task_automaton(model, task))
        if w.families:
            say("families")
            plain = plain_families is False
            fs = family_search(
                model,
                task,
                max_len,
                centres,
                family_cap,
                device=device,
                plain=plain,
                witnesses=w,
                also=() if broke_first is None else (broke_first,),
            )
            if not plain:
                fs.known = plain_families if isinstance(plain_families, int) else None
            searches.append(fs)
    return combine(ex, searches, max_len, draws)


def horizons_record(
    model,
    task: Task,
    max_len: int,
    draws: tuple[int | None, list[int]] | None = None,
    budget: int = BUDGET,
    max_families: int = MAX_FAMILIES,
    keep_families: bool = False,
    device=None,
) -> dict:
    """What a run records of its horizons up to ``max_len``: the witness families of every pair of states
    (``horizon.measure_horizons``: "pairs", "family_horizon" and the counts) and the verified horizon
    (``verify``): "horizon" (the shortest wrong string any search found, None: none), "holds_to",
    "rests_on", "shortest_wrong" and "verified" (each search's result)."""
    w = witness_pairs(task_automaton(model, task), max_families)  # once, for both searches
    h = measure_horizons(model, task, max_len, max_families, device=device, keep_families=True, witnesses=w)
    rows = h["families"] if keep_families else h.pop("families")
    broke = [r for r in rows if r["horizon"] is not None]
    first_family = min(broke, key=lambda r: r["horizon"])["index"] if broke else None  # an index into w
    v = verify(
        model,
        task,
        max_len,
        budget=budget,
        draws=draws,
        plain_families=h["horizon"],
        device=device,
        broke_first=first_family,
        witnesses=w,
    )
    first = v.wrong[0] if v.wrong else None
    return {
        **h,
        "family_horizon": h["horizon"],
        "horizon": v.horizon,
        "holds_to": v.holds_to,
        "rests_on": v.rests_on(),
        "verified": v.as_dict(),
        "shortest_wrong": None if first is None else first.as_dict(),
    }
