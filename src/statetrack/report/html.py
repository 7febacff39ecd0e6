"""A study's report as one self-contained HTML page, and an index of the studies of a folder.

The page answers "what did it find?" first: under the title, a headline block (``report.finding``): how
many cells with a published number agree with the paper, each cell that differs, how far each model
holds, the theory's count, and why differences are expected at this scale. Then the tables, our number
beside the paper's in each published column (``report.html_grid``: the window's width is used; a table
folds into parts only in a window too narrow for it), the figures inline as SVG (matplotlib's SVG
backend, glyphs as paths) with captions, the probes, the theory's verdicts, the evidence behind each
cell not learnt (``report.evidence``: in-distribution fit, projection, spectrum) and every run's accuracy with
its 95% interval (intervals shown where they change a reading, the others on hover or with a toggle);
last, how the report was made (command, machine, date) and the study's notes. No script, no
stylesheet or font from elsewhere: the file is the page. A report with no complete run, or only some,
says so at its top.

``index.html`` summarises every study written to the folder, one card per study as wide as the window
allows: the finding's first sentence, runs complete and missing, run time, device, its first figure
large enough to read, and links to its page (only pages written to that folder). It is built from
``index.json`` beside it (one record per study, updated by each report written there), not from the pages.
That file may come from others (a shared folder, a copied report): its records are read as text, every
value escaped, and every link is built from the study's name (``NAME.html``, ``NAME.md``,
``NAME-leaderboard.html``, ``NAME/thumbnail.png``, each only where that plain file exists in the folder),
never copied from the file; a record whose key is not a study name is dropped.
"""

from __future__ import annotations

from pathlib import Path

from statetrack.config import Split
from statetrack.experiments import StudyKind
from statetrack.files import ensure_dir, inside, write_file
from statetrack.report.collect import Report
from statetrack.report.evidence import EvidenceSection, Spectrum, report_evidence
from statetrack.report.finding import Finding
from statetrack.report.folder import check_replace, read_index, update_record
from statetrack.report.html_grid import (
    Grid,
    HCell,
    esc,
    grid_html,
    plain_grid,
    study_grid,
)
from statetrack.report.leaderboard import COLOURS, cell_inner, write_leaderboard
from statetrack.report.lm_tables import LMTable
from statetrack.report.plots import save, svg_text
from statetrack.report.verdict_tables import CAPTION as VERDICTS_CAPTION
from statetrack.report.writer import (
    INTERVALS_CAPTION,
    LONG_INTERVALS_CAPTION,
    PROBE_HEADERS,
    Interval,
    drawn_figures,
    interval_tables,
    probe_cells,
    runs_line,
    scale_note,
)
from statetrack.untrusted import name_problem
from statetrack.version import __version__

CSS = (
    """
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; padding: 1.2em 2em 2em;
       color: #1d1d1f; }
h1 { font-size: 1.5em; margin: 0 0 .2em; } h2 { font-size: 1.2em; margin-top: 1.8em; border-bottom: 1px solid #ddd; }
p.sub { color: #555; margin: 0 0 .8em; }
code { background: #f3f3f3; padding: 0 .25em; border-radius: 3px; overflow-wrap: anywhere; }
section.finding { border: 1px solid #c9d6e8; background: #f4f8fd; border-radius: 6px; padding: .5em 1.2em .7em;
                  margin: .6em 0 1em; max-width: 90em; }
section.finding h2 { margin: .2em 0 .4em; border: 0; font-size: 1.15em; }
section.finding p { margin: .35em 0; } section.finding ul { margin: .2em 0 .4em; padding-left: 1.4em; }
p.agreement { font-size: 1.1em; font-weight: 600; } p.why { color: #444; font-size: .93em; }
dl.meta { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .2em 1em; }
dl.meta dt { font-weight: 600; } dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.status { padding: .6em 1em; border-radius: 4px; border: 1px solid; margin: 1em 0; font-weight: 600; }
.status.empty { background: #fdecea; border-color: #e0a39d; color: #7d1a12; }
.status.partial { background: #fff6e0; border-color: #e5c77a; color: #6b4d00; }
.part { font-size: .85em; color: #555; margin: 1em 0 -.6em; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: 1em 0; font-size: 14px; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d0d0d0; padding: .25em .6em; text-align: right; white-space: nowrap; }
td small { display: block; color: #666; font-size: .8em; }
thead th { background: #eef1f5; white-space: normal; vertical-align: bottom; }
thead th.group { text-align: center; }
th:first-child, td:first-child { text-align: left; position: sticky; left: 0; background: #fff; }
thead th:first-child { background: #eef1f5; }
th.paper, td.paper { background: #f7f4ea; color: #555; }
td.differs { color: #a40000; font-weight: 600; }
table.wrap td { white-space: normal; text-align: left; vertical-align: top; max-width: 22em; }
td.verdict { font-size: .86em; min-width: 10em; } td.verdict .acc { font-weight: 600; }
td.verdict .outcome { font-style: italic; }
"""
    + "".join(f"td.verdict.{k} {{ background: {v}; }}\n" for k, v in COLOURS.items())
    + """
caption { caption-side: bottom; text-align: left; font-size: .85em; color: #555; padding-top: .4em;
          white-space: normal; max-width: 90em; }
.figures { display: flex; flex-wrap: wrap; gap: 0 2em; align-items: flex-start; }
figure { margin: 1.2em 0; flex: 0 1 auto; max-width: 100%; }
figure svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: .85em; color: #444; max-width: 62em; }
.notes { white-space: pre-wrap; max-width: 62em; }
td:first-child { white-space: normal; min-width: 8em; }
td small.more { display: none; } input.ci-all:checked ~ * td small.more { display: block; }
label.ci-all { font-size: .9em; color: #333; }
div.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(min(100%, 34em), 1fr)); gap: 1.2em; }
div.card { border: 1px solid #d8dde5; border-radius: 6px; padding: .7em 1em; }
div.card h2 { margin: 0 0 .3em; border: 0; font-size: 1.1em; } div.card p { margin: .3em 0; }
div.card img { width: 100%; height: auto; display: block; margin-top: .5em; }
div.card dl { display: grid; grid-template-columns: max-content minmax(0, 1fr); gap: .1em .8em; margin: .4em 0;
              font-size: .92em; } div.card dt { color: #555; } div.card dd { margin: 0; }
footer { margin-top: 3em; font-size: .8em; color: #777; }
"""
)


def figure_html(svg: str, caption: str, stem: str) -> str:
    return f'<figure id="{esc(stem)}">{svg}<figcaption>{esc(caption or stem)}</figcaption></figure>'


def figures_html(items: list[str]) -> str:
    """Figures side by side where the window allows."""
    return f'<div class="figures">{"".join(items)}</div>' if items else ""


def status_html(rep: Report) -> str:
    """A warning at the top of an empty or partial report ('' for a complete one)."""
    total, done = len(rep.results), rep.complete
    if done == 0:
        return (
            f'<p class="status empty">Empty report: none of the {total} runs of this grid is complete in the '
            f"database, so every table below is empty. Run <code>statetrack sweep {esc(rep.study.name)} "
            f"--scale {esc(rep.scale)}</code> (with the same --db) first.</p>"
        )
    if done < total:
        return (
            f'<p class="status partial">Partial report: {done} of {total} runs of this grid are complete; '
            f"{total - done} are missing and their cells show '-'.</p>"
        )
    return ""


def finding_html(f: Finding) -> str:
    """The headline block: the agreement, the cells that differ, how far each model holds, the theory's
    count, why differences are expected."""
    out = [
        '<section class="finding"><h2>What this study found</h2>',
        f'<p class="agreement">{esc(f.agreement)}</p>',
    ]
    if f.differs:
        out.append(
            "<p>Cells that differ (ours, then the paper's; marked * in the tables):</p><ul>"
            + "".join(f"<li>{esc(x)}</li>" for x in f.shown_differs())
            + "</ul>"
        )
    out += [f"<p>{esc(h)}</p>" for h in f.holds]
    if f.theory:
        out.append(f"<p>{esc(f.theory)}</p>")
    if f.why:
        out.append(
            f'<p class="why">{esc(f.why)} The study\'s notes (at the end) say what each choice changes.</p>'
        )
    out.append("</section>")
    return "".join(out)


def interval_cell(x) -> HCell:
    """A cell of the all-runs table: the accuracy, with its 95% interval on a second line where it changes
    a reading (it holds 90% or chance), else on hover and with the page's toggle."""
    if not isinstance(x, Interval):
        return HCell(str(x))
    lo, hi = f"{100 * x.low:.1f}", f"{100 * x.high:.1f}"
    return HCell(f"{100 * x.accuracy:.1f}", f"({lo}-{hi})", f"95% interval {lo}-{hi}", telling=x.telling)


def verdict_grid(vt) -> Grid:
    """The theory's verdict beside every cell: compact cells coloured by their outcome, the oracle's
    reason on hover."""
    rows = []
    for label, cells in vt.rows:
        row = [HCell(label)]
        for c in cells:
            row.append(
                HCell("-")
                if c is None
                else HCell(
                    c.text(), title=c.reason, classes=("verdict", str(c.outcome)), markup=cell_inner(c)
                )
            )
        rows.append(row)
    return plain_grid(["model", *vt.columns], rows, VERDICTS_CAPTION, wrap=True)


class _Page:
    """The page's parts and the CSS rules its tables need (their fold)."""

    def __init__(self):
        self.parts: list[str] = []
        self.css: list[str] = []

    def table(self, g: Grid) -> None:
        r = grid_html(g, f"t{len(self.css)}")
        self.parts.append(r.html)
        self.css.append(r.css)


def page(rep: Report, meta: dict, svgs: list[tuple[str, str, str, str]]) -> str:
    """The HTML text; ``svgs``: (section, stem, svg text, caption) of each figure."""
    study = rep.study
    p = _Page()
    written = f"; written {esc(meta['Date'])}" if meta.get("Date") else ""
    sub = (
        f'<p class="sub">Study <code>{esc(study.name)}</code>, scale <code>{esc(rep.scale)}</code>, '
        f"{rep.complete} of {len(rep.results)} runs ({rep.seeds} seed{'s' if rep.seeds > 1 else ''} per "
        f"cell){written}. Source: {esc(study.source)}.</p>"
    )
    p.parts += [f"<h1>{esc(study.title)}</h1>", sub, status_html(rep)]
    if study.kind is not StudyKind.LM:
        p.parts.append(finding_html(rep.finding()))
    # one toggle for every interval and seeds' range of the page: those that change no reading are hidden
    p.parts.append(
        '<input type="checkbox" id="ci-all" class="ci-all"> <label for="ci-all" class="ci-all">show '
        "every seeds' range and 95% interval (by default only those that hold the 90% threshold or "
        "chance are shown; hover a cell for its own)</label>"
    )
    _study_tables(p, rep, svgs)
    _probes(p, rep, svgs)
    _verdicts(p, rep)
    _evidence(p, report_evidence(rep))
    _intervals(p, rep)
    _made(p, rep, meta)
    return _document(study.title, "\n".join(x for x in p.parts if x), "".join(p.css))


def _study_tables(p: _Page, rep: Report, svgs: list[tuple[str, str, str, str]]) -> None:
    """Each table of the study, with the figures of its section."""
    for t in rep.tables:
        p.parts.append(
            f"<h2>{esc(t.title)}"
            + (f" (table <code>{esc(t.name)}</code>)" if t.name != "main" else "")
            + "</h2>"
        )
        if isinstance(t, LMTable):
            p.table(plain_grid(t.headers(), t.cell_texts(), t.caption))
            p.parts += [f"<p>{esc(x)}</p>" for x in t.notes]
        else:
            p.table(study_grid(t, rep.study.score.threshold))
        p.parts.append(
            figures_html(
                [figure_html(svg, caption, stem) for section, stem, svg, caption in svgs if section == t.name]
            )
        )


def _probes(p: _Page, rep: Report, svgs: list[tuple[str, str, str, str]]) -> None:
    """The probes' accuracy table and their traces, where the study traces any."""
    probes = rep.probe_rows()
    if probes:
        p.parts.append("<h2>Probes</h2>")
        p.table(
            plain_grid(
                ["model", "probe", "runs", *PROBE_HEADERS],
                [[r["model"], r["probe"], str(r["runs"]), *probe_cells(r)] for r in probes],
                "accuracy (%) of the trained models on fixed inputs (median over runs); traces: one "
                "seeded sequence per probe: input, target and the model's P(1) over time",
            )
        )
        p.parts.append(
            figures_html(
                [
                    figure_html(svg, caption, stem)
                    for section, stem, svg, caption in svgs
                    if section == "probes"
                ]
            )
        )


def _verdicts(p: _Page, rep: Report) -> None:
    """Studies with the oracle: its verdict beside every cell."""
    if rep.verdicts is not None:
        vt = rep.verdicts
        p.parts.append("<h2>The theory's verdict beside every cell</h2>")
        p.parts.append(
            f'<p>{esc(vt.summary())} The <a href="{esc(rep.study.name)}-leaderboard.html">leaderboard</a> '
            "ranks the models.</p>"
        )
        p.table(verdict_grid(vt))


def _evidence(p: _Page, section: EvidenceSection) -> None:
    """The evidence behind the cells a study did not learn (``report.evidence``), its spectra inline."""
    if not section.cells:
        return
    p.parts += [f"<h2>{esc(section.title)}</h2>", f"<p>{esc(section.caption)}</p>"]
    for cell in section.cells:
        p.parts.append(f"<h3>{esc(cell.title)}</h3>")
        points, figures = [], []
        for item in cell.items:
            if isinstance(item, Spectrum):
                figures.append(figure_html(item.drawn(svg_text), item.alt, item.stem))
            else:
                points.append(f"<li>{esc(item)}</li>")
        p.parts += [f"<ul>{''.join(points)}</ul>", figures_html(figures)]


def _intervals(p: _Page, rep: Report) -> None:
    """Every run's accuracy with its 95% intervals, on the test draw and on the long-range draw."""
    for split, title, caption in (
        (Split.TEST, "Accuracy of every run, with 95% intervals", INTERVALS_CAPTION),
        (
            Split.LONG,
            "Accuracy of every run on the long-range draw, with 95% intervals",
            LONG_INTERVALS_CAPTION,
        ),
    ):
        intervals = interval_tables(rep, split)
        if not intervals:
            continue
        p.parts.append(f"<h2>{title}</h2>")
        p.parts.append("<div>")
        for name, head, rows in intervals:
            p.table(
                plain_grid(
                    head,
                    [[interval_cell(x) for x in r] for r in rows],
                    caption if len(intervals) == 1 else f"table {name}: {caption}",
                )
            )
        p.parts.append("</div>")


def _made(p: _Page, rep: Report, meta: dict) -> None:
    """How the report was made: the writer's metadata, the study, its scale and runs, its notes."""
    study = rep.study
    p.parts.append("<h2>How this report was made</h2>")
    dl = ['<dl class="meta">']
    for k, v in meta.items():
        dl.append(f"<dt>{esc(k)}</dt><dd>{f'<code>{esc(v)}</code>' if k == 'Command' else esc(v)}</dd>")
    dl.append(
        f"<dt>Study</dt><dd><code>{esc(study.name)}</code>, scale <code>{esc(rep.scale)}</code></dd>"
        f"<dt>Source</dt><dd>{esc(study.source)}</dd></dl>"
    )
    p.parts.append("".join(dl))
    for text in (scale_note(rep), runs_line(rep)):
        if text:
            p.parts.append(f"<p>{esc(text.replace('`', ''))}</p>")
    if study.notes:
        p.parts += [
            "<h2>Notes (from the study file)</h2>",
            f'<p class="notes">{esc(study.notes.strip())}</p>',
        ]
    p.parts.append(f'<footer>statetrack {esc(__version__)}; <a href="index.html">all reports</a></footer>')


def _document(title: str, body: str, css: str = "") -> str:
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{CSS}{css}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def write_html(rep: Report, out, meta: dict | None = None, force: bool = False) -> Path:
    """Write ``out``/<study>.html and its record in ``out``/index.json, then ``out``/index.html from that
    file; returns the page's path. A report of the study already in ``out`` that holds more (another
    scale, more seeds or more complete runs) is not replaced: ``report.folder.ReportExists``, unless
    ``force``. Every file is written inside ``out``, never through a link (``files.inside``)."""
    with inside(out):
        return _write_html(rep, Path(out), meta or {}, force)


def _write_html(rep: Report, out: Path, meta: dict, force: bool) -> Path:
    out = ensure_dir(out, f"cannot write the report in {str(out)!r}")
    check_replace(out, rep.study.name, rep.extent(), force)
    svgs: list[tuple[str, str, str, str]] = []
    thumbnail = None

    def keep(f) -> None:
        nonlocal thumbnail
        svgs.append((f.section, f.stem, svg_text(f.fig), f.caption))
        if thumbnail is None:  # the index's thumbnail: the first figure, at a size its words can be read
            folder = ensure_dir(out / rep.study.name, f"cannot write the report in {str(out)!r}")
            thumb = save(f.fig, folder, "thumbnail", ("png",))[0]
            thumbnail = f"{rep.study.name}/{thumb.name}"

    drawn_figures(rep, keep)
    path = write_file(out / f"{rep.study.name}.html", page(rep, meta, svgs), what="report")
    if rep.verdicts is not None:
        write_leaderboard(rep.verdicts, rep.study.title, out, meta)
    records = update_record(
        out,
        rep.study.name,
        {
            **rep.record(meta),
            "page": path.name,
            "thumbnail": thumbnail,
            "leaderboard": f"{rep.study.name}-leaderboard.html" if rep.verdicts is not None else None,
        },
    )
    write_index(out, records)
    return path


def _duration(s: float) -> str:
    if s < 10:
        return f"{s:.1f} s"
    s = int(round(s))
    return f"{s} s" if s < 120 else f"{s // 60} min {s % 60:02d} s" if s < 7200 else f"{s / 3600:.1f} h"


def _link(folder: Path, name: str) -> str | None:
    """``name`` (built from a study's name) if it names a plain file inside ``folder``, not a link."""
    p = folder / name
    return name if not p.is_symlink() and p.is_file() else None


def index_card(name: str, r: dict, folder: Path) -> str:
    """One study's card in the index: its finding, runs, time, device, its first figure, its links. The
    links are built from ``name`` alone; the record's values (``r`` may come from another program's
    index.json) are escaped and type-checked."""
    page = _link(folder, f"{name}.html") or _link(folder, f"{name}.md")
    title = f'<a href="{esc(page)}">{esc(name)}</a>' if page else esc(name)
    compared, agree = _count(r.get("cells_compared")), _count(r.get("cells_agree"))
    finding = (
        r.get("finding")
        if isinstance(r.get("finding"), str)
        else (
            f"{agree} of {compared} cells with a published number agree with the paper." if compared else ""
        )
    )
    missing = _count(r.get("missing"))
    runs = f"{_count(r.get('complete'))} of {_count(r.get('runs'))} complete" + (
        f", <strong>{missing} missing</strong>" if missing else ""
    )
    n = r.get("seeds")
    seeds = (
        f", {n} seed{'s' if n != 1 else ''} per cell"
        if isinstance(n, int) and not isinstance(n, bool)
        else ""
    )
    links = [
        f'<a href="{esc(x)}">{what}</a>'
        for what, x in (
            ("the page", _link(folder, f"{name}.html")),
            ("markdown", _link(folder, f"{name}.md")),
            ("leaderboard", _link(folder, f"{name}-leaderboard.html")),
        )
        if x
    ]
    thumb = _link(folder, f"{name}/thumbnail.png")
    img = (
        f'<a href="{esc(page or thumb)}"><img src="{esc(thumb)}" alt="first figure of {esc(name)}" '
        'loading="lazy"></a>'
        if thumb
        else ""
    )
    run_time = rt if isinstance(rt := r.get("run_time_s"), (int, float)) else 0.0
    devices = dv if isinstance(dv := r.get("devices"), list) else []
    dl = "".join(
        f"<dt>{k}</dt><dd>{v}</dd>"
        for k, v in (
            ("scale", esc(r.get("scale") or "-") + seeds),
            ("runs", runs),
            ("run time", esc(_duration(run_time)) + " (sum over runs)"),
            ("device", esc(", ".join(map(str, devices)) or "-")),
            ("written", esc(r.get("date") or "-")),
        )
    )
    return (
        f'<div class="card"><h2>{title}</h2><p>{esc(r.get("title") or "")}</p>'
        + (f"<p><strong>{esc(finding)}</strong></p>" if finding else "")
        + f"<dl>{dl}</dl><p>{' · '.join(links)}</p>{img}</div>"
    )


def _count(v) -> int:
    """A count of a record read from index.json (anything else: 0)."""
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def write_index(folder, records: dict[str, dict] | None = None) -> Path:
    """``folder``/index.html from the studies' records (``read_index`` when not given)."""
    folder = Path(folder)
    records = read_index(folder) if records is None else records
    cards = [index_card(k, records[k], folder) for k in sorted(records) if name_problem(k) is None]
    body = [
        f"<h1>statetrack reports ({len(cards)} stud{'y' if len(cards) == 1 else 'ies'})</h1>",
        (
            '<p class="sub">Each study\'s page starts with what it found, then its tables (our numbers beside '
            "the paper's), its figures and its notes. Cells agreeing with the paper: the cells with a published "
            "number whose value is within the study's tolerance.</p>"
        ),
        f'<div class="cards">{"".join(cards)}</div>',
        f"<footer>statetrack {esc(__version__)}</footer>",
    ]
    return write_file(folder / "index.html", _document("statetrack reports", "\n".join(body)), what="report")
