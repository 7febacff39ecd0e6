"""The finite automaton behind a regular task, and exact counts of its strings.

A task whose label is computed by a finite automaton (``dfa:``, ``tomita:``, ``parity``, ``evenpairs``,
``cycle``, ``group``, ``modcount``, ``modarith``) returns one from ``Task.automaton()``. It has

- ``delta`` (states x symbols): the next state;
- ``start``: the state before the first symbol;
- ``labels`` (states): the class of a string of the task that ends in the state, or -1 where no string
  of the task ends (e.g. modular arithmetic after an operator, or after a digit where an operator
  belongs); a state from which no labelled state can be reached is a dead end;
- ``outputs`` (states): the target the task gives a position whose prefix ends in the state (equal to
  ``labels`` where that is >= 0; a task such as modular arithmetic also labels unscored positions);
- ``tokens`` (symbols): the token id of each symbol (the symbols a task's draws use, e.g. a group's
  subset);
- optionally ``symbols`` (how each symbol prints), ``label_names`` (how each class prints: 'rejected' /
  'accepted', a group element in cycle notation) and ``state_names`` (a DFA file's state names).

Every task built on an automaton draws its symbols uniformly among those allowed at each position,
and the number allowed depends only on the position, so each string of a length is equally likely: the
final label of its training draw has exactly ``label_distribution(L)``. The tests check each task's
automaton against its own draw.

Counts are kept in log space (float64 ``logaddexp``: exact to rounding, no overflow at any length):
``forward_log_counts(t)[q]`` is the log of the number of strings of t symbols that lead from the
start to q (-inf: none). ``reverse_rows`` gives the rows of such a recursion from the last to the
first with memory O(sqrt(n)) rows (checkpoints), which the long-range draw
(:mod:`statetrack.tasks.long_range`) uses to sample strings backwards.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np
from numpy.typing import ArrayLike

NEG = -np.inf


class Automaton:
    """A labelled deterministic automaton (see the module docstring)."""

    def __init__(
        self,
        delta: ArrayLike,
        start: int,
        labels: ArrayLike,
        num_classes: int,
        tokens: ArrayLike | None = None,
        outputs: ArrayLike | None = None,
        symbols: Sequence[str] | None = None,
        label_names: Sequence[str] | None = None,
        state_names: Sequence[str] | None = None,
    ):
        self.delta = np.asarray(delta, dtype=np.int64)
        self.start = int(start)
        self.labels = np.asarray(labels, dtype=np.int64)
        self.num_classes = int(num_classes)
        n_states, n_symbols = self.delta.shape
        self.tokens = (
            np.arange(n_symbols, dtype=np.int64) if tokens is None else np.asarray(tokens, dtype=np.int64)
        )
        self.outputs = np.maximum(self.labels, 0) if outputs is None else np.asarray(outputs, dtype=np.int64)
        self.symbols = tuple(symbols) if symbols is not None else tuple(str(t) for t in self.tokens)
        self.label_names = label_names
        self.state_names = state_names
        if not (len(self.labels) == len(self.outputs) == n_states and len(self.tokens) == n_symbols):
            raise ValueError("automaton arrays disagree in size")
        if self.delta.min() < 0 or self.delta.max() >= n_states or not 0 <= self.start < n_states:
            raise ValueError("automaton transition to an unknown state")
        # predecessors of each state, padded with the index n_states (a -inf slot in the counts)
        pairs: list[list[tuple[int, int]]] = [[] for _ in range(n_states)]
        for q in range(n_states):
            for a in range(n_symbols):
                pairs[int(self.delta[q, a])].append((q, a))
        width = max(1, max(len(p) for p in pairs))
        self.pred_state = np.full((n_states, width), n_states, dtype=np.int64)
        self.pred_symbol = np.zeros((n_states, width), dtype=np.int64)
        for q, p in enumerate(pairs):
            if p:
                self.pred_state[q, : len(p)], self.pred_symbol[q, : len(p)] = zip(*p, strict=True)
        self._forward: dict[int, np.ndarray] = {}
        self._token_index: np.ndarray | None = None

    def label_name(self, c: int) -> str:
        """The name of class ``c`` ('accepted', a group element), or its id where the task names none."""
        return str(self.label_names[int(c)]) if self.label_names is not None else str(int(c))

    @property
    def n_states(self) -> int:
        return self.delta.shape[0]

    @property
    def n_symbols(self) -> int:
        return self.delta.shape[1]

    # -- running ---------------------------------------------------------------------------------
    def symbol_index(self, tokens: np.ndarray) -> np.ndarray:
        """Token ids -> symbol indices (-1 for a token the automaton has no symbol for)."""
        if self._token_index is None:
            index = np.full(int(self.tokens.max()) + 1, -1, dtype=np.int64)
            index[self.tokens] = np.arange(self.n_symbols)
            self._token_index = index
        tokens = np.asarray(tokens, dtype=np.int64)
        inside = (tokens >= 0) & (tokens < len(self._token_index))
        return np.where(inside, self._token_index[np.clip(tokens, 0, len(self._token_index) - 1)], -1)

    def run(self, tokens: np.ndarray, state: np.ndarray | None = None) -> np.ndarray:
        """States after each token of ``tokens`` (B, T), from ``state`` (B,) or the start."""
        sym = self.symbol_index(tokens)
        if (sym < 0).any():
            raise ValueError("a token outside the automaton's symbols")
        q = np.full(sym.shape[0], self.start, dtype=np.int64) if state is None else np.asarray(state)
        out = np.empty(sym.shape, dtype=np.int64)
        for t in range(sym.shape[1]):
            q = self.delta[q, sym[:, t]]
            out[:, t] = q
        return out

    def apply(self, word: Sequence[int], states: ArrayLike | None = None) -> np.ndarray:
        """The state each state reaches on ``word`` (symbol indices): an array over the states."""
        q = np.arange(self.n_states) if states is None else np.asarray(states, dtype=np.int64)
        for a in word:
            q = self.delta[q, a]
        return q

    def access_words(self) -> dict[int, tuple[int, ...]]:
        """A shortest string reaching each reachable state, the first in symbol order (breadth-first, the
        symbols in order: the first string found for a state is the least of its shortest strings)."""
        access: dict[int, tuple[int, ...]] = {self.start: ()}
        todo = [self.start]
        for q in todo:  # grows while it is read: a queue
            for a in range(self.n_symbols):
                r = int(self.delta[q, a])
                if r not in access:
                    access[r] = access[q] + (a,)
                    todo.append(r)
        return access

    def minimized(self) -> tuple[Automaton, np.ndarray]:
        """The minimal automaton of the reachable states, and the state of it that each state maps to (-1:
        unreachable). Two states are merged when every suffix gives them the same label (-1 included):
        Moore's refinement, from the partition by label, until the number of classes stops growing
        (at most n_states rounds of O(states x symbols)). Its states are numbered in the order in which
        a breadth-first search from the start first reaches them; it keeps the symbols, tokens and label
        names, and names a state by its members' names where the automaton names them."""
        reach = np.zeros(self.n_states, dtype=bool)
        reach[list(self.access_words())] = True
        idx = np.flatnonzero(reach)
        cls = np.unique(self.labels[idx], return_inverse=True)[1]
        local = np.full(self.n_states, -1, dtype=np.int64)
        local[idx] = np.arange(len(idx))
        succ = local[
            self.delta[idx]
        ]  # (reachable, symbols): every successor of a reachable state is reachable
        while True:
            sig = np.column_stack([cls, cls[succ]])
            new = np.unique(sig, axis=0, return_inverse=True)[1].reshape(-1)
            if new.max() == cls.max():
                break
            cls = new
        k = int(cls.max()) + 1
        delta = np.zeros((k, self.n_symbols), dtype=np.int64)
        delta[cls] = cls[succ]
        labels = np.zeros(k, dtype=np.int64)
        labels[cls] = self.labels[idx]
        # number the classes in breadth-first order from the start
        order = {int(cls[local[self.start]]): 0}
        todo = [int(cls[local[self.start]])]
        for c in todo:
            for a in range(self.n_symbols):
                d = int(delta[c, a])
                if d not in order:
                    order[d] = len(order)
                    todo.append(d)
        perm = np.empty(k, dtype=np.int64)
        for c, i in order.items():
            perm[c] = i
        mdelta = np.empty_like(delta)
        mdelta[perm] = perm[delta]
        mlabels = np.empty_like(labels)
        mlabels[perm] = labels
        of = np.full(self.n_states, -1, dtype=np.int64)
        of[idx] = perm[cls]
        names = None
        if self.state_names is not None:
            names = ["=".join(str(self.state_names[q]) for q in idx[perm[cls] == i]) for i in range(k)]
        return Automaton(
            mdelta,
            0,
            mlabels,
            self.num_classes,
            tokens=self.tokens,
            outputs=np.maximum(mlabels, 0),
            symbols=self.symbols,
            label_names=self.label_names,
            state_names=names,
        ), of

    # -- counting --------------------------------------------------------------------------------
    def forward_step(self, row: np.ndarray) -> np.ndarray:
        """Log counts of strings one symbol longer: ``row`` over states -> the next row."""
        ext = np.append(row, NEG)
        return np.logaddexp.reduce(ext[self.pred_state], axis=1)

    def forward_first(self) -> np.ndarray:
        row = np.full(self.n_states, NEG)
        row[self.start] = 0.0
        return row

    def forward_log_counts(self, length: int) -> np.ndarray:
        """Log of the number of strings of ``length`` symbols from the start to each state."""
        if length in self._forward:
            return self._forward[length]
        have = [n for n in self._forward if n <= length]
        n = max(have, default=0)
        row = self._forward[n] if have else self.forward_first()
        for _ in range(n, length):
            row = self.forward_step(row)
        if len(self._forward) > 64:  # a few rows, not a table: each length's row is O(states)
            self._forward.pop(next(iter(self._forward)))
        self._forward[length] = row
        return row

    def reachable(self, length: int) -> np.ndarray:
        """States that some string of ``length`` symbols reaches from the start (bool over states)."""
        return self.forward_log_counts(length) > NEG

    def label_log_counts(self, length: int) -> np.ndarray:
        """Log of the number of strings of the task of ``length`` symbols with each label (over classes)."""
        row = self.forward_log_counts(length)
        out = np.full(self.num_classes, NEG)
        for c in range(self.num_classes):
            hit = self.labels == c
            if hit.any():
                out[c] = np.logaddexp.reduce(row[hit])
        return out

    def draw_ending_in(self, ends: np.ndarray, length: int, rng: np.random.Generator) -> np.ndarray:
        """(len(ends), length) symbol indices: per row a string of ``length`` symbols from the start that
        ends in the state ``ends[i]``, uniform among them (every end state must be reachable in ``length``
        symbols). Drawn backwards, each (state, symbol) predecessor in proportion to the strings that
        reach that state (forward counts recomputed in blocks: memory O(sqrt(length)) rows)."""
        q = np.asarray(ends, dtype=np.int64).copy()
        out = np.empty((len(q), length), dtype=np.int64)
        rows = reverse_rows(self.forward_first(), self.forward_step, length)
        next(rows)
        for t, row in rows:  # the symbol at position t leads from a state of row t to q
            j = choose(rng, np.append(row, NEG)[self.pred_state[q]])
            out[:, t] = self.pred_symbol[q, j]
            q = self.pred_state[q, j]
        assert (q == self.start).all()
        return out

    def label_distribution(self, length: int) -> np.ndarray | None:
        """Share of each label among the task's strings of ``length`` symbols (None: there is none)."""
        logs = self.label_log_counts(length)
        if not np.isfinite(logs).any():
            return None
        w = np.exp(logs - logs.max())
        return w / w.sum()

    def labels_at(self, length: int) -> np.ndarray:
        """The labels that some string of the task of ``length`` symbols has (sorted class ids)."""
        return np.flatnonzero(self.label_log_counts(length) > NEG)


def reverse_rows(
    first: np.ndarray, step: Callable[[np.ndarray], np.ndarray], n: int
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield (t, row_t) for t = n, n - 1, ..., 0, where row_0 = ``first`` and row_t = step(row_{t-1}).

    Keeps every b-th row (b = ceil(sqrt(n + 1))) on a first pass and recomputes one block of b rows at
    a time on the way back: memory O(sqrt(n)) rows, twice the steps of one pass."""
    block = max(1, math.isqrt(n) + 1)
    checkpoints = []
    row = first
    for t in range(n + 1):
        if t % block == 0:
            checkpoints.append(row)
        if t < n:
            row = step(row)
    for i in reversed(range(len(checkpoints))):
        lo = i * block
        rows = [checkpoints[i]]
        for _ in range(lo + 1, min(lo + block, n + 1)):
            rows.append(step(rows[-1]))
        for j in reversed(range(len(rows))):
            yield lo + j, rows[j]


def choose(rng: np.random.Generator, log_weights: np.ndarray) -> np.ndarray:
    """One index per row of ``log_weights`` (B, K), drawn with probability proportional to exp(weight);
    every row must have a finite weight."""
    w = np.exp(log_weights - log_weights.max(axis=1, keepdims=True))
    cum = np.cumsum(w, axis=1)
    u = rng.random(len(w))[:, None] * cum[:, -1:]
    idx = (cum <= u).sum(axis=1)
    # u * total can round up to total: fall back on the last index with a positive weight
    last = w.shape[1] - 1 - np.argmax(w[:, ::-1] > 0, axis=1)
    return np.minimum(idx, last)
