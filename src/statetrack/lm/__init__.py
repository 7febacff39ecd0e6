"""Language modelling at small scale: corpora, tokenizers, baselines, metrics and text generation.

    from statetrack.lm import get_corpus, evaluate_lm, evaluate_baselines, generate
    corpus = get_corpus("stdlib")                 # built into the cache on first use, then memory-mapped
    corpus.describe()                             # documents, bytes and tokens per split, sha256

The ``lm`` task family (``statetrack.tasks.corpus_tasks``: ``lm:stdlib``, ``lm:synthetic``) puts a corpus under the
Task protocol, so any model trains on it with the one training loop (docs/lm.md).
"""

from statetrack.lm.baselines import count_ngrams, evaluate_baselines, train_counts
from statetrack.lm.corpus import CORPORA, Corpus, Split, cache_root, get_corpus
from statetrack.lm.generation import generate
from statetrack.lm.metrics import LMMetrics, bits_per_byte, evaluate_lm, position_buckets
from statetrack.lm.tokens import BPETokenizer, ByteTokenizer

__all__ = [
    "CORPORA",
    "Corpus",
    "Split",
    "cache_root",
    "get_corpus",
    "ByteTokenizer",
    "BPETokenizer",
    "LMMetrics",
    "bits_per_byte",
    "evaluate_lm",
    "position_buckets",
    "count_ngrams",
    "evaluate_baselines",
    "train_counts",
    "generate",
]
