"""Answers: the bytes of a generated program that only its state decides, and how they are scored.

An **answer** is a byte that the program so far fixes but its local text does not: the value after
``assert a == `` in the synthetic programs, a digit of a printed permutation in the traces. Each
answer carries two numbers, written by the generator and stored beside the token files:

- ``k``: the number of values the answer could take for a reader that does not know the state, all
  equally likely (10 for a digit, 2 for a truth value; n, n - 1, ..., 2 for the digits of a printed
  permutation of n, the last digit being decided by the others and so not an answer);
- the **decisive statement**: the last statement before the answer that revealed the value it
  depends on (an assignment of a constant, an earlier check or print of the same value). The
  **distance to the decisive statement** is the number of tokens from the last token of that
  statement to the answer.

Between the decisive statement and the answer only operations happen (swaps, additions, flips,
compositions), each a bijection of the hidden value, drawn independently of it; and the value at the
decisive statement is uniform. So a reader that sees fewer than ``distance`` tokens before the answer
has no information about it: its best is the uniform guess among the k values, log2(k) bits and 1/k
accuracy. This **state-blind level**, averaged over the answers scored, is computed exactly from the
stored k (nothing is typed in); only a model that carries the state across the distance goes below it.

At evaluation, an answer at position t of a window (targets 0 .. L-1) has its decisive statement in
the window's context when distance <= t + 1 (the first input token is position 0 of the window);
answers whose decisive statement lies before the window's start are counted apart (``outside``):
there every model is held to the state-blind level.

``answer_buckets`` groups a window batch's answers by distance, [1, 16), [16, 32), [32, 64), ..., plus
``outside``, with per bucket the count, the sums of the model's bits and squared bits, its hits and
the state-blind bits, from which a report draws bpb and accuracy with 95% intervals.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

#: distance buckets start here and double: [1, 16), [16, 32), [32, 64), ...
FIRST_EDGE = 16
OUTSIDE = "outside"
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Answer:
    """One answer byte of a document: its offset, its number of state-blind alternatives k, and the
    offset of the last byte of its decisive statement."""

    offset: int
    k: int
    decisive: int

    def __post_init__(self):
        if not (2 <= self.k <= 255 and 0 <= self.decisive < self.offset):
            raise ValueError(f"bad answer {self}: need 2 <= k <= 255 and 0 <= decisive < offset")


def distance_edges(length: int) -> list[int]:
    """Bucket edges for windows of ``length``: 1, 16, 32, ... up to the first edge >= length."""
    edges, e = [1, FIRST_EDGE], FIRST_EDGE
    while e < length:
        e *= 2
        edges.append(e)
    return edges


def bucket_label(lo: int, hi: int | None) -> str:
    return OUTSIDE if hi is None else f"{lo}-{hi - 1}"


def answer_buckets(nats: np.ndarray, hits: np.ndarray, k: np.ndarray, distance: np.ndarray) -> list[dict]:
    """Answer statistics by distance to the decisive statement.

    Args:
        nats: [n, L] per-target loss in nats; hits: [n, L] argmax == target;
        k: [n, L] alternatives of each target (0: not an answer); distance: [n, L] tokens to the
            decisive statement of each answer target.
    Returns one dict per bucket (``lo``, ``hi`` (None for ``outside``), ``label``, ``n``, ``bits``,
    ``bits_sq``, ``hits``, ``blind_bits``, ``blind_hits``: sum of 1/k, the state-blind accuracy times n)
    for the buckets that hold answers, in distance order, ``outside`` last.
    """
    L = nats.shape[1]
    is_ans = k > 0
    pos = np.broadcast_to(np.arange(L) + 1, k.shape)
    inside = is_ans & (distance <= pos)
    bits = nats / math.log(2)
    edges = distance_edges(L)
    out = []
    groups: list[tuple[int | None, int | None, np.ndarray]] = [
        (lo, hi, inside & (distance >= lo) & (distance < hi)) for lo, hi in itertools.pairwise(edges)
    ]
    groups.append((None, None, is_ans & ~inside))
    for lo, hi, sel in groups:
        n = int(sel.sum())
        if not n:
            continue
        b = bits[sel]
        kk = k[sel].astype(np.float64)
        out.append(
            {
                "lo": lo,
                "hi": hi,
                "label": bucket_label(lo or 0, hi),
                "n": n,
                "bits": float(b.sum()),
                "bits_sq": float((b * b).sum()),
                "hits": int(hits[sel].sum()),
                "blind_bits": float(np.log2(kk).sum()),
                "blind_hits": float((1 / kk).sum()),
            }
        )
    return out


def merge_buckets(buckets: list[dict], select=None) -> dict | None:
    """The buckets (those ``select(bucket)`` keeps) summed into one; None if they hold no answer."""
    keep = [b for b in buckets if select is None or select(b)]
    if not keep or not sum(b["n"] for b in keep):
        return None
    out = {k: sum(b[k] for b in keep) for k in ("n", "bits", "bits_sq", "hits", "blind_bits", "blind_hits")}
    out.update(lo=keep[0]["lo"], hi=keep[-1]["hi"], label="+".join(b["label"] for b in keep))
    return out


def mean_interval(total: float, total_sq: float, n: int) -> tuple[float, float, float]:
    """(mean, low, high): the mean of n values from their sum and sum of squares, with the normal 95%
    interval mean +- 1.96 s / sqrt(n) (s the sample standard deviation; the answers taken as independent)."""
    mean = total / n
    if n < 2:
        return mean, float("nan"), float("nan")
    var = max(total_sq - n * mean * mean, 0.0) / (n - 1)
    half = Z95 * math.sqrt(var / n)
    return mean, mean - half, mean + half


def wilson(hits: int, n: int) -> tuple[float, float]:
    """Wilson 95% interval of a proportion hits / n."""
    if n == 0:
        return float("nan"), float("nan")
    p, z2 = hits / n, Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def blind_level(buckets: list[dict]) -> float | None:
    """The state-blind level of the answers in ``buckets`` (bits per answer token: the mean of log2 k),
    or None when there are none."""
    n = sum(b["n"] for b in buckets)
    return sum(b["blind_bits"] for b in buckets) / n if n else None


def bucket_summary(b: dict) -> dict:
    """bpb (mean bits per answer) and accuracy of a bucket with their 95% intervals, and its state-blind
    level (bits and accuracy)."""
    bpb, lo, hi = mean_interval(b["bits"], b["bits_sq"], b["n"])
    acc_lo, acc_hi = wilson(b["hits"], b["n"])
    return {
        "label": b["label"],
        "n": b["n"],
        "bpb": bpb,
        "bpb_low": lo,
        "bpb_high": hi,
        "accuracy": b["hits"] / b["n"],
        "accuracy_low": acc_lo,
        "accuracy_high": acc_hi,
        "blind_bpb": b["blind_bits"] / b["n"],
        "blind_accuracy": b["blind_hits"] / b["n"],
    }
