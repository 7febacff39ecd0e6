"""Language modelling as a task: ``lm:stdlib``, ``lm:synthetic``, with options after ``/``.

``lm:CORPUS[/OPTION...]``; options: ``bytes`` (default) or ``bpe`` / ``bpe=N`` (a byte-level BPE of N
tokens, default 4096, trained on the train split with Hugging Face ``tokenizers``), and ``seed=S`` (the
corpus's split seed, default 0). Examples: ``lm:stdlib``, ``lm:synthetic``, ``lm:stdlib/bpe``,
``lm:stdlib/seed=1``.

A batch is ``batch_size`` windows of ``length + 1`` tokens at random offsets of the task's split:
inputs are the first ``length`` tokens, targets the same window shifted by one (the next tokens),
and every position is scored; ``num_classes = vocab_size``. The task returned by ``get_task`` reads the
train split; ``heldout("validation")`` and ``heldout("test")`` read the others (the training loop
validates on the first; evaluation scores the second). Being a ``CorpusTask`` tells the runner, the
evaluation and the reports to use the LM metrics (``statetrack.lm.metrics``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from statetrack.errors import UserError
from statetrack.lm.baselines import train_counts
from statetrack.lm.corpus import CORPORA, Corpus, get_corpus, parse_tokenizer
from statetrack.lm.tokens import ByteTokenizer
from statetrack.tasks.base import Batch, CorpusTask, Scoring
from statetrack.tasks.streaming import check_length


def parse_lm_arg(arg: str | None) -> tuple[str, str, int]:
    """'stdlib/bpe/seed=1' -> ('stdlib', 'bpe4096', 1)."""
    if not arg:
        raise UserError(f"task 'lm' needs a corpus, e.g. lm:stdlib; allowed corpora: {', '.join(CORPORA)}")
    corpus, *opts = arg.split("/")
    if corpus not in CORPORA:
        raise UserError(f"unknown corpus {corpus!r} for task family 'lm'; allowed: {', '.join(CORPORA)}")
    tokenizer, seed = "bytes", 0
    for o in opts:
        if o.startswith("seed="):
            v = o[5:]
            if not v.isdigit():
                raise UserError(f"bad corpus seed {v!r} in 'lm:{arg}'; allowed: an integer >= 0")
            seed = int(v)
        elif o == "bytes" or o.startswith("bpe"):
            tokenizer = parse_tokenizer(o)
        else:
            raise UserError(f"unknown option {o!r} for task family 'lm'; allowed: bytes, bpe, bpe=N, seed=S")
    return corpus, tokenizer, seed


def lm_vocab_size(task: str) -> int:
    """The vocabulary of an ``lm:...`` task string's tokens (259 for bytes, N for bpe=N), without building
    the corpus or its tokenizer."""
    _, tokenizer, _ = parse_lm_arg(task.partition(":")[2])
    return ByteTokenizer.vocab_size if tokenizer == "bytes" else int(tokenizer.removeprefix("bpe"))


class LMTask(CorpusTask):
    scoring = Scoring.EVERY

    def __init__(
        self,
        corpus: str = "stdlib",
        tokenizer: str = "bytes",
        seed: int = 0,
        split: str = "train",
        _corpus: Corpus | None = None,
    ):
        self.corpus = _corpus or get_corpus(corpus, seed, tokenizer)
        self.tokenizer = self.corpus.tokenizer
        self.split_name = split
        self.split = self.corpus.split(split)
        self.vocab_size = self.num_classes = self.tokenizer.vocab_size
        opts = ([] if tokenizer == "bytes" else [tokenizer]) + ([f"seed={seed}"] if seed else [])
        self.name = "lm:" + "/".join([corpus] + opts)
        self._args = (corpus, tokenizer, seed)

    def sample_batch(self, rng: np.random.Generator, batch_size: int, length: int) -> Batch:
        length = check_length(length)
        starts = self.split.random_starts(rng, batch_size, length + 1)
        w = self.split.windows(starts, length + 1)
        return Batch(w[:, :-1], w[:, 1:], np.ones((batch_size, length), dtype=bool))

    def heldout(self, split: str) -> LMTask:
        return LMTask(*self._args, split=split, _corpus=self.corpus)

    def label_distribution(self) -> np.ndarray:
        """The train split's token frequencies (chance = the most frequent token's)."""
        u = train_counts(self.corpus).unigram
        return u / u.sum()

    def params(self) -> dict[str, Any]:
        return {
            "corpus": self._args[0],
            "tokenizer": self._args[1],
            "seed": self._args[2],
            "split": self.split_name,
            "vocab_size": self.vocab_size,
        }

    def provenance(self) -> dict[str, Any]:
        """What a run's numbers were computed on: the corpus folder, python and split hashes."""
        d = self.corpus.describe()
        return {
            "folder": d["folder"],
            "python": d["python"],
            "sha256": d["sha256"],
            "tokenizer": self.tokenizer.name,
        }
