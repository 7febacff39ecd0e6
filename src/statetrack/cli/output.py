# long: every printed form the commands share (width, tables, blocks, JSON), together so that output stays uniform
"""Output shared by every command: the width, tables that fit it, key/value blocks, JSON Lines.

The width is ``COLUMNS`` when set (piped or not), else the terminal's, else 80 (piped output is read
too: logs, mail, files; machines read ``--json``). A table never cuts a value: cells wrap at spaces and
after commas; if the words of every column cannot fit side by side, columns marked optional are left out
with a note naming them; if it still does not fit, each row is printed as a block of ``header: value``
lines (as psql's expanded display). Text from data (labels, names, errors) reaches the terminal with its
control characters written as escapes (``untrusted.terminal_text``): a label holding ``ESC]0;...BEL``
or ``ESC[2J`` shows as typed and does nothing.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from statetrack.config import Split
from statetrack.untrusted import terminal_text


class Guarded:
    """Standard output that never ends a command in a traceback: a character its encoding lacks is written
    as a backslash escape (an ASCII-only terminal), and the first failed write (a full disk: ``>/dev/full``;
    a closed descriptor) is kept in ``error`` while the command goes on, its output dropped, so that its
    work (a run recorded) is done and the failure is said once at the end. A closed pipe (``| head``) is
    passed on as BrokenPipeError: the reader wants no more."""

    def __init__(self, inner, error: OSError | None = None):
        self.inner, self.error = inner, error

    @property
    def encoding(self) -> str:
        return getattr(self.inner, "encoding", None) or "utf-8"

    @property
    def errors(self) -> str:
        return "backslashreplace"

    def isatty(self) -> bool:
        try:
            return self.error is None and self.inner.isatty()
        except (OSError, ValueError):
            return False

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return int(self.inner.fileno())

    def _guard(self, op):
        if self.error is not None:
            return None
        try:
            return op()
        except BrokenPipeError:
            raise
        except OSError as e:
            self.error = e
        except ValueError as e:  # written after the stream was closed
            self.error = OSError(errno.EBADF, str(e))
        return None

    def write(self, text: str) -> int:
        def write():
            try:
                self.inner.write(text)
            except UnicodeEncodeError:
                self.inner.write(text.encode(self.encoding, "backslashreplace").decode(self.encoding))

        self._guard(write)
        return len(text)

    def flush(self) -> None:
        self._guard(self.inner.flush)


@contextlib.contextmanager
def guarded_output() -> Iterator[Guarded]:
    """Around a command: ``sys.stdout`` as a :class:`Guarded` stream (a closed one, ``>&-``, counts as a
    failed write), and a closed stderr (``2>&-``) replaced by the null device, so that progress and
    error lines never land on stdout."""
    old_out, old_err = sys.stdout, sys.stderr
    closed = OSError(errno.EBADF, "it is closed") if old_out is None else None
    out = Guarded(old_out if old_out is not None else open(os.devnull, "w"), closed)  # noqa: SIM115 (a stream)
    sys.stdout = out
    if old_err is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the process's stream)
    try:
        yield out
        out.flush()
    finally:
        sys.stdout, sys.stderr = old_out, old_err
        if out.error is not None and old_out is not None:
            with contextlib.suppress(
                OSError, ValueError
            ):  # the interpreter's own flush at exit finds no error
                os.dup2(os.open(os.devnull, os.O_WRONLY), old_out.fileno())


#: the width of piped output when COLUMNS is not set
PIPE_WIDTH = 80
#: rendered width of a table = sum of the column widths + GAP * (columns - 1)
GAP = 3

#: how a draw of test strings is named in printed titles
SPLIT_NAMES = {
    Split.TEST: "test draw",
    Split.LONG: "long-range draw: the last half of each string leaves both labels possible",
}


def width() -> int:
    cols = os.environ.get("COLUMNS", "").strip()
    if cols.isdigit() and int(cols) > 0:
        return int(cols)
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return PIPE_WIDTH


def console(stderr: bool = False):
    from rich.console import Console

    return Console(width=width(), stderr=stderr, highlight=False)


def say(text: str) -> None:
    """A line of prose on stdout, wrapped at the width (words kept whole, no markup read)."""
    prose(console(), text)


def prose(con, text: str, style: str | None = None) -> None:
    """``text`` wrapped at the console's width by :func:`wrap` (a word wider than the width on a line of
    its own, whole), never markup, never cut."""
    from rich.text import Text

    for line in wrap(terminal_text(str(text)), con.width):
        con.print(Text(line, style=style or ""), soft_wrap=True)


def emit_rows(rows):
    for r in rows:
        print(json.dumps(r))


def show(v) -> str:
    """A value as a person reads it: yes/no, ``-`` for none, floats to 4 significant digits, lists
    comma-separated (``--json`` keeps the full values)."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return ", ".join(map(show, v))
    if isinstance(v, float):
        return f"{v:.4g}"
    return "-" if v is None else str(v)


# -- wrapping ----------------------------------------------------------------------------------------
#: unbreakable pieces: words (split after commas), each with the markers that follow it (`` ?``, `` *``), so
#: that a marker is never alone on a line
_PIECE = re.compile(r"\s+|[^\s,]*,|[^\s,]+(?: [?*](?!\S))*")


def _len(s: str) -> int:
    from rich.cells import cell_len

    return cell_len(s)


def pieces(text: str) -> list[str]:
    """The unbreakable pieces of a cell: words, split after commas."""
    return [p for p in _PIECE.findall(text) if not p.isspace()]


def wrap(text: str, w: int) -> list[str]:
    """Lines of at most ``w`` cells, broken at spaces and after commas; a piece wider than ``w`` is broken
    after its slashes (a long path wraps at its folders); a piece still wider than ``w`` (a
    terminal narrower than a word: ``COLUMNS=5``) stands whole on a line of its own, never cut."""
    lines = []
    for para in str(text).split("\n"):
        line, space = "", ""
        pieces = [
            q
            for p in _PIECE.findall(para)
            for q in (re.findall(r"[^/]*/|[^/]+", p) if _len(p) > w and "/" in p else [p])
        ]
        for p in pieces:
            if p.isspace():
                space = " " if line else ""
                continue
            if line and _len(line + space + p) <= w:
                line += space + p
            else:
                if line:
                    lines.append(line)
                line = p
            space = ""
        lines.append(line)
    return lines


# -- tables ------------------------------------------------------------------------------------------
Justify = Literal["left", "center", "right"]


@dataclass
class Col:
    """A column: its header, the function from a row to the cell's text, and whether it may be left out
    (with a note) when the table is too wide."""

    header: str
    cell: Callable[[Any], str]
    justify: Justify = "left"
    optional: bool = False
    style: str | None = None


def _columns(columns) -> list[Col]:
    if isinstance(columns, dict):
        return [Col(h, fn) for h, fn in columns.items()]
    return list(columns)


def _allocate(mins: list[int], maxs: list[int], total: int) -> list[int]:
    """Column widths: each at least its longest piece, the room left shared towards each natural width."""
    w = list(mins)
    extra = total - sum(w)
    while extra > 0:
        want = [i for i in range(len(w)) if w[i] < maxs[i]]
        if not want:
            break
        i = max(want, key=lambda i: (maxs[i] - w[i]) / maxs[i])
        w[i] += 1
        extra -= 1
    return w


def _chunks(idx: list[int], mins: list[int], total: int) -> list[list[int]] | None:
    """Split the columns ``idx`` into groups that each fit ``total`` with the first column repeated
    (as pandas prints a wide frame); None when the first column and one other do not fit."""
    key, out, cur = idx[0], [], [idx[0]]
    for i in idx[1:]:
        if mins[key] + mins[i] + GAP > total:
            return None
        if sum(mins[j] for j in cur) + mins[i] + GAP * len(cur) > total:
            out.append(cur)
            cur = [key]
        cur.append(i)
    out.append(cur)
    # as many groups as needed, but of even size where they fit: room for every group's widest cells
    size = -(-(len(idx) - 1) // len(out))
    even = [[key, *idx[1:][k : k + size]] for k in range(0, len(idx) - 1, size)]
    return even if all(sum(mins[j] for j in g) + GAP * (len(g) - 1) <= total for g in even) else out


def _layout(
    cols: list, mins: list[int], roomy: list[int], total: int
) -> tuple[list[list[int]], list[int]] | None:
    """The columns of each printed part and the optional columns dropped: the whole table, or the table
    without its optional columns (the last ones first), or the table folded into groups of columns; None
    when even a fold does not fit (then each row is printed as a block)."""

    def fits(idx):
        return sum(mins[i] for i in idx) + GAP * (len(idx) - 1) <= total

    keep = list(range(len(cols)))
    optional = [i for i in reversed(keep) if cols[i].optional]  # the last ones go first
    while not fits(keep) and optional:
        keep.remove(optional.pop(0))
    if fits(keep):
        return [keep], sorted(set(range(len(cols))) - set(keep))
    every = list(range(len(cols)))
    chunks = _chunks(every, roomy, total) or _chunks(every, mins, total)
    return None if chunks is None else (chunks, [])


def print_table(
    title: str | None,
    columns,
    rows,
    caption: str | None = None,
    styles: Callable[[int, int], str | None] | None = None,
    con=None,
) -> None:
    """Print ``rows`` under ``columns`` (a list of Col, or header -> cell function) fitted to the width:
    the whole table if the longest word of every column fits side by side; else without its optional
    columns (a note names them); else folded into groups of columns, the first column repeated in each;
    else one block per row. ``styles(row_index, column_index)``: an optional rich style for a cell."""

    con = con or console()
    total = con.width
    cols = _columns(columns)
    texts = [[terminal_text(str(c.cell(r))) for c in cols] for r in rows]  # labels from data: no escapes
    cells = [[c.header] + [row[i] for row in texts] for i, c in enumerate(cols)]
    mins = [max(_len(p) for t in col for p in pieces(t) or [""]) for col in cells]
    maxs = [max(1, max(_len(line) for t in col for line in t.split("\n"))) for col in cells]

    # a folded table repeats its first column (the row's label): give it room for a few words per line
    # where that still fits, rather than one word per line
    roomy = list(mins)
    roomy[0] = min(maxs[0], max(mins[0], total // 4))
    layout = _layout(cols, mins, roomy, total)
    if layout is None:
        return print_blocks(title, [c.header for c in cols], texts, caption, styles, con)
    parts, dropped = layout
    if title:  # title and caption wrap at the width, not at the table's
        prose(con, title, "bold")
    for k, idx in enumerate(parts):
        if len(parts) > 1:
            prose(
                con, f"({k + 1}/{len(parts)}: the columns do not fit in {total} columns side by side)", "dim"
            )
        low = roomy if len(parts) > 1 and sum(roomy[i] for i in idx) + GAP * (len(idx) - 1) <= total else mins
        con.print(
            _table(
                cols,
                idx,
                texts,
                _allocate([low[i] for i in idx], [maxs[i] for i in idx], total - GAP * (len(idx) - 1)),
                styles,
            )
        )
    if caption:
        prose(con, caption, "dim")
    if dropped:
        prose(
            con,
            f"(not shown, too wide for {total} columns: {', '.join(cols[i].header for i in dropped)}; "
            "a wider COLUMNS or --json shows them)",
            "dim",
        )


def _table(cols: list[Col], idx: list[int], texts, widths: list[int], styles):
    from rich import box
    from rich.table import Table
    from rich.text import Text

    t = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    for i, w in zip(idx, widths, strict=True):
        t.add_column(
            Text("\n".join(wrap(cols[i].header, w))),
            width=w,
            no_wrap=True,
            overflow="fold",
            justify=cols[i].justify,
            style=cols[i].style,
        )
    for r, row in enumerate(texts):
        t.add_row(
            *(
                Text("\n".join(wrap(row[i], w)), style=(styles(r, i) if styles else None) or "")
                for i, w in zip(idx, widths, strict=True)
            )
        )
    return t


def print_blocks(
    title: str | None,
    headers: list[str],
    texts: list[list[str]],
    caption: str | None = None,
    styles=None,
    con=None,
) -> None:
    """Each row as a block: its first cell, then one ``header: value`` line per other column, values
    wrapped (the layout of a table too wide for the terminal, and of one record)."""
    from rich.text import Text

    con = con or console()
    total = con.width
    title = terminal_text(title) if title else title
    texts = [[terminal_text(t) for t in row] for row in texts]
    keyw = min(max((_len(h) for h in headers[1:]), default=0) + 2, max(8, total // 2))
    out: list[str | tuple[str, str | None]] = [title, ""] if title else []
    for r, row in enumerate(texts):
        out.append((row[0], "bold"))
        for i, (h, v) in enumerate(zip(headers[1:], row[1:], strict=True), start=1):
            style = styles(r, i) if styles else None
            lines = wrap(v, max(1, total - keyw))
            key = wrap(h + ":", keyw - 1)
            for k in range(max(len(lines), len(key))):
                kt = key[k] if k < len(key) else ""
                kt = (kt + " ").ljust(keyw) if kt else " " * keyw  # a key wider than its column keeps a space
                out.append((kt + (lines[k] if k < len(lines) else ""), style))
        out.append("")
    if caption:
        out.append(caption)
    for line in out:
        text, style = line if isinstance(line, tuple) else (line, None)
        if _len(text) > total:
            prose(con, text, style)
        else:
            con.print(Text(text, style=style or ""), soft_wrap=True)


def print_record(title: str, pairs: list[tuple[str, str]], con=None) -> None:
    """One record as ``key: value`` lines under a title (e.g. ``runs show``)."""
    print_blocks(None, ["", *(k for k, _ in pairs)], [[title, *(v for _, v in pairs)]], con=con)


def rows_out(a, rows, title, columns):
    """JSON Lines with --json, else a table; ``columns`` maps each header to a cell function (or is a
    list of Col)."""
    if a.json:
        emit_rows(rows)
        return 0
    print_table(title, columns, rows)
    return 0


def print_horizons(horizons: dict, con=None, title: str | None = None, rows: int = 12) -> None:
    """The failure horizon of every pair of states (``horizon.measure_horizons``): the pairs broken
    first first, at most ``rows`` of them, then the counts."""
    pairs = horizons.get("pairs")
    if pairs is None:  # a run stored before horizons were measured per pair of states
        pairs = [{**r, "pair": ["-", "-"], "families": 1} for r in horizons.get("families", [])]
    if not pairs:
        return
    shown = sorted(pairs, key=lambda r: (r["horizon"] is None, r["horizon"] or 0))[:rows]
    n = horizons.get("family_horizon", horizons.get("horizon"))
    skipped = len(pairs) - len(shown)
    counts = (
        f"{horizons['families_tested']} families on {len(pairs)} pairs of states"
        f" (of {horizons['pairs_total']}"
        + (f"; {horizons['pairs_skipped']} beyond the cap" if horizons.get("pairs_skipped") else "")
        + "".join(f"; {c} {why}" for why, c in horizons.get("no_family", {}).items())
        + ")"
        if "families_tested" in horizons
        else ""
    )
    verdict = (
        f"family horizon {n}: on the families the model first confuses {' and '.join(horizons['pair'])} "
        f"(on {horizons['family']})"
        if n is not None and horizons.get("pair")
        else f"family horizon {n}: the shortest family string the model gets wrong"
        if n is not None
        else "no failure on the families: every family's two strings kept apart at every n tested"
    )
    print_table(
        title or f"witness families per pair of states, up to length {horizons.get('horizon_max')}",
        [
            Col("pair of states", lambda r: " | ".join(r["pair"])),
            Col("horizon", lambda r: "none" if r["horizon"] is None else str(r["horizon"]), "right"),
            Col(
                "n", lambda r: "-" if r["horizon_n"] is None else str(r["horizon_n"]), "right", optional=True
            ),
            Col("families", lambda r: str(r["families"]), "right", optional=True),
            Col("first broken family", lambda r: r["family"] if r["horizon"] is not None else "-"),
            Col("accuracy", lambda r: f"{100 * r['accuracy']:.1f}", "right", optional=True),
        ],
        shown,
        caption=verdict
        + (f"; {counts}" if counts else "")
        + (f"; {skipped} more pairs not shown" if skipped else ""),
        con=con,
    )
    if "verified" in horizons:
        print_verified(horizons["verified"], con=con, rows=rows)


def print_verified(v: dict, con=None, rows: int = 12) -> None:
    """The verified horizon (``verify.Verified.as_dict``): the shortest wrong strings every search found,
    then what the claim rests on."""
    n = v["horizon"]
    head = (
        f"verified horizon {n}: the shortest wrong string found has {n} symbols"
        if n is not None
        else f"no wrong string found up to {v['max_len']:,}"
    )
    wrong = v.get("wrong") or []
    if wrong:
        print_table(
            "the shortest wrong strings (every search)",
            [
                Col("length", lambda r: str(r["length"]), "right"),
                Col("string", lambda r: r["text"] if len(r["text"]) <= 40 else r["text"][:37] + "..."),
                Col("right", lambda r: r["label"]),
                Col("answer", lambda r: r["answer"]),
                Col("state", lambda r: r["state"], optional=True),
                Col("nearest", lambda r: r["confused_with"] or "-", optional=True),
                Col("found by", lambda r: r["source"], optional=True),
            ],
            wrong[:rows],
            caption=f"{head}; state: where the string ends in the task's minimal automaton; nearest: the "
            "state whose centre (mean model state over the strings it answers right) is nearest the "
            f"model's state; {v['rests_on']}",
            con=con,
        )
    else:
        prose(con or console(), f"{head}; {v['rests_on']}")
    failing = [f for s in v.get("searches", []) for f in s.get("failing_prefixes", [])]
    by: dict[str, list[str]] = {}
    for f in failing:
        by.setdefault(f["state"], []).append(f["prefix"] or "(empty)")
    if by:
        prose(
            con or console(),
            "prefixes that fail in a family whose shortest access word does not (state: prefixes): "
            + "; ".join(
                f"{q}: {', '.join(ps[:4])}" + (f" and {len(ps) - 4} more" if len(ps) > 4 else "")
                for q, ps in by.items()
            ),
        )


def print_metrics(title: str, metrics, con=None) -> None:
    """The per-length table of one run (train, eval, runs show): accuracy with its 95% (Wilson)
    interval, the chance of that length's test set, and n/a where a length has no test set."""
    from statetrack.training.evaluation import longest_generalized, uncertain_judgement

    def pct(v):
        return "-" if v is None else f"{100 * v:.1f}"

    def acc(m):
        return (
            f"n/a ({m.note})"
            if m.accuracy is None
            else pct(m.accuracy) + (" ?" if m.decided is False else "")
        )

    def interval(m):
        return "-" if m.accuracy is None else f"{pct(m.accuracy_low)}-{pct(m.accuracy_high)}"

    longest = longest_generalized(metrics)
    if metrics and all(m.accuracy is None for m in metrics):
        reasons = "; ".join(dict.fromkeys(m.note or "no test set" for m in metrics))
        verdict = f"not measurable at any length ({reasons})"
    else:
        verdict = (
            f"longest length with accuracy >= 90% (and at every shorter test length): {longest or 'none'}"
        )
    print_table(
        title,
        [
            Col("length", lambda m: str(m.length), "right"),
            Col("accuracy", acc, "right"),
            Col("95% interval", interval, "right", optional=True),
            Col("n", lambda m: f"{m.n_sequences:,}", "right", optional=True),
            Col("chance", lambda m: pct(m.chance), "right"),
            Col(
                "scaled", lambda m: "-" if m.scaled_accuracy is None else f"{m.scaled_accuracy:+.3f}", "right"
            ),
            Col("token acc", lambda m: pct(m.token_accuracy), "right", optional=True),
            Col("sequence acc", lambda m: pct(m.sequence_accuracy), "right", optional=True),
        ],
        metrics,
        caption=verdict
        + (
            " (?: undecided at a length it reads: its interval contains 90% after every doubling of the "
            "sequences, or a 95% interval contains it)"
            if uncertain_judgement(metrics)
            else ""
        )
        + "; chance: the majority share of the final label's distribution in that length's draw",
        con=con,
    )
