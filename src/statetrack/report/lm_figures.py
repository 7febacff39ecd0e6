"""The figures of a language-modelling report: learning curves, bpb by position and by context length,
each beside the unigram and bigram baselines."""
from __future__ import annotations

import statistics

from statetrack.lm.baselines import BASELINES, LABELS
from statetrack.lm.metrics import LN2
from statetrack.report.lm_cells import baselines, columns_of, gather
from statetrack.report.plots import lm_curve_figure, lm_length_figure, slug


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
        runs = [(c.label, [p["step"] for p in rep.curves.get(r.run_id, [])],
                 [p["val_loss"] / LN2 for p in rep.curves.get(r.run_id, [])]) for c in mine for r in c.runs]
        out.append((section, f"curves-{slug(col)}",
                    lm_curve_figure(f"{study.name}: learning curves, {col}", [x for x in runs if x[1]])))
        L, train_len = max(mine[0].lengths), mine[0].train_len
        series = {}
        for c in mine:
            ms = [m for r in c.runs for m in r.lm if m.length == L]
            if ms:
                xs = [b["hi"] for b in ms[0].buckets]
                series[c.label] = (xs, [statistics.median(m.buckets[i]["bpb"] for m in ms) for i in range(len(xs))])
        bl = {LABELS[b]: ([x["hi"] for x in base[col][b][L].buckets], [x["bpb"] for x in base[col][b][L].buckets])
              for b in BASELINES}
        out.append((section, f"positions-{slug(col)}",
                    lm_length_figure(f"{study.name}: bpb by position in windows of {L}, {col}", series, bl,
                                     train_len, "position in the window (bucket end)")))
        lengths = sorted({n for c in mine for n in c.lengths})
        series = {c.label: (lengths, [statistics.median(c.values(n)) if c.values(n) else float("nan")
                                      for n in lengths]) for c in mine}
        bl = {LABELS[b]: (lengths, [base[col][b][n].bpb for n in lengths]) for b in BASELINES}
        out.append((section, f"context-{slug(col)}",
                    lm_length_figure(f"{study.name}: bpb by context length, {col}", series, bl, train_len,
                                     "context length (tokens)")))
    return out
