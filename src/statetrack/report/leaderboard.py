"""A study's leaderboard as one self-contained HTML page (studies with ``oracle: true``).

One row per model, best first (tasks some seed tracks at the long lengths, >= 90%, then cells that
agree with the theory); one column per task. Each cell shows the median seed's pooled accuracy with
its interval and chance, the oracle's verdict with its basis, and is coloured by the outcome: agrees,
disagrees, learnability (possible, not tracked), open. The page carries the agreement count and the
table's caption; no script, no stylesheet or font from elsewhere.
"""

from __future__ import annotations

import html
from pathlib import Path

from statetrack.files import ensure_dir, write_file
from statetrack.report.verdict_tables import CAPTION, LEVEL, VerdictCell, VerdictTable

COLOURS = {
    "agrees": "#e3f1e0",
    "disagrees": "#f6d5d5",
    "learnability": "#fbf0cf",
    "open": "#eceff3",
    "missing": "#ffffff",
}
CSS = """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 90em;
       padding: 0 1em; color: #1d1d1f; }
h1 { font-size: 1.45em; } p.summary { max-width: 60em; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 1em 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d0d0; padding: .3em .55em; vertical-align: top; }
thead th { background: #eef1f5; text-align: center; }
td.model { font-weight: 600; white-space: nowrap; } td.rank, td.num { text-align: right; }
td.cell { min-width: 9em; font-size: .86em; }
td.cell .acc { font-weight: 600; } td.cell .verdict { color: #444; } td.cell .outcome { font-style: italic; }
caption { caption-side: bottom; text-align: left; font-size: .85em; color: #555; padding-top: .4em; }
ul.key { list-style: none; padding: 0; display: flex; gap: 1.2em; flex-wrap: wrap; font-size: .9em; }
ul.key span { display: inline-block; width: 1em; height: 1em; border: 1px solid #bbb; vertical-align: -.15em;
              margin-right: .35em; }
footer { margin-top: 3em; font-size: .8em; color: #777; }
"""


def esc(s) -> str:
    return html.escape(str(s), quote=True)


def cell_inner(c: VerdictCell) -> str:
    """A verdict cell's content as HTML: the median seed's accuracy and interval, the seeds that track the
    task and those above chance, the verdict and the outcome."""
    m = c.median()
    if m is None:
        acc = "no complete run"
    else:
        n = len(c.scored)
        accuracy, low, high, chance = m.measured()
        acc = (
            f'<span class="acc">{100 * accuracy:.0f}%</span> [{100 * low:.0f}-{100 * high:.0f}]<br>'
            f"tracked {c.tracked}/{n}, above chance {c.above}/{n} ({100 * chance:.0f}%)"
        )
    return (
        f'{acc}<br><span class="verdict">{esc(c.verdict_text())}</span>: '
        f'<span class="outcome">{esc(c.outcome)}</span>'
    )


def _cell(c: VerdictCell | None) -> str:
    if c is None:
        return '<td class="cell">-</td>'
    return f'<td class="cell" style="background:{COLOURS[c.outcome]}" title="{esc(c.reason)}">{cell_inner(c)}</td>'


def leaderboard_html(vt: VerdictTable, title: str, meta: dict | None = None) -> str:
    by_label = dict(vt.rows)
    head = (
        "<tr><th>#</th><th>model</th><th>tasks tracked</th><th>agree</th>"
        + "".join(f"<th>{esc(c)}</th>" for c in vt.columns)
        + "</tr>"
    )
    body = []
    for i, (label, learned, agree, judged) in enumerate(vt.leaderboard(), 1):
        cells = "".join(_cell(c) for c in by_label[label])
        body.append(
            f'<tr><td class="rank">{i}</td><td class="model">{esc(label)}</td>'
            f'<td class="num">{learned}/{len(vt.columns)}</td><td class="num">{agree}/{judged}</td>'
            f"{cells}</tr>"
        )
    key = "".join(
        f'<li><span style="background:{COLOURS[k]}"></span>{esc(k)}</li>'
        for k in ("agrees", "disagrees", "learnability", "open")
    )
    meta_html = "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in (meta or {}).items())
    caption = (
        f"{CAPTION} Rows: tasks some seed tracks at the long lengths, then cells that "
        f"agree with the theory ('agree' counts the cells judged: neither open nor missing). Hover a "
        f"cell for the oracle's reason."
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="statetrack-study" content="{esc(vt.study)} (leaderboard)">'
        f"<title>{esc(title)}: leaderboard</title><style>{CSS}</style></head>\n<body>\n"
        f"<h1>{esc(title)}: leaderboard</h1>\n"
        + (f"<dl>{meta_html}</dl>\n" if meta_html else "")
        + f'<p class="summary">{esc(vt.summary())}</p>\n<ul class="key">{key}</ul>\n'
        f'<div class="scroll"><table><caption>{esc(caption)}</caption><thead>{head}</thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>\n"
        f"<footer>Intervals: {100 * LEVEL:.0f}% Wilson. Study <code>{esc(vt.study)}</code>; "
        f'<a href="{esc(vt.study)}.html">the full report</a>.</footer>\n</body></html>\n'
    )


def write_leaderboard(vt: VerdictTable, title: str, out, meta: dict | None = None) -> Path:
    """``out``/<study>-leaderboard.html; returns its path."""
    out = ensure_dir(out, f"cannot write the report in {str(out)!r}")
    return write_file(
        Path(out) / f"{vt.study}-leaderboard.html", leaderboard_html(vt, title, meta), what="report"
    )
