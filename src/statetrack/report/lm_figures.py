"""The figures of a language-modelling report: learning curves, bpb by position and by context length,
each beside the unigram and bigram baselines, and for a corpus with answers, answer bpb by distance to
the decisive statement beside the state-blind level."""

from __future__ import annotations

import statistics

from statetrack.lm.baselines import BASELINES, LABELS
from statetrack.lm.metrics import LN2
from statetrack.report.lm_answers import run_buckets
from statetrack.report.lm_cells import Cell, CorpusBaselines, baselines, columns_of, eval_length, gather
from statetrack.report.plots import lm_curve_figure, lm_length_figure, slug


def _by_distance(runs: list[list[dict]], key: str = "bits") -> tuple[list, list]:
    """(bucket starts, median over runs of bits per answer) over the in-context distance buckets."""
    starts = sorted({b["lo"] for bs in runs for b in bs if b["hi"] is not None})
    ys = []
    for lo in starts:
        vals = [b[key] / b["n"] for bs in runs for b in bs if b["lo"] == lo and b["hi"] is not None]
        ys.append(statistics.median(vals) if vals else float("nan"))
    return starts, ys


def answer_figure(study, mine: list[Cell], bigram, col: str):
    """Answer bpb by distance to the decisive statement, per model, beside the state-blind level."""
    series = {c.label: _by_distance(run_buckets(c)) for c in mine if run_buckets(c)}
    blind = {
        "state-blind level": _by_distance([bigram.answer_buckets], "blind_bits"),
        "bigram (add-one)": _by_distance([bigram.answer_buckets]),
    }
    fig = lm_length_figure(
        f"{study.name}: answer bpb by distance to the decisive statement, {col}",
        series,
        blind,
        mine[0].train_len,
        "distance to the decisive statement (tokens, bucket start)",
    )
    fig.axes[0].set_ylabel("bits per answer (test split)")
    return fig


def lm_figures(rep) -> list[tuple[str, str, object]]:
    """(section, stem, figure) per corpus: learning curves, bpb by position at the longest context, bpb by
    context length; the section is the corpus's context table."""
    study, cells = rep.study, gather(rep.study, rep.results)
    if not any(c.runs for c in cells):
        return []
    base = baselines(cells, rep.results)
    out = []
    for col in columns_of(cells):
        mine = [c for c in cells if c.column == col and c.runs]
        if not mine:
            continue
        section = f"context-{col}"
        out.append((section, f"curves-{slug(col)}", _curves_figure(study, rep.curves, mine, col)))
        out.append((section, f"positions-{slug(col)}", _positions_figure(study, mine, base[col], col)))
        out.append((section, f"context-{slug(col)}", _context_figure(study, mine, base[col], col)))
        bigram = base[col].counts["bigram"][eval_length(mine[0])]
        if bigram.answer_buckets and any(run_buckets(c) for c in mine):
            out.append((f"answers-{col}", f"answers-{slug(col)}", answer_figure(study, mine, bigram, col)))
    return out


def _curves_figure(study, curves: dict[int, list], mine: list[Cell], col: str):
    """Validation bits per byte against the step, one line per run of the corpus's cells."""
    runs = [
        (
            c.label,
            [p["step"] for p in curves.get(r.run_id, [])],
            [p["val_loss"] / LN2 for p in curves.get(r.run_id, [])],
        )
        for c in mine
        for r in c.runs
    ]
    return lm_curve_figure(f"{study.name}: learning curves, {col}", [x for x in runs if x[1]])


def _positions_figure(study, mine: list[Cell], base: CorpusBaselines, col: str):
    """bpb by position in the windows of the longest context, per model (median over runs), beside the
    baselines ``base`` of the corpus."""
    L, train_len = max(mine[0].lengths), mine[0].train_len
    series = {}
    for c in mine:
        ms = [m for r in c.runs for m in r.lm if m.length == L]
        if ms:
            xs = [b["hi"] for b in ms[0].buckets]
            series[c.label] = (
                xs,
                [statistics.median(m.buckets[i]["bpb"] for m in ms) for i in range(len(xs))],
            )
    bl = {
        LABELS[b]: (
            [x["hi"] for x in base.counts[b][L].buckets],
            [x["bpb"] for x in base.counts[b][L].buckets],
        )
        for b in BASELINES
    }
    return lm_length_figure(
        f"{study.name}: bpb by position in windows of {L}, {col}",
        series,
        bl,
        train_len,
        "position in the window (bucket end)",
    )


def _context_figure(study, mine: list[Cell], base: CorpusBaselines, col: str):
    """bpb by context length, per model (median over runs), beside the baselines ``base`` of the corpus."""
    lengths = sorted({n for c in mine for n in c.lengths})
    series = {
        c.label: (
            lengths,
            [statistics.median(c.values(n)) if c.values(n) else float("nan") for n in lengths],
        )
        for c in mine
    }
    bl = {LABELS[b]: (lengths, [base.counts[b][n].bpb for n in lengths]) for b in BASELINES}
    return lm_length_figure(
        f"{study.name}: bpb by context length, {col}",
        series,
        bl,
        mine[0].train_len,
        "context length (tokens)",
    )
