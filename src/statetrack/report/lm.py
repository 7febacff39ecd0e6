"""Reports of a language-modelling study (``kind: lm``): bpb beside the baselines, by context length and
by position, and the joint table of what a model's eigenvalue range costs on text and gains on state
tracking.

Per model and corpus, the runs of the learning rate with the lowest median validation loss are
reduced over seeds to ``median [min-max]``. Every table holds the add-one unigram and bigram
baselines of the corpus (``statetrack.lm.baselines``), scored on the very windows the models are
scored on. ``bpb`` is read at the training context length (the in-distribution number); the context
table gives every test length and the bpb of the positions beyond the training length.

The joint table (study field ``state_tracking``) reads the state-tracking study's runs from the same
database by their keys (``runner.complete_result``), at the same scale, and shows that study's
selected cell for each model label; a model with no complete run there shows ``-``. Rows whose labels
differ only by ``[0,1]`` / ``[-1,1]`` are paired, and a difference row (``[-1,1]`` minus ``[0,1]``, of
the medians) follows each pair.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace

from statetrack.experiments import load_study
from statetrack.lm.baselines import BASELINES, LABELS
from statetrack.report import render
from statetrack.report.lm_cells import (
    NEG,
    POS,
    Cell,
    baselines,
    beyond_bpb,
    columns_of,
    eval_length,
    find_cell,
    gather,
    labels_of,
    pairs,
)
from statetrack.report.render import fmt_cell
from statetrack.report.table import study_tables
from statetrack.runner import complete_result
from statetrack.store import Store

MARK = "*"
BLIND = "state-blind guess (answers)"


@dataclass
class LMTable:
    """A table of text cells with its CSV records; renders like a study table."""

    study: str
    name: str
    title: str
    header: list[str]
    rows: list[list[str]] = field(default_factory=list)
    records: list[dict] = field(default_factory=list)
    caption: str = ""
    kind: str = "lm"
    notes: list[str] = field(default_factory=list)  # verdict lines shown under the table

    def headers(self) -> list[str]:
        return self.header

    def cell_texts(self) -> list[list[str]]:
        return self.rows

    def cells(self) -> list[list[render.Cell]]:
        return [[render.Cell(x) for x in row] for row in self.rows]

    def published(self) -> bool:
        return False

    def markdown(self) -> str:
        return render.grid_markdown(self.header, self.rows)

    def csv_rows(self) -> list[dict]:
        return self.records

    def csv(self) -> str:
        return render.grid_csv(self.records)

    def latex(self) -> str:
        return render.grid_latex(self.header, self.rows, self.title, self.caption)

    def rich(self):
        return render.grid_rich(self.header, self.rows, self.title, self.caption)

    def disagreements(self) -> int:
        return 0


# -- formatting --------------------------------------------------------------------------------------
def fmt_bpb(vals: list[float], se: list[float] | None = None) -> str:
    """median [min-max] over seeds, 3 decimals; one seed: the value +- its standard error over the test
    windows (``se``), where given."""
    if not vals:
        return "-"
    s = f"{statistics.median(vals):.3f}"
    if len(vals) > 1:
        return s + f" [{min(vals):.3f}-{max(vals):.3f}]"
    return s + (f" ±{se[0]:.3f}" if se else "")


def _stats(vals: list[float]) -> dict:
    return {"median": statistics.median(vals) if vals else None, "min": min(vals) if vals else None,
            "max": max(vals) if vals else None, "seeds": len(vals)}


def _has_answers(cells: list[Cell], column: str) -> bool:
    return any(m.answer_bpb is not None for c in cells if c.column == column for r in c.runs for m in r.lm)


# -- the tables ---------------------------------------------------------------------------------------
def _record(study, table: str, model: str, column: str, metric: str, length: int, vals: list[float],
            params: int | None = None, lr: float | None = None) -> dict:
    return {"study": study.name, "table": table, "model": model, "column": column, "metric": metric,
            "length": length, "params": params, "lr": lr, **_stats(vals)}


def bpb_table(study, cells: list[Cell], base: dict) -> LMTable:
    cols = columns_of(cells)
    at = {col: eval_length(next(c for c in cells if c.column == col)) for col in cols}
    answers = {col: _has_answers(cells, col) for col in cols}
    header = ["model", "params"]
    for col in cols:
        header += [f"{col}: bpb @{at[col]}"] + ([f"{col}: answer bpb"] if answers[col] else [])
    t = LMTable(study.name, "bpb", "Bits per byte on the test split", header)
    for label in labels_of(cells):
        row = [label, "-"]
        for col in cols:
            c, L = find_cell(cells, label, col), at[col]
            if c is None:
                row += ["-"] * (1 + answers[col])
                continue
            row[1] = f"{c.params:,}"
            vals = c.values(L)
            text = fmt_bpb(vals, c.values(L, "bpb_se"))
            if vals and statistics.median(vals) >= base[col]["bigram"][L].bpb:
                text += " " + MARK
            row.append(text)
            t.records.append(_record(study, "bpb", label, col, "bpb", L, vals, c.params, c.lr))
            if answers[col]:
                a = c.values(L, "answer_bpb")
                row.append(fmt_bpb(a))
                t.records.append(_record(study, "bpb", label, col, "answer_bpb", L, a, c.params, c.lr))
        t.rows.append(row)
    for b in BASELINES:
        row = [LABELS[b], "-"]
        for col in cols:
            m = base[col][b][at[col]]
            row.append(f"{m.bpb:.3f}")
            t.records.append(_record(study, "bpb", LABELS[b], col, "bpb", at[col], [m.bpb]))
            if answers[col]:
                row.append("-" if m.answer_bpb is None else f"{m.answer_bpb:.3f}")
                t.records.append(_record(study, "bpb", LABELS[b], col, "answer_bpb", at[col],
                                         [] if m.answer_bpb is None else [m.answer_bpb]))
        t.rows.append(row)
    if any(base[col]["blind"] is not None for col in cols):
        row = [BLIND, "-"]
        for col in cols:
            blind = "-" if base[col]["blind"] is None else f"{base[col]['blind']:.3f}"
            row += ["-"] + ([blind] if answers[col] else [])
            if base[col]["blind"] is not None:
                t.records.append(_record(study, "bpb", BLIND, col, "answer_bpb", at[col], [base[col]["blind"]]))
        t.rows.append(row)
    m = base[cols[0]]["bigram"][at[cols[0]]]
    t.caption = (f"Test-split bits per byte at the training context length, median [min-max] over seeds (one "
                 f"seed: ± the standard error over the test windows); {MARK} = not below the bigram baseline. "
                 "Answer bpb: on the bytes the synthetic programs' state determines (the value after "
                 "'assert v == ', the letter after 'assert p is '). Baselines: fitted on the train split, scored "
                 f"on the same windows ({m.windows} windows, {m.tokens:,} tokens at length {m.length}). {BLIND}: "
                 "log2(10) bits for a digit answer, 1 bit for a truth value, i.e. knowing what kind of answer "
                 "comes but not the state; only a model that tracks the programs' state goes below it.")
    return t


def context_table(study, cells: list[Cell], base: dict, column: str) -> LMTable:
    mine = [c for c in cells if c.column == column]
    lengths = sorted({n for c in mine for n in c.lengths})
    train_len = mine[0].train_len
    header = ["model"] + [f"bpb @{n}" for n in lengths] + [f"positions >= {train_len} @{max(lengths)}"]
    t = LMTable(study.name, f"context-{column}", f"{column}: bits per byte by context length", header)
    for c in mine:
        row = [c.label] + [fmt_bpb(c.values(n)) for n in lengths] + [fmt_bpb(c.beyond())]
        t.rows.append(row)
        t.records += [_record(study, t.name, c.label, column, "bpb", n, c.values(n), c.params, c.lr) for n in lengths]

    for b in BASELINES:
        ms = base[column][b]
        beyond = beyond_bpb(ms[max(lengths)], train_len)
        t.rows.append([LABELS[b]] + [f"{ms[n].bpb:.3f}" for n in lengths] +
                      ["-" if beyond is None else f"{beyond:.3f}"])
    t.caption = (f"Trained on windows of {train_len} tokens; at test, windows of each length are read whole "
                 f"(the state carried across chunks). Last column: the positions past the training length in the "
                 f"longest windows. A model that extrapolates keeps or lowers its bpb as the context grows. Each "
                 f"length has its own windows: the baselines' rows, on the same windows, show how much of a "
                 f"change across lengths is the windows'.")
    return t


def state_tracking_cells(study, db, scale: str) -> tuple[dict, list[str], str]:
    """({label: {column: (text, value)}}, column headers, note) from the state-tracking study in ``db``."""
    st = study.state_tracking
    if st is None:
        return {}, [], ""

    other = load_study(st.study)
    out: dict[str, dict] = {}
    found = 0
    if db is not None and scale in other.scales:
        store = Store(db, readonly=True)
        jobs = [j for j in other.cells(scale) if j.table == st.table]
        res = [(j, complete_result(store, j.key)) for j in jobs]
        found = sum(r is not None for _, r in res)
        tables = [t for t in study_tables(other, res, scale) if t.name == st.table]
        for row in (tables[0].rows if tables and found else []):
            cells = {col: row["cells"][col] for col in st.columns if col in row["cells"]}
            # the cell's value as that study shows it, without its mark of a difference from ITS paper
            out[row["label"]] = {col: (fmt_cell(replace(c, differs=None), other), c.selected)
                                 for col, c in cells.items()
                                 if c.selected is not None}
    note = (f"State tracking: {other.source}, our runs of study `{other.name}` at scale `{scale}` read from the same "
            f"database ({found} complete runs found); the cell is that study's selected value "
            f"({other.metric.replace('_', ' ')}; {other.score.kind} over lengths "
            f"{other.score.lengths[0]}-{other.score.lengths[1] if other.score.lengths else ''}). "
            f"'-': no complete run of that model there (run `statetrack sweep {other.name} --scale {scale} --db ...` "
            "into the same database). Those models have that study's sizes, not this one's: the table pairs model "
            "families, not weights.")
    return out, list(st.columns), note


def _st_header(study, col: str) -> str:
    return f"{col} ({study.state_tracking.study})" if study.state_tracking else col


def joint_table(study, cells: list[Cell], base: dict, st_cells: dict, st_cols: list[str], note: str) -> LMTable:
    cols = columns_of(cells)
    ans_cols = [c for c in cols if _has_answers(cells, c)]
    header = (["model", "params"] + [f"bpb {c}" for c in cols] + [f"answer bpb {c}" for c in ans_cols]
              + [_st_header(study, c) for c in st_cols])
    t = LMTable(study.name, "joint", "What [-1,1] costs on text, what it gains on state tracking", header)
    med: dict[str, dict] = {}
    for label in labels_of(cells):
        row = [label, "-"]
        med[label] = {}
        for col in cols:
            c = find_cell(cells, label, col)
            vals = c.values(eval_length(c)) if c else []
            if c:
                row[1] = f"{c.params:,}"
            row.append(fmt_bpb(vals))
            med[label][("bpb", col)] = statistics.median(vals) if vals else None
        for col in ans_cols:
            c = find_cell(cells, label, col)
            vals = c.values(eval_length(c), "answer_bpb") if c else []
            row.append(fmt_bpb(vals))
            med[label][("answer", col)] = statistics.median(vals) if vals else None
        for col in st_cols:
            text, value = st_cells.get(label, {}).get(col, ("-", None))
            row.append(text)
            med[label][("st", col)] = value
        t.rows.append(row)
        t.records.append({"study": study.name, "table": "joint", "model": label,
                          **{f"{k[0]} {k[1]}": v for k, v in med[label].items()}})
    for fam, a, b in pairs(labels_of(cells)):
        def diff(key, digits=3, a=a, b=b):
            x, y = med[a].get(key), med[b].get(key)
            return "-" if x is None or y is None else f"{y - x:+.{digits}f}"
        row = [f"{fam}: {NEG} - {POS}", ""] + [diff(("bpb", c)) for c in cols]
        row += [diff(("answer", c)) for c in ans_cols] + [diff(("st", c)) for c in st_cols]
        t.rows.append(row)

    for bname in BASELINES:
        row = [LABELS[bname], "-"]
        for col in cols:
            L = eval_length(next(c for c in cells if c.column == col))
            row.append(f"{base[col][bname][L].bpb:.3f}")
        for col in ans_cols:
            L = eval_length(next(c for c in cells if c.column == col))
            v = base[col][bname][L].answer_bpb
            row.append("-" if v is None else f"{v:.3f}")
        t.rows.append(row + ["-"] * len(st_cols))
    if ans_cols:
        t.rows.append([BLIND, "-"] + ["-"] * len(cols) +
                      ["-" if base[c]["blind"] is None else f"{base[c]['blind']:.3f}" for c in ans_cols] +
                      ["-"] * len(st_cols))
    t.caption = ("bpb: test split at the training context length, median [min-max] over seeds (lower is better); "
                 "difference rows: [-1,1] minus [0,1] of the medians (bpb: positive = [-1,1] costs bits; state "
                 "tracking: positive = [-1,1] gains). " + note)
    return t


def lm_tables(study, results, scale: str | None = None, db=None) -> list[LMTable]:
    """Every table of an LM study's report: bits per byte (with the verdict lines), the joint table (it
    reads ``db`` for the state-tracking study), then bpb by context length per corpus."""
    cells = gather(study, results)
    if not any(c.runs for c in cells):
        return [LMTable(study.name, "bpb", "Bits per byte on the test split (no complete runs yet)", ["model"])]
    base = baselines(cells, results)
    bpb = bpb_table(study, cells, base)
    bpb.notes = verdicts(cells, base)
    st_cells, st_cols, note = state_tracking_cells(study, db, scale) if scale else ({}, [], "")
    return ([bpb, joint_table(study, cells, base, st_cells, st_cols, note)]
            + [context_table(study, cells, base, col) for col in columns_of(cells)])


def json_rows(study, results) -> list[dict]:
    """One object per run (its bpb at the training context, and by length) and per baseline and corpus."""
    cells = gather(study, results)
    base = baselines(cells, results) if any(c.runs for c in cells) else {}
    out = []
    for c in cells:
        L = eval_length(c)
        for j, r in results:
            if j.label != c.label or j.column != c.column or r is None or not r.lm:
                continue
            by = {m.length: m for m in r.lm}
            m = by.get(L)
            out.append({"study": study.name, "model": c.label, "layers": j.train.model.layers, "task": c.task,
                        "column": c.column, "seed": j.seed, "lr": j.train.lr, "run_id": r.run_id,
                        "params": c.params, "length": L, "bpb": m.bpb if m else None,
                        "bpb_se": m.bpb_se if m else None, "answer_bpb": m.answer_bpb if m else None,
                        "bpb_by_length": {n: x.bpb for n, x in sorted(by.items())}})

    for col, bs in base.items():
        c = next(x for x in cells if x.column == col)
        L = eval_length(c)
        for b in BASELINES:
            m = bs[b][L]
            out.append({"study": study.name, "model": LABELS[b], "baseline": b, "task": c.task, "column": col,
                        "length": L, "bpb": m.bpb, "bpb_se": m.bpb_se, "answer_bpb": m.answer_bpb,
                        "bpb_by_length": {n: x.bpb for n, x in sorted(bs[b].items())}})
    return out


# -- the report ---------------------------------------------------------------------------------------
def scale_note(scale: str) -> str:
    return (f"Scale `{scale}`. The paper's language models have 340M-1.3B parameters and are trained on billions "
            "of tokens; ours are trained here on the corpora below, so only the direction of a difference can be "
            "compared with the paper, not the numbers.")


def verdicts(cells: list[Cell], base: dict) -> list[str]:
    """Plain sentences: which models beat the bigram baseline; what [-1,1] costs per family and corpus."""
    lines = []
    above = []
    for c in cells:
        L = eval_length(c)
        vals = c.values(L)
        if vals and statistics.median(vals) >= base[c.column]["bigram"][L].bpb:
            above.append(f"{c.label} on {c.column}")
    n = sum(1 for c in cells if c.values(eval_length(c)))
    lines.append(f"Below the bigram baseline: {n - len(above)} of {n} (model, corpus) cells"
                 + (f"; not below: {', '.join(above)}." if above else "."))
    for col in columns_of(cells):
        blind = base[col].get("blind")
        if blind is None:
            continue
        below = [c.label for c in cells if c.column == col and c.values(eval_length(c), "answer_bpb")
                 and statistics.median(c.values(eval_length(c), "answer_bpb")) < blind]
        lines.append(f"Answer bytes of {col}: {len(below)} model(s) below the state-blind level {blind:.3f}"
                     + (f" ({', '.join(below)})" if below else
                        ": no model uses the programs' state at this scale") + ".")
    for fam, a, b in pairs(labels_of(cells)):
        for col in columns_of(cells):
            ca, cb = find_cell(cells, a, col), find_cell(cells, b, col)
            if not (ca and cb and ca.values(eval_length(ca)) and cb.values(eval_length(cb))):
                continue
            La, Lb = eval_length(ca), eval_length(cb)
            va, vb = ca.values(La), cb.values(Lb)
            d = statistics.median(vb) - statistics.median(va)
            note = ""
            if len(va) > 1 and len(vb) > 1:
                overlap = min(vb) <= max(va) and min(va) <= max(vb)
                note = " (the seeds' ranges overlap)" if overlap else " (the seeds' ranges do not overlap)"
            elif ca.values(La, "bpb_se") and cb.values(Lb, "bpb_se"):
                noise = 2 * math.hypot(ca.values(La, "bpb_se")[0], cb.values(Lb, "bpb_se")[0])
                note = (f" ({'within' if abs(d) <= noise else 'beyond'} twice its standard error over the test "
                        f"windows, {noise:.3f}, counted unpaired; one seed, so nothing on the seed-to-seed spread)")
            lines.append(f"{fam} on {col}: {NEG} minus {POS} = {d:+.3f} bpb{note}")
    return lines
