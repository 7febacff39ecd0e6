"""A study's report from the database alone: tables, plots, markdown / CSV / LaTeX / HTML exports."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from pathlib import Path

from statetrack.config import Split
from statetrack.errors import UserError
from statetrack.experiments import Study, StudyKind
from statetrack.files import ensure_dir, inside, write_file
from statetrack.progress import Ticker
from statetrack.report.evidence import report_evidence
from statetrack.report.finding import Finding, difference_items, finding, protocol_changes
from statetrack.report.folder import Extent, check_replace, update_record
from statetrack.report.lm_figures import lm_figures
from statetrack.report.lm_tables import LMTable, lm_tables
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
from statetrack.report.selection import MARK
from statetrack.report.state_tables import on_split, state_tables
from statetrack.report.table import StudyTable, study_tables
from statetrack.report.verdict_tables import CAPTION as VERDICTS_CAPTION
from statetrack.report.verdict_tables import VerdictTable, verdict_table
from statetrack.runs.jobs import MAX_RUNS
from statetrack.runs.probes import read_traces
from statetrack.runs.runner import complete_result
from statetrack.runs.store import Damaged, RunRecord, RunStatus, Store, warn_damaged
from statetrack.untrusted import markdown_lines, markdown_link


@dataclass
class Report:
    study: Study
    scale: str
    tables: Sequence[StudyTable | LMTable]
    results: list  # (Job, RunResult or None)
    traces: dict[int, dict] = field(default_factory=dict)  # run_id -> probe -> trace
    curves: dict[int, list] = field(default_factory=dict)
    interrupted: int = 0  # running or interrupted rows of the grid's keys (not counted)
    machines: list[str] = field(default_factory=list)  # where the runs ran (from their recorded versions)
    verdicts: VerdictTable | None = None  # studies with ``oracle: true``: the theory's verdict per cell
    db: str = ""  # the database the runs were read from
    wall_time: float = 0.0  # seconds, summed over the complete runs of the grid (as each run recorded it)
    devices: list[str] = field(default_factory=list)  # the devices the complete runs trained on
    cpu_time: float = 0.0  # CPU seconds, summed over the complete runs that recorded theirs
    cpu_runs: int = 0  # how many complete runs recorded their CPU time
    seeds: int = 1  # seeds per cell of the grid reported
    # job key -> why its last run failed (the jobs with no complete run)
    failures: dict[str, str] = field(default_factory=dict)

    def extent(self) -> Extent:
        """How much the report holds: scale, seeds per cell, complete runs (``report.folder``)."""
        return Extent(self.scale, self.seeds, self.complete)

    def record(self, meta: dict | None = None) -> dict:
        """The report's record in its folder's index.json (``report.folder``)."""
        meta = meta or {}
        compared, agree = self.agreement()
        return {
            "study": self.study.name,
            "title": self.study.title,
            "scale": self.scale,
            "seeds": self.seeds,
            "runs": len(self.results),
            "complete": self.complete,
            "missing": self.missing,
            "cells_compared": compared,
            "cells_agree": agree,
            "finding": self.finding().agreement if self.study.kind is not StudyKind.LM else None,
            "run_time_s": round(self.wall_time, 1),
            "devices": self.devices,
            "machines": self.machines,
            "date": meta.get("Date"),
            "command": meta.get("Command"),
        }

    def finding(self) -> Finding:
        """What the study found: the headline of its report (``report.finding``)."""
        return finding(self)

    @property
    def complete(self) -> int:
        return len(self.results) - self.missing

    def agreement(self) -> tuple[int, int]:
        """(cells compared with a published number, cells that agree within the study's tolerance)."""
        flags = [
            v
            for t in self.tables
            for r in getattr(t, "rows", [])
            if isinstance(r, dict)
            for v in r.get("differs", {}).values()
            if v is not None
        ]
        return len(flags), sum(1 for v in flags if not v)

    @property
    def missing(self) -> int:
        return sum(1 for _, r in self.results if r is None)

    def probe_rows(self) -> list[dict]:
        """Per model and probe: median over its runs of token accuracy and accuracy on input-1 steps."""
        out = []
        for tdef in self.study.tables:
            for m in tdef.models:
                for t in tdef.tasks:
                    for probe in t.probes:
                        runs = [
                            r
                            for j, r in self.results
                            if r is not None
                            and j.table == tdef.name
                            and j.label == m.label
                            and j.column == t.label
                        ]
                        tr = [x for x in (self.traces.get(r.run_id, {}).get(probe) for r in runs) if x]
                        if not tr:
                            continue
                        row = {"model": m.label, "task": t.label, "probe": probe, "runs": len(tr)}
                        for k in ("token_accuracy", "accuracy_input1", "offset_accuracy", "hold_accuracy"):
                            v = [x[k] for x in tr if x.get(k) is not None]
                            row[k] = statistics.median(v) if v else None
                        out.append(row)
        return out


def collect(
    study, db, scale: str = "quick", seeds: int | None = None, device: str = "auto", max_runs: int = MAX_RUNS
) -> Report:
    """Look up every run of the study's grid (at ``scale``) by its key; read metrics, curves, traces."""
    jobs = study.grid(scale, seeds, device, max_runs)  # refused above max_runs before the database is opened
    store = Store(db, readonly=True)
    results, traces, curves, unfinished, wall = [], {}, {}, 0, 0.0
    machines: Counter[str] = Counter()
    devices: dict[str, None] = {}  # an ordered set
    cpu_time, cpu_runs = 0.0, 0
    for job in Ticker(f"report {study.name}", len(jobs), "runs of the grid read").each(jobs):  # a line / 5 s
        res = complete_result(store, job.key)
        results.append((job, res))
        rows = store.runs(key=job.key)
        unfinished += sum(1 for r in rows if r.status in (RunStatus.RUNNING, RunStatus.INTERRUPTED))
        if res is not None:
            row = next((r for r in rows if r.id == res.run_id), None)
            v, summary, config = (row.versions or {}, row.summary or {}, row.config) if row else ({}, {}, {})
            wall += (row.wall_time if row else None) or 0.0
            cpu = summary.get("cpu_time")
            if isinstance(cpu, (int, float)):
                cpu_time, cpu_runs = cpu_time + cpu, cpu_runs + 1
            dev = config.get("device")
            if dev:
                devices[dev] = None
            machines[_machine(v)] += 1
            try:
                curves[res.run_id] = store.curve(res.run_id)
            except Damaged as e:  # the figure of learning curves leaves it out; its numbers stay
                warn_damaged(store.path, e)
            if job.probes:
                traces[res.run_id] = read_traces(db, res.run_id)
    tables: Sequence[StudyTable | LMTable]
    if study.kind is StudyKind.LM:  # a language-modelling study: bpb tables (statetrack.report.lm_tables)
        tables = lm_tables(study, results, scale, db=db)
    else:
        tables = state_tables(study, results, study_tables(study, results, scale), curves)
    rep = Report(
        study,
        scale,
        tables,
        results,
        traces,
        curves,
        unfinished,
        [f"{m} ({n} run{'s' if n > 1 else ''})" for m, n in machines.items()],
        db=str(db),
        wall_time=wall,
        devices=list(devices),
        cpu_time=cpu_time,
        cpu_runs=cpu_runs,
        seeds=study.scale(scale).seeds if seeds is None else seeds,
        failures={j.key: why for j, r in results if r is None and (why := _failure(store.runs(key=j.key)))},
    )
    if study.kind is not StudyKind.LM:
        _compare_probes(rep)
    if getattr(study, "oracle", False):
        rep.verdicts = verdict_table(study, results)
    return rep


def _machine(v: dict) -> str:
    """Where a run ran, from its recorded versions: platform, torch, threads and, where recorded, the CPU
    kernels torch dispatched to (their rounding can move a fragile run)."""
    m = f"{v.get('platform', '?')}, torch {v.get('torch', '?')}, {v.get('threads', '?')} thread(s)"
    return m + (f", {v['cpu_capability']} kernels" if v.get("cpu_capability") else "")


def _failure(rows: list[RunRecord]) -> str | None:
    """Why the newest failed record of one run's key failed (None: no failed record), as one plain line for
    a report: the database may come from others, so its error's first line only, characters that markdown
    or HTML would read as markup blanked, at most 160."""
    failed = [r for r in rows if r.status == RunStatus.FAILED]
    if not failed:
        return None
    text = str(max(failed, key=lambda r: r.id).error or "").strip()
    line = text.splitlines()[0] if text else "no reason recorded"
    return re.sub(r"[^\w .,:;=+()'%-]", " ", line)[:160]


def _compare_probes(rep: Report) -> None:
    """Published columns compared with a probe (``compare: {key: "probe:TASK"}``): 'yes' when the median
    over runs of the probe's offset accuracy and of its hold accuracy are both above the study's
    threshold (the model predicts every end of an ISI and no end too early), else 'no'."""
    thr = rep.study.score.threshold
    rows = rep.probe_rows()
    for t in rep.tables:
        tdef = next((x for x in rep.study.tables if x.name == t.name), None)
        if tdef is None or isinstance(t, LMTable):  # a long-range or failure-horizon table: no published
            continue  # column to compare; an LM table: no probe
        for key, spec in tdef.compare.items():
            if not (isinstance(spec, str) and spec.startswith("probe:")):
                continue
            probe = spec.removeprefix("probe:")
            for row in t.rows:
                hit = [
                    r
                    for r in rows
                    if r["model"] == row["label"]
                    and r["probe"] == probe
                    and r["offset_accuracy"] is not None
                    and r["hold_accuracy"] is not None
                ]
                pub = row["published"].get(key)
                if not hit:
                    continue
                off, hold = hit[0]["offset_accuracy"], hit[0]["hold_accuracy"]
                ours = "yes" if off > thr and hold > thr else "no"
                differs = isinstance(pub, str) and pub.strip().lower() != ours
                row["differs"][key] = differs
                row["ours_text"][key] = ours
                row["ours_title"][key] = (
                    f"ours on the probe {probe}: offsets {100 * off:.0f}%, holds "
                    f"{100 * hold:.0f}% (yes: both above {100 * thr:g}%)"
                )
                row["published_text"][key] = (
                    f"{pub if pub is not None else '-'} (ours: {ours}; offsets "
                    f"{100 * off:.0f}%, holds {100 * hold:.0f}%"
                    f"{'; ' + MARK if differs else ''})"
                )


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


def check_reportable(rep: Report, db) -> None:
    """Refuse (one line) a report of a grid none of whose runs is complete in the database: it would
    show only dashes, and written over an earlier report it would replace measured numbers."""
    if rep.results and rep.missing == len(rep.results):
        raise UserError(
            f"no run of study {rep.study.name!r} at scale {rep.scale!r} is complete in {str(db)!r} "
            f"(0 of {len(rep.results)}); no report written (run 'statetrack sweep {rep.study.name} "
            f"--scale {rep.scale} --db {db}' first)"
        )


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
