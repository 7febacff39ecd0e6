"""The tables of the HTML report: our number beside the paper's, laid out for the window's width.

A study table becomes a ``Grid``: columns under optional group headers (``extrap. acc``: ``ours`` |
``paper``), and cells with a main line, an optional second line in small type (the seeds' range where the
seeds differ) and a hover text. Published columns come first, each with our number beside it, then the
'>=90% up to' length, then our accuracy at each test length.

Width: a grid is drawn whole. Where its columns (estimated from the longest word of every line, at the
tables' 14 px) cannot fit a window of ``PAGE_WIDTH`` (1,280) pixels, a second rendering split into parts
that fit is added, and a CSS media query shows the whole table in any window wide enough for it and the
parts only in a narrower one. Paired columns (ours | paper) stay in one part; each part repeats the
first (model) column, as a terminal folds a wide table. No script: the file is the page.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

from statetrack.report.render import Cell
from statetrack.report.selection import MARK

#: the window width a table must fit without folding, in CSS pixels
PAGE_WIDTH = 1280
#: the page's horizontal padding (2 x 2em of 15 px), a vertical scroll bar, and a margin
PAGE_MARGIN = 2 * 30 + 20 + 60
#: an upper estimate of a character's width at the tables' 14 px (measured in Chromium: 7.1 px for cells of
#: digits, 7.5 for a model's label), and of a cell's padding and border
CHAR_PX, CELL_PX = 7.6, 19


def esc(s) -> str:
    return html.escape(str(s), quote=True)


@dataclass(frozen=True)
class HCell:
    """A cell as the page draws it: ``text`` (its main line), ``detail`` (a second line in small type),
    ``title`` (the text shown on hover), its CSS classes, and ``markup``: trusted HTML in place of the
    escaped text (the verdict cells)."""

    text: str
    detail: str = ""
    title: str = ""
    classes: tuple[str, ...] = ()
    markup: str | None = None
    telling: bool = True  # the detail is shown; else only on hover and with the page's toggle

    def lines(self) -> list[str]:
        return [self.text, self.detail] if self.detail and self.telling else [self.text]


@dataclass(frozen=True)
class Column:
    """A column: its header, the group header above it (None: the header spans both header rows), and its
    unit: columns of one unit (ours | paper) are never split across parts."""

    header: str
    group: str | None = None
    unit: int = 0
    paper: bool = False


@dataclass
class Grid:
    columns: list[Column]
    rows: list[list[HCell]]
    caption: str = ""
    wrap: bool = False  # cells of prose: they wrap, and a column is as wide as its longest word (at most 24)
    classes: list[str] = field(default_factory=list)


#: trailing markers of a cell's text that stay on its first line
_MARKS = re.compile(r"((?: [?*])+)$")
#: a cell's number: 95.3, 0.512, >=500, x
_NUMBER = re.compile(r"(>=)?-?[\d.]+|x")


def split_text(text: str) -> tuple[str, str]:
    """'95.3 [50.1-100.0] ? *' -> ('95.3 ? *', '[50.1-100.0]'): the number and its marks, then the seeds'
    range (or '(median [min-max])') for a second line."""
    m = _MARKS.search(text)
    marks = m[1] if m else ""
    core = text[: len(text) - len(marks)]
    for sep in (" [", " ("):
        i = core.find(sep)
        if i > 0 and _NUMBER.fullmatch(core[:i]):
            return core[:i] + marks, core[i + 1 :]
    return text, ""


def _cell(c: Cell, paper: bool = False, title: str = "", cell=None, threshold: float | None = None) -> HCell:
    """``cell``: the ``TableCell`` behind a number of ours: its seeds' range is shown where it holds
    ``threshold`` (the seeds disagree on the judgement), else on hover and with the toggle."""
    main, detail = split_text(c.text)
    classes = tuple(x for x, on in (("paper", paper), ("differs", c.differs)) if on)
    if detail and not title:
        title = f"{main.split(' ')[0]}; over the seeds {detail}"
    values = getattr(cell, "values", None) or []
    telling = threshold is None or not values or min(values) < threshold <= max(values)
    return HCell(main, detail, title, classes, telling=telling)


def study_grid(t, threshold: float = 0.9) -> Grid:
    """A study table (``report.table.StudyTable``) with each published column beside our number;
    ``threshold``: the metric's judgement (a seeds' range that holds it is shown, others on hover)."""
    heads = t.headers()
    rows = t.cells()
    # a seeds' range says something where it holds the threshold of the metric's judgement (0.9 of an
    # accuracy); lengths (longest) always
    thr = None if t.kind in ("longest", "horizon") else threshold
    if t.kind != "per_length":
        return _task_grid(t, heads, rows, thr)
    return _length_grid(t, heads, rows, thr)


def _task_grid(t, heads: list[str], rows: list[list[Cell]], thr: float | None) -> Grid:
    """mean / longest tables: model, train len, seeds, then per task: ours (| paper)."""
    cols: list[Column] = []
    tasks: list[str | None] = []
    unit = 0
    for h in heads:
        if h.startswith("paper: "):
            cols[-1] = Column("ours", cols[-1].header, unit)
            cols.append(Column("paper", h.removeprefix("paper: "), unit, paper=True))
            tasks.append(None)
        else:
            unit += 1
            cols.append(Column(h, None, unit))
            tasks.append(h if h in t.task_columns else None)
    body = [
        [
            _cell(c, cols[i].paper, cell=row["cells"].get(tasks[i]) if tasks[i] else None, threshold=thr)
            for i, c in enumerate(r)
        ]
        for r, row in zip(rows, t.rows, strict=True)
    ]
    return Grid(cols, body, t.caption)


def _length_grid(t, heads: list[str], rows: list[list[Cell]], thr: float | None) -> Grid:
    """per_length tables: model, train len, seeds, lr, [train acc], published pairs, >=90% up to, the lengths."""
    n_len = len(t.lengths)
    keys = list(t.columns)
    validation = any(r.get("compare", {}).get(k) == "validation" for r in t.rows for k in keys)
    lead = [0, 1, 2, 3] + ([] if validation else [4])
    cols = [Column(heads[i], None, u) for u, i in enumerate(lead)]
    unit = len(cols)
    body = [[_cell(r[i]) for i in lead] for r in rows]
    for key in keys:
        unit += 1
        cols += [Column("ours", t.columns[key], unit), Column("paper", t.columns[key], unit, paper=True)]
        for row, cells in zip(t.rows, body, strict=True):
            ours = row.get("ours_text", {}).get(key, "-")
            pub = row["published"].get(key)
            differs = bool(row["differs"].get(key))
            paper_text = "-" if pub is None else (pub if isinstance(pub, str) else f"{100 * float(pub):.1f}")
            cells.append(
                HCell(
                    ours + (f" {MARK}" if differs else ""),
                    "",
                    row.get("ours_title", {}).get(key, ""),
                    ("differs",) if differs else (),
                )
            )
            cells.append(HCell(paper_text, "", "", ("paper",)))
    unit += 1
    first_len = 5
    cols.append(Column(heads[first_len + n_len], None, unit))
    for r, cells in zip(rows, body, strict=True):
        cells.append(_cell(r[first_len + n_len]))
    for j, n in enumerate(t.lengths):
        unit += 1
        cols.append(Column(heads[first_len + j], "accuracy (%) at each test length", unit))
        for r, row, cells in zip(rows, t.rows, body, strict=True):
            cells.append(_cell(r[first_len + j], cell=row["cells"].get(n), threshold=thr))
    return Grid(cols, body, t.caption)


def plain_grid(headers: list[str], rows: list[list], caption: str = "", wrap: bool = False) -> Grid:
    """A grid of text cells (or ``HCell``s) under one row of headers."""
    cols = [Column(h, None, i) for i, h in enumerate(headers)]
    body = [[x if isinstance(x, HCell) else HCell(str(x)) for x in r] for r in rows]
    return Grid(cols, body, caption, wrap)


def _words(s: str) -> int:
    return max((len(w) for w in s.split()), default=1)


def widths(g: Grid) -> list[float]:
    """Each column's width in pixels, at most: headers wrap at spaces; cells do not, except the first
    column's (within 20 characters) and those of a grid of prose (``wrap``, within 24)."""
    out = []
    for i, c in enumerate(g.columns):
        longest = _words(c.header)
        wraps = g.wrap or i == 0  # the first column (a model's label) wraps at spaces too
        for r in g.rows:
            for line in r[i].lines():
                n = max(_words(line), min(len(line), 24 if g.wrap else 20)) if wraps else len(line)
                longest = max(longest, n)
        out.append(longest * CHAR_PX + CELL_PX)
    return out


def parts(g: Grid, room: float) -> list[list[int]]:
    """The grid's columns in parts that each fit ``room`` pixels, the first column repeated; one part if
    the whole grid fits. A unit (ours | paper) is never split."""
    w = widths(g)
    if sum(w) <= room:
        return [list(range(len(g.columns)))]
    units: list[list[int]] = []
    for i, c in enumerate(g.columns[1:], 1):
        if units and g.columns[units[-1][0]].unit == c.unit:
            units[-1].append(i)
        else:
            units.append([i])
    out, cur = [], [0]
    for u in units:
        if len(cur) > 1 and sum(w[j] for j in cur) + sum(w[j] for j in u) > room:
            out.append(cur)
            cur = [0]
        cur += u
    out.append(cur)
    return out


def _cls(names) -> str:
    names = [n for n in names if n]
    return f' class="{" ".join(names)}"' if names else ""


def _td(c: HCell) -> str:
    hidden = "" if c.telling else ' class="more"'
    more = f"<small{hidden}>{esc(c.detail)}</small>" if c.detail else ""
    body = c.markup if c.markup is not None else esc(c.text) + more
    title = f' title="{esc(c.title)}"' if c.title else ""
    return f"<td{_cls(c.classes)}{title}>{body}</td>"


def _table(g: Grid, idx: list[int], caption: str, extra: str = "") -> str:
    cols = [g.columns[i] for i in idx]
    out = [f'<div class="scroll"><table{_cls([*g.classes, "wrap" if g.wrap else "", extra])}>']
    if caption:
        out.append(f"<caption>{esc(caption)}</caption>")
    out.append("<thead>")
    if any(c.group for c in cols):
        top, sub, k = [], [], 0
        while k < len(cols):
            c = cols[k]
            if c.group is None:
                top.append(f'<th rowspan="2"{_cls(["paper" if c.paper else ""])}>{esc(c.header)}</th>')
                k += 1
                continue
            span = 1
            while k + span < len(cols) and cols[k + span].group == c.group:
                span += 1
            top.append(f'<th colspan="{span}" class="group">{esc(c.group)}</th>')
            sub += [
                f"<th{_cls(['paper' if x.paper else ''])}>{esc(x.header)}</th>" for x in cols[k : k + span]
            ]
            k += span
        out.append("<tr>" + "".join(top) + "</tr><tr>" + "".join(sub) + "</tr>")
    else:
        out.append(
            "<tr>"
            + "".join(f"<th{_cls(['paper' if c.paper else ''])}>{esc(c.header)}</th>" for c in cols)
            + "</tr>"
        )
    out.append("</thead><tbody>")
    for r in g.rows:
        out.append("<tr>" + "".join(_td(r[i]) for i in idx) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


@dataclass
class Rendered:
    """A grid as HTML, and the CSS rules (media queries) that choose between its whole and folded forms."""

    html: str
    css: str = ""
    folded: bool = False
    width: float = 0.0


def grid_html(g: Grid, key: str, page_width: int = PAGE_WIDTH) -> Rendered:
    """The grid whole; where it cannot fit ``page_width``, also split into parts that do, each form shown
    by a media query in the windows it fits (``key``: a unique class name for those rules)."""
    w = sum(widths(g))
    room = page_width - PAGE_MARGIN
    ps = parts(g, room)
    whole = _table(g, list(range(len(g.columns))), g.caption)
    if len(ps) == 1:
        return Rendered(whole, width=w)
    need = int(w + PAGE_MARGIN)
    folded = []
    for k, idx in enumerate(ps):
        names = ", ".join(
            g.columns[i].header
            if g.columns[i].group is None
            else f"{g.columns[i].group} ({g.columns[i].header})"
            for i in idx[1:]
        )
        folded.append(
            f'<p class="part">part {k + 1} of {len(ps)} (this window is too narrow for the whole '
            f"table; a window {need} px wide shows it whole): {esc(names)}</p>"
        )
        folded.append(_table(g, idx, g.caption if k == len(ps) - 1 else ""))
    body = f'<div class="whole {key}">{whole}</div><div class="folded {key}">{"".join(folded)}</div>'
    css = (
        f"@media (max-width: {need - 1}px) {{ div.whole.{key} {{ display: none; }} }}\n"
        f"@media (min-width: {need}px) {{ div.folded.{key} {{ display: none; }} }}\n"
    )
    return Rendered(body, css, True, w)
