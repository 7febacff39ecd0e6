"""Corpora every machine has: built on first use into a cache folder, memory-mapped, split by document.

Two corpora:

``stdlib``
    The ``.py`` files of the running interpreter's standard library (``sysconfig.get_paths()['stdlib']``),
    sorted by relative path, excluding: ``site-packages`` (third-party code, differs per machine);
    every directory named ``test``, ``tests`` or ``idle_test`` (test suites, with deliberately malformed
    files and data); ``encodings`` and ``pydoc_data`` (generated codec tables and documentation text);
    ``config-*`` and ``_sysconfigdata*`` (generated, machine-specific build settings); and any file that
    is not valid UTF-8. Everything else (``idlelib``, ``tkinter``, ``lib2to3`` without its tests, ...)
    is kept: it is ordinary hand-written Python.
``synthetic``
    8,000 generated programs whose answers depend on state revealed far before them
    (``statetrack.lm.synthetic``).
``traces``
    4,500 Python REPL sessions composing permutations, whose printed states are answers
    (``statetrack.lm.traces``).

The generated corpora store, per token file, ``*.answers`` (uint8 per token: the number k of values a
reader blind to the state chooses among, 0 where the token is not an answer) and ``*.distance``
(uint32 per token: tokens from the answer's decisive statement to it), see ``statetrack.lm.answers``.

Split: by document, with a seed. The documents are put in the order of a seeded permutation; the
first ones go to ``test`` until it holds at least 5% of the corpus's bytes, the next to
``validation`` until it holds 5%, and the rest (about 90%) to ``train``. Within a split, documents keep
the sorted order. A token file per split holds, for every document, BOS, its tokens, EOS; token ids
are uint16 (byte tokens need 259 ids) and the files are read with ``np.memmap`` and sampled as
windows, never loaded whole. ``manifest.json`` records the rule, the python version, the seed, and per
split the document names, counts of documents, bytes and tokens, and the sha256 of the token file.

Cache folder: ``$STATETRACK_CACHE/corpora/`` if ``STATETRACK_CACHE`` is set, else
``$XDG_CACHE_HOME/statetrack/corpora/`` (``~/.cache/statetrack/corpora/``); one folder per corpus,
``stdlib-py3.11.7-seed0`` or ``synthetic-v2-seed0``. A corpus is written to a temporary folder and
renamed into place, so a reader never sees half of one; two processes building at once both succeed.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import sysconfig
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from statetrack.errors import UserError
from statetrack.files import reason, write_file
from statetrack.lm import synthetic, traces
from statetrack.lm.answers import Answer
from statetrack.lm.tokens import DEFAULT_BPE_VOCAB, BPETokenizer, ByteTokenizer, Tokenizer, token_dtype
from statetrack.untrusted import read_json

FORMAT = 2  # 2: answers far from their decisive statement, with k and distance; the traces corpus
SPLITS = ("train", "validation", "test")
HELDOUT_FRACTION = 0.05  # of the bytes, for validation and for test each
EXCLUDED_DIRS = ("site-packages", "test", "tests", "idle_test", "encodings", "pydoc_data")
CORPORA = {
    "stdlib": "the Python standard library's own .py files (this interpreter's), split by file",
    "synthetic": "generated Python programs whose answers need state revealed far before (swaps, mod-10 adds, parity)",
    "traces": "Python REPL sessions composing permutations of 3 by swaps, whose printed states need the composed state",
}


def cache_root() -> Path:
    """Where corpora are built: $STATETRACK_CACHE, else $XDG_CACHE_HOME/statetrack, else ~/.cache/statetrack."""
    if os.environ.get("STATETRACK_CACHE"):
        return Path(os.environ["STATETRACK_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "statetrack"


@dataclass
class Document:
    name: str
    data: bytes
    answers: list[Answer] | None = None  # answer bytes (generated corpora)


# -- sources -------------------------------------------------------------------------------------
def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _excluded(rel: Path) -> str | None:
    """The exclusion rule that drops a file (relative to the stdlib folder), or None to keep it."""
    for part in rel.parts[:-1]:
        if part in EXCLUDED_DIRS:
            return part
        if part.startswith("config-"):
            return "config-*"
    if rel.name.startswith("_sysconfigdata"):
        return "_sysconfigdata*"
    return None


def stdlib_files(root: str | os.PathLike | None = None) -> tuple[list[Path], dict[str, int]]:
    """(kept .py files relative to ``root``, sorted; count of excluded files per rule)."""
    root = Path(root) if root is not None else stdlib_root()
    if not root.is_dir():
        raise UserError(f"standard library folder {str(root)!r} not found")
    kept: list[Path] = []
    dropped: dict[str, int] = {}
    for p in root.rglob("*.py"):
        rel = p.relative_to(root)
        rule = _excluded(rel)
        if rule:
            dropped[rule] = dropped.get(rule, 0) + 1
        elif p.is_file():
            kept.append(rel)
    return sorted(kept, key=lambda r: r.as_posix()), dict(sorted(dropped.items()))


def stdlib_documents(root: str | os.PathLike | None = None) -> tuple[list[Document], dict[str, int]]:
    root = Path(root) if root is not None else stdlib_root()
    files, dropped = stdlib_files(root)
    docs = []
    for rel in files:
        data = (root / rel).read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            dropped["not UTF-8"] = dropped.get("not UTF-8", 0) + 1
            continue
        docs.append(Document(rel.as_posix(), data))
    return docs, dropped


def generated_documents(name: str, seed: int) -> list[Document]:
    """The documents of a generated corpus (``synthetic`` or ``traces``)."""
    gen = synthetic.programs if name == "synthetic" else traces.sessions
    return [Document(n, data, answers) for n, data, answers in gen(seed)]


# -- splitting -----------------------------------------------------------------------------------
def assign_splits(sizes: list[int], seed: int, fraction: float = HELDOUT_FRACTION) -> list[str]:
    """The split of each document: a seeded permutation fills test, then validation, to ``fraction``
    of the bytes each; the rest is train."""
    total = sum(sizes)
    out = ["train"] * len(sizes)
    order = np.random.default_rng(seed).permutation(len(sizes))
    filled = {"test": 0, "validation": 0}
    for i in order:
        for split in ("test", "validation"):
            if filled[split] < fraction * total:
                out[i] = split
                filled[split] += sizes[i]
                break
    return out


# -- building ------------------------------------------------------------------------------------
def _dir_name(name: str, seed: int) -> str:
    if name == "stdlib":
        return f"stdlib-py{platform.python_version()}-seed{seed}"
    return f"{name}-v{FORMAT}-seed{seed}"


def _write_split(folder: Path, split: str, docs: list[Document], tok, suffix: str) -> dict:
    """Write ``split``.``suffix`` (BOS, tokens, EOS per document), its answer mask if any, and the
    document offsets; returns the split's manifest entry."""
    dtype = token_dtype(tok.vocab_size)
    path = folder / f"{split}.{suffix}"
    h = hashlib.sha256()
    offsets, n_tokens, n_bytes = [], 0, 0
    any_answers = any(d.answers is not None for d in docs)
    answer_path = (
        (lambda ext: folder / f"{split}.{suffix}.{ext}") if any_answers else (lambda _ext: os.devnull)
    )
    with (
        open(path, "wb") as f,
        open(answer_path("answers"), "wb") as fa,
        open(answer_path("distance"), "wb") as fd,
    ):
        for d in docs:
            ids = tok.encode(d.data)
            toks = np.concatenate([[tok.bos], ids, [tok.eos]]).astype(dtype)
            buf = toks.tobytes()
            f.write(buf)
            h.update(buf)
            offsets.append(n_tokens)
            if any_answers:
                k, dist = _answer_arrays(d, tok, len(ids))
                fa.write(k.tobytes())
                fd.write(dist.tobytes())
            n_tokens += len(toks)
            n_bytes += len(d.data)
    np.save(folder / f"{split}.{suffix}.offsets.npy", np.asarray(offsets, dtype=np.int64))
    return {
        "documents": len(docs),
        "bytes": n_bytes,
        "tokens": n_tokens,
        "sha256": h.hexdigest(),
        "files": [d.name for d in docs],
    }


def _answer_arrays(d: Document, tok, n_ids: int) -> tuple[np.ndarray, np.ndarray]:
    """Per token of BOS + document + EOS: k (uint8; 0 = not an answer) and the distance in tokens from
    the token holding the last byte of the decisive statement (uint32; 0 = not an answer)."""
    k = np.zeros(n_ids + 2, dtype=np.uint8)
    dist = np.zeros(n_ids + 2, dtype=np.uint32)
    if not d.answers:
        return k, dist
    offsets = np.asarray([a.offset for a in d.answers])
    decisive = np.asarray([a.decisive for a in d.answers])
    if isinstance(tok, ByteTokenizer):
        at, dec = offsets, decisive
    else:
        ends = np.cumsum(tok.token_bytes[tok.encode(d.data)])  # byte end of each token
        at, dec = (np.searchsorted(ends, x, side="right") for x in (offsets, decisive))
    k[1 + at] = [a.k for a in d.answers]
    dist[1 + at] = np.maximum(at - dec, 1)
    return k, dist


def _build(name: str, seed: int, final: Path, source) -> None:
    if name == "stdlib":
        docs, dropped = stdlib_documents(source)
        src = str(Path(source) if source is not None else stdlib_root())
    else:
        docs, dropped, src = generated_documents(name, seed), {}, f"statetrack.lm.{name}"
    if len(docs) < 3:
        raise UserError(f"corpus {name!r} from {src!r} has {len(docs)} documents; a split needs at least 3")
    splits = assign_splits([len(d.data) for d in docs], seed)
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    try:
        tok = ByteTokenizer()
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "corpus": name,
            "seed": seed,
            "python": platform.python_version(),
            "source": src,
            "excluded": dropped,
            "excluded_dirs": list(EXCLUDED_DIRS) if name == "stdlib" else [],
            "heldout_fraction": HELDOUT_FRACTION,
            "tokenizer": tok.describe(),
            "splits": {},
        }
        for split in SPLITS:
            mine = [d for d, s in zip(docs, splits, strict=True) if s == split]
            manifest["splits"][split] = _write_split(tmp, split, mine, tok, "u16")
        _write_json(tmp / "manifest.json", manifest)
        try:
            os.rename(tmp, final)
        except OSError:  # built meanwhile by another process: keep theirs
            if not (final / "manifest.json").is_file():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _write_json(path: Path, obj) -> None:
    write_file(path, json.dumps(obj, indent=1, sort_keys=True) + "\n", what="corpus manifest")


# -- reading -------------------------------------------------------------------------------------
class Split:
    """One split's token file, memory-mapped; windows are read by slicing, never the whole file."""

    def __init__(self, path: Path, dtype, answers: Path | None = None):
        self.path = path
        self.tokens = np.memmap(path, dtype=dtype, mode="r")
        self.answers = np.memmap(answers, dtype=np.uint8, mode="r") if answers is not None else None
        dist = path.with_name(path.name + ".distance")
        self.distance = np.memmap(dist, dtype=np.uint32, mode="r") if answers is not None else None

    def __len__(self) -> int:
        return len(self.tokens)

    def random_starts(self, rng: np.random.Generator, n: int, length: int) -> np.ndarray:
        """``n`` window starts, each window of ``length`` tokens inside the split."""
        if length > len(self):
            raise UserError(
                f"window of {length} tokens is longer than the split {self.path.name} ({len(self)} tokens)"
            )
        return rng.integers(0, len(self) - length + 1, size=n)

    def windows(self, starts, length: int) -> np.ndarray:
        """(len(starts), length) int64 token ids."""
        return np.stack([np.asarray(self.tokens[s : s + length]) for s in starts]).astype(np.int64)

    def answer_windows(self, starts, length: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(k, distance) of every token of the windows (``statetrack.lm.answers``), or None for a corpus
        without answers."""
        if self.answers is None or self.distance is None:
            return None
        k = np.stack([np.asarray(self.answers[s : s + length]) for s in starts]).astype(np.int64)
        dist = np.stack([np.asarray(self.distance[s : s + length]) for s in starts]).astype(np.int64)
        return k, dist


def train_tokenizer(folder: Path, tokenizer: str) -> None:
    """The explicit step a BPE tokenizer needs before :class:`Corpus` can open a corpus with it: train it
    on the train split's documents (``tokenizer-bpeN.json``) and write every split's token files with
    it (``manifest-bpeN.json`` last), unless that is done. The byte tokenizer needs nothing."""
    if tokenizer == "bytes":
        return
    suffix = tokenizer
    path = folder / f"tokenizer-{suffix}.json"
    source = Corpus(folder)  # the byte files: the documents as they are
    tok = (
        BPETokenizer(path)
        if path.is_file()
        else BPETokenizer.train(source.documents("train"), path, int(suffix.removeprefix("bpe")))
    )
    if (folder / f"manifest-{suffix}.json").is_file():
        return
    entries = {}
    for split in SPLITS:
        docs = [Document(n, d, a) for n, d, a in source.documents_with_answers(split)]
        entries[split] = _write_split_in_place(folder, split, docs, tok, suffix)
    _write_json(folder / f"manifest-{suffix}.json", {"tokenizer": tok.describe(), "splits": entries})


def _write_split_in_place(folder: Path, split: str, docs: list[Document], tok, suffix: str) -> dict:
    """A split's token files written to a temporary folder, then moved into ``folder`` one by one."""
    tmp = folder / f".{suffix}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        entry = _write_split(tmp, split, docs, tok, suffix)
        for p in tmp.iterdir():
            p.replace(folder / p.name)
        return entry
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class Corpus:
    """A built corpus folder: its manifest, tokenizer and splits. Opening reads only: a BPE tokenizer
    must have been trained first (:func:`train_tokenizer`; :func:`get_corpus` does both)."""

    def __init__(self, folder: Path, tokenizer: str = "bytes"):
        self.folder = folder
        self.manifest = read_json(folder / "manifest.json", "corpus manifest")
        self.name, self.seed = self.manifest["corpus"], self.manifest["seed"]
        self.tokenizer_name = tokenizer
        self.tokenizer: Tokenizer
        if tokenizer == "bytes":
            self.tokenizer, self.suffix = ByteTokenizer(), "u16"
        else:
            if not (folder / f"manifest-{tokenizer}.json").is_file():
                raise UserError(
                    f"corpus folder {str(folder)!r} has no {tokenizer} token files; "
                    "train_tokenizer (or get_corpus) writes them"
                )
            self.tokenizer, self.suffix = BPETokenizer(folder / f"tokenizer-{tokenizer}.json"), tokenizer
        self._splits: dict[str, Split] = {}

    def split(self, name: str) -> Split:
        if name not in SPLITS:
            raise UserError(f"unknown split {name!r}; allowed: {', '.join(SPLITS)}")
        if name not in self._splits:
            base = self.folder / f"{name}.{self.suffix}"
            ans = base.with_name(base.name + ".answers")
            self._splits[name] = Split(
                base, token_dtype(self.tokenizer.vocab_size), ans if ans.is_file() else None
            )
        return self._splits[name]

    def offsets(self, split: str, suffix: str | None = None) -> np.ndarray:
        return np.load(self.folder / f"{split}.{suffix or self.suffix}.offsets.npy")

    def documents(self, split: str):
        """The split's documents as bytes, read back from the byte-token file one at a time."""
        for _, data, _ in self.documents_with_answers(split):
            yield data

    def documents_with_answers(self, split: str):
        """The split's documents as (name, bytes, answers) read back from its files (answers None without)."""
        mm = np.memmap(self.folder / f"{split}.u16", dtype=np.uint16, mode="r")
        ans_path = self.folder / f"{split}.u16.answers"
        ans = np.memmap(ans_path, dtype=np.uint8, mode="r") if ans_path.is_file() else None
        dist = (
            np.memmap(self.folder / f"{split}.u16.distance", dtype=np.uint32, mode="r")
            if ans is not None
            else None
        )
        offs = list(self.offsets(split, "u16")) + [len(mm)]
        names = self.manifest["splits"][split]["files"]
        for name, a, b in zip(names, offs[:-1], offs[1:], strict=True):
            body = np.asarray(mm[a + 1 : b - 1])  # drop BOS and EOS
            answers = None
            if ans is not None and dist is not None:
                k, d = np.asarray(ans[a + 1 : b - 1]), np.asarray(dist[a + 1 : b - 1])
                answers = [Answer(int(i), int(k[i]), int(i - d[i])) for i in np.flatnonzero(k)]
            yield name, body.astype(np.uint8).tobytes(), answers

    def _entries(self) -> dict:
        """Per split: the manifest entry of this corpus's token files (the byte files' or the BPE files')."""
        if self.suffix == "u16":
            return self.manifest["splits"]
        return read_json(self.folder / f"manifest-{self.suffix}.json", "corpus manifest")["splits"]

    def sizes(self) -> dict:
        """Per split: documents, bytes, tokens (of this corpus's tokenizer)."""
        entries = self._entries()
        return {
            s: {
                "documents": self.manifest["splits"][s]["documents"],
                "bytes": self.manifest["splits"][s]["bytes"],
                "tokens": entries[s]["tokens"],
            }
            for s in SPLITS
        }

    def describe(self) -> dict:
        entries = self._entries()
        return {
            "corpus": self.name,
            "seed": self.seed,
            "folder": str(self.folder),
            "python": self.manifest["python"],
            "tokenizer": self.tokenizer.describe(),
            "splits": self.sizes(),
            "sha256": {s: entries[s]["sha256"] for s in SPLITS},
        }


def parse_tokenizer(text: str | None) -> str:
    if text in (None, "", "bytes"):
        return "bytes"
    if text == "bpe":
        return f"bpe{DEFAULT_BPE_VOCAB}"
    if text.startswith("bpe"):
        n = text[3:].lstrip("=")
        if n.isdigit() and 260 <= int(n) <= 65536:
            return f"bpe{int(n)}"
    raise UserError(f"unknown tokenizer {text!r}; allowed: bytes, bpe, bpe=N (260 <= N <= 65536)")


def get_corpus(
    name: str = "stdlib",
    seed: int = 0,
    tokenizer: str = "bytes",
    root: str | os.PathLike | None = None,
    source: str | os.PathLike | None = None,
) -> Corpus:
    """The corpus ``name`` split with ``seed``, built into ``root`` (default ``cache_root()/corpora``)
    on first use. ``source``: another folder to read the stdlib corpus from (tests)."""
    if name not in CORPORA:
        raise UserError(f"unknown corpus {name!r}; allowed: {', '.join(CORPORA)}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise UserError(f"bad corpus seed {seed!r}; allowed: an integer >= 0")
    tokenizer = parse_tokenizer(tokenizer)
    root = Path(root) if root is not None else cache_root() / "corpora"
    folder = root / (
        _dir_name(name, int(seed))
        if source is None
        else f"{name}-{hashlib.sha256(str(Path(source).resolve()).encode()).hexdigest()[:8]}-seed{seed}"
    )
    if not (folder / "manifest.json").is_file():
        try:
            root.mkdir(parents=True, exist_ok=True)
            _build(name, int(seed), folder, source)
        except OSError as e:  # no permission, a read-only or full disk, a file in the way of the folder
            raise UserError(
                f"cannot write the corpus cache {str(root)!r} ({reason(e)}); set STATETRACK_CACHE "
                "to a writable folder"
            ) from None
    try:
        train_tokenizer(folder, tokenizer)
        return Corpus(folder, tokenizer)
    except (OSError, ValueError, KeyError) as e:
        raise UserError(f"corpus folder {str(folder)!r} is damaged ({e}); delete it to rebuild") from None
