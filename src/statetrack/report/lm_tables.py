# long: the language-modelling report's tables (bpb by context and position, the joint table) and their text
"""Reports of a language-modelling study (``kind: lm``): bpb beside the baselines, by context length and
by position, and the joint table of what a model's eigenvalue range costs on text and gains on state
tracking.

Per model and corpus, the runs of the learning rate with the lowest median validation loss are
reduced over seeds to ``median [min-max]``. Every table holds the add-one unigram and bigram
baselines of the corpus (``statetrack.lm.baselines``), scored on the very windows the models are
scored on. ``bpb`` is read at the training context length (the in-distribution number); the context
table gives every test length and the bpb of the positions beyond the training length.

Beside the count baselines every table holds the file compressors (``statetrack.lm.compressors``: gzip
-9, bz2 -9, xz -9e, and xz -9e after the train split) on the test split's bytes; a corpus with answers
gets two tables of its answers by distance to the decisive statement (``statetrack.report.lm_answers``),
and a training table says what each model cost: parameters, tokens seen, wall time.

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
from statetrack.lm.compressors import COMPRESSORS
from statetrack.report import render
from statetrack.report.lm_answers import IN_CONTEXT, answer_tables, blind_in_context, in_context_bpb, select
from statetrack.report.lm_cells import (
    NEG,
    POS,
    Cell,
    CorpusBaselines,
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
from statetrack.runs.runner import complete_result
from statetrack.runs.store import Store
from statetrack.tasks import get_task
from statetrack.tasks.base import CorpusTask

MARK = "*"
BLIND = "state-blind level (answers, exact)"


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
    return {
        "median": statistics.median(vals) if vals else None,
        "min": min(vals) if vals else None,
        "max": max(vals) if vals else None,
        "seeds": len(vals),
    }


def _has_answers(cells: list[Cell], column: str) -> bool:
    return any(m.answer_bpb is not None for c in cells if c.column == column for r in c.runs for m in r.lm)


# -- the tables ---------------------------------------------------------------------------------------
def _record(
    study,
    table: str,
    model: str,
    column: str,
    metric: str,
    length: int,
    vals: list[float],
    params: int | None = None,
    lr: float | None = None,
) -> dict:
    return {
        "study": study.name,
        "table": table,
        "model": model,
        "column": column,
        "metric": metric,
        "length": length,
        "params": params,
        "lr": lr,
        **_stats(vals),
    }


def params_text(cells: list[Cell], label: str) -> str:
    """A model's parameter count; where it differs between corpora (their vocabularies differ), one count per
    corpus in column order, separated by '/'."""
    counts = list(dict.fromkeys(c.params for c in cells if c.label == label and c.params is not None))
    return " / ".join(f"{n:,}" for n in counts) or "-"


def baseline_rows(
    base: dict[str, CorpusBaselines], column: str, length: int
) -> list[tuple[str, float, float | None]]:
    """(label, bpb, answer bpb or None) of every baseline of a corpus at a length: the count models on the
    windows, then the compressors on the whole test split (no answer bpb: a compressor's cost is not
    per byte)."""
    out = []
    for b in BASELINES:
        m = base[column].counts[b][length]
        out.append((LABELS[b], m.bpb, m.answer_bpb))
    comp = base[column].compressors
    out += [(comp[k].label, comp[k].bpb, None) for k in COMPRESSORS if k in comp]
    return out


def _windows_note(base: dict[str, CorpusBaselines], column: str, length: int) -> str:
    m = base[column].counts["bigram"][length]
    comp = base[column].compressors
    test = next(iter(comp.values())).test_bytes if comp else None
    ctx = comp["xz_train"].context_bytes if "xz_train" in comp else 0
    text = (
        f"Count baselines: fitted on the train split, scored on the models' windows ({m.windows:,} windows, "
        f"{m.tokens:,} tokens at length {m.length}). "
    )
    if test:
        text += (
            f"Compressors: the test split's {test:,} bytes as one stream (8 x compressed bytes / test bytes); "
            f"'xz -9e after train': compressed after the train split's last {ctx:,} bytes, minus what those "
            "cost alone. "
        )
    return text


def bpb_table(study, cells: list[Cell], base: dict[str, CorpusBaselines]) -> LMTable:
    cols = columns_of(cells)
    at = {col: eval_length(next(c for c in cells if c.column == col)) for col in cols}
    answers = {col: _has_answers(cells, col) for col in cols}
    header = ["model", "params"]
    for col in cols:
        header += [f"{col}: bpb @{at[col]}"] + ([f"{col}: answer bpb"] if answers[col] else [])
    t = LMTable(study.name, "bpb", "Bits per byte on the test split", header)
    for label in labels_of(cells):
        t.rows.append(_model_bpb_row(study, t, cells, label, base, at, answers))
    names = [name for name, _, _ in baseline_rows(base, cols[0], at[cols[0]])]
    for i, name in enumerate(names):
        t.rows.append(_baseline_bpb_row(study, t, i, name, base, at, answers))
    if any(base[col].blind is not None for col in cols):
        row = [BLIND, "-"]
        for col in cols:
            level = base[col].blind
            row += ["-"] + (["-" if level is None else f"{level:.3f}"] if answers[col] else [])
            if level is not None:
                t.records.append(_record(study, "bpb", BLIND, col, "answer_bpb", at[col], [level]))
        t.rows.append(row)
    t.caption = (
        f"Test-split bits per byte at the training context length, median [min-max] over seeds (one "
        f"seed: ± the standard error over the test windows); {MARK} = not below the bigram baseline. "
        "params: counted from the built model (one count per corpus where their token vocabularies "
        "differ). "
        "Answer bpb: on the answer bytes of a generated corpus (bytes only the program's state decides: "
        "docs/lm.md). "
        + _windows_note(base, cols[0], at[cols[0]])
        + f"{BLIND}: the mean of log2 k over the same answers, k the number of values an answer can take for "
        "a reader that does not know the state; only a model that carries the state goes below it."
    )
    return t


def _model_bpb_row(
    study,
    t: LMTable,
    cells: list[Cell],
    label: str,
    base: dict[str, CorpusBaselines],
    at: dict[str, int],
    answers: dict[str, bool],
) -> list[str]:
    """A model's row of the bits-per-byte table (its records added to ``t``)."""
    row = [label, "-"]
    for col in at:
        c, L = find_cell(cells, label, col), at[col]
        if c is None:
            row += ["-"] * (1 + answers[col])
            continue
        row[1] = params_text(cells, label)
        vals = c.values(L)
        text = fmt_bpb(vals, c.values(L, "bpb_se"))
        if vals and statistics.median(vals) >= base[col].counts["bigram"][L].bpb:
            text += " " + MARK
        row.append(text)
        t.records.append(_record(study, "bpb", label, col, "bpb", L, vals, c.params, c.lr))
        if answers[col]:
            a = c.values(L, "answer_bpb")
            row.append(fmt_bpb(a))
            t.records.append(_record(study, "bpb", label, col, "answer_bpb", L, a, c.params, c.lr))
    return row


def _baseline_bpb_row(
    study,
    t: LMTable,
    i: int,
    name: str,
    base: dict[str, CorpusBaselines],
    at: dict[str, int],
    answers: dict[str, bool],
) -> list[str]:
    """The ``i``-th baseline's row of the bits-per-byte table (its records added to ``t``)."""
    row = [name, "-"]
    for col in at:
        rows = baseline_rows(base, col, at[col])
        _, bpb, ans = rows[i] if i < len(rows) else (name, None, None)
        row.append("-" if bpb is None else f"{bpb:.3f}")
        if bpb is not None:
            t.records.append(_record(study, "bpb", name, col, "bpb", at[col], [bpb]))
        if answers[col]:
            row.append("-" if ans is None else f"{ans:.3f}")
    return row


TRAINING_HEADER = [
    "model",
    "corpus",
    "params",
    "steps",
    "batch",
    "context",
    "tokens seen",
    "passes",
    "train time (s)",
    "ms / step",
]
TRAINING_NOTE = (
    "Tokens seen = steps x batch x context; passes = tokens seen / the train split's tokens; train "
    "time: wall time of the training loop (validations included, test evaluation not), median over "
    "seeds, each run on one thread of a shared 2-worker sweep unless the study ran otherwise."
)


def training_table(study, cells: list[Cell]) -> LMTable:
    """What each model cost: parameters, steps, batch, context, tokens seen, passes over the train split,
    training wall time (median over seeds; one thread per run where the sweep set it)."""
    t = LMTable(study.name, "training", "What each run cost", list(TRAINING_HEADER))
    sizes: dict[str, int] = {}
    for c in cells:
        if not c.runs:
            continue
        j = c.job
        tokens = j.train.steps * j.train.batch_size * j.train.train_max_len
        if c.task not in sizes:
            task = get_task(c.task)
            assert isinstance(task, CorpusTask)  # an lm study's columns are corpora
            sizes[c.task] = task.corpus.sizes()["train"]["tokens"]
        times = [r.summary.get("train_time") for r in c.runs if r.summary.get("train_time")]
        steps = [r.summary.get("steps_run") or j.train.steps for r in c.runs]
        tt = statistics.median(times) if times else None
        t.rows.append(
            [
                c.label,
                c.column,
                f"{c.params:,}",
                f"{j.train.steps:,}",
                str(j.train.batch_size),
                str(j.train.train_max_len),
                f"{tokens / 1e6:.1f}M",
                f"{tokens / sizes[c.task]:.2f}",
                "-" if tt is None else f"{tt:.{0 if tt >= 10 else 1}f}",
                "-" if tt is None else f"{1000 * tt / statistics.median(steps):.0f}",
            ]
        )
        t.records.append(
            {
                "study": study.name,
                "table": "training",
                "model": c.label,
                "column": c.column,
                "params": c.params,
                "steps": j.train.steps,
                "batch_size": j.train.batch_size,
                "context": j.train.train_max_len,
                "tokens_seen": tokens,
                "passes": tokens / sizes[c.task],
                "train_time": tt,
                "seeds": len(c.runs),
            }
        )
    t.caption = TRAINING_NOTE
    return t


def context_table(study, cells: list[Cell], base: dict[str, CorpusBaselines], column: str) -> LMTable:
    mine = [c for c in cells if c.column == column]
    lengths = sorted({n for c in mine for n in c.lengths})
    train_len = mine[0].train_len
    header = ["model"] + [f"bpb @{n}" for n in lengths] + [f"positions >= {train_len} @{max(lengths)}"]
    t = LMTable(study.name, f"context-{column}", f"{column}: bits per byte by context length", header)
    for c in mine:
        row = [c.label] + [fmt_bpb(c.values(n)) for n in lengths] + [fmt_bpb(c.beyond())]
        t.rows.append(row)
        t.records += [
            _record(study, t.name, c.label, column, "bpb", n, c.values(n), c.params, c.lr) for n in lengths
        ]
    for b in BASELINES:
        ms = base[column].counts[b]
        beyond = beyond_bpb(ms[max(lengths)], train_len)
        t.rows.append(
            [LABELS[b]] + [f"{ms[n].bpb:.3f}" for n in lengths] + ["-" if beyond is None else f"{beyond:.3f}"]
        )
    comp = base[column].compressors
    for k in COMPRESSORS:
        if k in comp:
            t.rows.append([comp[k].label] + [f"{comp[k].bpb:.3f}"] * len(lengths) + ["-"])
    t.caption = (
        f"Trained on windows of {train_len} tokens; at test, windows of each length are read whole "
        f"(the state carried across chunks). Last column: the positions past the training length in the "
        f"longest windows. A model that extrapolates keeps or lowers its bpb as the context grows. Each "
        f"length has its own windows: the baselines' rows, on the same windows, show how much of a "
        f"change across lengths is the windows'. The compressors read the whole test split at once: one "
        f"number, repeated."
    )
    return t


def state_tracking_cells(study, db, scale: str) -> tuple[dict, list[str], str]:
    """({label: {column: (text, value)}}, column headers, note) from the state-tracking study in ``db``."""
    st = study.state_tracking
    if st is None:
        return {}, [], ""

    other = load_study(st.study)
    scale = st.scales.get(scale, scale)  # that study's scale read beside this one's
    out: dict[str, dict] = {}
    found = 0
    if db is not None and scale in other.scales:
        store = Store(db, readonly=True)
        jobs = [j for j in other.cells(scale) if j.table == st.table]
        res = [(j, complete_result(store, j.key)) for j in jobs]
        found = sum(r is not None for _, r in res)
        tables = [t for t in study_tables(other, res, scale) if t.name == st.table]
        for row in tables[0].rows if tables and found else []:
            cells = {col: row["cells"][col] for col in st.columns if col in row["cells"]}
            # the cell's value as that study shows it, without its mark of a difference from ITS paper
            out[row["label"]] = {
                col: (fmt_cell(replace(c, differs=None), other), c.selected)
                for col, c in cells.items()
                if c.selected is not None
            }
    span = "-".join(map(str, other.score.lengths)) if other.score.lengths else "all"
    note = (
        f"State tracking: {other.source}, our runs of study `{other.name}` at scale `{scale}` read from the same "
        f"database ({found} complete runs found); the cell is that study's selected value "
        f"({other.metric.replace('_', ' ')}; {other.score.kind} over lengths {span}). "
        f"'-': no complete run of that model there (run `statetrack sweep {other.name} --scale {scale} --db ...` "
        "into the same database). Those models have that study's sizes, not this one's: the table pairs model "
        "families, not weights."
    )
    return out, list(st.columns), note


def _st_header(study, col: str) -> str:
    return f"{col} ({study.state_tracking.study})" if study.state_tracking else col


def joint_table(
    study, cells: list[Cell], base: dict[str, CorpusBaselines], st_cells: dict, st_cols: list[str], note: str
) -> LMTable:
    cols = columns_of(cells)
    ans_cols = [c for c in cols if _has_answers(cells, c)]
    header = (
        ["model", "params"]
        + [f"bpb {c}" for c in cols]
        + [f"answer bpb {c} ({IN_CONTEXT})" for c in ans_cols]
        + [_st_header(study, c) for c in st_cols]
    )
    t = LMTable(study.name, "joint", "What [-1,1] costs on text, what it gains on state tracking", header)
    med = _joint_models(t, study, cells, cols, ans_cols, st_cells, st_cols)
    for fam, a, b in pairs(labels_of(cells)):

        def diff(key, digits=3, a=a, b=b):
            x, y = med[a].get(key), med[b].get(key)
            return "-" if x is None or y is None else f"{y - x:+.{digits}f}"

        row = [f"{fam}: {NEG} - {POS}", ""] + [diff(("bpb", c)) for c in cols]
        row += [diff(("answer", c)) for c in ans_cols] + [diff(("st", c)) for c in st_cols]
        t.rows.append(row)
    _joint_baselines(t, cells, base, cols, ans_cols, len(st_cols))
    t.caption = (
        "bpb: test split at the training context length, median [min-max] over seeds (lower is better); "
        f"answer bpb ({IN_CONTEXT}): bits per answer on the answers whose decisive statement is inside "
        "the window (tables answers-*), beside the exact state-blind level of the same answers; "
        "difference rows: [-1,1] minus [0,1] of the medians (bpb: positive = [-1,1] costs bits; state "
        "tracking: positive = [-1,1] gains). Compressors: the whole test split as one stream. " + note
    )
    return t


def _joint_models(
    t: LMTable,
    study,
    cells: list[Cell],
    cols: list[str],
    ans_cols: list[str],
    st_cells: dict,
    st_cols: list[str],
) -> dict[str, dict]:
    """The joint table's row of each model; returns per model its medians, keyed ("bpb" | "answer" | "st",
    column), which the difference rows subtract."""
    med: dict[str, dict] = {}
    for label in labels_of(cells):
        row = [label, "-"]
        med[label] = {}
        for col in cols:
            c = find_cell(cells, label, col)
            vals = c.values(eval_length(c)) if c else []
            if c:
                row[1] = params_text(cells, label)
            row.append(fmt_bpb(vals))
            med[label][("bpb", col)] = statistics.median(vals) if vals else None
        for col in ans_cols:
            c = find_cell(cells, label, col)
            vals = in_context_bpb(c) if c else []
            row.append(fmt_bpb(vals))
            med[label][("answer", col)] = statistics.median(vals) if vals else None
        for col in st_cols:
            text, value = st_cells.get(label, {}).get(col, ("-", None))
            row.append(text)
            med[label][("st", col)] = value
        t.rows.append(row)
        t.records.append(
            {
                "study": study.name,
                "table": "joint",
                "model": label,
                **{f"{k[0]} {k[1]}": v for k, v in med[label].items()},
            }
        )
    return med


def _joint_baselines(
    t: LMTable,
    cells: list[Cell],
    base: dict[str, CorpusBaselines],
    cols: list[str],
    ans_cols: list[str],
    n_st: int,
) -> None:
    """The joint table's baseline rows (each corpus's unigram, bigram and compressors) and the state-blind
    level of the answers; ``n_st``: the state-tracking columns, '-' in these rows."""
    L = {col: eval_length(next(c for c in cells if c.column == col)) for col in cols}
    names = [name for name, _, _ in baseline_rows(base, cols[0], L[cols[0]])]
    for i, name in enumerate(names):
        row = [name, "-"]
        for col in cols:
            rows = baseline_rows(base, col, L[col])
            row.append(f"{rows[i][1]:.3f}" if i < len(rows) else "-")
        counts = {LABELS[k]: k for k in BASELINES}
        for col in ans_cols:
            m = base[col].counts[counts[name]][L[col]] if name in counts else None
            sel = select(m.answer_buckets, IN_CONTEXT) if m is not None and m.answer_buckets else None
            row.append("-" if sel is None else f"{sel['bits'] / sel['n']:.3f}")
        t.rows.append(row + ["-"] * n_st)
    if ans_cols:
        levels = [blind_in_context(base, c, L[c]) for c in ans_cols]
        t.rows.append(
            [BLIND, "-"]
            + ["-"] * len(cols)
            + ["-" if v is None else f"{v:.3f}" for v in levels]
            + ["-"] * n_st
        )


def lm_tables(study, results, scale: str | None = None, db=None) -> list[LMTable]:
    """Every table of an LM study's report: bits per byte (with the verdict lines), the joint table (it
    reads ``db`` for the state-tracking study), the answers by distance of each corpus that has answers,
    what each run cost, then bpb by context length per corpus."""
    cells = gather(study, results)
    if not any(c.runs for c in cells):
        return [
            LMTable(study.name, "bpb", "Bits per byte on the test split (no complete runs yet)", ["model"])
        ]
    base = baselines(cells, results)
    bpb = bpb_table(study, cells, base)
    bpb.notes = verdicts(cells, base)
    st_cells, st_cols, note = state_tracking_cells(study, db, scale) if scale else ({}, [], "")
    answers = [
        t
        for col in columns_of(cells)
        if _has_answers(cells, col)
        for t in answer_tables(study, cells, base, col, LMTable)
    ]
    return (
        [bpb, joint_table(study, cells, base, st_cells, st_cols, note)]
        + answers
        + [training_table(study, cells)]
        + [context_table(study, cells, base, col) for col in columns_of(cells)]
    )


def json_rows(study, results) -> list[dict]:
    """One object per run (its bpb at the training context, and by length, its answers by distance) and per
    baseline and corpus (count models and compressors)."""
    cells = gather(study, results)
    base = baselines(cells, results) if any(c.runs for c in cells) else {}
    out = []
    for c in cells:
        for j, r in results:
            if j.label != c.label or j.column != c.column or r is None or not r.lm:
                continue
            out.append(_run_json(study, c, j, r))
    for col, bs in base.items():
        out += _baseline_json(study, next(x for x in cells if x.column == col), bs)
    return out


def _run_json(study, c: Cell, j, r) -> dict:
    """The JSON object of one run ``r`` (of job ``j``) of the cell ``c``."""
    L = eval_length(c)
    by = {m.length: m for m in r.lm}
    m = by.get(L)
    return {
        "study": study.name,
        "model": c.label,
        "layers": j.train.model.layers,
        "task": c.task,
        "column": c.column,
        "seed": j.seed,
        "lr": j.train.lr,
        "run_id": r.run_id,
        "params": c.params,
        "length": L,
        "bpb": m.bpb if m else None,
        "bpb_se": m.bpb_se if m else None,
        "answer_bpb": m.answer_bpb if m else None,
        "answer_buckets": m.answer_buckets if m else [],
        "bpb_by_length": {n: x.bpb for n, x in sorted(by.items())},
    }


def _baseline_json(study, c: Cell, bs: CorpusBaselines) -> list[dict]:
    """The JSON objects of the baselines of the corpus column of ``c``: count models, then compressors."""
    L = eval_length(c)
    out = []
    for b in BASELINES:
        m = bs.counts[b][L]
        out.append(
            {
                "study": study.name,
                "model": LABELS[b],
                "baseline": b,
                "task": c.task,
                "column": c.column,
                "length": L,
                "bpb": m.bpb,
                "bpb_se": m.bpb_se,
                "answer_bpb": m.answer_bpb,
                "bpb_by_length": {n: x.bpb for n, x in sorted(bs.counts[b].items())},
            }
        )
    for k, comp in bs.compressors.items():
        out.append(
            {
                "study": study.name,
                "model": comp.label,
                "baseline": k,
                "task": c.task,
                "column": c.column,
                "bpb": comp.bpb,
                "test_bytes": comp.test_bytes,
                "compressed_bytes": comp.compressed_bytes,
                "context_bytes": comp.context_bytes,
            }
        )
    return out


# -- the report ---------------------------------------------------------------------------------------
def scale_note(scale: str) -> str:
    return (
        f"Scale `{scale}`. The paper's language models have 340M-1.3B parameters and are trained on billions "
        "of tokens; ours are trained here on the corpora below, so only the direction of a difference can be "
        "compared with the paper, not the numbers."
    )


def verdicts(cells: list[Cell], base: dict[str, CorpusBaselines]) -> list[str]:
    """Plain sentences: which models beat the bigram baseline; what [-1,1] costs per family and corpus."""
    lines = []
    above = []
    for c in cells:
        L = eval_length(c)
        vals = c.values(L)
        if vals and statistics.median(vals) >= base[c.column].counts["bigram"][L].bpb:
            above.append(f"{c.label} on {c.column}")
    n = sum(1 for c in cells if c.values(eval_length(c)))
    lines.append(
        f"Below the bigram baseline: {n - len(above)} of {n} (model, corpus) cells"
        + (f"; not below: {', '.join(above)}." if above else ".")
    )
    for col in columns_of(cells):
        grid = [c for c in cells if c.column == col and len(c.lrs) > 1]
        if grid:
            tried = sorted({lr for c in grid for lr in c.lrs})
            lines.append(
                f"{col}: the learning rate of each model is the one with the lowest median validation loss "
                f"among {', '.join(f'{lr:g}' for lr in tried)}: "
                + ", ".join(f"{c.label} {c.lr:g}" for c in grid)
                + "."
            )
    for col in columns_of(cells):
        lines += _compressor_verdict(cells, base, col) + _blind_verdict(cells, base, col)
    for fam, a, b in pairs(labels_of(cells)):
        for col in columns_of(cells):
            ca, cb = find_cell(cells, a, col), find_cell(cells, b, col)
            if ca and cb and ca.values(eval_length(ca)) and cb.values(eval_length(cb)):
                lines.append(_pair_verdict(fam, col, ca, cb))
    return lines


def _compressor_verdict(cells: list[Cell], base: dict[str, CorpusBaselines], col: str) -> list[str]:
    """How many models of column ``col`` are below gzip, and whether the best is below xz ([] without them)."""
    comp = base[col].compressors
    mine = [
        (c.label, statistics.median(c.values(eval_length(c))))
        for c in cells
        if c.column == col and c.values(eval_length(c))
    ]
    if not (comp and mine):
        return []
    gz, xz = comp["gzip"], comp["xz"]
    not_below = [f"{label} ({v:.3f})" for label, v in mine if v >= gz.bpb]
    best = min(mine, key=lambda x: x[1])
    return [
        f"{col}: below {gz.label} ({gz.bpb:.3f}): {len(mine) - len(not_below)} of {len(mine)} models"
        + (f"; not below: {', '.join(not_below)}" if not_below else "")
        + f". The best, {best[0]} at {best[1]:.3f}, is {'below' if best[1] < xz.bpb else 'not below'}"
        f" {xz.label} ({xz.bpb:.3f})"
        + (
            f" and {'below' if best[1] < comp['xz_train'].bpb else 'not below'} "
            f"{comp['xz_train'].label} ({comp['xz_train'].bpb:.3f})"
            if "xz_train" in comp
            else ""
        )
        + "."
    ]


def _blind_verdict(cells: list[Cell], base: dict[str, CorpusBaselines], col: str) -> list[str]:
    """The models of column ``col`` below the state-blind level on answers in context ([] without one)."""
    L = eval_length(next(c for c in cells if c.column == col))
    blind = blind_in_context(base, col, L) if base[col].blind is not None else None
    if blind is None:
        return []
    below = [
        c.label
        for c in cells
        if c.column == col and in_context_bpb(c) and statistics.median(in_context_bpb(c)) < blind
    ]
    return [
        f"Answers of {col} whose decisive statement is in context: {len(below)} model(s) below the "
        f"state-blind level {blind:.3f}"
        + (f" ({', '.join(below)})" if below else ": no model carries the state at this scale")
        + f" (intervals and distances: table answers-{col})."
    ]


def _pair_verdict(fam: str, col: str, ca: Cell, cb: Cell) -> str:
    """What [-1,1] (``cb``) costs against [0,1] (``ca``) for one family on one corpus, with its noise."""
    La, Lb = eval_length(ca), eval_length(cb)
    va, vb = ca.values(La), cb.values(Lb)
    d = statistics.median(vb) - statistics.median(va)
    note = ""
    if len(va) > 1 and len(vb) > 1:
        overlap = min(vb) <= max(va) and min(va) <= max(vb)
        note = " (the seeds' ranges overlap)" if overlap else " (the seeds' ranges do not overlap)"
    elif ca.values(La, "bpb_se") and cb.values(Lb, "bpb_se"):
        noise = 2 * math.hypot(ca.values(La, "bpb_se")[0], cb.values(Lb, "bpb_se")[0])
        note = (
            f" ({'within' if abs(d) <= noise else 'beyond'} twice its standard error over the test "
            f"windows, {noise:.3f}, counted unpaired; one seed, so nothing on the seed-to-seed spread)"
        )
    return f"{fam} on {col}: {NEG} minus {POS} = {d:+.3f} bpb{note}"
