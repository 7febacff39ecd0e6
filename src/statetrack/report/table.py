"""A study's tables: our numbers beside the paper's, with the paper's selection rule and a tolerance.

One ``StudyTable`` per table of the study. Rows are models, columns are test lengths (``score.kind:
per_length``) or tasks (``mean``, ``longest``). A cell reduces the runs of one (model, task) over
learning rates and seeds with the study's ``select`` rule; it shows the selected value and, when there
are several seeds, the median [min-max] over the seeds at the selected learning rate. A cell whose
selected value differs from the published one by more than the study's tolerance is marked ``*``
(for lengths: a ratio outside [1/f, f], or 'x' on one side only; a value that reaches our longest
test length is shown as ``>=N`` and only marked if the paper's value is below N).

This module builds the tables' rows; the numbers are chosen by :mod:`statetrack.report.selection`
and written out by :mod:`statetrack.report.render`.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from statetrack.experiments import ScoreKind
from statetrack.report import render
from statetrack.report.render import UNSURE, TableKind, fmt_cell, fmt_published, pct
from statetrack.report.selection import MARK, compare, run_score, run_uncertain, select
from statetrack.runs.store import RunStatus
from statetrack.training.evaluation import uncertain_judgement


@dataclass
class StudyTable:
    study: str
    title: str
    lengths: list[int]
    columns: dict[str, str]  # per_length: published column key -> header
    rows: list[dict] = field(default_factory=list)
    name: str = "main"
    kind: TableKind = "per_length"
    task_columns: list[str] = field(default_factory=list)  # mean / longest: task labels
    caption: str = ""

    def disagreements(self) -> int:
        return sum(1 for r in self.rows for v in r["differs"].values() if v)

    # renderers (statetrack.report.render), as methods for notebooks: table.markdown()
    def headers(self) -> list[str]:
        return render.headers(self)

    def cells(self) -> list[list[render.Cell]]:
        return render.cells(self)

    def cell_texts(self) -> list[list[str]]:
        return render.cell_texts(self)

    def published(self) -> bool:
        """Whether any row has a published number to compare with."""
        return any(v is not None for r in self.rows for v in r["published"].values())

    def markdown(self) -> str:
        return render.markdown(self)

    def csv_rows(self) -> list[dict]:
        return render.csv_rows(self)

    def csv(self) -> str:
        return render.csv_text(self)

    def latex(self) -> str:
        return render.latex(self)

    def rich(self):
        return render.rich(self)


def _cell_what(study, kind: ScoreKind) -> str:
    """What a cell of a table of score ``kind`` is: 'mean accuracy over the test lengths 40-256'."""
    metric = study.metric.replace("_", " ")
    if kind == "per_length":
        return f"{metric} (%) at each test length"
    if kind == "mean":
        lo_hi = f" {study.score.lengths[0]}-{study.score.lengths[1]}" if study.score.lengths else ""
        return f"mean {metric} over the test lengths{lo_hi}"
    return (
        f"longest test length with {metric} > {100 * study.score.threshold:g}% "
        + (
            "(and at every shorter test length)"
            if study.score.every_shorter
            else "at that length, whatever the shorter test lengths read (the paper's statistic as it "
            "is written; the table that follows asks it of every shorter length too)"
        )
        + (f"; x = below {study.score.fail_below}" if study.score.fail_below else "")
    )


def caption(study, kind: ScoreKind, published: bool = True) -> str:
    """The table's caption; the mark of a difference from the paper is explained only where the table has
    published numbers (``published``)."""
    sel = study.select
    what = _cell_what(study, kind)
    rule = (
        f"{sel.seeds} over seeds, then {sel.lrs} over learning rates, chosen on the "
        f"{'TEST lengths (as the paper did)' if sel.using == 'test' else 'in-distribution validation'}"
    )
    tol = (
        f"factor {study.length_factor:g}"
        if kind == "longest"
        else f"{study.tolerance:g}"
        + (" (absolute)" if study.metric == "scaled_accuracy" else f" ({100 * study.tolerance:g} points)")
    )
    judged = (
        "the longest length"
        if kind == "longest"
        else "the '>=90% up to' length (accuracy >= 90% at it and every shorter test length)"
    )
    # mean tables judge no threshold; a longest length of token or sequence accuracy has no interval
    no_interval = study.metric in ("token_accuracy", "sequence_accuracy") and kind == "longest"
    unsure = (
        ""
        if kind == "mean" or no_interval
        else f" {UNSURE} = {judged} could move: at a length it reads, the accuracy is undecided against 90% "
        "(its Wilson interval, Bonferroni-corrected over the looks, still contains 90% after the test "
        "sequences were doubled as often as the evaluation allows, 4 times by default; docs/long-range.md), or, "
        "for another threshold, the 95% "
        "interval contains it."
    )
    shown = (
        "shown as the best seed, the statistic the paper reports and the one compared with it, then our "
        "median [min-max] over seeds in parentheses"
        if sel.seeds == "max"
        else "shown as selected (median [min-max] over seeds), or median [min-max] when the selected value is the "
        "median"
    )
    return (
        f"Cells: {what}; {rule}; {shown}."
        + (f" {MARK} = differs from the paper by more than {tol}." if published else "")
        + f"{unsure} Chance at each test length is the "
        "majority share of the final label's distribution in that length's test draw (exact where the task "
        "computes it, else over 10,000 draws); n/a = no test set at that length (e.g. no accepted string "
        "of that length)."
    )


def table_runs(results, name: str) -> list:
    """The (Job, RunResult or None) pairs of ``results`` that belong to the study table ``name`` (a job
    without a table belongs to ``main``)."""
    return [(j, r) for j, r in results if getattr(j, "table", "main") == name]


def study_tables(study, results, scale: str | None = None) -> list[StudyTable]:
    """``results``: (Job, RunResult or None) for the study's grid (sweep.run_jobs or the database)."""
    tables = []
    names = [t.name for t in (study.active_tables(scale) if scale else study.tables)]
    for tdef in study.tables:
        if tdef.name not in names:
            continue
        mine = table_runs(results, tdef.name)
        if not mine and len(study.tables) > 1:
            continue
        tables.append(_study_table(study, tdef, mine))
    return tables


def named_table(study, name: str, mine: list) -> StudyTable:
    """The study's table ``name`` from its runs ``mine`` (those of that table), whatever the scale runs."""
    return _study_table(study, next(t for t in study.tables if t.name == name), mine)


def _study_table(study, tdef, mine: list) -> StudyTable:
    """The table ``tdef`` of the study from its runs ``mine``: one row per model with a run."""
    kind = study.score.kind
    lengths = sorted({m.length for _, r in mine if r for m in r.metrics}) or sorted(
        {n for j, _ in mine for n in j.eval.lengths}
    )
    title = tdef.title or study.title
    published = any(v is not None for m in tdef.models for v in m.published.values())
    table = StudyTable(
        study.name,
        title,
        lengths,
        tdef.published_columns,
        name=tdef.name,
        kind=kind,
        caption=caption(study, kind, published),
    )
    present_cols = {getattr(j, "column", None) or tdef.tasks[0].label for j, _ in mine}
    table.task_columns = [t.label for t in tdef.tasks if t.label in present_cols] or [
        t.label for t in tdef.tasks
    ]
    for m in tdef.models:
        runs = [(j, r) for j, r in mine if j.label == m.label]
        if not runs:
            continue
        done = [(j, r) for j, r in runs if r is not None and r.status == RunStatus.COMPLETE]
        lo, hi = m.train_lengths or (runs[0][0].train.train_min_len, runs[0][0].train.train_max_len)
        lrs = sorted({j.train.lr for j, _ in runs})
        row = {
            "label": m.label,
            "train_lengths": f"{lo}" if lo == hi else f"{lo}-{hi}",
            "seeds": len({j.seed for j, _ in done}),
            "lr": "/".join(f"{x:g}" for x in lrs),
            "train_acc": [r.summary.get("best_val_accuracy") for _, r in done],
            "longest": [r.summary.get("longest_90") for _, r in done],
            "longest_uncertain": any(uncertain_judgement(r.metrics) for _, r in done),
            "acc": {n: [mm.accuracy for _, r in done for mm in r.metrics if mm.length == n] for n in lengths},
            "published": m.published,
            "failed": len(runs) - len(done),
            "cells": {},
            "text": {},
            "published_text": {},
            "differs": {},
            # per_length: our number for each published column, and how it is computed
            "ours": {},
            "ours_text": {},
            "ours_title": {},
            "compare": {},
        }
        if kind == "per_length":
            _length_cells(study, tdef, m, row, runs, done, lengths)
        else:
            _task_cells(study, tdef, m, row, runs, table.task_columns)
        table.rows.append(row)
    if any(c in r["published_text"] and c not in r["text"] for r in table.rows for c in table.task_columns):
        table.caption += (
            " - beside a paper's number = a cell this scale does not run (its study file's scale says why)."
        )
    return table


def _length_cells(study, tdef, m, row: dict, runs: list, done: list, lengths: list[int]) -> None:
    """per_length tables: the model's cell at each test length, and our number beside each published column."""
    for n in lengths:
        entries = [
            (
                j.train.lr,
                run_score(study, r, n),
                r.summary.get("best_val_accuracy"),
                r.summary.get("best_val_loss"),
            )
            for j, r in done
        ]
        cell = select(study, entries)
        cell.runs, cell.missing = len(done), len(runs) - len(done)
        notes = {mm.note for _, r in done for mm in r.metrics if mm.length == n and mm.accuracy is None}
        cell.not_scored = "; ".join(sorted(notes)) if notes and cell.selected is None else None
        row["cells"][n], row["text"][n] = cell, fmt_cell(cell, study)
    for key in tdef.published_columns:
        pub = m.published.get(key)
        spec = tdef.compare.get(key)
        row["compare"][key] = spec
        if isinstance(spec, str) and spec.startswith("probe:"):  # filled in by report.collect
            row["differs"][key] = None
            row["published_text"][key] = pub if isinstance(pub, str) else pct(pub)
            continue
        ours = _compare_value(study, spec, done)
        row["ours"][key], row["ours_text"][key] = ours, pct(ours)
        row["ours_title"][key] = _compare_what(study, spec)
        differs = (
            None
            if pub is None or ours is None or isinstance(pub, str)
            else abs(ours - float(pub)) > study.tolerance
        )
        row["differs"][key] = differs
        row["published_text"][key] = pct(pub) if not isinstance(pub, str) else pub
        if differs:
            row["published_text"][key] += f" (ours {pct(ours)} {MARK})"


def _task_cells(study, tdef, m, row: dict, runs: list, task_columns: list[str]) -> None:
    """mean / longest tables: the model's selected number on each task column."""
    kind = study.score.kind
    for col in task_columns:
        cruns = [(j, r) for j, r in runs if (j.column or tdef.tasks[0].label) == col]
        if not cruns:  # not in this scale's grid: the paper's number still stands beside the '-'
            if m.published.get(col) is not None:
                row["published_text"][col] = fmt_published(m.published[col], study)
            continue
        entries = [
            (
                j.train.lr,
                run_score(study, r),
                r.summary.get("best_val_accuracy"),
                r.summary.get("best_val_loss"),
            )
            for j, r in cruns
            if r is not None and r.status == RunStatus.COMPLETE
        ]
        cell = select(study, entries)
        cell.runs = len(entries)
        cell.missing = len(cruns) - len(entries)
        cell.published = m.published.get(col)
        col_max = max(n for j, _ in cruns for n in j.eval.lengths)
        if kind == "longest" and cell.selected is not None and cell.selected >= col_max:
            cell.capped = True
        cell.differs = compare(study, cell)
        if kind == "longest":
            cell.uncertain = any(
                run_uncertain(study, r)
                for j, r in cruns
                if r is not None
                and r.status == RunStatus.COMPLETE
                and (cell.lr is None or j.train.lr == cell.lr)
            )
        row["cells"][col], row["text"][col] = cell, fmt_cell(cell, study)
        row["published_text"][col] = fmt_published(cell.published, study)
        row["differs"][col] = cell.differs


def _compare_value(study, spec, done) -> float | None:
    """per_length tables: our number for a published column ('validation' or a [lo, hi] mean)."""
    if not done or spec is None:
        return None
    if spec == "validation":
        vals = [r.summary.get("best_val_accuracy") for _, r in done]
    else:
        lo, hi = spec
        vals = []
        for _, r in done:
            xs = [
                getattr(m, study.metric)
                for m in r.metrics
                if lo <= m.length <= hi and getattr(m, study.metric) is not None
            ]
            if xs:
                vals.append(statistics.fmean(xs))
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def _compare_what(study, spec) -> str:
    """How our number beside a published column is computed (its hover text in the HTML report)."""
    if spec is None:
        return "no number of ours is compared with this column"
    metric = study.metric.replace("_", " ")
    if spec == "validation":
        return "ours: the best validation accuracy (in-distribution lengths), median over seeds"
    lo, hi = spec
    return f"ours: {metric} averaged over the test lengths {lo}-{hi}, median over seeds"


def study_table(study, results) -> StudyTable:
    """The study's first table (the one-table form's only one)."""
    return study_tables(study, results)[0]
