"""A collected report (``report.collect``) rendered: markdown, CSV and LaTeX files, figures, and the
folder's index; the HTML page is ``report.html``'s."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from itertools import chain
from pathlib import Path

from statetrack.config import Split
from statetrack.experiments import Study, StudyKind
from statetrack.files import ensure_dir, inside, write_file
from statetrack.report.collect import Report, check_reportable
from statetrack.report.evidence import report_evidence
from statetrack.report.finding import difference_items, protocol_changes
from statetrack.report.folder import check_replace, update_record
from statetrack.report.lm_figures import lm_figures
from statetrack.report.lm_tables import LMTable
from statetrack.report.lm_tables import scale_note as lm_note
from statetrack.report.plots import (
    close,
    curve_figures,
    length_figures,
    save,
    slug,
    trace_figure,
    unique_stem,
)
from statetrack.report.render import grid_csv, grid_markdown
from statetrack.report.state_tables import on_split
from statetrack.report.table import StudyTable
from statetrack.report.verdict_tables import CAPTION as VERDICTS_CAPTION
from statetrack.runs.store import RunStatus
from statetrack.untrusted import markdown_lines, markdown_link


def _probe_markdown(rep: Report) -> str:
    rows = rep.probe_rows()
    if not rows:
        return ""
    return grid_markdown(
        ["model", "probe", "runs", *PROBE_HEADERS],
        [[r["model"], r["probe"], str(r["runs"]), *probe_cells(r)] for r in rows],
    )


PROBE_HEADERS = ("token acc", "acc, input-1 steps", "offsets (in 1, target 0)", "holds (in 1, target 1)")


def probe_cells(r: dict) -> list[str]:
    return [
        "-" if r[k] is None else f"{100 * r[k]:.1f}"
        for k in ("token_accuracy", "accuracy_input1", "offset_accuracy", "hold_accuracy")
    ]


INTERVALS_CAPTION = (
    "Accuracy (%) of the final label at each test length, with its Wilson 95% interval over the "
    "test sequences; 'chance' rows: the majority share of the final label's distribution in that "
    "length's test draw (exact where the task computes it, else over 10,000 draws; n/a: no test "
    "set at that length)."
)


LONG_INTERVALS_CAPTION = (
    "The same on the long-range draw (docs/long-range.md): the last ceil(L/2) symbols leave "
    "both labels possible and the label is drawn independently of them; chance is uniform "
    "over the labels of the length (n/a: no long-range draw at that length)."
)


@dataclass(frozen=True)
class Interval:
    """One run's accuracy at one length with its 95% (Wilson) interval and that length's chance; as text
    ``acc (low-high)`` in percent. ``telling``: whether the interval changes a reading of the number: it
    holds the 90% threshold, or chance (so the run cannot be told from a constant there)."""

    accuracy: float
    low: float
    high: float
    chance: float | None = None
    threshold: float = 0.9

    def __str__(self) -> str:
        return f"{100 * self.accuracy:.1f} ({100 * self.low:.1f}-{100 * self.high:.1f})"

    @property
    def telling(self) -> bool:
        return self.low <= self.threshold <= self.high or (
            self.chance is not None and self.low <= self.chance <= self.high
        )


def interval_tables(rep: Report, split: Split = Split.TEST) -> list[tuple[str, list[str], list[list]]]:
    """(table name, headers, rows) per study table: every complete run's accuracy at each test length
    with its 95% (Wilson) interval (an ``Interval``; its text is ``acc (low-high)`` in percent), then one
    'chance' row per task column (the majority share of the final label's distribution in that length's
    draw); '-': no such run at that length, n/a: no test set at that length. ``split``: the draw
    (``test``, or ``long`` for the long-range draw, where the runs scored it)."""
    out = []
    results = on_split(rep.results, split)
    thr = rep.study.score.threshold
    for tdef in rep.study.tables:
        runs = [
            (j, r)
            for j, r in results
            if r is not None and r.status == RunStatus.COMPLETE and j.table == tdef.name and r.metrics
        ]
        if not runs:
            continue
        lengths = sorted({m.length for _, r in runs for m in r.metrics})
        rows: list[list] = []
        chance: dict = {}
        for j, r in runs:
            col = j.column or tdef.tasks[0].label
            at = {m.length: m for m in r.metrics}
            cells: list = []
            for n in lengths:
                m = at.get(n)
                if m is None:
                    cells.append("-")
                elif m.accuracy is None:
                    cells.append("n/a")
                else:
                    cells.append(Interval(m.accuracy, m.accuracy_low, m.accuracy_high, m.chance, thr))
                    chance.setdefault(col, {}).setdefault(n, m.chance)
            rows.append([j.label, col, f"{j.train.lr:g}", str(j.seed), *cells])
        rows += [
            ["chance", col, "", "", *(f"{100 * by[n]:.1f}" if n in by else "-" for n in lengths)]
            for col, by in chance.items()
        ]
        out.append((tdef.name, ["model", "task", "lr", "seed", *map(str, lengths)], rows))
    return out


def intervals_markdown(rep: Report, split: Split = Split.TEST) -> str:
    lines = []
    for name, head, rows in interval_tables(rep, split):
        if len(rep.study.tables) > 1:
            lines += [f"Table `{name}`:", ""]
        lines += [grid_markdown(head, rows), ""]
    return "\n".join(lines)


def differences(t: StudyTable | LMTable, study: Study) -> list[str]:
    """Markdown lines listing every cell that differs from the paper beyond the tolerance."""
    head, items = difference_items(t, study)
    if not items:
        return [head, ""] if head else []
    if not head:
        return [f"- {x}" for x in items] + [""]
    return [f"**{head.removesuffix(' (marked *):')}** (marked *):", ""] + [f"- {x}" for x in items] + [""]


@dataclass
class Figure:
    """One figure of a report: the table it belongs to (or ``probes``), its file stem, the figure, and
    its caption (a sentence saying what it shows)."""

    section: str
    stem: str
    fig: object
    caption: str = ""


#: captions of the language-modelling figures, by the stem's first word ({} = the corpus)
LM_CAPTIONS = {
    "curves": "Learning curves on the {} corpus: validation loss (bits per token) against the training step, "
    "one colour per model.",
    "positions": "Bits per byte on the {} test split by position in the window (the longest context), one line "
    "per model (median over seeds) beside the baselines (dashed); dotted: the training length.",
    "context": "Bits per byte on the {} test split against the context length, one line per model (median over "
    "seeds) beside the baselines (dashed); dotted: the training length.",
}


def report_figures(rep: Report) -> Iterator[Figure]:
    """Every figure of the report, drawn one at a time as the caller asks for the next (so a caller that
    closes each before asking holds one open): per table accuracy vs length and learning curves, then probe
    traces."""
    if rep.study.kind is StudyKind.LM:
        for section, stem, fig in lm_figures(rep):
            yield Figure(
                section, stem, fig, LM_CAPTIONS.get(stem.split("-")[0], "").format(stem.partition("-")[2])
            )
        return
    names = {t.name for t in rep.study.tables}
    for t in rep.tables:
        if t.name not in names:  # long-range and horizon tables: their numbers are in the tables
            continue
        for stem, fig, caption in chain(
            length_figures(rep.study, t, rep.results), curve_figures(rep.study, t, rep.results, rep.curves)
        ):
            yield Figure(t.name, stem, fig, caption)
    for j, r in rep.results:
        if r is None or j.seed != 0:
            continue
        for probe, tr in rep.traces.get(r.run_id, {}).items():
            fig = trace_figure(f"{j.label} (lr {j.train.lr:g}, seed {j.seed}) on {probe}", tr)
            yield Figure(
                "probes",
                f"trace-{slug(j.label)}-lr{j.train.lr:g}-{slug(probe)}",
                fig,
                f"{j.label} (learning rate {j.train.lr:g}, seed {j.seed}) on the probe {probe}: the "
                "input, the target and the model's output over time, for one seeded sequence.",
            )


def unique_stems(figures) -> Iterator[Figure]:
    """The figures, each with a file stem of its own (``plots.unique_stem``: two tables ``a b`` and ``a-b``
    slug alike; the second figure is written as ``-2``, with a warning line)."""
    seen: dict[str, str] = {}
    for f in figures:
        stem = unique_stem(f.stem, seen, f.section)
        yield f if stem == f.stem else replace(f, stem=stem)


def drawn_figures(rep: Report, use) -> list[Figure]:
    """Each figure of the report passed to ``use(figure)`` (e.g. to save it), then closed before the next
    is drawn; returns the figures (closed) for their sections, stems and captions."""
    done = []
    for f in unique_stems(report_figures(rep)):
        try:
            use(f)
        finally:
            close(f.fig)
        done.append(f)
    return done


def scale_note(rep: Report) -> str:
    if rep.study.kind is StudyKind.LM:
        return lm_note(rep.scale)
    if rep.scale == "paper":
        return ""
    changes = protocol_changes(rep.study, rep.scale)
    if changes is None:
        return (
            f"Scale `{rep.scale}`: the study file says what this scale keeps of the paper's protocol; "
            "differences from the paper's numbers are listed under each table."
        )
    what = (
        f", against the paper's protocol: {', '.join(changes)} (the study file says what it keeps and changes), "
        "so differences from the paper's numbers are expected and are"
        if changes
        else ": the steps, seeds, learning rates, widths and test lengths of the paper's protocol, with the "
        "changes the study file gives; differences from the paper's numbers are"
    )
    return f"Scale `{rep.scale}`{what} listed under each table; `--scale paper` runs the paper's protocol."


def runs_line(rep: Report) -> str:
    """How many runs of the grid the report holds; when some are missing, which (the report's first line
    after its header)."""
    failed = f" ({len(rep.failures)} of them failed)" if rep.failures else ""
    line = (
        f"Runs of the grid: {len(rep.results)}; complete: {len(rep.results) - rep.missing}; missing: "
        f"{rep.missing}{failed}; unfinished records of these runs (killed, not counted): {rep.interrupted}. "
        f"{time_line(rep)}"
    )
    missing = missing_runs(rep)
    if missing:
        line = (
            f"This report is incomplete: {rep.missing} of the grid's {len(rep.results)} runs are not complete "
            f"in the database (not run yet, failed or killed), and its numbers leave them out: "
            f"{'; '.join(missing)}. {line}"
        )
    return line


def time_line(rep: Report) -> str:
    """What the complete runs cost: their wall times summed and, where they recorded it, their CPU time (on a
    shared machine the wall time includes waiting for a core; the CPU time does not)."""
    done = len(rep.results) - rep.missing
    line = f"Wall time of the complete runs, summed: {rep.wall_time / 3600:.2f} h"
    if rep.cpu_runs:
        some = "" if rep.cpu_runs == done else f" (recorded by {rep.cpu_runs} of the {done} runs)"
        line += f"; their CPU time: {rep.cpu_time / 3600:.2f} h{some}"
    return line + "."


def missing_runs(rep: Report, at_most: int = 20) -> list[str]:
    """The runs of the grid with no complete record, one item per model, task and learning rate with its
    seeds (``RNN on parity, lr 0.01: seeds 1, 2``), a seed whose run failed with the reason recorded
    (``seed 0 (failed: ...)``); at most ``at_most`` items, then how many more."""
    groups: dict[tuple, list[str]] = {}
    for j, r in rep.results:
        if r is None:
            why = rep.failures.get(j.key)
            seed = f"{j.seed} (failed: {why})" if why else str(j.seed)
            groups.setdefault((j.table, j.label, j.column, j.train.lr), []).append(seed)
    several_tables = len({k[0] for k in groups}) > 1
    items = [
        f"{label} on {column}{f' (table {table})' if several_tables else ''}, lr {lr:g}: "
        f"seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}"
        for (table, label, column, lr), seeds in groups.items()
    ]
    if len(items) > at_most:
        items = [*items[:at_most], f"and {len(items) - at_most} more"]
    return items


def _figure_md(f: Figure, folder: str, links: dict) -> list[str]:
    link = markdown_link(f.stem, f"{folder}/{links[f.stem]}")
    return [link, "", f"*{f.caption}*", ""] if f.caption else [link, ""]


def write_report(
    rep: Report, out: str | Path, meta: dict | None = None, figures=("png",), force: bool = False
) -> Path:
    """``out``/<study>.md, .csv, .tex and ``out``/<study>/<figure>.<format> for each of ``figures``
    (png, svg, pdf; the markdown shows the first), and the report's record in ``out``/index.json.
    ``meta``: the header's lines, e.g. {"Command": ..., "Machine": ..., "Date": ...}. A report of the study
    already in ``out`` that holds more (another scale, more seeds or more complete runs) is not replaced:
    ``report.folder.ReportExists`` (one line), unless ``force``. Returns the markdown path. (The HTML page:
    ``report.html.write_html``.) Every file is written inside ``out``, never through a link
    (``files.inside``)."""
    with inside(out):
        return _write_report(rep, Path(out), meta, figures, force)


def _write_report(rep: Report, out: Path, meta: dict | None, figures, force: bool) -> Path:
    study = rep.study
    check_reportable(rep, rep.db)
    out = Path(out)
    check_replace(out, study.name, rep.extent(), force)
    figdir = out / study.name  # made only where there are figures to write
    ensure_dir(figdir if figures else out, f"cannot write the report in {str(out)!r}")
    meta = meta or {}
    md = _head_markdown(rep, meta)
    md += _tables_markdown(rep, figdir, figures)
    if rep.verdicts is not None:
        md += [
            "## The theory's verdict beside every cell",
            "",
            rep.verdicts.summary(),
            "",
            rep.verdicts.markdown(),
            "",
            VERDICTS_CAPTION,
            "",
        ]
    md += report_evidence(rep).markdown(figdir, study.name, figures)
    md += ["## Accuracy of every run, with 95% intervals", "", INTERVALS_CAPTION, "", intervals_markdown(rep)]
    long = intervals_markdown(rep, Split.LONG)
    if long.strip():
        md += [
            "## Accuracy of every run on the long-range draw, with 95% intervals",
            "",
            LONG_INTERVALS_CAPTION,
            "",
            long,
        ]
    if study.notes:
        md += ["## Notes (from the study file)", "", study.notes.strip(), ""]
    text = markdown_lines(md)  # labels and notes are text: no HTML tag or link of theirs is rendered
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    path = write_file(out / f"{study.name}.md", text, what="report")
    rows = [r for t in rep.tables for r in t.csv_rows()]
    # LM tables: other columns
    write_file(
        out / f"{study.name}.csv", _csv_text(rows, dict.fromkeys(k for r in rows for k in r)), what="report"
    )
    write_file(out / f"{study.name}.tex", "\n\n".join(t.latex() for t in rep.tables) + "\n", what="report")
    if rep.verdicts is not None:
        rows = rep.verdicts.csv_rows()
        write_file(
            out / f"{study.name}-verdicts.csv", _csv_text(rows, rows[0] if rows else {}), what="report"
        )
    update_record(out, study.name, {**rep.record(meta), "markdown": path.name})
    return path


def _csv_text(rows: list[dict], fields: dict) -> str:
    """The rows as CSV under the keys of ``fields`` (in their order); nothing at all for no rows."""
    return grid_csv(rows, fields)


def _head_markdown(rep: Report, meta: dict) -> list[str]:
    """The report's title, the writer's metadata, what the study found and how complete its runs are."""
    study = rep.study
    header = [f"- {k}: `{v}`" if k == "Command" else f"- {k}: {v}" for k, v in meta.items()]
    found = (
        [] if study.kind is StudyKind.LM else ["## What this study found", "", *rep.finding().lines_md(), ""]
    )
    runs = [runs_line(rep), ""]  # an incomplete report says so before anything it found
    return [
        f"# {study.title}",
        "",
        *header,
        "",
        *(runs if rep.missing else []),
        *found,
        *([] if rep.missing else runs),
        scale_note(rep),
        "",
        f"Study `{study.name}` (scale `{rep.scale}`). Source: {study.source}.",
        "",
    ]


def _tables_markdown(rep: Report, figdir: Path, figures) -> list[str]:
    """Each table with its caption, its differences from the paper and its figures (written to ``figdir``
    in each of ``figures``), then the probes; every figure is closed, written or not."""
    study = rep.study
    md: list[str] = []
    links: dict[str, str] = {}

    def keep(f: Figure) -> None:
        if figures:
            links[f.stem] = save(f.fig, figdir, f.stem, figures)[0].name

    figs = drawn_figures(rep, keep) if figures else []
    for t in rep.tables:
        md += [
            f"## {t.title}" + (f" (table `{t.name}`)" if t.name != "main" else ""),
            "",
            t.markdown(),
            "",
            t.caption,
            "",
        ]
        md += differences(t, rep.study)
        md += [
            line for f in figs if f.section == t.name and links for line in _figure_md(f, study.name, links)
        ]
    probe_md = _probe_markdown(rep)
    if probe_md:
        md += [
            "## Probes",
            "",
            probe_md,
            "",
            "Traces: one seeded sequence per probe; input, target and the model's P(1) over time.",
            "",
        ]
        md += [
            line for f in figs if f.section == "probes" and links for line in _figure_md(f, study.name, links)
        ]
    return md
