"""File compressors as baselines: gzip -9, bz2 -9, xz -9e, and xz -9e that has read the train split first.

A language model's bits per byte mean little until they are set beside what an ordinary compressor
does with the same bytes. Every LM table shows, beside the add-one unigram and bigram models:

- ``gzip -9``: ``gzip.compress(test, 9)`` (DEFLATE, 32 KiB window; the gzip header and trailer count);
- ``bz2 -9``: ``bz2.compress(test, 9)`` (Burrows-Wheeler, 900 kB blocks);
- ``xz -9e``: ``lzma.compress(test, preset=9 | PRESET_EXTREME)`` (LZMA2, 64 MiB dictionary; xz container);
- ``xz -9e after train``: xz given the train split as context. Python's ``lzma`` has no preset
  dictionary, so the cost is measured as a difference: compress (train + test) and subtract the
  compressed size of the train bytes alone, i.e. what the test bytes add to a stream that has already
  seen the train split. The train bytes used are the split's last ``CONTEXT_BYTES`` (48 MiB, so that
  context and test fit in xz -9's 64 MiB dictionary): the whole train split of the corpora here.

"The test bytes" are the test split's documents concatenated in the order of its token file (the
bytes the models are scored on, without the BOS/EOS markers between documents), so bpb = 8 x
compressed size / test bytes. Only the standard library is used (``gzip``, ``bz2``, ``lzma``), and
the results are cached in the corpus folder (``compressors.json``), keyed by the test and train token
files' sha256 and the library versions, so the (slow, about 10 s for stdlib) train-context number is
computed once per corpus.

These are bounds a language model should beat, not models of the same kind: a compressor sees the
whole test split as one stream (gzip 32 KiB back, xz all of it), while a model of context L reads
windows of L tokens.
"""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import platform
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

from statetrack.files import write_file

#: most train bytes given to xz as context (xz -9's dictionary is 64 MiB: context + test fit in it)
CONTEXT_BYTES = 48 << 20
XZ_PRESET = 9 | lzma.PRESET_EXTREME
COMPRESSORS = ("gzip", "bz2", "xz", "xz_train")
LABELS = {"gzip": "gzip -9", "bz2": "bz2 -9", "xz": "xz -9e", "xz_train": "xz -9e after train"}
CACHE = "compressors.json"


@dataclass(frozen=True)
class Compressed:
    """One compressor on one corpus's test bytes."""

    name: str
    label: str
    test_bytes: int
    compressed_bytes: int
    context_bytes: int = 0  # train bytes read first (xz_train only)

    @property
    def bpb(self) -> float:
        return 8 * self.compressed_bytes / self.test_bytes


def _xz(data: bytes) -> int:
    return len(lzma.compress(data, format=lzma.FORMAT_XZ, preset=XZ_PRESET))


def compressed_sizes(test: bytes, train: bytes = b"") -> dict[str, Compressed]:
    """The four compressors on ``test`` (``xz_train`` reads the last CONTEXT_BYTES of ``train`` first;
    left out when ``train`` is empty)."""
    n = len(test)
    out = {
        "gzip": Compressed("gzip", LABELS["gzip"], n, len(gzip.compress(test, 9, mtime=0))),
        "bz2": Compressed("bz2", LABELS["bz2"], n, len(bz2.compress(test, 9))),
        "xz": Compressed("xz", LABELS["xz"], n, _xz(test)),
    }
    if train:
        ctx = train[-CONTEXT_BYTES:]
        out["xz_train"] = Compressed("xz_train", LABELS["xz_train"], n, _xz(ctx + test) - _xz(ctx), len(ctx))
    return out


def _versions() -> dict:
    """What the sizes depend on besides the bytes: the interpreter (its bz2 and liblzma), zlib, the settings."""
    return {
        "python": platform.python_version(),
        "zlib": zlib.ZLIB_RUNTIME_VERSION,
        "xz_preset": XZ_PRESET,
        "context_bytes": CONTEXT_BYTES,
    }


def corpus_compressors(corpus) -> dict[str, Compressed]:
    """The compressors on ``corpus``'s test split, cached in its folder (``compressors.json``)."""
    path = Path(corpus.folder) / CACHE
    splits = corpus.manifest["splits"]
    key = {"test_sha256": splits["test"]["sha256"], "train_sha256": splits["train"]["sha256"], **_versions()}
    if path.is_file():
        try:
            cached = json.loads(path.read_text())
            if cached.get("key") == key:
                return {k: Compressed(**v) for k, v in cached["results"].items()}
        except (OSError, ValueError, TypeError, KeyError):
            pass  # unreadable or of another format: computed again and rewritten
    test = b"".join(corpus.documents("test"))
    train = b"".join(corpus.documents("train"))
    res = compressed_sizes(test, train)
    write_file(
        path,
        json.dumps({"key": key, "results": {k: asdict(v) for k, v in res.items()}}, indent=1) + "\n",
        what="compressor cache",
    )
    return res
