"""Tokenizers: bytes by default, a byte-level BPE from Hugging Face ``tokenizers`` as an option.

Byte tokens (the default): ids 0-255 are the bytes themselves, then three specials, so the
vocabulary has 259 entries. ``BOS`` starts and ``EOS`` ends every document of a corpus; ``PAD`` never
occurs in a corpus (it is reserved for padding batches of prompts, and a trained model learns to give
it no mass). Any text round-trips exactly: ``decode(encode(b)) == b`` for every byte string.

BPE (task option ``bpe`` or ``bpe=N``): a byte-level BPE trained with Hugging Face's ``tokenizers``
on the corpus's TRAIN split only, cached beside the corpus. Chosen over ``tiktoken`` because it trains
a tokenizer locally from our own text; ``tiktoken``'s encodings are fixed vocabularies fetched from a
network on first use, which statetrack never does at run time. Every BPE token still stands for a whole
number of bytes (byte-level: one character of a token string = one byte), so bits per byte stay exact.

``token_bytes`` (an int array over the vocabulary) says how many text bytes each token covers: 1 for a
byte token, the length of a BPE token's byte string, and 1 for BOS/EOS/PAD (they stand where a text
format would put a separator); bits per byte divide by the sum of ``token_bytes`` over the scored
targets.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from statetrack.errors import UserError
from statetrack.files import atomic_write

SPECIALS = ("<bos>", "<eos>", "<pad>")
N_BYTES = 256
BOS, EOS, PAD = N_BYTES, N_BYTES + 1, N_BYTES + 2
DEFAULT_BPE_VOCAB = 4096


class ByteTokenizer:
    """Bytes 0-255 plus BOS, EOS, PAD (vocabulary 259)."""

    name = "bytes"
    vocab_size = N_BYTES + len(SPECIALS)
    bos, eos, pad = BOS, EOS, PAD

    def encode(self, data: bytes | str) -> np.ndarray:
        if isinstance(data, str):
            data = data.encode("utf-8")
        return np.frombuffer(bytes(data), dtype=np.uint8).astype(np.int64)

    def decode_bytes(self, ids) -> bytes:
        """The bytes of the byte tokens among ``ids`` (specials are dropped)."""
        ids = np.asarray(ids, dtype=np.int64)
        return ids[ids < N_BYTES].astype(np.uint8).tobytes()

    def decode(self, ids) -> str:
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    @property
    def token_bytes(self) -> np.ndarray:
        return np.ones(self.vocab_size, dtype=np.int64)

    def describe(self) -> dict:
        return {
            "tokenizer": self.name,
            "vocab_size": self.vocab_size,
            "specials": dict(zip(SPECIALS, (BOS, EOS, PAD), strict=True)),
        }


@lru_cache(maxsize=1)
def _byte_level_alphabet() -> dict[str, int]:
    """The byte-level BPE alphabet (GPT-2's): each byte is one printable character; char -> byte."""
    from tokenizers import pre_tokenizers  # optional (the lm extra)

    return {ch: i for i, ch in enumerate(_bytes_to_unicode(pre_tokenizers.ByteLevel.alphabet()))}


def _bytes_to_unicode(alphabet) -> list[str]:
    # the standard byte -> unicode map: printable Latin-1 bytes map to themselves, the others to 256+
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars, n = [], 0
    for b in range(256):
        if b in printable:
            chars.append(chr(b))
        else:
            chars.append(chr(256 + n))
            n += 1
    if set(chars) != set(alphabet):  # the tokenizers package's behaviour, not this code's
        raise RuntimeError(
            "the tokenizers package's byte-level alphabet differs from the standard byte map; "
            "this version of tokenizers is not supported"
        )
    return chars


def import_tokenizers():
    try:
        import tokenizers  # optional (the lm extra)
    except ImportError:
        raise UserError(
            "the bpe option needs Hugging Face tokenizers: pip install 'statetrack[lm]' "
            "(or pip install tokenizers); allowed without it: bytes"
        ) from None
    return tokenizers


class BPETokenizer:
    """A byte-level BPE (Hugging Face ``tokenizers``) trained on a corpus's train split."""

    def __init__(self, path: str | os.PathLike):
        tk = import_tokenizers()
        self.path = Path(path)
        self._tok = tk.Tokenizer.from_file(str(self.path))
        self.vocab_size = self._tok.get_vocab_size()
        self.name = f"bpe{self.vocab_size}"
        ids = [self._tok.token_to_id(s) for s in SPECIALS]
        if None in ids:
            raise UserError(
                f"tokenizer {str(self.path)!r} lacks the specials {SPECIALS}; delete it to rebuild"
            )
        self.bos, self.eos, self.pad = ids

    @classmethod
    def train(cls, documents, path: str | os.PathLike, vocab_size: int = DEFAULT_BPE_VOCAB) -> BPETokenizer:
        """Train on an iterable of documents (bytes) and save atomically to ``path``."""
        tk = import_tokenizers()
        tok = tk.Tokenizer(tk.models.BPE())
        tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = tk.decoders.ByteLevel()
        trainer = tk.trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=list(SPECIALS),
            initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator((d.decode("utf-8") for d in documents), trainer=trainer)
        with atomic_write(path, what="tokenizer") as tmp:
            tok.save(str(tmp))
        return cls(path)

    def encode(self, data: bytes | str) -> np.ndarray:
        # corpora hold valid UTF-8 only (corpus.py), which the byte-level pre-tokenizer maps back to
        # exactly the same bytes
        if isinstance(data, bytes):
            data = data.decode("utf-8", errors="replace")
        return np.asarray(self._tok.encode(data).ids, dtype=np.int64)

    def decode_bytes(self, ids) -> bytes:
        alpha = _byte_level_alphabet()
        out = bytearray()
        for i in np.asarray(ids, dtype=np.int64).tolist():
            tok = self._tok.id_to_token(int(i))
            if tok is None or tok in SPECIALS:
                continue
            out += bytes(alpha[c] for c in tok)
        return bytes(out)

    def decode(self, ids) -> str:
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    @property
    def token_bytes(self) -> np.ndarray:
        out = np.ones(self.vocab_size, dtype=np.int64)
        for tok, i in self._tok.get_vocab().items():
            if tok not in SPECIALS:
                out[i] = len(tok)  # one character of a byte-level token = one byte
        return out

    def describe(self) -> dict:
        return {
            "tokenizer": self.name,
            "vocab_size": self.vocab_size,
            "path": str(self.path),
            "specials": dict(zip(SPECIALS, (self.bos, self.eos, self.pad), strict=True)),
        }


#: a corpus's tokenizer: bytes, or a byte-level BPE (the same methods)
Tokenizer = ByteTokenizer | BPETokenizer


def token_dtype(vocab_size: int):
    """The smallest unsigned dtype that holds every id (uint16 for bytes + specials)."""
    return np.uint8 if vocab_size <= 256 else np.uint16 if vocab_size <= 65536 else np.uint32
