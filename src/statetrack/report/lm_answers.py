"""The answers of a generated corpus in an LM report: bpb and accuracy by distance to the decisive
statement, beside the state-blind level, and whether [-1,1] uses state that [0,1] cannot.

For each model on a corpus with answers (``statetrack.lm.answers``), its runs' answer buckets at the
headline context length are read per distance to the decisive statement: [1, 16), [16, 32), ... for
answers whose decisive statement is inside the window, and ``outside`` for those whose decisive
statement lies before the window (no model can know them). ``in context`` merges the first ones.

One seed: the cell is the mean bits per answer with its 95% interval over the answers (normal, the
answers taken as independent), and the accuracy with its Wilson 95% interval. Several seeds: the
median [min-max] over seeds. The state-blind row is exact: the mean of log2 k and of 1/k over the same
answers. A verdict compares each model's in-context answers with that level (below it = the 95%
interval's upper end below it), and each [-1,1] model with its [0,1] twin: the difference of the
means over the answers of all seeds, with the interval of an unpaired difference.
"""

from __future__ import annotations

import math
import statistics

from statetrack.lm.answers import OUTSIDE, bucket_summary, mean_interval, merge_buckets, wilson
from statetrack.report.lm_cells import (
    NEG,
    POS,
    Cell,
    CorpusBaselines,
    eval_length,
    find_cell,
    labels_of,
    pairs,
)

IN_CONTEXT = "in context"
ALL = "all"
BLIND_ROW = "state-blind level (exact)"


def answer_columns(cells: list[Cell], column: str) -> list[str]:
    """Bucket labels present among the cells' runs of ``column``, by distance, then in context, outside, all."""
    seen: dict[str, int] = {}
    for c in cells:
        if c.column != column:
            continue
        for bs in run_buckets(c):
            for b in bs:
                if b["hi"] is not None:
                    seen[b["label"]] = b["lo"]
    return sorted(seen, key=seen.__getitem__) + [IN_CONTEXT, OUTSIDE, ALL]


def run_buckets(c: Cell) -> list[list[dict]]:
    """Per run of the cell: its answer buckets at the headline length."""
    L = eval_length(c)
    out = []
    for r in c.runs:
        m = next((m for m in r.lm if m.length == L), None)
        if m is not None and m.answer_buckets:
            out.append(m.answer_buckets)
    return out


def select(buckets: list[dict], col: str) -> dict | None:
    """The bucket (or merged buckets) a column shows."""
    if col == ALL:
        return merge_buckets(buckets)
    if col == IN_CONTEXT:
        return merge_buckets(buckets, lambda b: b["hi"] is not None)
    return next((b for b in buckets if b["label"] == col), None)


def pooled(runs: list[list[dict]], col: str) -> dict | None:
    """The column's answers of every run, summed into one bucket."""
    parts = [b for b in (select(bs, col) for bs in runs) if b is not None]
    return merge_buckets(parts) if parts else None


def _fmt_cell(runs: list[list[dict]], col: str, what: str) -> str:
    vals = [bucket_summary(b) for b in (select(bs, col) for bs in runs) if b is not None]
    if not vals:
        return "-"
    if what == "bpb":
        if len(vals) == 1:
            v = vals[0]
            return (
                f"{v['bpb']:.3f} ({v['bpb_low']:.3f}-{v['bpb_high']:.3f})"
                if v["n"] > 1
                else f"{v['bpb']:.3f}"
            )
        xs = [v["bpb"] for v in vals]
        return f"{statistics.median(xs):.3f} [{min(xs):.3f}-{max(xs):.3f}]"
    if len(vals) == 1:
        v = vals[0]
        return f"{100 * v['accuracy']:.1f} ({100 * v['accuracy_low']:.1f}-{100 * v['accuracy_high']:.1f})"
    xs = [100 * v["accuracy"] for v in vals]
    return f"{statistics.median(xs):.1f} [{min(xs):.1f}-{max(xs):.1f}]"


def answer_tables(study, cells: list[Cell], base: dict[str, CorpusBaselines], column: str, table_cls) -> list:
    """The two tables of a corpus with answers: bpb and accuracy by distance to the decisive statement."""
    cols = answer_columns(cells, column)
    mine = [c for c in cells if c.column == column and c.runs]
    if not mine:
        return []
    L = eval_length(mine[0])
    bigram = base[column].counts["bigram"][L].answer_buckets
    out = []
    for what, title in (("bpb", "answer bits per byte"), ("accuracy", "answer accuracy (%)")):
        t = table_cls(
            study.name,
            f"answers-{column}" if what == "bpb" else f"answer-accuracy-{column}",
            f"{column}: {title} by distance to the decisive statement",
            ["model"] + cols,
        )
        for c in mine:
            runs = run_buckets(c)
            t.rows.append([c.label] + [_fmt_cell(runs, col, what) for col in cols])
            t.records += [
                _answer_record(study.name, t.name, c.label, column, col, what, L, runs) for col in cols
            ]
        t.rows.append(["bigram (add-one)"] + [_fmt_cell([bigram], col, what) for col in cols])
        blind = [select(bigram, col) for col in cols]
        key = "blind_bits" if what == "bpb" else "blind_hits"
        scale = 1 if what == "bpb" else 100
        t.rows.append(
            [BLIND_ROW]
            + [
                "-" if b is None else f"{scale * b[key] / b['n']:.{3 if what == 'bpb' else 1}f}"
                for b in blind
            ]
        )
        t.rows.append(["answers scored (per seed)"] + ["0" if b is None else f"{b['n']:,}" for b in blind])
        t.caption = _answer_caption(column, L, what)
        if what == "bpb":
            t.notes = answer_verdicts(cells, column)
        out.append(t)
    return out


def _answer_record(
    study: str, table: str, model: str, column: str, col: str, what: str, L: int, runs: list[list[dict]]
) -> dict:
    """The JSON record of one cell of an answer table: a model's ``what`` (bpb or accuracy) in the
    distance column ``col``, per seed."""
    vals = [bucket_summary(b) for b in (select(bs, col) for bs in runs) if b is not None]
    return {
        "study": study,
        "table": table,
        "model": model,
        "column": column,
        "distance": col,
        "metric": "answer_" + what,
        "length": L,
        "seeds": len(vals),
        "answers": vals[0]["n"] if vals else 0,
        "values": [v[what] for v in vals],
        "low": vals[0][f"{what}_low"] if len(vals) == 1 else None,
        "high": vals[0][f"{what}_high"] if len(vals) == 1 else None,
    }


def _answer_caption(column: str, L: int, what: str) -> str:
    return (
        f"Answers of the {column} test windows at context {L}, grouped by distance (tokens) from the "
        "end of their decisive statement (the last statement that revealed the value) to the answer; "
        f"'{IN_CONTEXT}': every answer whose decisive statement is inside its window; '{OUTSIDE}': the "
        "decisive statement lies before the window's start (no model can know the answer there); "
        f"'{ALL}': both. One seed: the mean with its 95% interval over the answers "
        f"({'normal' if what == 'bpb' else 'Wilson'}); several seeds: median [min-max] over seeds. "
        f"{BLIND_ROW}: the mean of " + ("log2 k" if what == "bpb" else "1/k") + " over the same "
        "answers, k the number of values an answer can take for a reader who does not know the "
        "state (10 for a digit, 2 for a truth value, 3 and 2 for the first two digits of a printed "
        "permutation of 3), exact: a model below it in bpb (above it in accuracy) carries the state "
        "over the distance."
    )


def _interval(b: dict) -> tuple[float, float, float]:
    return mean_interval(b["bits"], b["bits_sq"], b["n"])


def answer_verdicts(cells: list[Cell], column: str) -> list[str]:
    """Per model: in-context answers against the state-blind level; per family: [-1,1] minus [0,1]."""
    lines = []
    below: list[str] = []
    above: list[str] = []
    for c in cells:
        if c.column != column:
            continue
        bucket = pooled(run_buckets(c), IN_CONTEXT)
        if bucket is None:
            continue
        mean, lo, hi = _interval(bucket)
        level = bucket["blind_bits"] / bucket["n"]
        (below if hi < level else above).append(f"{c.label} {mean:.3f} ({lo:.3f}-{hi:.3f})")
    if below or above:
        lines.append(
            f"Answers of {column} with the decisive statement in context: below the state-blind level "
            f"(95% interval entirely below it): {', '.join(below) or 'none'}; not below: "
            f"{', '.join(above) or 'none'}."
        )
    for fam, a, b in pairs(labels_of(cells)):
        ca, cb = find_cell(cells, a, column), find_cell(cells, b, column)
        if not (ca and cb):
            continue
        pa, pb = pooled(run_buckets(ca), IN_CONTEXT), pooled(run_buckets(cb), IN_CONTEXT)
        if pa is None or pb is None:
            continue
        ma, la, ha = _interval(pa)
        mb, lb, hb = _interval(pb)
        d = mb - ma
        half = (
            math.hypot((ha - la) / 2, (hb - lb) / 2)
            if all(map(math.isfinite, (la, ha, lb, hb)))
            else float("nan")
        )
        acc_a, acc_b = pa["hits"] / pa["n"], pb["hits"] / pb["n"]
        (wa_lo, wa_hi), (wb_lo, wb_hi) = wilson(pa["hits"], pa["n"]), wilson(pb["hits"], pb["n"])
        if not math.isfinite(half):
            verdict = "too few answers to say"
        elif d + half < 0:
            verdict = f"{NEG} uses state that {POS} does not"
        elif d - half > 0:
            verdict = f"{NEG} is worse than {POS}"
        else:
            verdict = "no difference the answers can resolve"
        seeds = len(run_buckets(ca))
        lines.append(
            f"{fam} on {column}, answers in context: {NEG} minus {POS} = {d:+.3f} bits per answer (95% "
            f"interval {d - half:+.3f} to {d + half:+.3f}, unpaired, {pa['n']:,} answers"
            f"{f' pooled over {seeds} seeds' if seeds > 1 else ''}); accuracy {100 * acc_b:.1f}% "
            f"({100 * wb_lo:.1f}-{100 * wb_hi:.1f}) against {100 * acc_a:.1f}% ({100 * wa_lo:.1f}-"
            f"{100 * wa_hi:.1f}): {verdict}."
        )
    return lines


def in_context_bpb(c: Cell) -> list[float]:
    """Per run: bits per answer on the answers whose decisive statement is in context."""
    out = []
    for bs in run_buckets(c):
        b = select(bs, IN_CONTEXT)
        if b is not None:
            out.append(b["bits"] / b["n"])
    return out


def blind_in_context(base: dict[str, CorpusBaselines], column: str, length: int) -> float | None:
    b = select(base[column].counts["bigram"][length].answer_buckets, IN_CONTEXT)
    return None if b is None else b["blind_bits"] / b["n"]
