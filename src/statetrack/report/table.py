"""A study's tables: our numbers beside the paper's, with the paper's selection rule and a tolerance.

One ``StudyTable`` per table of the study. Rows are models, columns are test lengths (``score.kind:
per_length``) or tasks (``mean``, ``longest``). A cell reduces the runs of one (model, task) over
learning rates and seeds with the study's ``select`` rule; it shows the selected value and, when there
are several seeds, the median [min-max] over the seeds at the selected learning rate. A cell whose
selected value differs from the published one by more than the study's tolerance is marked ``*``
(for lengths: a ratio outside [1/f, f], or 'x' on one side only; a value that reaches our longest
test length is shown as ``>=N`` and only marked if the paper's value is below N).
"""
from __future__ import annotations

import csv
import io
import statistics
from dataclasses import dataclass, field

MARK = "*"


# -- scores of one run --------------------------------------------------------------------------------
def metric_by_length(res, metric: str) -> dict[int, float]:
    return {m.length: getattr(m, metric) for m in (res.metrics if res else [])}


def longest_above(per_length: dict[int, float], threshold: float) -> int:
    """Longest test length L with metric > threshold at L and at every shorter test length (0: none)."""
    best = 0
    for n in sorted(per_length):
        if not per_length[n] > threshold:
            break
        best = n
    return best


def run_score(study, res, column_length: int | None = None) -> float | None:
    """The number a run contributes to a cell."""
    by_len = metric_by_length(res, study.metric)
    if not by_len:
        return None
    sc = study.score
    if sc.kind == "per_length":
        return by_len.get(column_length)
    if sc.kind == "mean":
        lo, hi = sc.lengths or (min(by_len), max(by_len))
        vals = [v for n, v in by_len.items() if lo <= n <= hi]
        return statistics.fmean(vals) if vals else None
    return float(longest_above(by_len, sc.threshold))


def _reduce(vals: list[float], how: str) -> float:
    return {"median": statistics.median, "mean": statistics.fmean, "max": max, "min": min}[how](vals)


@dataclass
class Cell:
    selected: float | None = None
    values: list[float] = field(default_factory=list)  # the seeds' scores at the selected learning rate
    lr: float | None = None
    runs: int = 0
    missing: int = 0
    published: object = None
    differs: bool | None = None
    capped: bool = False  # longest: reached our longest test length


def select(study, entries: list[tuple[float, float | None, float | None, float | None]]) -> Cell:
    """entries: (lr, score, val_accuracy, val_loss) for every complete run of one cell."""
    sel = study.select
    by_lr: dict[float, list] = {}
    for lr, score, va, vl in entries:
        if score is not None:
            by_lr.setdefault(lr, []).append((score, va if va is not None else -1.0,
                                             vl if vl is not None else float("inf")))
    if not by_lr:
        return Cell()
    if sel.using == "test":
        agg = {lr: _reduce([s for s, _, _ in v], sel.seeds) for lr, v in by_lr.items()}
        if sel.lrs == "max":
            lr = max(agg, key=lambda k: (agg[k], -k))
            return Cell(agg[lr], [s for s, _, _ in by_lr[lr]], lr)
        return Cell(_reduce(list(agg.values()), sel.lrs), [s for v in by_lr.values() for s, _, _ in v], None)
    # on validation: never look at the test scores to choose
    how = sel.seeds if sel.seeds in ("median", "mean") else "max"
    vagg = {lr: (_reduce([a for _, a, _ in v], how), -_reduce([l for _, _, l in v], "mean")) for lr, v in by_lr.items()}
    lr = max(vagg, key=lambda k: (vagg[k], -k))
    runs = by_lr[lr]
    scores = [s for s, _, _ in runs]
    if sel.seeds in ("max", "min"):
        order = sorted(runs, key=lambda r: (r[1], -r[2]))
        value = (order[-1] if sel.seeds == "max" else order[0])[0]
    else:
        value = _reduce(scores, sel.seeds)
    return Cell(value, scores, lr)


def _published_number(v):
    if v is None:
        return None
    if isinstance(v, str):
        return 0.0 if v.strip().lower() in ("x", "fail", "fails") else None
    return float(v)


def compare(study, cell: Cell, max_len: int | None) -> bool | None:
    """True when our selected value and the published one differ beyond the study's tolerance."""
    pub = _published_number(cell.published)
    if pub is None or cell.selected is None:
        return None
    ours = cell.selected
    if study.score.kind != "longest":
        return abs(ours - pub) > study.tolerance
    fail = study.score.fail_below or 1
    ours_x, pub_x = ours < fail, pub < fail
    if ours_x or pub_x:
        return ours_x != pub_x
    if cell.capped:  # we cannot tell beyond our longest test length
        return pub < ours / study.length_factor
    f = study.length_factor
    return not (1 / f <= ours / pub <= f)


# -- formatting -----------------------------------------------------------------------------------------
def fmt_value(v, study) -> str:
    if v is None:
        return "-"
    if study.score.kind == "longest":
        fail = study.score.fail_below or 1
        return "x" if v < fail else f"{v:g}"
    if study.metric == "scaled_accuracy":
        return f"{v:.3f}"
    return f"{100 * v:.1f}"


def fmt_published(v, study) -> str:
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    return fmt_value(v, study)


def fmt_cell(cell: Cell, study) -> str:
    if cell.selected is None:
        return "-"
    s = fmt_value(cell.selected, study)
    if cell.capped:
        s = ">=" + s
    if len(cell.values) > 1:
        med = statistics.median(cell.values)
        rng = f"[{fmt_value(min(cell.values), study)}-{fmt_value(max(cell.values), study)}]"
        s += f" {rng}" if abs(med - cell.selected) < 1e-12 else f" ({fmt_value(med, study)} {rng})"
    if cell.differs:
        s += " " + MARK
    return s


# -- legacy helpers (per-length table of the one-table form) ----------------------------------------
def pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f}"


def fmt(values) -> str:
    if not isinstance(values, (list, tuple)):
        values = [values]
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{100 * med:.1f}"
    return f"{100 * med:.1f} [{100 * min(values):.0f}-{100 * max(values):.0f}]"


def fmt_len(values) -> str:
    vals = [v if v is not None else 0 for v in values]
    if not vals:
        return "-"
    med = statistics.median(vals)
    s = "x" if med == 0 else f"{med:g}"
    if len(vals) > 1 and min(vals) != max(vals):
        s += f" [{min(vals) or 'x'}-{max(vals) or 'x'}]"
    return s


# -- the table ----------------------------------------------------------------------------------------
@dataclass
class StudyTable:
    study: str
    title: str
    lengths: list[int]
    columns: dict[str, str]            # per_length: published column key -> header
    rows: list[dict] = field(default_factory=list)
    name: str = "main"
    kind: str = "per_length"
    task_columns: list[str] = field(default_factory=list)  # mean / longest: task labels
    caption: str = ""

    def headers(self) -> list[str]:
        if self.kind == "per_length":
            return (["model", "train len", "seeds", "lr", "train acc"] + [str(n) for n in self.lengths]
                    + [">=90% up to"] + [f"paper: {h}" for h in self.columns.values()])
        h = ["model", "train len", "seeds"]
        for c in self.task_columns:
            h += [c, f"paper: {c}"]
        return h

    def cells(self) -> list[list[str]]:
        out = []
        for r in self.rows:
            if self.kind == "per_length":
                out.append([r["label"], r["train_lengths"], str(r["seeds"]), r["lr"], fmt(r["train_acc"])]
                           + [r["text"][n] for n in self.lengths]
                           + [fmt_len(r["longest"])]
                           + [r["published_text"][k] for k in self.columns])
            else:
                row = [r["label"], r["train_lengths"], str(r["seeds"])]
                for c in self.task_columns:
                    row += [r["text"].get(c, "-"), r["published_text"].get(c, "-")]
                out.append(row)
        return out

    def disagreements(self) -> int:
        return sum(1 for r in self.rows for v in r["differs"].values() if v)

    def markdown(self) -> str:
        h = self.headers()
        lines = ["| " + " | ".join(h) + " |", "|" + "---|" * len(h)]
        lines += ["| " + " | ".join(c) + " |" for c in self.cells()]
        return "\n".join(lines)

    def csv_rows(self) -> list[dict]:
        out = []
        for r in self.rows:
            for col, cell in r["cells"].items():
                out.append({"study": self.study, "table": self.name, "model": r["label"], "column": col,
                            "selected": cell.selected, "lr": cell.lr, "seeds": len(cell.values),
                            "median": statistics.median(cell.values) if cell.values else None,
                            "min": min(cell.values) if cell.values else None,
                            "max": max(cell.values) if cell.values else None,
                            "capped": cell.capped, "missing_runs": cell.missing,
                            "published": cell.published, "differs": cell.differs})
        return out

    def csv(self) -> str:
        buf = io.StringIO()
        rows = self.csv_rows()
        if rows:
            w = csv.DictWriter(buf, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        return buf.getvalue()

    def latex(self) -> str:
        def esc(s: str) -> str:
            for a, b in (("\\", r"\textbackslash{}"), ("&", r"\&"), ("%", r"\%"), ("_", r"\_"), ("#", r"\#"),
                         ("$", r"\$"), ("{", r"\{"), ("}", r"\}"), ("~", r"\textasciitilde{}"),
                         ("^", r"\^{}"), (">=", r"$\geq$"), ("*", r"$^*$")):
                s = s.replace(a, b)
            return s
        h = self.headers()
        lines = [r"\begin{table}[ht]", r"\centering", r"\small",
                 r"\begin{tabular}{l" + "r" * (len(h) - 1) + "}", r"\toprule",
                 " & ".join(esc(x) for x in h) + r" \\", r"\midrule"]
        lines += [" & ".join(esc(x) for x in c) + r" \\" for c in self.cells()]
        lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{esc(self.title)}. {esc(self.caption)}}}",
                  r"\end{table}"]
        return "\n".join(lines)

    def rich(self):
        from rich.table import Table

        from rich.markup import escape

        t = Table(title=escape(self.title), show_lines=False, caption=escape(self.caption) if self.caption else None)
        for i, h in enumerate(self.headers()):
            t.add_column(h, justify="left" if i == 0 else "right", style="dim" if h.startswith("paper") else None)
        for c in self.cells():
            t.add_row(*(escape(x) for x in c))
        return t


def _caption(study, kind: str) -> str:
    sel = study.select
    metric = study.metric.replace("_", " ")
    if kind == "per_length":
        what = f"{metric} (%) at each test length"
    elif kind == "mean":
        lo_hi = f" {study.score.lengths[0]}-{study.score.lengths[1]}" if study.score.lengths else ""
        what = f"mean {metric} over the test lengths{lo_hi}"
    else:
        what = (f"longest test length with {metric} > {100 * study.score.threshold:g}% (and at every shorter "
                f"test length)" + (f"; x = below {study.score.fail_below}" if study.score.fail_below else ""))
    rule = (f"{sel.seeds} over seeds, then {sel.lrs} over learning rates, chosen on the "
            f"{'TEST lengths (as the paper did)' if sel.using == 'test' else 'in-distribution validation'}")
    tol = (f"factor {study.length_factor:g}" if kind == "longest"
           else f"{study.tolerance:g}" + (" (absolute)" if study.metric == "scaled_accuracy"
                                          else f" ({100 * study.tolerance:g} points)"))
    return (f"Cells: {what}; {rule}; shown as selected (median [min-max] over seeds), or "
            f"median [min-max] when the selected value is the median. "
            f"{MARK} = differs from the paper by more than {tol}.")


def study_tables(study, results, scale: str | None = None) -> list[StudyTable]:
    """``results``: (Job, RunResult or None) for the study's grid (sweep.run_jobs or the database)."""
    tables = []
    names = [t.name for t in (study.active_tables(scale) if scale else study.tables)]
    for tdef in study.tables:
        if tdef.name not in names:
            continue
        mine = [(j, r) for j, r in results if getattr(j, "table", "main") == tdef.name]
        if not mine and len(study.tables) > 1:
            continue
        kind = study.score.kind
        lengths = sorted({m.length for _, r in mine if r for m in r.metrics}) or \
            sorted({n for j, _ in mine for n in j.eval.lengths})
        title = tdef.title or study.title
        table = StudyTable(study.name, title, lengths, tdef.published_columns, name=tdef.name, kind=kind,
                           caption=_caption(study, kind))
        present_cols = {getattr(j, "column", None) or tdef.tasks[0].label for j, _ in mine}
        table.task_columns = [t.label for t in tdef.tasks if t.label in present_cols] or [t.label for t in tdef.tasks]
        for m in tdef.models:
            runs = [(j, r) for j, r in mine if j.label == m.label]
            if not runs:
                continue
            done = [(j, r) for j, r in runs if r is not None and r.status == "complete"]
            lo, hi = m.train_lengths or (runs[0][0].train.train_min_len, runs[0][0].train.train_max_len)
            lrs = sorted({j.train.lr for j, _ in runs})
            row = {"label": m.label, "train_lengths": f"{lo}" if lo == hi else f"{lo}-{hi}",
                   "seeds": len({j.seed for j, _ in done}), "lr": "/".join(f"{x:g}" for x in lrs),
                   "train_acc": [r.summary.get("best_val_accuracy") for _, r in done],
                   "longest": [r.summary.get("longest_90") for _, r in done],
                   "acc": {n: [mm.accuracy for _, r in done for mm in r.metrics if mm.length == n] for n in lengths},
                   "published": m.published, "failed": len(runs) - len(done),
                   "cells": {}, "text": {}, "published_text": {}, "differs": {}}
            if kind == "per_length":
                for n in lengths:
                    entries = [(j.train.lr, run_score(study, r, n), r.summary.get("best_val_accuracy"),
                                r.summary.get("best_val_loss")) for j, r in done]
                    cell = select(study, entries)
                    cell.runs, cell.missing = len(done), len(runs) - len(done)
                    row["cells"][n], row["text"][n] = cell, fmt_cell(cell, study)
                for key in tdef.published_columns:
                    pub = m.published.get(key)
                    spec = tdef.compare.get(key)
                    if isinstance(spec, str) and spec.startswith("probe:"):  # filled in by report.collect
                        row["differs"][key] = None
                        row["published_text"][key] = pub if isinstance(pub, str) else pct(pub)
                        continue
                    ours = _compare_value(study, spec, done)
                    differs = None if pub is None or ours is None or isinstance(pub, str) else \
                        abs(ours - float(pub)) > study.tolerance
                    row["differs"][key] = differs
                    row["published_text"][key] = pct(pub) if not isinstance(pub, str) else pub
                    if differs:
                        row["published_text"][key] += f" (ours {pct(ours)} {MARK})"
            else:
                for col in table.task_columns:
                    cruns = [(j, r) for j, r in runs if (j.column or tdef.tasks[0].label) == col]
                    if not cruns:
                        continue
                    entries = [(j.train.lr, run_score(study, r), r.summary.get("best_val_accuracy"),
                                r.summary.get("best_val_loss")) for j, r in cruns if r is not None and r.status == "complete"]
                    cell = select(study, entries)
                    cell.runs = len(entries)
                    cell.missing = len(cruns) - len(entries)
                    cell.published = m.published.get(col)
                    col_max = max(n for j, _ in cruns for n in j.eval.lengths)
                    if kind == "longest" and cell.selected is not None and cell.selected >= col_max:
                        cell.capped = True
                    cell.differs = compare(study, cell, col_max)
                    row["cells"][col], row["text"][col] = cell, fmt_cell(cell, study)
                    row["published_text"][col] = fmt_published(cell.published, study)
                    row["differs"][col] = cell.differs
            table.rows.append(row)
        tables.append(table)
    return tables


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
            xs = [getattr(m, study.metric) for m in r.metrics if lo <= m.length <= hi]
            if xs:
                vals.append(statistics.fmean(xs))
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def study_table(study, results) -> StudyTable:
    """The study's first table (the one-table form's only one)."""
    return study_tables(study, results)[0]
