"""A study's report as one self-contained HTML page, and an index of the studies of a folder.

The page holds what the markdown report holds: the header (command, machine, date), the tables with the
same headers and cell texts (``report.render``; the paper's columns shaded, cells that differ from the
paper marked by their ``differs`` flag), the differences, the figures inline as SVG (matplotlib's SVG
backend, glyphs as paths) with a caption saying what each shows, the probes and the study's notes. No
script, no stylesheet or font from elsewhere: the file is the page.

The page takes the window's width. A table wider than a 1,280-pixel window is split into parts that fit,
each repeating the model column (as a terminal folds a wide table), so that no column, the paper's least
of all, hides behind a scroll bar. A report with no complete run, or only some, says so at its top.

``index.html`` summarises every study written to the folder: runs complete and missing, cells that agree
with the paper, run time, device, a thumbnail of its first figure, and a link to its page. It is built
from ``index.json`` beside it (one record per study, updated by each ``write_html``), not from the pages.
That file may come from others (a shared folder, a copied report): its records are read as text, every
value escaped, and every link is built from the study's name (``NAME.html``, ``NAME-leaderboard.html``,
``NAME/thumbnail.png``), never copied from the file; a record whose key is not a study name is dropped.
"""
from __future__ import annotations

import html
import json
from pathlib import Path

from statetrack.errors import UserError
from statetrack.files import ensure_dir, write_file
from statetrack.report.leaderboard import write_leaderboard
from statetrack.report.plots import close, save, svg_text
from statetrack.report.render import Cell
from statetrack.report.verdicts import CAPTION as VERDICTS_CAPTION
from statetrack.report.writer import (
    INTERVALS_CAPTION,
    LONG_INTERVALS_CAPTION,
    PROBE_HEADERS,
    Report,
    difference_items,
    interval_tables,
    probe_cells,
    report_figures,
    runs_line,
    scale_note,
)
from statetrack.untrusted import name_problem, read_json
from statetrack.version import __version__

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; padding: 1.2em 2em 2em;
       color: #1d1d1f; }
h1 { font-size: 1.5em; margin-top: 0; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
code { background: #f3f3f3; padding: 0 .25em; border-radius: 3px; overflow-wrap: anywhere; }
dl.meta { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .2em 1em; }
dl.meta dt { font-weight: 600; } dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.status { padding: .6em 1em; border-radius: 4px; border: 1px solid; margin: 1em 0; font-weight: 600; }
.status.empty { background: #fdecea; border-color: #e0a39d; color: #7d1a12; }
.status.partial { background: #fff6e0; border-color: #e5c77a; color: #6b4d00; }
.part { font-size: .85em; color: #555; margin: 1em 0 -.6em; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 1em 0; font-size: 14px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d0d0; padding: .25em .6em; text-align: right; white-space: nowrap; }
thead th { background: #eef1f5; white-space: normal; vertical-align: bottom; }
th:first-child, td:first-child { text-align: left; position: sticky; left: 0; background: #fff; }
thead th:first-child { background: #eef1f5; }
th.paper, td.paper { background: #f7f4ea; color: #555; }
td.differs { color: #a40000; font-weight: 600; }
caption { caption-side: bottom; text-align: left; font-size: .85em; color: #555; padding-top: .4em;
          white-space: normal; }
figure { margin: 1.5em 0; } figure svg { max-width: min(100%, 62em); height: auto; display: block; }
figcaption { font-size: .85em; color: #444; max-width: 62em; }
.notes { white-space: pre-wrap; max-width: 62em; }
table.index td { vertical-align: middle; white-space: normal; }
table.index img { width: 220px; height: auto; display: block; }
footer { margin-top: 3em; font-size: .8em; color: #777; }
"""

#: the window width a table must fit without scrolling, in CSS pixels
PAGE_WIDTH = 1280
#: room for the table inside it: the body's padding (2 x 2em of 15 px) and a vertical scroll bar, with a margin
TABLE_ROOM = PAGE_WIDTH - 2 * 30 - 20 - 60
#: an upper estimate of a character's width at the tables' 14 px (measured in Chromium: 7.1 px for cells of
#: digits, 7.5 for a model's label), and of a cell's padding and border
CHAR_PX, CELL_PX = 7.6, 19


def esc(s) -> str:
    return html.escape(str(s), quote=True)


def _cls(names: list[str]) -> str:
    return f' class="{" ".join(names)}"' if names else ""


def _width(header: str, texts: list[str]) -> float:
    """A column's width in pixels, at most: headers wrap at spaces, cells do not."""
    longest = max([len(w) for w in header.split()] + [len(t) for t in texts] + [1])
    return longest * CHAR_PX + CELL_PX


def column_parts(headers: list[str], rows: list[list[Cell]], room: float = TABLE_ROOM) -> list[list[int]]:
    """The table's columns in parts that each fit ``room`` pixels with the first (model) column repeated:
    one part if the whole table fits. A part never starts with a paper column, so each paper column
    stays beside ours."""
    widths = [_width(h, [r[i].text for r in rows]) for i, h in enumerate(headers)]
    if sum(widths) <= room:
        return [list(range(len(headers)))]
    parts, cur = [], [0]
    for i in range(1, len(headers)):
        if sum(widths[j] for j in cur) + widths[i] > room and len(cur) > 1:
            keep = []  # a paper column pulls the columns it follows into the next part
            while headers[i].startswith("paper") and len(cur) > 2 and headers[cur[-1]].startswith("paper"):
                keep.insert(0, cur.pop())
            if headers[i].startswith("paper") and len(cur) > 2:
                keep.insert(0, cur.pop())
            parts.append(cur)
            cur = [0, *keep]
        cur.append(i)
    parts.append(cur)
    return parts


def table_html(headers: list[str], rows: list[list[Cell]], caption: str = "", css: str = "") -> str:
    """The table, split into parts that fit the page (``column_parts``); the caption under the last."""
    paper = [h.startswith("paper") for h in headers]
    parts = column_parts(headers, rows)
    out = []
    for k, idx in enumerate(parts):
        if len(parts) > 1:
            out.append(f'<p class="part">part {k + 1} of {len(parts)} (the columns do not fit one table):'
                       f" {esc(', '.join(headers[i] for i in idx[1:]))}</p>")
        out.append(f'<div class="scroll"><table{_cls([css] if css else [])}>')
        if caption and k == len(parts) - 1:
            out.append(f"<caption>{esc(caption)}</caption>")
        out.append("<thead><tr>" + "".join(f"<th{_cls(['paper'] if paper[i] else [])}>{esc(headers[i])}</th>"
                                           for i in idx) + "</tr></thead><tbody>")
        for row in rows:
            out.append("<tr>" + "".join(
                f"<td{_cls([c for c, on in (('paper', paper[i]), ('differs', row[i].differs)) if on])}>"
                f"{esc(row[i].text)}</td>" for i in idx) + "</tr>")
        out.append("</tbody></table></div>")
    return "\n".join(out)


def _plain(rows: list[list[str]]) -> list[list[Cell]]:
    return [[Cell(x) for x in r] for r in rows]


def figure_html(svg: str, caption: str, stem: str) -> str:
    return f'<figure id="{esc(stem)}">{svg}<figcaption>{esc(caption or stem)}</figcaption></figure>'


def status_html(rep: Report) -> str:
    """A warning at the top of an empty or partial report ('' for a complete one)."""
    total, done = len(rep.results), rep.complete
    if done == 0:
        return (f'<p class="status empty">Empty report: none of the {total} runs of this grid is complete in the '
                f"database, so every table below is empty. Run <code>statetrack sweep {esc(rep.study.name)} "
                f"--scale {esc(rep.scale)}</code> (with the same --db) first.</p>")
    if done < total:
        return (f'<p class="status partial">Partial report: {done} of {total} runs of this grid are complete; '
                f"{total - done} are missing and their cells show '-'.</p>")
    return ""


def page(rep: Report, meta: dict, svgs: list[tuple[str, str, str, str]]) -> str:
    """The HTML text; ``svgs``: (section, stem, svg text, caption) of each figure."""
    study = rep.study
    parts = [f"<h1>{esc(study.title)}</h1>", status_html(rep), '<dl class="meta">']
    for k, v in meta.items():
        parts.append(f"<dt>{esc(k)}</dt><dd>{f'<code>{esc(v)}</code>' if k == 'Command' else esc(v)}</dd>")
    parts.append(f"<dt>Study</dt><dd><code>{esc(study.name)}</code>, scale <code>{esc(rep.scale)}</code></dd>"
                 f"<dt>Source</dt><dd>{esc(study.source)}</dd></dl>")
    for text in (scale_note(rep), runs_line(rep)):
        if text:
            parts.append(f"<p>{esc(text.replace('`', ''))}</p>")
    for t in rep.tables:
        parts.append(f"<h2>{esc(t.title)}" + (f" (table <code>{esc(t.name)}</code>)" if t.name != "main" else "")
                     + "</h2>")
        parts.append(table_html(t.headers(), t.cells(), t.caption))
        head, items = difference_items(t, study)
        if head:
            parts.append(f"<p><strong>{esc(head)}</strong></p>")
        if items:
            parts.append("<ul>" + "".join(f"<li>{esc(x)}</li>" for x in items) + "</ul>")
        parts += [figure_html(svg, caption, stem) for section, stem, svg, caption in svgs if section == t.name]
    probes = rep.probe_rows()
    if probes:
        parts.append("<h2>Probes</h2>")
        parts.append(table_html(["model", "probe", "runs", *PROBE_HEADERS],
                                _plain([[r["model"], r["probe"], str(r["runs"]), *probe_cells(r)] for r in probes]),
                                "accuracy (%) of the trained models on fixed inputs (median over runs); traces: "
                                "one seeded sequence per probe: input, target and the model's P(1) over time"))
        parts += [figure_html(svg, caption, stem) for section, stem, svg, caption in svgs if section == "probes"]
    if rep.verdicts is not None:
        vt = rep.verdicts
        parts.append("<h2>The theory's verdict beside every cell</h2>")
        parts.append(f"<p>{esc(vt.summary())} The <a href=\"{esc(study.name)}-leaderboard.html\">leaderboard</a> "
                     "ranks the models.</p>")
        rows = [[label, *("-" if c is None else c.text() for c in cells)] for label, cells in vt.rows]
        parts.append(table_html(["model", *vt.columns], _plain(rows), VERDICTS_CAPTION))
    for split, title, caption in (("test", "Accuracy of every run, with 95% intervals", INTERVALS_CAPTION),
                                  ("long", "Accuracy of every run on the long-range draw, with 95% intervals",
                                   LONG_INTERVALS_CAPTION)):
        intervals = interval_tables(rep, split)
        if intervals:
            parts.append(f"<h2>{title}</h2>")
            for name, head, rows in intervals:
                parts.append(table_html(head, _plain(rows),
                                        caption if len(intervals) == 1 else f"table {name}: {caption}"))
    if study.notes:
        parts += ["<h2>Notes (from the study file)</h2>", f'<p class="notes">{esc(study.notes.strip())}</p>']
    parts.append(f'<footer>statetrack {esc(__version__)}; <a href="index.html">all reports</a></footer>')
    return _document(study.title, "\n".join(p for p in parts if p))


def _document(title: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head>\n<body>\n{body}\n</body></html>\n")


def summary(rep: Report, meta: dict, page_name: str, thumbnail: str | None) -> dict:
    """The index's record of one study (index.json)."""
    compared, agree = rep.agreement()
    return {"study": rep.study.name, "title": rep.study.title, "scale": rep.scale, "page": page_name,
            "runs": len(rep.results), "complete": rep.complete, "missing": rep.missing,
            "cells_compared": compared, "cells_agree": agree, "run_time_s": round(rep.wall_time, 1),
            "devices": rep.devices, "machines": rep.machines, "thumbnail": thumbnail,
            "leaderboard": f"{rep.study.name}-leaderboard.html" if rep.verdicts is not None else None,
            "date": meta.get("Date"), "command": meta.get("Command")}


def write_html(rep: Report, out, meta: dict | None = None) -> Path:
    """Write ``out``/<study>.html and its record in ``out``/index.json, then ``out``/index.html from that
    file; returns the page's path."""
    meta = meta or {}
    out = ensure_dir(out, f"cannot write the report in {str(out)!r}")
    figs = report_figures(rep)
    thumbnail = None
    try:
        svgs = [(f.section, f.stem, svg_text(f.fig), f.caption) for f in figs]
        if figs:  # the index's thumbnail: the first figure, small
            folder = ensure_dir(out / rep.study.name, f"cannot write the report in {str(out)!r}")
            thumb = save(figs[0].fig, folder, "thumbnail", ("png",))[0]
            thumbnail = f"{rep.study.name}/{thumb.name}"
    finally:
        for f in figs:
            close(f.fig)
    path = write_file(out / f"{rep.study.name}.html", page(rep, meta, svgs), what="report")
    if rep.verdicts is not None:
        write_leaderboard(rep.verdicts, rep.study.title, out, meta)
    records = read_index(out)
    records[rep.study.name] = summary(rep, meta, path.name, thumbnail)
    write_file(out / "index.json", json.dumps(records, indent=1, sort_keys=True) + "\n", what="report")
    write_index(out, records)
    return path


def read_index(folder) -> dict[str, dict]:
    """The records of ``folder``/index.json (an unreadable, damaged or absent file: none), keyed by study
    name; a record under a key that is not a study name (``untrusted.name_problem``) is dropped."""
    try:
        data = read_json(Path(folder) / "index.json", "report index")
    except (OSError, ValueError, UserError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict) and name_problem(k) is None}


def _duration(s: float) -> str:
    if s < 10:
        return f"{s:.1f} s"
    s = int(round(s))
    return f"{s} s" if s < 120 else f"{s // 60} min {s % 60:02d} s" if s < 7200 else f"{s / 3600:.1f} h"


def _count(v) -> int:
    """A count of a record read from index.json (anything else: 0)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def index_row(name: str, r: dict) -> list[str]:
    """The row of study ``name`` in the index, as HTML cells: links built from ``name`` alone, the record's
    values escaped (``r`` may come from another program's index.json)."""
    page = f"{name}.html"
    thumb = (f'<a href="{esc(page)}"><img src="{esc(name)}/thumbnail.png" alt="first figure of {esc(name)}"></a>'
             if r.get("thumbnail") else "")
    compared, agree = _count(r.get("cells_compared")), _count(r.get("cells_agree"))
    paper = f"{agree} of {compared}" if compared else "no published numbers"
    missing = _count(r.get("missing"))
    runs = f"{_count(r.get('complete'))} of {_count(r.get('runs'))} complete" + (
        f", <strong>{missing} missing</strong>" if missing else "")
    board = f'<br><a href="{esc(name)}-leaderboard.html">leaderboard</a>' if r.get("leaderboard") else ""
    run_time = r.get("run_time_s") if isinstance(r.get("run_time_s"), (int, float)) else 0.0
    devices = r.get("devices") if isinstance(r.get("devices"), list) else []
    return [f'<a href="{esc(page)}"><strong>{esc(name)}</strong></a><br>{esc(r.get("title") or "")}{board}',
            esc(r.get("scale") or "-"), runs, paper, esc(_duration(run_time)),
            esc(", ".join(map(str, devices)) or "-"), esc(r.get("date") or "-"), thumb]


def write_index(folder, records: dict[str, dict] | None = None) -> Path:
    """``folder``/index.html from the studies' records (``read_index`` when not given)."""
    folder = Path(folder)
    records = read_index(folder) if records is None else records
    head = ["study", "scale", "runs", "cells agreeing with the paper", "run time (sum over runs)", "device",
            "written", "first figure"]
    rows = [index_row(k, records[k]) for k in sorted(records) if name_problem(k) is None]
    body = [f"<h1>statetrack reports ({len(rows)} stud{'y' if len(rows) == 1 else 'ies'})</h1>",
            ("<p>Each study's page holds its tables beside the paper's numbers, its figures and its notes. "
             "Cells agreeing with the paper: the cells with a published number whose value is within the "
             "study's tolerance.</p>"),
            '<table class="index"><thead><tr>' + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    body += ["<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows]
    body.append(f"</tbody></table><footer>statetrack {esc(__version__)}</footer>")
    return write_file(folder / "index.html", _document("statetrack reports", "\n".join(body)), what="report")
