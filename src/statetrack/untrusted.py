"""Text read from files: JSON and YAML parsed within a size and a depth limit.

Every JSON or YAML document statetrack reads from a file (a checkpoint's metadata, a DFA file, a study or
run config, a corpus manifest, the JSON columns of a results database) goes through :func:`load_json` or
:func:`load_yaml`: a document over its size limit is refused before it is parsed (JSON: ``MAX_JSON_BYTES``,
YAML: ``MAX_YAML_BYTES``; YAML is parsed in pure Python, about 4 s per MiB, so its limit is lower), and one
nested deeper than ``MAX_DEPTH`` after it is parsed (a parser that gives up earlier, at the interpreter's
recursion limit, is reported the same way). Each is one :class:`UserError` line naming the document.
No file statetrack writes comes near either limit: a study file is a few KB, a run's config under 2 KB,
and a document needs no more than a few levels.

Names and labels read from such documents are checked too: a name that becomes part of a file name (a
study's, :func:`name_problem`) is an identifier, so that no name makes a command write outside the folder
the user chose; a label (a run's, a study's model or task label: :func:`label_problem`) is printable text
of at most ``MAX_LABEL`` characters.

A label or name read from a database or a study file is text wherever it is written out, never markup,
a formula, a terminal command or maths: :func:`markdown_text` (no raw HTML tag in a markdown file),
:func:`csv_cell` (no live formula in a spreadsheet), :func:`terminal_text` (no control character reaches
a terminal), plain text in plots (``report.plots`` turns matplotlib's maths off). :func:`confusable`
tells labels apart that look the same (``RNN`` and ``RΝΝ`` with a Greek Nu).
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

from statetrack.errors import UserError

#: the largest JSON document read (8 MiB: a DFA of a hundred thousand states fits)
MAX_JSON_BYTES = 8 << 20
#: the largest YAML document read (256 KiB: fifty times the largest built-in study file)
MAX_YAML_BYTES = 256 << 10
#: the deepest nesting of lists and objects accepted
MAX_DEPTH = 64
#: the longest label (a run's ``--label``, a study's model and task labels, a table's name)
MAX_LABEL = 200
#: a name that becomes part of a file name: a letter or digit, then letters, digits, '.', '_' or '-'
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", re.ASCII)
NAME_RULE = "a letter or digit, then up to 99 letters, digits, '.', '_' or '-'"


def name_problem(name) -> str | None:
    """Why ``name`` cannot name files (a study's report, its figure folder), or None: it must match
    :data:`NAME`, so it holds no folder separator, no '..' of its own and is never absolute."""
    if isinstance(name, str) and NAME.fullmatch(name):
        return None
    return f"{name!r} is not a name: use {NAME_RULE} (it names the report's files)"


def label_problem(label) -> str | None:
    """Why ``label`` cannot label a run, or None: printable text (no control character, no line break, no
    undecodable byte) of 1 to :data:`MAX_LABEL` characters."""
    if not isinstance(label, str) or not label.strip():
        return f"{label!r} is not a label: give some printable text"
    if len(label) > MAX_LABEL:
        return f"a label of {len(label):,} characters is over the limit of {MAX_LABEL}"
    if not label.isprintable():
        bad = next(c for c in label if not c.isprintable())
        return (
            f"{label!r} is not a label: it holds {bad!r}, which is not printable (labels are printable text, "
            f"without control characters, line breaks or undecodable bytes)"
        )
    return None


def _size(text: str | bytes) -> int:
    return len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))


def _too_big(what: str, n: int, limit: int) -> UserError:
    return UserError(
        f"{what} is {n:,} bytes, over the limit of {limit:,} bytes for a document read from a file"
    )


def _too_deep(what: str) -> UserError:
    return UserError(
        f"{what} is nested more than {MAX_DEPTH} levels deep (lists and objects within each "
        "other), over the limit for a document read from a file"
    )


def check_depth(value, what: str) -> None:
    """A UserError if ``value`` nests lists and dicts more than MAX_DEPTH deep. No recursion, and a
    container shared by several parents (a YAML alias) is walked again only at a greater depth, so the
    walk is linear in the document (at most MAX_DEPTH times its size), never exponential."""
    deepest: dict[int, int] = {}
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _too_deep(what)
        if deepest.get(id(v), 0) >= depth:
            continue
        deepest[id(v)] = depth
        items = v.values() if isinstance(v, dict) else v
        stack.extend((x, depth + 1) for x in items if isinstance(x, (dict, list, tuple)))


def _parse(parse: Callable[[Any], Any], text: str | bytes, what: str, max_bytes: int) -> Any:
    n = _size(text)
    if n > max_bytes:
        raise _too_big(what, n, max_bytes)
    try:
        value = parse(text)
    except RecursionError:  # the parser gave up first (the interpreter's recursion limit)
        raise _too_deep(what) from None
    if isinstance(value, (dict, list)):
        check_depth(value, what)
    return value


def load_json(text: str | bytes, what: str, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """``json.loads(text)`` within the size and depth limits; ``what`` names the document in the error
    (a syntax error is the caller's to word: ``json.JSONDecodeError`` passes through)."""
    return _parse(json.loads, text, what, max_bytes)


def load_yaml(text: str, what: str, max_bytes: int = MAX_YAML_BYTES) -> Any:
    """``yaml.safe_load(text)`` within the size and depth limits, with a key given twice in one mapping an
    error naming the key and both lines (YAML parsers otherwise keep the last silently: two ``models:``
    would drop a model from the grid). ``yaml.YAMLError`` passes through."""
    import yaml  # the study and config readers' dependency, not needed for JSON

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            seen: dict = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # '<<: *base' merges on purpose
                    continue
                key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
                try:
                    if key in seen:
                        where = f"line {line}" if seen[key] == line else f"lines {seen[key]} and {line}"
                        raise UserError(f"{what}: key {key!r} is given twice ({where}); keep one")
                    seen[key] = line
                except TypeError:  # an unhashable key: SafeLoader's own error says so
                    continue
            return super().construct_mapping(node, deep)

    def parse(t):
        loader = Loader(t)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()

    return _parse(parse, text, what, max_bytes)


def yaml_problem(e: Exception) -> str:
    """A YAML syntax error in one line that says where: 'line 3, column 9: expected ',' or '}', but got
    '<stream end>' (in a flow mapping that starts at line 2, column 7)'; lines and columns count from 1."""
    problem = getattr(e, "problem", None)
    mark = getattr(e, "problem_mark", None)
    if problem is None or mark is None:
        return str(e).splitlines()[0] if str(e) else type(e).__name__
    out = f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    context, cmark = getattr(e, "context", None), getattr(e, "context_mark", None)
    if context and cmark is not None:
        started = context.removeprefix("while parsing ").removeprefix("while scanning ")
        out += f" (in {started} that starts at line {cmark.line + 1}, column {cmark.column + 1})"
    return " ".join(out.split())


def read_json(path: str | os.PathLike, what: str, follow: bool = True) -> Any:
    """A JSON file within the limits (no more than the limit is read); ``follow`` False: not through a
    link (:func:`read_head`)."""
    what = f"{what} {str(path)!r}"
    return load_json(read_text(path, what, MAX_JSON_BYTES, follow), what)


def open_regular(path: str | os.PathLike, follow: bool = True) -> int:
    """A file descriptor of the regular file ``path``, for reading; an OSError for anything else: a FIFO is
    opened without waiting for a writer and refused, as are devices (``/dev/zero`` is never read for good)
    and folders, and, with ``follow`` False, a symbolic link."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | (0 if follow else os.O_NOFOLLOW))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return fd


def read_head(path: str | os.PathLike, limit: int, follow: bool = True) -> bytes:
    """At most ``limit`` bytes from the start of the regular file ``path``; an OSError for anything else
    (a FIFO is opened without waiting for a writer and refused, as are devices and folders, so that
    ``/dev/zero`` is never read for good), and, with ``follow`` False, for a symbolic link (data inside a
    folder from others is read where it is, never through a link)."""
    fd = open_regular(path, follow)
    try:
        chunks, n = [], 0
        while n < limit and (block := os.read(fd, min(1 << 20, limit - n))):
            chunks.append(block)
            n += len(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike, what: str, max_bytes: int, follow: bool = True) -> str:
    """A regular file's text (UTF-8), refused beyond ``max_bytes`` (no more is read); a byte that is not
    UTF-8 is one UserError naming the file and where. ``follow``: see :func:`read_head`."""
    data = read_head(path, max_bytes + 1, follow)
    if len(data) > max_bytes:
        raise _too_big(what, Path(path).stat().st_size, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise UserError(
            f"{what} is not UTF-8 text: byte {data[e.start]:#04x} at offset {e.start:,} (line {line}); save it "
            "as UTF-8"
        ) from None


# -- labels written out as text ----------------------------------------------------------------------
#: '<' that could open an HTML tag, comment or declaration in markdown ('<=' and '< 5' cannot)
_TAG = re.compile(r"<(?=[A-Za-z/!?])")
#: what makes a spreadsheet read a cell as a formula (OWASP's list)
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[-+]?(\d[\d,]*\.?\d*|\.\d+)([eE][-+]?\d+)?%?|-")
#: characters that reorder or hide text on a terminal (bidirectional controls: 'Trojan source')
_BIDI = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


#: the ']' that closes a link's or an image's text: '](' (inline) or '][' (reference)
_LINK = re.compile(r"\](?=[(\[])")
#: a line that defines a link reference: '[name]: url'
_LINK_DEF = re.compile(r"^( {0,3})\[(?=[^\]\n]*\]:)", re.MULTILINE)


def markdown_text(text: str) -> str:
    """``text`` for a markdown file that forges and editors render: every ``<`` that could open an HTML
    tag (``<script>``, ``<img onerror=...>``, ``<!--``) written ``&lt;``, so it shows as typed and runs
    nothing; the rest (``<=``, ``a < b``) as it is. A link or an image it would make (``[x](url)``,
    ``![x](url)``, ``[x][ref]``, a line ``[ref]: url``) has its bracket escaped (``\\]``): it shows as
    typed, links nowhere and loads nothing."""
    return _LINK_DEF.sub(r"\1\\[", _LINK.sub(r"\\]", _TAG.sub("&lt;", text)))


class MarkdownLink(str):
    """A line of markdown this program wrote that holds a link (a figure's image): :func:`markdown_lines`
    keeps its link; its text was made safe by :func:`markdown_link`."""


def markdown_link(text: str, target: str, image: bool = True, indent: str = "") -> MarkdownLink:
    """``![text](target)`` (or ``[text](target)``): ``text`` (a label, maybe from data) shown as typed,
    its brackets escaped; ``target`` is a path this program chose."""
    safe = _TAG.sub("&lt;", " ".join(str(text).splitlines())).replace("[", "\\[").replace("]", "\\]")
    return MarkdownLink(f"{indent}{'!' if image else ''}[{safe}]({target})")


def markdown_lines(lines: list[str]) -> str:
    """The lines of a markdown document joined, each made text by :func:`markdown_text` but the links this
    program wrote (:class:`MarkdownLink`)."""
    return "\n".join(x if isinstance(x, MarkdownLink) else markdown_text(x) for x in lines)


def csv_cell(value):
    """A CSV cell a spreadsheet reads as text, never a formula: a string starting with ``=``, ``+``,
    ``-``, ``@``, a tab or a carriage return gets a leading ``'`` (numbers, and ``-`` for none, are kept)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


#: a run of this many characters without a space in a message is a value cut for the terminal
LONG_VALUE = 200
_LONG = re.compile(rf"\S{{{LONG_VALUE},}}")


def cut_long_values(text: str, keep: int = 60) -> str:
    """``text`` with each run of ``LONG_VALUE`` or more characters without a space (a 5,000-digit value
    echoed in an error) cut to its first and last ``keep`` characters and its length, so that an error
    stays one readable line."""
    return _LONG.sub(lambda m: f"{m[0][:keep]}...({len(m[0]):,} characters)...{m[0][-keep:]}", text)


def terminal_text(text: str) -> str:
    """``text`` for a terminal: each control character (an escape sequence's ESC, BEL, a carriage return)
    and bidirectional control written as its escape (``\\x1b``), so it shows and does nothing; line breaks
    and tabs are kept."""
    if text.isprintable():
        return text
    return "".join(
        c
        if c in "\n\t" or (c.isprintable() and c not in _BIDI)
        else (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
        for c in text
    )


#: letters of other scripts drawn like Latin letters (Greek and Cyrillic capitals and small letters)
_LOOKALIKE = str.maketrans(
    "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧαορτυνικАВЕЅІЈКМНОРСТХУаеіјорсуխһԁԛѕԝхӏ",
    "ABEZHIKMNOPTYXaoptuvikABESIJKMHOPCTXYaeijopcyuhdqswxl",
)


def skeleton(text: str) -> str:
    """What ``text`` looks like: compatibility forms folded (NFKC: fullwidth letters, ligatures), letters
    of other scripts drawn like Latin ones mapped to them, invisible format characters dropped."""
    folded = unicodedata.normalize("NFKC", text).translate(_LOOKALIKE)
    return "".join(c for c in folded if unicodedata.category(c) != "Cf")


def confusable(labels) -> list[tuple[str, ...]]:
    """Groups of distinct labels that look the same (one :func:`skeleton`), e.g. ``('RNN', 'RΝΝ')``."""
    groups: dict[str, set[str]] = {}
    for label in labels:
        if isinstance(label, str):
            groups.setdefault(skeleton(label), set()).add(label)
    return [tuple(sorted(g)) for g in groups.values() if len(g) > 1]
