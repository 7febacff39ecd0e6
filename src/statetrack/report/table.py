"""Accuracy-vs-length table of a study, our numbers beside the paper's.

Each cell is the median over seeds, with [min-max] when there is more than one seed.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field


@dataclass
class StudyTable:
    study: str
    title: str
    lengths: list[int]
    columns: dict[str, str]            # published column key -> header
    rows: list[dict] = field(default_factory=list)

    def headers(self) -> list[str]:
        return (["model", "train len", "seeds", "train acc"] + [str(n) for n in self.lengths]
                + [">=90% up to"] + [f"paper: {h}" for h in self.columns.values()])

    def cells(self) -> list[list[str]]:
        out = []
        for r in self.rows:
            out.append([r["label"], r["train_lengths"], str(r["seeds"]), fmt(r["train_acc"])]
                       + [fmt(r["acc"].get(n, [])) for n in self.lengths]
                       + [fmt_len(r["longest"])]
                       + [pct(r["published"].get(k)) for k in self.columns])
        return out

    def markdown(self) -> str:
        h = self.headers()
        lines = ["| " + " | ".join(h) + " |", "|" + "---|" * len(h)]
        lines += ["| " + " | ".join(c) + " |" for c in self.cells()]
        return "\n".join(lines)

    def rich(self):
        from rich.table import Table

        t = Table(title=self.title, show_lines=False)
        for i, h in enumerate(self.headers()):
            t.add_column(h, justify="left" if i == 0 else "right", style="dim" if h.startswith("paper") else None)
        for c in self.cells():
            t.add_row(*c)
        return t


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


def study_table(study, results) -> StudyTable:
    """``results``: list of (Job, RunResult) from sweep.run_jobs for this study."""
    by_label: dict[str, list] = {}
    for job, res in results:
        by_label.setdefault(job.label, []).append((job, res))
    lengths = sorted({m.length for _, res in results for m in res.metrics})
    table = StudyTable(study.name, study.title, lengths, study.published_columns)
    for m in study.models:
        runs = [(j, r) for j, r in by_label.get(m.label, []) if r.status == "complete"]
        acc = {n: [mm.accuracy for _, r in runs for mm in r.metrics if mm.length == n] for n in lengths}
        lo, hi = m.train_lengths
        table.rows.append({
            "label": m.label, "train_lengths": f"{lo}" if lo == hi else f"{lo}-{hi}",
            "seeds": len(runs), "train_acc": [r.summary.get("best_val_accuracy") for _, r in runs],
            "acc": acc, "longest": [r.summary.get("longest_90") for _, r in runs],
            "published": m.published, "failed": len(by_label.get(m.label, [])) - len(runs)})
    return table
