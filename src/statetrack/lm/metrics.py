"""Language-modelling metrics on held-out text: loss, bits per byte, loss by position bucket.

At each context length L, a fixed set of windows of L + 1 tokens is read from the test split at
seeded offsets (the same windows for every model: the seed is the evaluation's, not the run's); the
model reads the first L tokens of each window, carrying its state across time chunks, and is scored
on predicting every next token, positions 0 .. L-1.

- ``loss``: mean next-token cross-entropy in nats per token;
- ``bpb`` (bits per byte): total cross-entropy in nats / ln 2 / number of bytes the scored targets
  cover (``token_bytes``; 1 per byte token, so for byte tokens bpb = bits per token);
- ``bpb_se``: standard error of the bpb over windows (windows are independent draws);
- ``buckets``: bpb by position in the window, in buckets [0, 1), [1, 2), [2, 4), [4, 8), ...,
  [L/2, L): the positions beyond the training length show whether a model extrapolates;
- ``answer_bpb``: the same over the answer tokens only, for corpora that mark them (the generated
  corpora), with ``answer_accuracy`` (argmax = target), and ``answer_buckets``: the answers by
  distance to their decisive statement, with the state-blind level (``statetrack.lm.answers``).

Windows are drawn at seeded random offsets, or (``tile``) laid end to end from the split's start, each
sharing its first token with the previous one's last, so that every token of the split but the first
(and a remainder shorter than a window at the end) is scored exactly once: the test split's own bytes,
on which the compressor baselines are measured too.

A constant predictor does not pass unnoticed: the uniform one scores log2(V) bits per token, and the
baselines (``statetrack.lm.baselines``) are scored by the same ``summarize`` on the same windows.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from statetrack.errors import UserError
from statetrack.lm.answers import answer_buckets
from statetrack.untrusted import load_json

LN2 = math.log(2)
#: floats per logits chunk (batch x time x vocab) held at once during evaluation
LOGITS_BUDGET = 1 << 24


@dataclass
class LMMetrics:
    length: int
    windows: int
    tokens: int
    bytes: int
    loss: float
    bpb: float
    bpb_se: float
    token_accuracy: float
    last_accuracy: float
    sequence_accuracy: float
    buckets: list[dict] = field(default_factory=list)
    answer_tokens: int = 0
    answer_bpb: float | None = None
    answer_accuracy: float | None = None
    # the most frequent target token's share among the windows' last targets / all their targets: the
    # accuracy of the best constant answer on exactly the tokens scored (not stored in lm_metrics; the
    # length metrics carry them as chance and token_majority)
    last_chance: float | None = None
    token_majority: float | None = None
    # answers by distance to their decisive statement (statetrack.lm.answers.answer_buckets)
    answer_buckets: list[dict] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_row(cls, row) -> LMMetrics:
        """From a row of the results database's ``lm_metrics`` table (``buckets`` as JSON)."""
        d = {k: row[k] for k in cls.__dataclass_fields__ if k in row.keys()}  # noqa: SIM118 (a sqlite3.Row)
        for k in ("buckets", "answer_buckets"):
            if isinstance(d.get(k), str):
                d[k] = load_json(d[k], f"an LM run's {k.replace('_', ' ')}")
            elif d.get(k) is None:
                d.pop(k, None)
        return cls(**d)


def bits_per_byte(nats: float, n_bytes: int) -> float:
    return nats / LN2 / n_bytes


def position_buckets(length: int) -> list[tuple[int, int]]:
    """[0, 1), [1, 2), [2, 4), ... up to ``length`` (the last bucket cut at ``length``)."""
    out, lo = [(0, 1)], 1
    while lo < length:
        out.append((lo, min(2 * lo, length)))
        lo *= 2
    return [b for b in out if b[0] < length]


def summarize(
    nats: np.ndarray,
    correct: np.ndarray,
    nbytes: np.ndarray,
    answers: tuple[np.ndarray, np.ndarray] | None = None,
) -> LMMetrics:
    """Metrics of per-token losses (windows, L) in nats, hits and byte counts of the targets;
    ``answers``: (k, distance) of the targets (``statetrack.lm.answers``) for a corpus that has them."""
    n, L = nats.shape
    tot_nats, tot_bytes = float(nats.sum()), int(nbytes.sum())
    per_window = nats.sum(1) / LN2 / np.maximum(nbytes.sum(1), 1)
    se = float(per_window.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
    buckets = []
    for lo, hi in position_buckets(L):
        b_nats, b_bytes = float(nats[:, lo:hi].sum()), int(nbytes[:, lo:hi].sum())
        buckets.append(
            {
                "lo": lo,
                "hi": hi,
                "tokens": n * (hi - lo),
                "bytes": b_bytes,
                "bpb": bits_per_byte(b_nats, b_bytes),
                "loss": b_nats / (n * (hi - lo)),
            }
        )
    m = LMMetrics(
        L,
        n,
        n * L,
        tot_bytes,
        tot_nats / (n * L),
        bits_per_byte(tot_nats, tot_bytes),
        se,
        float(correct.mean()),
        float(correct[:, -1].mean()),
        float(correct.all(1).mean()),
        buckets,
    )
    if answers is not None and (answers[0] > 0).any():
        k, dist = answers
        mask = k > 0
        m.answer_tokens = int(mask.sum())
        m.answer_bpb = bits_per_byte(float(nats[mask].sum()), int(nbytes[mask].sum()))
        m.answer_accuracy = float(correct[mask].mean())
        m.answer_buckets = answer_buckets(nats, correct, k, dist)
    return m


def tile_starts(n_tokens: int, length: int) -> np.ndarray:
    """Starts of windows of ``length + 1`` tokens laid end to end over a split of ``n_tokens``: each shares
    its first token with the previous window's last, so every token but the first is a target once."""
    if length + 1 > n_tokens:
        raise UserError(f"a window of {length + 1} tokens is longer than the split ({n_tokens} tokens)")
    return np.arange(0, n_tokens - length, length)


def eval_windows(split, length: int, n_windows: int | None, seed: int):
    """The fixed evaluation windows at ``length``: (tokens (n, length + 1), (k, distance) of the targets'
    answers or None). ``n_windows`` None: the windows tile the split (``tile_starts``)."""
    if n_windows is None:
        starts = tile_starts(len(split), length)
    else:
        rng = np.random.default_rng([seed, length])
        starts = np.sort(split.random_starts(rng, n_windows, length + 1))
    toks = split.windows(starts, length + 1)
    ans = split.answer_windows(starts, length + 1)
    return toks, (None if ans is None else (ans[0][:, 1:], ans[1][:, 1:]))


def n_windows_for(length: int, tokens: int | None, batch_size: int, windows: str = "random") -> int | None:
    """Windows scored at ``length``: None when they tile the split (``windows='tile'``), else enough for
    ``tokens`` scored tokens, else ``batch_size``."""
    if windows == "tile":
        return None
    return max(2, math.ceil(tokens / length)) if tokens else batch_size


@torch.no_grad()
def token_losses(
    model, windows: np.ndarray, chunk: int = 1024, batch_size: int = 64, device=None, watch=None
) -> tuple[np.ndarray, np.ndarray]:
    """Per-token next-token loss (nats, float64) and hits of ``model`` on windows (n, L + 1).
    ``watch(L, tokens done, tokens in all)`` after each chunk (a progress line's tokens, rate and ETA)."""
    device = torch.device(device or next(model.parameters()).device)
    model = model.eval()
    n, L = windows.shape[0], windows.shape[1] - 1
    V = model.num_classes
    nats = np.empty((n, L), dtype=np.float64)
    hits = np.empty((n, L), dtype=bool)
    for b0 in range(0, n, batch_size):
        w = torch.as_tensor(windows[b0 : b0 + batch_size], device=device)
        B = w.shape[0]
        step = max(1, min(chunk, LOGITS_BUDGET // (B * V)))
        states = model.init_state(B)
        for t0 in range(0, L, step):
            t1 = min(t0 + step, L)
            x, y = w[:, t0:t1], w[:, t0 + 1 : t1 + 1]
            logits, states = model(x, states)
            logits = logits.float()
            nll = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1), reduction="none").view_as(y)
            nats[b0 : b0 + B, t0:t1] = nll.double().cpu().numpy()
            hits[b0 : b0 + B, t0:t1] = (logits.argmax(-1) == y).cpu().numpy()
            if watch is not None:
                watch(L, b0 * L + B * t1, n * L)
    return nats, hits


def evaluate_lm(
    model,
    split,
    token_bytes: np.ndarray,
    lengths: list[int],
    tokens: int | None = None,
    batch_size: int = 64,
    seed: int = 12345,
    chunk: int = 1024,
    device=None,
    on_length=None,
    windows: str = "random",
    watch=None,
) -> list[LMMetrics]:
    """LM metrics of ``model`` on ``split`` at every context length (see the module docstring);
    ``windows``: 'random' (``tokens`` per length at seeded offsets) or 'tile' (the whole split);
    ``watch``: see :func:`token_losses`."""
    out = []
    for L in lengths:
        toks, answers = eval_windows(split, L, n_windows_for(L, tokens, batch_size, windows), seed)
        nats, hits = token_losses(model, toks, chunk, batch_size, device, watch)
        m = summarize(nats, hits, token_bytes[toks[:, 1:]], answers)
        targets = toks[:, 1:]
        m.last_chance = float(np.bincount(targets[:, -1]).max() / len(targets))
        m.token_majority = float(np.bincount(targets.ravel()).max() / targets.size)
        out.append(m)
        if on_length:
            on_length(m)
    return out
