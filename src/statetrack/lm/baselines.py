"""Baselines every LM table shows: add-one unigram and add-one bigram models of the train split.

Fitted on the train split's tokens (the stream of BOS, document, EOS, ...), scored on the same
windows of the test split as the models (``metrics.eval_windows``), so the numbers share their tokens:

- unigram:  p(t) = (c(t) + 1) / (N + V)
- bigram:   p(t | s) = (c(s, t) + 1) / (c(s) + V), with c(s) the count of pairs that start with s

(N train tokens, V the vocabulary). Add-one (Laplace) smoothing keeps tokens unseen in train finite;
for the unigram it changes nothing visible on corpora of millions of tokens. A model whose bpb is
not below the bigram's has learnt less than the counts of adjacent pairs.

Counts are streamed from the memory-mapped train file in chunks and cached beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from statetrack.files import atomic_write
from statetrack.lm.metrics import LMMetrics, eval_windows, n_windows_for, summarize

BASELINES = ("unigram", "bigram")
LABELS = {"unigram": "unigram (add-one)", "bigram": "bigram (add-one)"}
CHUNK = 1 << 22


@dataclass
class NGramCounts:
    vocab: int
    unigram: np.ndarray  # (V,) counts of each token
    codes: np.ndarray  # sorted s * V + t of every pair seen
    pair_counts: np.ndarray  # counts of those pairs
    prev: np.ndarray  # (V,) count of pairs starting with s

    def unigram_nats(self, targets: np.ndarray) -> np.ndarray:
        p = (self.unigram[targets] + 1) / (self.unigram.sum() + self.vocab)
        return -np.log(p)

    def bigram_nats(self, prev: np.ndarray, targets: np.ndarray) -> np.ndarray:
        code = prev.astype(np.int64) * self.vocab + targets
        i = np.clip(np.searchsorted(self.codes, code), 0, max(len(self.codes) - 1, 0))
        c = (
            np.where(self.codes[i] == code, self.pair_counts[i], 0)
            if len(self.codes)
            else np.zeros_like(code)
        )
        return -np.log((c + 1) / (self.prev[prev] + self.vocab))


def count_ngrams(tokens, vocab: int) -> NGramCounts:
    """Unigram and pair counts of a token array (a memmap is read ``CHUNK`` tokens at a time)."""
    uni = np.zeros(vocab, dtype=np.int64)
    parts: list[tuple[np.ndarray, np.ndarray]] = []
    n = len(tokens)
    for a in range(0, n, CHUNK):
        t = np.asarray(tokens[a : min(a + CHUNK + 1, n)], dtype=np.int64)  # one token of overlap for pairs
        uni += np.bincount(t[: min(CHUNK, n - a)], minlength=vocab)
        if len(t) > 1:
            parts.append(np.unique(t[:-1] * vocab + t[1:], return_counts=True))
    if parts:
        codes = np.concatenate([c for c, _ in parts])
        counts = np.concatenate([k for _, k in parts])
        codes, inv = np.unique(codes, return_inverse=True)
        pair_counts = np.bincount(inv, weights=counts).astype(np.int64)
    else:
        codes, pair_counts = np.zeros(0, np.int64), np.zeros(0, np.int64)
    prev = np.bincount(codes // vocab, weights=pair_counts, minlength=vocab).astype(np.int64)
    return NGramCounts(vocab, uni, codes, pair_counts, prev)


def train_counts(corpus) -> NGramCounts:
    """The train split's counts, cached in the corpus folder (``train.<tokens>.ngrams.npz``)."""
    path = Path(corpus.folder) / f"train.{corpus.suffix}.ngrams.npz"
    V = corpus.tokenizer.vocab_size
    if path.is_file():
        z = np.load(path)
        return NGramCounts(V, z["unigram"], z["codes"], z["pair_counts"], z["prev"])
    c = count_ngrams(corpus.split("train").tokens, V)
    with atomic_write(path, what="n-gram counts") as tmp, open(tmp, "wb") as f:
        np.savez(f, unigram=c.unigram, codes=c.codes, pair_counts=c.pair_counts, prev=c.prev)
    return c


def baseline_nats(counts: NGramCounts, windows: np.ndarray, which: str) -> np.ndarray:
    """Per-token nats of a baseline on windows (n, L + 1): targets are windows[:, 1:]."""
    if which == "unigram":
        return counts.unigram_nats(windows[:, 1:])
    return counts.bigram_nats(windows[:, :-1], windows[:, 1:])


def baseline_hits(counts: NGramCounts, windows: np.ndarray, which: str) -> np.ndarray:
    """Whether each target is the baseline's most probable token."""
    if which == "unigram":
        return windows[:, 1:] == int(np.argmax(counts.unigram))
    V = counts.vocab
    best = np.zeros(V, dtype=np.int64)  # most frequent successor of each s (0 if s never starts a pair)
    s = counts.codes // V
    order = np.lexsort((counts.pair_counts, s))  # by s, then by ascending count
    last = order[np.r_[s[order][1:] != s[order][:-1], True]] if len(order) else order
    best[s[last]] = counts.codes[last] % V
    return windows[:, 1:] == best[windows[:, :-1]]


def evaluate_baselines(
    corpus,
    lengths: list[int],
    tokens: int | None = None,
    batch_size: int = 64,
    seed: int = 12345,
    windows: str = "random",
) -> dict[str, list[LMMetrics]]:
    """The baselines on the test split, at each length, on the windows the models are scored on
    (``windows``, ``tokens``, ``batch_size``, ``seed``: as ``metrics.evaluate_lm``'s)."""
    counts = train_counts(corpus)
    split = corpus.split("test")
    tb = corpus.tokenizer.token_bytes
    out: dict[str, list] = {b: [] for b in BASELINES}
    for L in lengths:
        toks, answers = eval_windows(split, L, n_windows_for(L, tokens, batch_size, windows), seed)
        for b in BASELINES:
            out[b].append(
                summarize(
                    baseline_nats(counts, toks, b), baseline_hits(counts, toks, b), tb[toks[:, 1:]], answers
                )
            )
    return out
