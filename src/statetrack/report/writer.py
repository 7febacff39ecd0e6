"""A study's report from the database alone: tables, plots, markdown / CSV / LaTeX / HTML exports."""
from __future__ import annotations

import csv
import io
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from statetrack.report.table import StudyTable, study_tables
from statetrack.store import Store


@dataclass
class Report:
    study: object
    scale: str
    tables: list[StudyTable]
    results: list  # (Job, RunResult or None)
    traces: dict[int, dict] = field(default_factory=dict)   # run_id -> probe -> trace
    curves: dict[int, list] = field(default_factory=dict)
    interrupted: int = 0  # 'running'/'interrupted' rows of the grid's keys (not counted)
    machines: list[str] = field(default_factory=list)  # where the runs ran (from their recorded versions)

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
                        runs = [r for j, r in self.results if r is not None and j.table == tdef.name
                                and j.label == m.label and j.column == t.label]
                        tr = [self.traces.get(r.run_id, {}).get(probe) for r in runs]
                        tr = [x for x in tr if x]
                        if not tr:
                            continue
                        row = {"model": m.label, "task": t.label, "probe": probe, "runs": len(tr)}
                        for k in ("token_accuracy", "accuracy_input1", "offset_accuracy", "hold_accuracy"):
                            v = [x[k] for x in tr if x.get(k) is not None]
                            row[k] = statistics.median(v) if v else None
                        out.append(row)
        return out


def collect(study, db, scale: str = "quick", seeds: int | None = None, device: str = "auto") -> Report:
    """Look up every run of the study's grid (at ``scale``) by its key; read metrics, curves, traces."""
    from statetrack.probes import read_traces
    from statetrack.runner import complete_result

    store = Store(db, readonly=True)
    jobs = study.cells(scale, seeds, device)
    results, traces, curves, unfinished, machines = [], {}, {}, 0, {}
    for job in jobs:
        res = complete_result(store, job.key)
        results.append((job, res))
        rows = store.runs(key=job.key)
        unfinished += sum(1 for r in rows if r["status"] in ("running", "interrupted"))
        if res is not None:
            v = next((r["versions"] or {} for r in rows if r["id"] == res.run_id), {})
            m = f"{v.get('platform', '?')}, torch {v.get('torch', '?')}, {v.get('threads', '?')} thread(s)"
            machines[m] = machines.get(m, 0) + 1
            curves[res.run_id] = store.curve(res.run_id)
            if job.probes:
                traces[res.run_id] = read_traces(db, res.run_id)
    if study.kind == "lm":  # a language-modelling study: bpb tables (statetrack.report.lm)
        from statetrack.report.lm import lm_tables

        tables = lm_tables(study, results, scale, db=db)
    else:
        tables = study_tables(study, results, scale)
    rep = Report(study, scale, tables, results, traces, curves, unfinished,
                 [f"{m} ({n} run{'s' if n > 1 else ''})" for m, n in machines.items()])
    if study.kind != "lm":
        _compare_probes(rep)
    return rep


def _compare_probes(rep: Report) -> None:
    """Published columns compared with a probe (``compare: {key: "probe:TASK"}``): 'yes' when the median
    over runs of the probe's offset accuracy and of its hold accuracy are both above the study's
    threshold (the model predicts every end of an ISI and no end too early), else 'no'."""
    from statetrack.report.selection import MARK

    thr = rep.study.score.threshold
    rows = rep.probe_rows()
    for t in rep.tables:
        tdef = next(x for x in rep.study.tables if x.name == t.name)
        for key, spec in tdef.compare.items():
            if not (isinstance(spec, str) and spec.startswith("probe:")):
                continue
            probe = spec.removeprefix("probe:")
            for row in t.rows:
                hit = [r for r in rows if r["model"] == row["label"] and r["probe"] == probe
                       and r["offset_accuracy"] is not None and r["hold_accuracy"] is not None]
                pub = row["published"].get(key)
                if not hit:
                    continue
                off, hold = hit[0]["offset_accuracy"], hit[0]["hold_accuracy"]
                ours = "yes" if off > thr and hold > thr else "no"
                differs = isinstance(pub, str) and pub.strip().lower() != ours
                row["differs"][key] = differs
                row["published_text"][key] = (f"{pub if pub is not None else '-'} (ours: {ours}; offsets "
                                              f"{100 * off:.0f}%, holds {100 * hold:.0f}%"
                                              f"{'; ' + MARK if differs else ''})")


def _probe_markdown(rep: Report) -> str:
    rows = rep.probe_rows()
    if not rows:
        return ""
    lines = ["| model | probe | runs | " + " | ".join(PROBE_HEADERS) + " |",
             "|---|---|---|" + "---|" * len(PROBE_HEADERS)]
    for r in rows:
        lines.append(f"| {r['model']} | {r['probe']} | {r['runs']} | " + " | ".join(probe_cells(r)) + " |")
    return "\n".join(lines)


PROBE_HEADERS = ("token acc", "acc, input-1 steps", "offsets (in 1, target 0)", "holds (in 1, target 1)")


def probe_cells(r: dict) -> list[str]:
    return ["-" if r[k] is None else f"{100 * r[k]:.1f}"
            for k in ("token_accuracy", "accuracy_input1", "offset_accuracy", "hold_accuracy")]


def difference_items(t: StudyTable, study) -> tuple[str, list[str]]:
    """(headline, one item per cell that differs from the paper beyond the tolerance). An LM table has no
    published cells: its items are its verdict lines, with no headline."""
    from statetrack.report.render import fmt_published

    if t.kind == "lm":
        return "", list(t.notes)
    out = []
    for r in t.rows:
        for col, d in r["differs"].items():
            if not d:
                continue
            cell = r["cells"].get(col)
            if cell is not None and t.kind != "per_length":
                out.append(f"{r['label']}, {col}: ours {r['text'][col].removesuffix(' *')}, paper "
                           f"{fmt_published(cell.published, study)}")
            else:
                out.append(f"{r['label']}, {t.columns.get(col, col)}: paper {r['published_text'][col]}")
    if not out:
        n = sum(1 for r in t.rows for d in r["differs"].values() if d is False)
        return (f"Every cell with a published number ({n}) agrees with the paper within the tolerance."
                if n else ""), []
    return f"{len(out)} cell(s) differ from the paper beyond the tolerance (marked *):", out


INTERVALS_CAPTION = ("Accuracy (%) of the final label at each test length, with its Wilson 95% interval over the "
                     "test sequences; 'chance' rows: the majority share of the final label's distribution in that "
                     "length's test draw (exact where the task computes it, else over 10,000 draws; n/a: no test "
                     "set at that length).")


def interval_tables(rep: Report) -> list[tuple[str, list[str], list[list[str]]]]:
    """(table name, headers, rows) per study table: every complete run's accuracy (%) at each test length
    with its 95% (Wilson) interval, then one 'chance' row per task column (the majority share of the final
    label in that length's test set); n/a: no test set at that length."""
    out = []
    for tdef in rep.study.tables:
        runs = [(j, r) for j, r in rep.results if r is not None and r.status == "complete" and j.table == tdef.name]
        if not runs:
            continue
        lengths = sorted({m.length for _, r in runs for m in r.metrics})
        rows, chance = [], {}
        for j, r in runs:
            col = j.column or tdef.tasks[0].label
            at = {m.length: m for m in r.metrics}
            cells = []
            for n in lengths:
                m = at.get(n)
                if m is None:
                    cells.append("-")
                elif m.accuracy is None:
                    cells.append("n/a")
                else:
                    cells.append(f"{100 * m.accuracy:.1f} ({100 * m.accuracy_low:.1f}-{100 * m.accuracy_high:.1f})")
                    chance.setdefault(col, {}).setdefault(n, m.chance)
            rows.append([j.label, col, f"{j.train.lr:g}", str(j.seed), *cells])
        rows += [["chance", col, "", "", *(f"{100 * by[n]:.1f}" if n in by else "-" for n in lengths)]
                 for col, by in chance.items()]
        out.append((tdef.name, ["model", "task", "lr", "seed", *map(str, lengths)], rows))
    return out


def intervals_markdown(rep: Report) -> str:
    lines = []
    for name, head, rows in interval_tables(rep):
        if len(rep.study.tables) > 1:
            lines += [f"Table `{name}`:", ""]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rows] + [""]
    return "\n".join(lines)


def differences(t: StudyTable, study) -> list[str]:
    """Markdown lines listing every cell that differs from the paper beyond the tolerance."""
    head, items = difference_items(t, study)
    if not items:
        return [head, ""] if head else []
    if not head:
        return [f"- {x}" for x in items] + [""]
    return [f"**{head.removesuffix(' (marked *):')}** (marked *):", ""] + [f"- {x}" for x in items] + [""]


@dataclass
class Figure:
    """One figure of a report: the table it belongs to (or ``probes``), its file stem, the figure."""

    section: str
    stem: str
    fig: object


def report_figures(rep: Report) -> list[Figure]:
    """Every figure of the report: per table accuracy vs length and learning curves, then probe traces."""
    from statetrack.report.plots import curve_figures, length_figures, slug, trace_figure

    if rep.study.kind == "lm":
        from statetrack.report.lm_figures import lm_figures

        return [Figure(section, stem, fig) for section, stem, fig in lm_figures(rep)]
    out = []
    for t in rep.tables:
        for stem, fig in length_figures(rep.study, t, rep.results) + curve_figures(rep.study, t, rep.results,
                                                                                      rep.curves):
            out.append(Figure(t.name, stem, fig))
    for j, r in rep.results:
        if r is None or j.seed != 0:
            continue
        for probe, tr in rep.traces.get(r.run_id, {}).items():
            fig = trace_figure(f"{j.label} (lr {j.train.lr:g}, seed {j.seed}) on {probe}", tr)
            out.append(Figure("probes", f"trace-{slug(j.label)}-lr{j.train.lr:g}-{slug(probe)}", fig))
    return out


def scale_note(rep: Report) -> str:
    if rep.study.kind == "lm":
        from statetrack.report.lm import scale_note as lm_note

        return lm_note(rep.scale)
    return "" if rep.scale == "paper" else (
        f"Scale `{rep.scale}`: fewer steps, seeds and learning rates, smaller models and shorter test lengths "
        "than the paper (see the study file), so differences from the paper's numbers are expected and are "
        "listed under each table; `--scale paper` runs the paper's protocol.")


def runs_line(rep: Report) -> str:
    return (f"Runs of the grid: {len(rep.results)}; complete: {len(rep.results) - rep.missing}; missing: "
            f"{rep.missing}; unfinished records of these runs (killed, not counted): {rep.interrupted}.")


def write_report(rep: Report, out: str | Path, meta: dict | None = None, figures=("png",)) -> Path:
    """``out``/<study>.md, .csv, .tex and ``out``/<study>/<figure>.<format> for each of ``figures``
    (png, svg, pdf; the markdown shows the first). ``meta``: the header's lines, e.g. {"Command": ...,
    "Machine": ..., "Date": ...}. Returns the markdown path. (The HTML page: ``report.html.write_html``.)"""
    from statetrack.files import ensure_dir, write_file
    from statetrack.report.plots import close, save

    study = rep.study
    out = Path(out)
    figdir = ensure_dir(out / study.name, f"cannot write the report in {str(out)!r}")
    meta = meta or {}
    header = [f"- {k}: `{v}`" if k == "Command" else f"- {k}: {v}" for k, v in meta.items()]
    md = [f"# {study.title}", "", *header, "", scale_note(rep), "",
          f"Study `{study.name}` (scale `{rep.scale}`). Source: {study.source}.", "", runs_line(rep), ""]
    figs = report_figures(rep)
    try:
        links = {f.stem: save(f.fig, figdir, f.stem, figures)[0].name for f in figs} if figures else {}
        for t in rep.tables:
            md += [f"## {t.title}" + (f" (table `{t.name}`)" if t.name != "main" else ""), "", t.markdown(), "",
                   t.caption, ""]
            md += differences(t, rep.study)
            md += [f"![{f.stem}]({study.name}/{links[f.stem]})\n" for f in figs if f.section == t.name and links]
        probe_md = _probe_markdown(rep)
        if probe_md:
            md += ["## Probes", "", probe_md, "",
                   "Traces: one seeded sequence per probe; input, target and the model's P(1) over time.", ""]
            md += [f"![{f.stem}]({study.name}/{links[f.stem]})\n" for f in figs if f.section == "probes" and links]
    finally:
        for f in figs:
            close(f.fig)
    md += ["## Accuracy of every run, with 95% intervals", "", INTERVALS_CAPTION, "", intervals_markdown(rep)]
    if study.notes:
        md += ["## Notes (from the study file)", "", study.notes.strip(), ""]
    text = "\n".join(md)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    path = write_file(out / f"{study.name}.md", text, what="report")
    rows = [r for t in rep.tables for r in t.csv_rows()]
    f = io.StringIO(newline="")
    if rows:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))  # LM tables: other columns
        w.writeheader()
        w.writerows(rows)
    write_file(out / f"{study.name}.csv", f.getvalue(), what="report")
    write_file(out / f"{study.name}.tex", "\n\n".join(t.latex() for t in rep.tables) + "\n", what="report")
    return path
