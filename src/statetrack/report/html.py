"""A study's report as one self-contained HTML page, and an index of the pages of a folder.

The page holds what the markdown report holds: the header (command, machine, date), the tables with the
same headers and cell texts (``report.render``; the paper's columns shaded, cells that differ from the
paper marked), the differences, the figures inline as SVG (matplotlib's SVG backend, glyphs as paths),
the probes and the study's notes. No script, no stylesheet or font from elsewhere: the file is the page.
"""
from __future__ import annotations

import html
import re
from pathlib import Path

from statetrack.report.selection import MARK
from statetrack.report.writer import (
    INTERVALS_CAPTION,
    PROBE_HEADERS,
    Report,
    difference_items,
    interval_tables,
    probe_cells,
    report_figures,
    runs_line,
    scale_note,
)
from statetrack.version import __version__

CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 72em;
       padding: 0 1em; color: #1d1d1f; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ddd; }
code { background: #f3f3f3; padding: 0 .25em; border-radius: 3px; }
dl.meta { display: grid; grid-template-columns: max-content auto; gap: .2em 1em; }
dl.meta dt { font-weight: 600; } dl.meta dd { margin: 0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 1em 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d0d0; padding: .25em .6em; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
thead th { background: #eef1f5; }
th.paper, td.paper { background: #f7f4ea; color: #555; }
td.differs { color: #a40000; font-weight: 600; }
caption { caption-side: bottom; text-align: left; font-size: .85em; color: #555; padding-top: .4em;
          white-space: normal; }
figure { margin: 1.5em 0; } figure svg { max-width: 100%; height: auto; }
figcaption { font-size: .85em; color: #555; }
.notes { white-space: pre-wrap; }
footer { margin-top: 3em; font-size: .8em; color: #777; }
"""


def esc(s) -> str:
    return html.escape(str(s), quote=True)


def differs(text: str) -> bool:
    """Cell texts (report.render) mark a value that differs from the paper with a trailing MARK."""
    return text.endswith(f" {MARK}") or f" {MARK})" in text


def _cls(names: list[str]) -> str:
    return f' class="{" ".join(names)}"' if names else ""


def table_html(headers: list[str], rows: list[list[str]], caption: str = "") -> str:
    paper = [h.startswith("paper") for h in headers]
    out = ['<div class="scroll"><table>']
    if caption:
        out.append(f"<caption>{esc(caption)}</caption>")
    out.append("<thead><tr>" + "".join(f"<th{_cls(['paper'] if p else [])}>{esc(h)}</th>"
                                       for h, p in zip(headers, paper, strict=True)) + "</tr></thead><tbody>")
    for row in rows:
        cells = [f"<td{_cls([c for c, on in (('paper', p), ('differs', differs(text))) if on])}>{esc(text)}</td>"
                 for text, p in zip(row, paper, strict=True)]
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out)


def figure_html(stem: str, svg: str) -> str:
    return f'<figure id="{esc(stem)}">{svg}<figcaption>{esc(stem)}</figcaption></figure>'


def page(rep: Report, meta: dict, svgs: list[tuple[str, str, str]]) -> str:
    """The HTML text; ``svgs``: (section, stem, svg text) of each figure."""
    study = rep.study
    parts = [f"<h1>{esc(study.title)}</h1>", '<dl class="meta">']
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
        parts.append(table_html(t.headers(), t.cell_texts(), t.caption))
        head, items = difference_items(t, study)
        if head:
            parts.append(f"<p><strong>{esc(head)}</strong></p>")
        if items:
            parts.append("<ul>" + "".join(f"<li>{esc(x)}</li>" for x in items) + "</ul>")
        parts += [figure_html(stem, svg) for section, stem, svg in svgs if section == t.name]
    probes = rep.probe_rows()
    if probes:
        parts.append("<h2>Probes</h2>")
        parts.append(table_html(["model", "probe", "runs", *PROBE_HEADERS],
                                [[r["model"], r["probe"], str(r["runs"]), *probe_cells(r)] for r in probes],
                                "accuracy (%) of the trained models on fixed inputs (median over runs); traces: "
                                "one seeded sequence per probe: input, target and the model's P(1) over time"))
        parts += [figure_html(stem, svg) for section, stem, svg in svgs if section == "probes"]
    intervals = interval_tables(rep)
    if intervals:
        parts.append("<h2>Accuracy of every run, with 95% intervals</h2>")
        for name, head, rows in intervals:
            parts.append(table_html(head, rows, INTERVALS_CAPTION if len(intervals) == 1 else
                                    f"table {name}: {INTERVALS_CAPTION}"))
    if study.notes:
        parts += ["<h2>Notes (from the study file)</h2>", f'<p class="notes">{esc(study.notes.strip())}</p>']
    parts.append(f'<footer>statetrack {esc(__version__)}; <a href="index.html">all reports</a></footer>')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<meta name=\"statetrack-study\" content=\"{esc(study.name)}\">"
            f"<title>{esc(study.title)}</title><style>{CSS}</style></head>\n<body>\n"
            + "\n".join(parts) + "\n</body></html>\n")


def write_html(rep: Report, out, meta: dict | None = None) -> Path:
    """Write ``out``/<study>.html and refresh ``out``/index.html; returns the page's path."""
    from statetrack.files import ensure_dir, write_file
    from statetrack.report.plots import close, svg_text

    out = ensure_dir(out, f"cannot write the report in {str(out)!r}")
    figs = report_figures(rep)
    try:
        svgs = [(f.section, f.stem, svg_text(f.fig)) for f in figs]
    finally:
        for f in figs:
            close(f.fig)
    path = write_file(out / f"{rep.study.name}.html", page(rep, meta or {}, svgs), what="report")
    write_index(out)
    return path


def write_index(folder) -> Path:
    """``folder``/index.html: a link to every study page in the folder, with its title."""
    folder = Path(folder)
    rows = []
    for p in sorted(folder.glob("*.html")):
        if p.name == "index.html":
            continue
        head = p.read_text(errors="replace")[:4000]
        title = re.search(r"<title>(.*?)</title>", head, re.S)
        name = re.search(r'<meta name="statetrack-study" content="([^"]*)"', head)
        rows.append(f'<tr><td><a href="{esc(p.name)}">{name[1] if name else esc(p.stem)}</a></td>'
                    f"<td>{title[1] if title else ''}</td></tr>")
    body = ("<h1>Reports</h1><table><thead><tr><th>study</th><th>title</th></tr></thead><tbody>"
            + "\n".join(rows) + "</tbody></table>")
    from statetrack.files import write_file

    path = write_file(folder / "index.html", "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                    f"<title>statetrack reports</title><style>{CSS} td {{ text-align: left; white-space: normal; }}"
                    "</style></head>\n"
                    f"<body>\n{body}\n</body></html>\n", what="report")
    return path
